// The auth engine (GoTrue protocol, docs/auth-protocol.md): a multi-tenant fastify app whose routes
// sit under /:database (a tenant's auth base URL is http://<engine>/<database>), storing
// everything in the tenant database's `auth` schema and signing with the tenant's secret.
// Also the in-process sign-in through an external identity the panel exchange uses.
import type { FastifyBaseLogger, FastifyInstance, FastifyError, FastifyReply, FastifyRequest } from 'fastify'
import { AUTH_CONSTANTS, type Config } from '../config/index.js'
import {
  type PartErrorMapping,
  toPartError,
  GatehouseError,
  createLogger,
  createPartApp,
  instrumentPart,
  type PartTracer,
  wantsApiVersion2024,
  LogThrottle,
  clusterOf,
  isClusterFailure,
} from '../shared/index.js'
import type { Tenant, TenantLookup } from '../tenants/index.js'
import { signInWithIdentity, type ExternalIdentity } from './accounts.js'
import { buildTenantContext, PoolRegistry } from './context.js'
import {
  BadJsonError,
  NotFoundError,
  renderAuthError,
  RequestTooLargeError,
  toAuthError,
  unexpectedFailure,
  ValidationFailedError,
} from './errors.js'
import { decorateAuthRequests, resolveTenantHook, tenantLabelOf } from './request-state.js'
import { jsonParser } from './json.js'
import { setHashConcurrency } from './crypto.js'
import { setRememberedSessions } from './models/hot-refresh.js'
import { RateLimits } from './rate-limits.js'
import { createMailer, type Mailer } from './mail/index.js'
import { setProviderOutboundPolicy } from './providers/index.js'
import { HEALTH_BODY } from './routes/health.js'
import { registerAuthRoutes } from './routes/table.js'
import type { AccessTokenResponse, UserJson } from './types.js'

export type { AccessTokenResponse, TenantContext, UserJson } from './types.js'
export { AuthError, OAuthError } from './errors.js'
export { AUTH_ERRORS, AUTH_ERROR_CODES, type AuthErrorCode } from './registry.js'
export { authRouteList } from './routes/table.js'

/** Dependencies of the auth engine. */
export interface AuthEngineDeps {
  config: Config
  tenants: TenantLookup
  /** A pino logger (or fastify's options are derived from config.log). */
  logger?: FastifyBaseLogger
  /** Traces each request and (gateway) carries `traceparent` upstream; none when absent. */
  tracer?: PartTracer
  /** The clock (tests inject one); every timestamp and token time comes from it. */
  now?: () => Date
  /** Timeout of a new tenant database connection (default TENANT_CONNECT_TIMEOUT_MS, as REST's). */
  connectTimeoutMs?: number
}

const MAX_BODY = AUTH_CONSTANTS.bodyLimitBytes

/** Fastify's own client errors keep their meaning; anything else is an unexpected failure. */
const AUTH_FASTIFY_ERRORS: PartErrorMapping = {
  fromFastify(fe, err) {
    if (!fe.fastify) return unexpectedFailure(err)
    switch (fe.kind) {
      case 'body_too_large':
        return new RequestTooLargeError()
      case 'bad_body':
      case 'bad_url':
      case 'unsupported_media_type':
        return new BadJsonError(`Could not parse request body as JSON: ${fe.message}`)
      case 'not_found':
        return new NotFoundError()
      // Any other fastify 4xx is GoTrue's validation code (none reaches here: fastify writes its 414 itself).
      default:
        return new ValidationFailedError('request', fe.message, { cause: err })
    }
  },
  unknown: (err) => unexpectedFailure(err),
}

/** GoTrue-style bodies: an empty body is `{}`, bad JSON or too deep nesting is 400 bad_json. */
function setBodyParsers(app: FastifyInstance, maxJsonDepth: number): void {
  const parseJson = jsonParser(maxJsonDepth)
  app.removeAllContentTypeParsers()
  app.addContentTypeParser('application/json', { parseAs: 'string', bodyLimit: MAX_BODY }, parseJson)
  app.addContentTypeParser(
    'application/x-www-form-urlencoded',
    { parseAs: 'string', bodyLimit: MAX_BODY },
    (_req, body, done) => {
      done(null, Object.fromEntries(new URLSearchParams(body as string)))
    },
  )
  // GoTrue reads every body as JSON whatever the Content-Type says.
  app.addContentTypeParser('*', { parseAs: 'string', bodyLimit: MAX_BODY }, parseJson)
}

/** How long one database's (or cluster's) "unreachable" warning stands for the refusals that follow it. */
const UNREACHABLE_LOG_WINDOW_MS = 30_000

/**
 * What one "unreachable" warning stands for: the cluster (host:port) of the tenant's auth URL when
 * the cluster failed (refused, timed out, known down: every tenant on it fails alike), else the
 * database (a refusal of its own login).
 */
function unreachableScope(req: FastifyRequest, internal: unknown): { database: string; cluster?: string } {
  const database = (req.url.split('/')[1] ?? '').split('?')[0]!
  const url = req.authState?.ctx.tenant.engines?.auth
  return url !== undefined && isClusterFailure(internal) ? { database, cluster: clusterOf(url) } : { database }
}

/** An unknown route (or a path parameter past any route's limit), in GoTrue's shape. */
function notFound(req: FastifyRequest, reply: FastifyReply): void {
  const r = renderAuthError(new NotFoundError(), req.headers['x-supabase-api-version'], String(req.id))
  void reply.code(r.status).headers(r.headers).send(r.body)
}

/** Every failure answered in GoTrue's shape (errors.ts renderAuthError). */
function setErrorRendering(app: FastifyInstance, now: () => Date): void {
  const unreachable = new LogThrottle({ windowMs: UNREACHABLE_LOG_WINDOW_MS, now: () => now().getTime() })
  app.setErrorHandler((err: FastifyError | GatehouseError, req, reply) => {
    const e = toAuthError(toPartError(err, AUTH_FASTIFY_ERRORS))
    if (e.code === 'database_unavailable') {
      const scope = unreachableScope(req, e.internal ?? err)
      if (unreachable.first(scope.cluster ?? scope.database))
        req.log.warn({ err: e.internal ?? err, reqId: req.id, ...scope }, 'tenant database unreachable')
      else req.log.debug({ reqId: req.id, ...scope }, 'tenant database unreachable (logged already)')
    } else if (e.status >= 500)
      req.log.error({ err: e.internal ?? e.cause ?? err, reqId: req.id }, 'auth engine failure')
    const r = renderAuthError(e, req.headers['x-supabase-api-version'], String(req.id))
    reply.code(r.status).headers(r.headers).send(r.body)
  })
  app.addHook('onSend', (req, reply, payload, done) => {
    // auth-js reads the error code from `code` only when the response says 2024-01-01; GoTrue
    // says it on errors only (HandleResponseError).
    if (
      reply.statusCode >= 400 &&
      wantsApiVersion2024(req.headers['x-supabase-api-version']) &&
      !reply.hasHeader('x-supabase-api-version')
    ) {
      reply.header('x-supabase-api-version', '2024-01-01')
    }
    done(null, payload)
  })
}

/** The tenant pools of the engine or the in-process service, sized by config `auth.pool_*`. */
function poolRegistryOf(config: Config, o: { connectTimeoutMs?: number; allowExitOnIdle?: boolean }): PoolRegistry {
  const a = config.auth
  const sizes = { max: a.pool_per_tenant, budget: a.pool_budget, clusterShare: a.pool_cluster_share }
  return new PoolRegistry({ ...sizes, maxTenants: a.pool_max_tenants, ...o })
}

/**
 * A path parameter of any length reaches its handler, which answers as GoTrue does (a user id
 * that is no UUID: 404 validation_failed); fastify's default is 100 characters.
 */
const AUTH_ROUTER = { ignoreTrailingSlash: true, maxParamLength: 4096 }

/**
 * Builds the engine (not listening): the routes of routes/table.ts under `/:database`
 * (docs/routes.md), plus `/health` for the process.
 */
export function buildAuthEngine(deps: AuthEngineDeps): FastifyInstance {
  setProviderOutboundPolicy({ allowHosts: deps.config.outbound.allow_hosts })
  const app = createPartApp({
    tracer: deps.tracer,
    logger: deps.logger,
    log: deps.config.log,
    notFoundHandler: notFound,
    fastify: {
      bodyLimit: MAX_BODY,
      // X-Forwarded-For counts only from the gateways (auth.trusted_proxies): the client IP
      // of rate limits and sessions is otherwise the socket's.
      trustProxy: deps.config.auth.trusted_proxies.length > 0 ? [...deps.config.auth.trusted_proxies] : false,
      routerOptions: AUTH_ROUTER,
    },
  })
  const logger = app.log
  const pools = poolRegistryOf(deps.config, { connectTimeoutMs: deps.connectTimeoutMs })
  const mailer = createMailer({ config: deps.config, logger })
  const rateLimits = new RateLimits({ config: deps.config })
  setHashConcurrency(deps.config.auth.hash_concurrency)
  setRememberedSessions(deps.config.auth.remembered_sessions)
  const now = deps.now ?? (() => new Date())

  setBodyParsers(app, deps.config.auth.max_json_depth)
  setErrorRendering(app, now)

  decorateAuthRequests(app)
  app.get('/health', async () => HEALTH_BODY)

  app.register(
    async (scope) => {
      scope.addHook(
        'onRequest',
        resolveTenantHook({ config: deps.config, pools, mailer, rateLimits, now, tenants: deps.tenants }),
      )
      registerAuthRoutes(scope)
    },
    { prefix: '/:database' },
  )

  instrumentPart(app, {
    part: 'auth',
    tenantOf: tenantLabelOf,
    tenantLabel: deps.config.metrics.tenant_label,
    pools: [{ snapshot: () => pools.snapshot() }],
  })

  app.addHook('onClose', async () => {
    mailer.close()
    await rateLimits.close()
    await pools.close()
  })
  return app
}

// ----- in-process sign-in through an external identity (panel exchange) ----------------------

/** An external identity (accounts.ts: provider, its subject, email ...) of a tenant's user. */
export interface FindOrCreateByIdentityInput extends ExternalIdentity {
  tenant: Tenant
}

export interface FindOrCreateByIdentityResult {
  /** The User object of docs/auth-protocol.md §2.1. */
  user: UserJson
  session: AccessTokenResponse
}

/** A long-lived handle on the engine's account operations for in-process callers. */
export interface AuthService {
  /**
   * Finds the user of (provider, providerId), else links the identity to the user owning
   * the verified email, else creates a user; then starts a session (AMR `oauth`). The same
   * code path as an external provider's callback; serialised per identity and email, so a
   * repeated or concurrent call finds the same user.
   */
  findOrCreateUserByIdentity(input: FindOrCreateByIdentityInput): Promise<FindOrCreateByIdentityResult>
  close(): Promise<void>
}

export interface AuthServiceDeps {
  config: Config
  logger?: FastifyBaseLogger
  now?: () => Date
}

export function createAuthService(deps: AuthServiceDeps): AuthService {
  setProviderOutboundPolicy({ allowHosts: deps.config.outbound.allow_hosts })
  const logger = deps.logger ?? createLogger(deps.config.log)
  const pools = poolRegistryOf(deps.config, { allowExitOnIdle: true })
  const mailer: Mailer = createMailer({ config: deps.config, logger })
  // The in-process exchange takes no per-IP tokens; its limiter never opens a Redis connection.
  const rateLimits = new RateLimits({ config: deps.config, redis: null })
  const now = deps.now ?? (() => new Date())
  return {
    async findOrCreateUserByIdentity(input) {
      const { tenant, ...ext } = input
      const ctx = buildTenantContext({ config: deps.config, pools, mailer, rateLimits, now }, tenant, logger)
      const session = await signInWithIdentity(ctx, ext)
      return { user: session.user, session }
    },
    async close() {
      mailer.close()
      await pools.close()
    },
  }
}

let defaultService: { config: Config; service: AuthService } | null = null

/**
 * The panel exchange's entry point: like AuthService.findOrCreateUserByIdentity, on a
 * process-wide service for `config` (pools let the process exit when idle).
 */
export async function findOrCreateUserByIdentity(
  input: FindOrCreateByIdentityInput & { config: Config; now?: () => Date },
): Promise<FindOrCreateByIdentityResult> {
  if (input.now) {
    const s = createAuthService({ config: input.config, now: input.now })
    try {
      return await s.findOrCreateUserByIdentity(input)
    } finally {
      await s.close()
    }
  }
  if (!defaultService || defaultService.config !== input.config) {
    if (defaultService) void defaultService.service.close()
    defaultService = { config: input.config, service: createAuthService({ config: input.config }) }
  }
  return defaultService.service.findOrCreateUserByIdentity(input)
}

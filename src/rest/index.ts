// The REST engine (PostgREST protocol, target v14): a multi-tenant fastify service whose
// routes are `/:database/<table>`, `/:database/rpc/<fn>` and the OpenAPI root
// `/:database/`, all through one handler (handler.ts). Builds an UNSTARTED instance; the
// caller listens. Closing the instance closes every pool.
import type { FastifyBaseLogger, FastifyInstance, FastifyReply, FastifyRequest, FastifyServerOptions } from 'fastify'
import { LRUCache } from 'lru-cache'
import { TENANT_CONNECT_TIMEOUT_MS, type Config } from '../config/index.js'
import {
  toPartError,
  budgetOptions,
  GatehouseError,
  createPartApp,
  instrumentPart,
  tenantLabel,
  type PartTracer,
  type TenantPoolsSnapshot,
} from '../shared/index.js'
import { DATABASE_NAME, type TenantLookup } from '../tenants/index.js'
import { TokenVerifier } from './auth.js'
import {
  BadRequestError,
  InvalidBodyError,
  InvalidPathError,
  PayloadTooLargeError,
  TenantNotFoundError,
  UnexpectedError,
  errorBodyJson,
  proxyStatus,
  reasonPhrase,
} from './errors.js'
import { EnginePools } from './pools.js'
import { isBackoffRefusal } from './reconnect.js'
import { handleRequest, type Engine } from './handler.js'
import { StageTimings } from './timing.js'
import { isJsonBody, jsonDepthExceeds } from './api-request/json-depth.js'
import { headerViews, pathSegments, unsupportedMethod } from './api-request/index.js'
import { createSchemaCacheStore, type SchemaCache } from './schema-cache/index.js'

export { statusForSqlState } from './errors.js'
/** The catalog reader of the schema cache (type generation reads relationships with it). */
export { loadSchemaCache, type Relationship } from './schema-cache/index.js'
export { REST_ERRORS } from './errors.js'

export interface RestEngineDeps {
  /** The process config; the engine reads `config.rest`. */
  config: Pick<Config, 'rest'> & { metrics?: Config['metrics'] }
  tenants: TenantLookup
  /** A pino/fastify logger instance, or fastify logger options (default: off). */
  logger?: FastifyBaseLogger | FastifyServerOptions['logger']
  /** Traces each request and (gateway) carries `traceparent` upstream; none when absent. */
  tracer?: PartTracer
  /** How long a request waits for a pooled connection before 504 PGRST003 (default 10 s). */
  poolAcquireTimeoutMs?: number
  /** Clock in ms of the reconnect back-off and its probes (tests); default Date.now. */
  now?: () => number
  /** Connection timeout of new connections (default 5 s). */
  connectTimeoutMs?: number
}

/** Handles on a built engine (tests, admin): schema reloads, pool statistics. */
export interface RestEngineHandle {
  /** Reloads a tenant's schema cache now; null when it has none yet. */
  reloadSchema(database: string): Promise<SchemaCache | null>
  /** Open connections of all tenants. */
  openConnections(): number
  /** Connections of one tenant (open, idle, waiting requests), null when it has no pool. */
  poolStats(database: string): { open: number; idle: number; waiting: number } | null
  /** Every tenant's pool numbers (metrics). */
  poolSnapshot(): TenantPoolsSnapshot
  /** Effective per-tenant connection cap. */
  perTenantCap(): number
  /** Resolves once no background reconnect probe is running (tests). */
  reconnectProbesSettled(): Promise<void>
}

/** The name of the instance decorator holding its RestEngineHandle. */
const ENGINE_DECORATOR = 'restEngine'
/** The name of the request decorator holding the request's StageTimings (null before the pipeline runs). */
const TIMINGS_DECORATOR = 'restTimings'

/** The engine behind an instance built by buildRestEngine. */
export function restEngineOf(app: FastifyInstance): RestEngineHandle {
  if (!app.hasDecorator(ENGINE_DECORATOR)) throw new TypeError('not a REST engine instance')
  return app.getDecorator<RestEngineHandle>(ENGINE_DECORATOR)
}

const METHODS = ['GET', 'HEAD', 'POST', 'PATCH', 'PUT', 'DELETE', 'OPTIONS'] as const

/**
 * Builds the REST engine: one fastify instance for all tenants. A tenant's base URL is
 * `http://<engine>/<database>`; requests run as the role of the upstream token (or the
 * tenant's anon role) on the tenant's `engines.rest` connection.
 */
export function buildRestEngine(deps: RestEngineDeps): FastifyInstance {
  const app = createRestApp(deps)
  const engine = createEngine(deps, app.log)
  app.decorate(ENGINE_DECORATOR, engineHandle(engine))
  app.decorateRequest(TIMINGS_DECORATOR, null)
  const routes = new RestRoutes(deps, engine)
  app.route({ method: [...METHODS], url: '/:database', handler: routes.handle })
  app.route({ method: [...METHODS], url: '/:database/*', handler: routes.handle })
  app.setNotFoundHandler(routes.notFound)
  app.setErrorHandler(routes.failed)
  instrumentPart(app, {
    part: 'rest',
    tenantOf: tenantLabel(deps.tenants),
    tenantLabel: deps.config.metrics?.tenant_label,
    pools: [{ snapshot: () => engine.pools.shared.snapshot() }],
  })
  app.addHook('onClose', async () => {
    await engine.schemaCaches.close()
    await engine.pools.close()
  })
  return app
}

/** The unstarted fastify instance: our own query-string and body handling. */
function createRestApp(deps: RestEngineDeps): FastifyInstance {
  const rest = deps.config.rest
  // The gateway logs every request; the engine logs failures only.
  const app = createPartApp({
    tracer: deps.tracer,
    logger: deps.logger ?? false,
    fastify: {
      bodyLimit: rest.max_body_bytes,
      exposeHeadRoutes: false,
      return503OnClosing: true,
      routerOptions: {
        maxParamLength: 4096,
        // We parse the raw query string ourselves (PostgREST's rules: `+` is a space, order kept).
        querystringParser: () => ({}),
      },
    },
  })
  // Bodies are kept as raw bytes (api-request/ parses JSON / CSV / form itself).
  app.removeAllContentTypeParsers()
  // JSON nested deeper than rest.max_json_depth is refused before any parser recurses into it.
  const maxDepth = rest.max_json_depth
  app.addContentTypeParser(
    '*',
    { parseAs: 'buffer' },
    (req: FastifyRequest, body: Buffer, done: (err: Error | null, body?: Buffer) => void) => {
      if (isJsonBody(req.headers['content-type']) && jsonDepthExceeds(body, maxDepth)) {
        done(
          new InvalidBodyError(`The JSON body is nested deeper than ${maxDepth} levels`, {
            details: `at most ${maxDepth} nested arrays and objects are accepted`,
          }),
        )
        return
      }
      done(null, body)
    },
  )
  return app
}

/**
 * The engine's pools, schema caches, token verifier and plan cache. A tenant whose pool was
 * closed (idle) also gives up its schema cache. Schema changes reach the cache from the
 * pool's connections: the schema version each transaction reads, and NOTIFY pgrst heard on
 * them (see pools.ts).
 */
function createEngine(deps: RestEngineDeps, log: FastifyBaseLogger): Engine {
  const rest = deps.config.rest
  const schemaCaches = createSchemaCacheStore({ logger: log })
  const pools = new EnginePools(
    {
      ...budgetOptions(rest.pool_budget, rest.pool_cluster_share),
      perTenant: rest.pool_per_tenant,
      idleMs: rest.pool_idle_ms,
      acquireTimeoutMs: deps.poolAcquireTimeoutMs ?? 10_000,
      connectTimeoutMs: deps.connectTimeoutMs ?? TENANT_CONNECT_TIMEOUT_MS,
      maxTenants: rest.pool_max_tenants,
      reconnectBackoffMs: rest.reconnect_backoff_ms,
      reconnectBackoffMaxMs: rest.reconnect_backoff_max_ms,
      ...(deps.now !== undefined ? { now: deps.now } : {}),
    },
    log,
    {
      poolClosed: (key) => schemaCaches.drop(key),
      notification: (key, payload) => schemaCaches.notified(key, payload),
      schemaVersion: (key, version) => schemaCaches.observed(key, version),
    },
  )
  return {
    settings: { statementTimeoutMs: rest.statement_timeout_ms },
    pools,
    schemaCaches,
    tokens: new TokenVerifier(),
    plans: new LRUCache({ max: 2_000 }),
  }
}

function engineHandle(engine: Engine): RestEngineHandle {
  const pools = engine.pools.shared
  return {
    reloadSchema: (database) => engine.schemaCaches.reload(database),
    openConnections: () => pools.openConnections,
    poolStats: (database) => pools.stats(database),
    poolSnapshot: () => pools.snapshot(),
    perTenantCap: () => pools.perTenantCap,
    reconnectProbesSettled: async () => {
      await engine.pools.backoff.probesSettled()
      await pools.clusterProbesSettled()
    },
  }
}

/** The engine's HTTP side: the route handler (the pipeline's way in and out), unknown routes and errors. */
class RestRoutes {
  readonly #deps: RestEngineDeps
  readonly #engine: Engine

  constructor(deps: RestEngineDeps, engine: Engine) {
    this.#deps = deps
    this.#engine = engine
  }

  /** A request of a tenant: through the pipeline (handler.ts), answered with its stage timings when the tenant asks for them. */
  readonly handle = async (
    request: FastifyRequest<{ Params: { database: string } }>,
    reply: FastifyReply,
  ): Promise<void> => {
    const database = request.params.database
    if (!DATABASE_NAME.test(database)) throw new TenantNotFoundError(database)
    const tenant = await this.#deps.tenants.get(database)
    if (!tenant) throw new TenantNotFoundError(database)
    const url = request.raw.url ?? '/'
    const q = url.indexOf('?')
    const pathname = q < 0 ? url : url.slice(0, q)
    const prefix = '/' + database
    if (!pathname.startsWith(prefix)) throw new InvalidPathError()
    // PostgREST's server-trace-header: the request's value of that header is on the answer, errors too.
    const trace = tenant.rest.server_trace_header
    const traced = trace === null || trace === undefined ? undefined : request.headers[trace.toLowerCase()]
    if (trace && typeof traced === 'string') reply.header(trace, traced)
    const timings = new StageTimings()
    request.setDecorator(TIMINGS_DECORATOR, timings)
    const res = await handleRequest(
      this.#engine,
      tenant,
      {
        method: request.method,
        path: pathname.slice(prefix.length),
        query: q < 0 ? '' : url.slice(q + 1),
        // Repeated headers read as PostgREST reads them (the first Accept line, ...).
        ...headerViews(request.headers, request.raw.headersDistinct),
        body: Buffer.isBuffer(request.body) ? request.body : null,
      },
      timings,
    )
    reply.code(res.status).headers(res.headers)
    if (tenant.rest.server_timing_enabled === true) reply.header('server-timing', timings.serverTiming())
    const phrase = reasonPhrase(res.status)
    if (phrase !== null) reply.raw.statusMessage = phrase
    if (res.body === null || request.method === 'HEAD') await reply.send()
    else await reply.send(res.body)
  }

  /**
   * Methods the routes do not take (TRACE, PROPFIND ...) arrive here: answered as PostgREST
   * answers them (PGRST117, or PGRST101 on a function) once the tenant is known.
   */
  readonly notFound = async (request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> => {
    const url = request.raw.url ?? '/'
    const q = url.indexOf('?')
    const [, database = '', ...rest] = (q < 0 ? url : url.slice(0, q)).split('/')
    if ((METHODS as readonly string[]).includes(request.method) || database === '')
      return sendError(reply, new InvalidPathError())
    if (!DATABASE_NAME.test(database) || !(await this.#deps.tenants.get(database)))
      return sendError(reply, new TenantNotFoundError(database))
    return sendError(
      reply,
      unsupportedMethod(request.method, pathSegments(rest.length === 0 ? '' : '/' + rest.join('/'))),
    )
  }

  /** Every error of the engine, ours or fastify's (a body too large, a bad content type), as PostgREST's error body. */
  readonly failed = (err: unknown, request: FastifyRequest, reply: FastifyReply): FastifyReply => {
    const e = this.#gatehouseError(err)
    // Fail-fast refusals of a database known to be down, and the request whose connect failed:
    // the pool logged that connect already (docs/operating.md, Tenant databases).
    if (isBackoffRefusal(e)) request.log.debug({ code: e.code, internal: e.internal }, 'rest: database backing off')
    else if (e.status >= 500) {
      const timings = request.getDecorator<StageTimings | null>(TIMINGS_DECORATOR)
      request.log.error(
        { err: e.cause ?? err, internal: e.internal, code: e.code, stages: timings?.serverTiming() },
        'rest: request failed',
      )
    }
    return sendError(reply, e, e instanceof UnexpectedError ? request.id : undefined)
  }

  #gatehouseError(err: unknown): GatehouseError {
    return toPartError(err, {
      fromFastify: (fe) =>
        fe.kind === 'body_too_large'
          ? new PayloadTooLargeError(this.#deps.config.rest.max_body_bytes, { cause: err })
          : new BadRequestError(fe.message, { cause: err }),
      unknown: () => new UnexpectedError({ cause: err }),
    })
  }
}

function sendError(reply: FastifyReply, e: GatehouseError, requestId?: string): FastifyReply {
  reply.code(e.status)
  const phrase = reasonPhrase(e.status, e)
  if (phrase !== null) reply.raw.statusMessage = phrase
  reply.header('content-type', 'application/json; charset=utf-8')
  reply.header('proxy-status', proxyStatus(e))
  if (e.status === 503) reply.header('retry-after', '1')
  for (const [k, v] of Object.entries(e.headers ?? {})) reply.header(k, v)
  if (e.status === 401 && !reply.hasHeader('www-authenticate')) reply.header('www-authenticate', 'Bearer')
  return reply.send(errorBodyJson(e, requestId === undefined ? {} : { request_id: requestId }))
}

// The control-panel API (its own listener, the "control-panel host"): buildPanel(deps)
// returns an UNSTARTED fastify instance serving, under
// /organizations/:org/databases/:db/api, the app-session exchange, the test query, the auth
// settings and the policy check, for panel users holding a valid panel session.
// Only cli.ts / serve.ts listen. Nothing here reads process.env.
//
// Panel session (Authorization: Bearer <token>): a JWT the control panel issues, verified
// with config.panel.session_secret (HS256) or config.panel.jwks_url, algorithms pinned to
// config.panel.algorithms, `exp` required, `iss`/`aud` checked when configured. Claims:
// `sub` = panel user id, `email`, `orgs` = array of organization ids the user belongs to,
// optional `email_verified` (default true). No session or a bad one: 401.
import type { FastifyBaseLogger, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import type { Config } from '../config/index.js'
import { createAuthService, type AuthService } from '../auth/index.js'
import { createCatalog, createRefusalExplainer } from '../gateway/index.js'
import {
  createPartApp,
  firstHeader,
  instrumentPart,
  sidePoolTenant,
  tenantLabel,
  type PartTracer,
} from '../shared/index.js'
import type { TenantLookup, TenantStore } from '../tenants/index.js'
import { decoratePanelRequests, guardHook } from './context.js'
import { BadRequestError, NotFoundError, PANEL_BODY_LIMIT, renderPanelError } from './errors.js'
import { createPanelPools } from './pools.js'
import { ExchangeLimiter } from './exchange-limit.js'
import { registerPanelRoutes } from './routes.js'
import { createSessionVerifier } from './session.js'

export { signPanelSession, type PanelSession, type SessionVerifier } from './session.js'
export { checkPolicies, formatPolicyReport } from './policy-check.js'
export { maskAuthSettings, applyAuthSettingsPatch, MASKED_SECRET } from './auth-settings.js'
export { restSettingsView, applyRestSettingsPatch } from './rest-settings.js'
export { PANEL_ERRORS, PANEL_ERROR_CODES, type PanelErrorCode } from './errors.js'
export type { TestQueryRequest } from './test-query.js'
export { registerPanelCommands } from './commands.js'
export { panelRouteList } from './routes.js'

export interface PanelDeps {
  config: Config
  /** Resolves a database to its tenant (usually the tenant cache). */
  tenants: TenantLookup
  /** The tenant store auth-settings changes are written to; without it PATCH answers 409. */
  store?: TenantStore
  /** A ready logger; default pino with config.log and the shared redaction. */
  logger?: FastifyBaseLogger
  /** Traces each request and (gateway) carries `traceparent` upstream; none when absent. */
  tracer?: PartTracer
  /** The account operations of the exchange; default one created (and closed) by the panel. */
  authService?: AuthService
  /** Clock (tests): panel session checks and sign-in times. */
  now?: () => Date
}

/** JSON bodies only (an empty body is {}: the exchange needs none), the request id on every answer, the panel's error bodies. */
function setJsonAndErrors(app: FastifyInstance): void {
  app.removeAllContentTypeParsers()
  app.addContentTypeParser(
    'application/json',
    { parseAs: 'string', bodyLimit: PANEL_BODY_LIMIT },
    (_req, body, done) => {
      const text = String(body)
      if (text.trim() === '') {
        done(null, {})
        return
      }
      try {
        done(null, JSON.parse(text))
      } catch {
        done(new BadRequestError('the body is not valid JSON'), undefined)
      }
    },
  )

  app.addHook('onRequest', async (req, reply) => {
    reply.header('x-request-id', req.id)
  })

  app.setErrorHandler((err, req, reply) => {
    const r = renderPanelError(err, req.id, firstHeader(req.headers['content-type']) ?? '')
    if (r.status >= 500)
      req.log.error({ err: r.error.internal ?? r.error.cause ?? err, code: r.error.code }, 'panel request failed')
    else req.log.info({ code: r.error.code, status: r.status }, 'panel request refused')
    void reply.code(r.status).headers(r.headers).send(r.body)
  })
}

/** An unknown route (or a path parameter past any route's limit), in the panel's shape. */
function notFound(req: FastifyRequest, reply: FastifyReply): void {
  const r = renderPanelError(new NotFoundError(), req.id)
  void reply.code(r.status).headers(r.headers).send(r.body)
}

const PANEL_FASTIFY_OPTIONS = {
  bodyLimit: PANEL_BODY_LIMIT,
  trustProxy: false,
  return503OnClosing: true,
  routerOptions: { ignoreTrailingSlash: true, maxParamLength: 4096 },
}

/** `{ now }` when the caller injected a clock, for options that must not carry `now: undefined`. */
function nowOption(now: (() => Date) | undefined): { now?: () => Date } {
  return now !== undefined ? { now } : {}
}

/**
 * Builds the panel (never listens; health, readiness and metrics are on its admin listener): the
 * routes of routes.ts under `/organizations/:org/databases/:db/api` (docs/routes.md). Close with
 * `app.close()` (pools end).
 */
export function buildPanel(deps: PanelDeps): FastifyInstance {
  const { config } = deps
  const verifier = createSessionVerifier(config.panel, nowOption(deps.now))
  const app = createPartApp({
    tracer: deps.tracer,
    logger: deps.logger,
    log: config.log,
    fastify: PANEL_FASTIFY_OPTIONS,
    notFoundHandler: notFound,
  })

  const ownAuth = deps.authService === undefined
  const auth = deps.authService ?? createAuthService({ config, logger: app.log, ...nowOption(deps.now) })
  const catalog = createCatalog()
  const explainer = createRefusalExplainer({
    catalog,
    onLookupError: (err, tenant) => app.log.warn({ err, tenant: tenant.database }, 'panel: catalog look-up failed'),
  })
  const restPools = createPanelPools('gatehouse-panel-test-query')
  const ownerPools = createPanelPools('gatehouse-panel')

  setJsonAndErrors(app)
  decoratePanelRequests(app)
  instrumentPart(app, {
    part: 'panel',
    tenantOf: tenantLabel(deps.tenants, 'db'),
    tenantLabel: deps.config.metrics.tenant_label,
    pools: [
      { part: 'panel-test-query', snapshot: () => restPools.snapshot(), tenantOf: sidePoolTenant },
      { part: 'panel-owner', snapshot: () => ownerPools.snapshot(), tenantOf: sidePoolTenant },
    ],
  })

  void app.register(
    async (scope) => {
      scope.addHook('onRequest', guardHook({ verifier, tenants: deps.tenants }))
      registerPanelRoutes(scope, {
        config,
        store: deps.store,
        auth,
        explainer,
        restPools,
        ownerPools,
        exchangeLimiter: new ExchangeLimiter(),
      })
    },
    { prefix: '/organizations/:org/databases/:db/api' },
  )

  app.addHook('onClose', async () => {
    await Promise.all([
      ownAuth ? auth.close() : Promise.resolve(),
      catalog.close(),
      restPools.close(),
      ownerPools.close(),
    ])
  })

  return app
}

// The gateway part's façade: buildGateway(deps) returns an UNSTARTED fastify instance that
// routes `/<database>/auth/v1/*` and `/<database>/rest/v1/*` to the tenant's upstreams,
// with keys, tokens, CORS, health, metrics and logs; installGracefulShutdown() drains it.
// Only cli.ts / serve.ts listen. Nothing here reads process.env.
import type { FastifyInstance, FastifyReply, FastifyRequest, FastifyServerOptions } from 'fastify'
import { createPartApp, redactUrl, firstHeader, instrumentPart } from '../shared/index.js'
import { createAuthenticator } from './request/authenticate.js'
import { createUpstreamTokens } from './proxy/upstream-token.js'
import { createUpstreamProxy } from './proxy/proxy-server.js'
import { createCors } from './cors.js'
import { createInflightSlots } from './inflight.js'
import { createGatewayMetrics, registerStoreHealth } from './metrics.js'
import { NotFoundError, InvalidPathError } from './errors.js'
import { renderError } from './render.js'
import { proxyRoutes, requestInfo } from './routes.js'
import { gatewayState } from './shutdown.js'
import { lazyChildLoggerFactory } from './request-logger.js'
import type { GatewayDeps, RequestInfo } from './types.js'
import { performance } from 'node:perf_hooks'

export type { GatewayDeps, Caller, RewriteError, RewrittenError, UpstreamErrorContext, Service } from './types.js'
export { installGracefulShutdown, gatewayState, type GracefulShutdown, type GracefulShutdownOptions } from './shutdown.js'
export { GATEWAY_ERRORS, GATEWAY_ERROR_CODES, REFUSAL_ERRORS, type GatewayErrorCode } from './errors.js'
export { CORS_ALLOWED_HEADERS, CORS_EXPOSED_HEADERS } from './cors.js'
export * from './rewrite/index.js'

/**
 * Builds the gateway (never listens). Routes: `/:database/auth/v1/*`, `/:database/rest/v1/*`;
 * `/healthz`, `/readyz`, `/metrics` answer 404 here (they are on the admin listener, see
 * buildPartAdmin). Close it with `app.close()` (keep-alive upstream
 * sockets are destroyed on close) or through installGracefulShutdown().
 */
export function buildGateway (deps: GatewayDeps): FastifyInstance {
  const { config } = deps
  const g = config.gateway
  const now = deps.now ?? Date.now
  const publicUrl = new URL(config.public_url)

  const app = createPartApp({
    tracer: deps.tracer,
    logger: deps.logger,
    log: config.log,
    loggerOptions: deps.loggerOptions,
    childLoggerFactory: lazyChildLoggerFactory,
    fastify: {
      // The client IP (request.ip, sent upstream as the only X-Forwarded-For entry) is the
      // socket's, or from X-Forwarded-For when the peer is a listed proxy (a load balancer).
      trustProxy: g.trusted_proxies.length > 0 ? [...g.trusted_proxies] : false,
      // Requests that arrive while closing get our 503 (JSON, Retry-After) from the routes,
      // not fastify's bare one; fastify still adds `Connection: close`.
      return503OnClosing: false,
      routerOptions: {
        ignoreDuplicateSlashes: false,
        ignoreTrailingSlash: false,
        useSemicolonDelimiter: false,
        maxParamLength: 200,
        // No route reads request.query (the proxy works on the raw query string, forwarded
        // as is): skip parsing it on every request.
        querystringParser: () => ({})
      } as FastifyServerOptions['routerOptions'],
      frameworkErrors: (error: Error, request: FastifyRequest, reply: FastifyReply) => {
        const r = renderError(new InvalidPathError('the URL cannot be decoded', { cause: error }), request.id)
        request.log.info({ code: r.error.code }, 'request refused')
        void reply.code(r.status).headers({ ...baseHeaders(request), ...r.headers }).send(r.body)
      }
    }
  })

  // Expect: 100-continue is answered by the route, once it reads the body: a request refused
  // before (a declared body over the limit, a bad key) gets its answer instead of an
  // invitation to send a body it would drop (Node would send 100 Continue at once).
  app.server.on('checkContinue', (req, res) => { app.server.emit('request', req, res) })

  const state = gatewayState(app)
  const metrics = createGatewayMetrics(deps.metricsRegistry)
  if (deps.tenants.health !== undefined) registerStoreHealth(metrics.registry, deps.tenants.health.bind(deps.tenants))
  const cors = createCors(g.cors_origins)
  const authenticator = createAuthenticator({ publicUrl: config.public_url, now })
  const tokens = createUpstreamTokens({ ttlSeconds: g.upstream_token_ttl_seconds, now })
  const upstream = createUpstreamProxy({
    timeoutMs: g.upstream_timeout_ms,
    connectTimeoutMs: g.upstream_connect_timeout_ms,
    maxSockets: g.upstream_max_sockets,
    queueTimeoutMs: g.upstream_queue_timeout_ms,
    keepAliveMs: g.upstream_keepalive_ms,
    maxErrorBodyBytes: g.max_error_body_bytes,
    rewriteError: deps.rewriteError,
    isShuttingDown: () => state.shuttingDown,
    onUpstreamError: (ctx, code) => metrics.upstreamError(ctx.tenant.database, ctx.service, code),
    onComplete: (info, status) => complete(info, status)
  })

  // Headers of every response: request id, CORS, `Connection: close` while shutting down.
  // Added where each response is made (no global onRequest hook on the hot path).
  const baseHeaders = (request: { id: string, raw: { headers: Record<string, string | string[] | undefined> } }): Record<string, string> => {
    const h: Record<string, string> = { 'x-request-id': request.id }
    const origin = request.raw.headers.origin
    if (origin !== undefined) {
      const c = cors.response(firstHeader(origin))
      if (c !== null) Object.assign(h, c)
    }
    if (state.shuttingDown) h.connection = 'close'
    return h
  }

  // One line per request the proxy pipeline took (URL redacted), and the metrics. Called
  // by the proxy when a response is complete and by the error handler; no onResponse hook
  // (fastify's hook runner per request cost more than the line itself). The root logger,
  // with reqId as a field: no per-request child logger is made; every field is ours, so
  // the censoring formatter is skipped.
  const accessLog = app.log.child({}, { formatters: { log: (o: Record<string, unknown>) => o } } as never)
  const complete = (info: RequestInfo, status: number): void => {
    if (info.done) return
    info.done = true
    const ms = performance.now() - info.start
    metrics.observe(info.tenant, info.service, status, ms / 1000)
    const line: Record<string, unknown> = {
      reqId: info.reqId,
      tenant: info.tenant,
      method: info.method,
      url: redactUrl(info.url),
      status,
      ms: Math.round(ms * 10) / 10
    }
    if (info.errorCode !== null) line.code = info.errorCode
    accessLog.info(line, 'request completed')
  }

  app.setErrorHandler((err, request, reply) => {
    const info = requestInfo(request.raw)
    const r = renderError(err, request.id, { auth: info?.service === 'auth', apiVersion: request.raw.headers['x-supabase-api-version'] })
    if (info !== undefined) info.errorCode = r.error.code
    const tenant = info?.tenant
    if (r.status >= 500) request.log.error({ tenant, err: r.error.cause ?? err, code: r.error.code }, 'request failed')
    else if (r.error.details !== null) request.log.debug({ tenant, code: r.error.code, details: r.error.details }, 'request refused')
    void reply.code(r.status).headers({ ...baseHeaders(request), ...r.headers }).send(r.body)
    if (info !== undefined) complete(info, r.status)
  })

  app.setNotFoundHandler((request, reply) => {
    const r = renderError(new NotFoundError(), request.id)
    void reply.code(r.status).headers({ ...baseHeaders(request), ...r.headers }).send(r.body)
  })

  // Set when app.close() begins (before the listener stops).
  let closing = false
  app.addHook('preClose', (done) => { closing = true; done() })

  // Health, readiness and metrics are served on the admin listener only (serve.ts); here
  // they are unknown paths, answered before any tenant look-up.
  const notHere = async (request: FastifyRequest, reply: FastifyReply): Promise<void> => {
    const r = renderError(new NotFoundError(), request.id)
    await reply.code(r.status).headers({ ...baseHeaders(request), ...r.headers }).send(r.body)
  }
  for (const url of ['/healthz', '/readyz', '/metrics']) app.route({ method: ['GET', 'HEAD'], url, handler: notHere })

  instrumentPart(app, {
    part: 'gateway',
    registry: metrics.registry,
    stopping: () => state.shuttingDown,
    checks: deps.ready === undefined
      ? []
      : [{ name: 'gateway', check: async () => { if (!(await deps.ready!())) throw new Error('its readiness check failed') } }]
  })

  void app.register(proxyRoutes({
    baseHeaders,
    cors,
    tenants: deps.tenants,
    authenticator,
    tokens,
    upstream,
    isClosing: () => closing,
    limits: {
      restMaxBodyBytes: g.rest_max_body_bytes,
      authMaxBodyBytes: g.auth_max_body_bytes,
      bodyIdleMs: g.body_idle_timeout_ms,
      bodyTimeoutMs: g.body_timeout_ms,
      tenantMaxInflight: g.tenant_max_inflight
    },
    slots: createInflightSlots(g.tenant_max_inflight),
    onClientGone: (info) => { info.errorCode = 'client_closed'; complete(info, 499) },
    forwardedProto: publicUrl.protocol.replace(/:$/, ''),
    forwardedHost: publicUrl.host,
    tracer: deps.tracer
  }))

  app.addHook('onClose', async () => {
    upstream.close()
    authenticator.clear()
    tokens.clear()
  })

  return app
}

// The gateway part's façade: buildGateway(deps) returns an UNSTARTED fastify instance that
// routes `/<database>/auth/v1/*` and `/<database>/rest/v1/*` to the tenant's upstreams,
// with keys, tokens, CORS, health, metrics and logs; installGracefulShutdown() drains it.
// Only cli.ts / serve.ts listen. Nothing here reads process.env.
//
// Two entries to one proxy pipeline (routes.ts): the server fastify listens with is ours
// (serverFactory), and its request listener hands the proxied requests straight to the
// pipeline (no fastify routing, request/reply objects, hooks or hijack per request); what
// it does not take (the three admin paths, other methods, paths with a `%`, bodies whose
// content type fastify vets, `/`) goes to fastify, whose catch-all route runs the same
// pipeline. Both give the same answers, headers, logs, metrics and spans.
import http from 'node:http'
import type { FastifyBaseLogger, FastifyInstance, FastifyReply, FastifyRequest, FastifyServerOptions } from 'fastify'
import proxyAddr from '@fastify/proxy-addr'
import { createPartApp, redactUrl, firstHeader, instrumentPart, requestIdOf } from '../shared/index.js'
import { createAuthenticator } from './request/authenticate.js'
import { createUpstreamTokens } from './proxy/upstream-token.js'
import { createUpstreamProxy } from './proxy/proxy-server.js'
import { refuseUpgrade } from './upgrade.js'
import { createCors } from './cors.js'
import { createInflightSlots } from './inflight.js'
import { createProxyHint } from './proxy-hint.js'
import { createRestRateLimiter } from './rate-limits.js'
import { createGatewayMetrics, registerStoreHealth } from './metrics.js'
import { NotFoundError, InvalidPathError } from './errors.js'
import { renderError } from './render.js'
import { createProxyPipeline, PROXY_METHODS, requestInfo, type Exchange } from './routes.js'
import { gatewayState } from './shutdown.js'
import { LazyRequestLogger, lazyChildLoggerFactory } from './request-logger.js'
import type { GatewayDeps, RequestInfo } from './types.js'
import { performance } from 'node:perf_hooks'

export type { GatewayDeps, Caller, RewriteError, RewrittenError, UpstreamErrorContext, Service } from './types.js'
export { installGracefulShutdown, gatewayState, type GracefulShutdown, type GracefulShutdownOptions } from './shutdown.js'
export { GATEWAY_ERRORS, GATEWAY_ERROR_CODES, REFUSAL_ERRORS, type GatewayErrorCode } from './errors.js'
export { CORS_EXPOSED_HEADERS } from './cors.js'
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
  // The fast path's listener, set once the pipeline exists (below).
  let fastPath: ((req: http.IncomingMessage, res: http.ServerResponse) => boolean) | null = null

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
      // fastify's own server set-up (lib/server.js), on a server whose listener tries the
      // fast path first.
      serverFactory: (handler: http.RequestListener, o: FastifyServerOptions) => {
        const server = http.createServer((o as { http?: http.ServerOptions }).http ?? {}, (req, res) => {
          if (fastPath === null || !fastPath(req, res)) handler(req, res)
        })
        server.keepAliveTimeout = o.keepAliveTimeout!
        server.requestTimeout = o.requestTimeout!
        server.setTimeout(o.connectionTimeout!)
        if ((o.maxRequestsPerSocket ?? 0) > 0) server.maxRequestsPerSocket = o.maxRequestsPerSocket!
        return server
      },
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
  app.server.on('upgrade', (req, socket) => { refuseUpgrade(req, socket) })

  const state = gatewayState(app)
  const metrics = createGatewayMetrics(deps.metricsRegistry, { tenantLabel: config.metrics.tenant_label })
  if (deps.tenants.health !== undefined) registerStoreHealth(metrics.registry, deps.tenants.health.bind(deps.tenants))
  const cors = createCors(g.cors_origins)
  const authenticator = createAuthenticator({ publicUrl: config.public_url, now })
  const tokens = createUpstreamTokens({ ttlSeconds: g.upstream_token_ttl_seconds, now })
  const slots = createInflightSlots(g.tenant_max_inflight, g.client_max_inflight_share)
  const rateLimiter = createRestRateLimiter({ redisUrl: config.redis.url, keyPrefix: config.redis.key_prefix })
  const upstream = createUpstreamProxy({
    timeoutMs: g.upstream_timeout_ms,
    connectTimeoutMs: g.upstream_connect_timeout_ms,
    maxSockets: g.upstream_max_sockets,
    queueTimeoutMs: g.upstream_queue_timeout_ms,
    keepAliveMs: g.upstream_keepalive_ms,
    maxErrorBodyBytes: g.max_error_body_bytes,
    responseBufferBytes: g.response_buffer_bytes,
    sendTimeoutMs: g.send_timeout_ms,
    // The upstream's answer is complete (or failed): the tenant's slot is free again,
    // whether or not the client has read the answer yet.
    onUpstreamDone: (res) => slots.release(res),
    rewriteError: deps.rewriteError,
    isShuttingDown: () => state.shuttingDown,
    onUpstreamError: (ctx, code) => metrics.upstreamError(ctx.tenant.database, ctx.service, code),
    onComplete: (info, status) => complete(info, status)
  })

  // The client address (sent upstream as the only X-Forwarded-For entry), as fastify's
  // request.ip with this trustProxy setting: the socket's, or the nearest untrusted hop
  // of X-Forwarded-For when the peer is a listed proxy.
  const trust = g.trusted_proxies.length > 0 ? proxyAddr.compile([...g.trusted_proxies]) : null
  // Without trusted proxies: a warning when most traffic comes from what looks like one.
  const hint = createProxyHint(g.trusted_proxies, app.log)
  const clientIp = (raw: http.IncomingMessage): string => {
    if (trust !== null) return proxyAddr(raw, trust) ?? ''
    if (hint !== null) hint(raw)
    return raw.socket.remoteAddress ?? ''
  }

  // Headers of every response: request id, CORS, `Connection: close` while shutting down.
  // Added where each response is made (no global onRequest hook on the hot path).
  const baseHeaders = (request: { id: string, raw: { method?: string, headers: Record<string, string | string[] | undefined> } }): Record<string, string> => {
    const h: Record<string, string> = { 'x-request-id': request.id }
    const origin = request.raw.headers.origin
    if (origin !== undefined) {
      const c = cors.response(firstHeader(origin))
      if (c !== null) Object.assign(h, c)
    } else if (request.raw.method === 'OPTIONS' && cors.anyOrigin) {
      // PostgREST answers every OPTIONS (a table's, a function's, the root's) with this.
      h['access-control-allow-origin'] = '*'
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
    if (info.trace !== undefined) { line.trace_id = info.trace.trace_id; line.span_id = info.trace.span_id }
    accessLog.info(line, 'request completed')
  }

  // An error answered: rendered, logged (5xx with the cause; refusals at debug), counted.
  const rendered = (err: unknown, ex: { id: string, raw: http.IncomingMessage, log: FastifyBaseLogger }): { status: number, headers: Record<string, string>, body: string } => {
    const info = requestInfo(ex.raw)
    const r = renderError(err, ex.id, { auth: info?.service === 'auth', apiVersion: ex.raw.headers['x-supabase-api-version'] })
    if (info !== undefined) info.errorCode = r.error.code
    const tenant = info?.tenant
    if (r.status >= 500) ex.log.error({ tenant, err: r.error.cause ?? err, code: r.error.code }, 'request failed')
    else if (r.error.details !== null) ex.log.debug({ tenant, code: r.error.code, details: r.error.details }, 'request refused')
    return { status: r.status, headers: { ...baseHeaders(ex), ...r.headers }, body: r.body }
  }

  app.setErrorHandler((err, request, reply) => {
    const r = rendered(err, request)
    void reply.code(r.status).headers(r.headers).send(r.body)
    const info = requestInfo(request.raw)
    if (info !== undefined) complete(info, r.status)
  })

  // The pipeline's errors, on the raw response (the same bytes fastify's reply.send writes).
  const fail = (ex: Exchange, err: unknown): void => {
    const r = rendered(err, ex)
    const res = ex.res
    const info = requestInfo(ex.raw)
    if (res.headersSent || res.destroyed) {
      res.destroy()
    } else {
      r.headers['content-length'] = String(Buffer.byteLength(r.body))
      res.writeHead(r.status, r.headers)
      res.end(r.body)
    }
    if (info !== undefined) complete(info, r.status)
  }

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

  const pipeline = createProxyPipeline({
    baseHeaders,
    fail,
    clientIp,
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
      bufferBodyBytes: g.buffer_body_bytes,
      minBodyBytesPerSecond: g.min_body_bytes_per_second,
      bodyRateWindowMs: g.body_rate_window_ms,
      tenantMaxInflight: g.tenant_max_inflight
    },
    slots,
    rateLimiter,
    onClientGone: (info) => { info.errorCode = 'client_closed'; complete(info, 499) },
    forwardedProto: publicUrl.protocol.replace(/:$/, ''),
    forwardedHost: publicUrl.host,
    tracer: deps.tracer
  })
  void app.register(pipeline.plugin)

  // The fast path: what fastify's routing, route hooks and tracing hooks do for the
  // catch-all route, done here for the requests it takes.
  const log = app.log
  const tracer = deps.tracer
  const methods = new Set(PROXY_METHODS)
  fastPath = (req, res) => {
    if (deps.fastPath === false) return false
    const url = req.url
    const method = req.method
    if (url === undefined || url.charCodeAt(0) !== 47 /* / */ || method === undefined || !methods.has(method)) return false
    const q = url.indexOf('?')
    const pct = url.indexOf('%')
    // Percent-encoded paths: fastify's router decodes them (400 when it cannot).
    if (pct !== -1 && (q === -1 || pct < q)) return false
    const pathLength = q === -1 ? url.length : q
    if (pathLength === 1 || isAdminPath(url, pathLength)) return false
    // A body with a content type: fastify vets the type (415 for a malformed one) before its
    // route; without a type, fastify parses none. GET and HEAD bodies are never vetted.
    if (method !== 'GET' && method !== 'HEAD') {
      const ct = req.headers['content-type']
      if (ct !== undefined ? !VALID_MEDIA_TYPE.test(ct) : hasBodyHeaders(req)) return false
    }
    const id = requestIdOf(req)
    if (closing && req.httpVersionMajor !== 2) res.setHeader('Connection', 'close')
    if (tracer !== undefined) {
      tracer.start(req)
      const end = (): void => {
        res.removeListener('finish', end)
        res.removeListener('error', end)
        tracer.end(req, res.statusCode, '/*')
      }
      res.on('finish', end)
      res.on('error', end)
    }
    const bindings = tracer === undefined ? { reqId: id } : { reqId: id, ...tracer.logFields?.(req) }
    void pipeline.handle({ raw: req, res, id, log: new LazyRequestLogger(log, bindings) })
    return true
  }

  app.addHook('onClose', async () => {
    upstream.close()
    rateLimiter.close()
    authenticator.clear()
    tokens.clear()
  })

  return app
}

// A content type fastify's parser takes as valid (its lib/content-type.js: `type/subtype`
// tokens before any `;`; parameters never make it invalid).
const VALID_MEDIA_TYPE = /^[\w!#$%&'*+.^`|~-]+\/[\w!#$%&'*+.^`|~-]+\s*(?:;|$)/

function hasBodyHeaders (req: http.IncomingMessage): boolean {
  const cl = req.headers['content-length']
  return req.headers['transfer-encoding'] !== undefined || (cl !== undefined && cl !== '0')
}

/** `/healthz`, `/readyz`, `/metrics` (fastify routes here: answered 404 before any look-up). */
function isAdminPath (url: string, pathLength: number): boolean {
  if (pathLength === 8) return url.startsWith('/healthz') || url.startsWith('/metrics')
  return pathLength === 7 && url.startsWith('/readyz')
}

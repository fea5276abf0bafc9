// The gateway part's façade: buildGateway(deps) returns an UNSTARTED fastify instance that
// routes `/<database>/auth/v1/*` and `/<database>/rest/v1/*` to the tenant's upstreams,
// with keys, tokens, CORS, health, metrics and logs; installGracefulShutdown() drains it.
// Only cli.ts / serve.ts listen. Nothing here reads process.env.
//
// The rooms: pipeline.ts (one request, stage by stage: path -> tenant -> key/token ->
// upstream token -> rate -> body -> slot -> forward), fast-path.ts (the node:http listener's
// entry to it, ahead of fastify; fastify's catch-all route is the other entry),
// responder.ts (headers, errors, the access-log line and metrics of every answer),
// request/ (path, query, authentication), proxy/ (upstream client, the response side,
// headers, upstream tokens), rewrite/ (refusals made clear).
import http from 'node:http'
import type { FastifyInstance, FastifyReply, FastifyRequest, FastifyServerOptions } from 'fastify'
import proxyAddr from '@fastify/proxy-addr'
import { createPartApp, instrumentPart } from '../shared/index.js'
import { Authenticator } from './request/authenticate.js'
import { createUpstreamTokens } from './proxy/upstream-token.js'
import { UpstreamClient } from './proxy/upstream-client.js'
import { refuseUpgrade } from './upgrade.js'
import { createCors } from './cors.js'
import { createInflightSlots, type InflightSlots } from './inflight.js'
import { createProxyHint } from './proxy-hint.js'
import { createRestRateLimiter } from './rate-limits.js'
import { createGatewayMetrics, registerStoreHealth, type GatewayMetrics } from './metrics.js'
import { NotFoundError, MalformedPathError } from './errors.js'
import { createProxyPipeline, requestInfo, type ProxyRouteDeps } from './pipeline.js'
import { createFastPath, type FastPath } from './fast-path.js'
import { GatewayResponder } from './responder.js'
import { gatewayState } from './shutdown.js'
import { GatewayRequest, GatewayResponse } from './http-objects.js'
import { lazyChildLoggerFactory } from './request-logger.js'
import type { GatewayDeps } from './types.js'

type GatewayConfig = GatewayDeps['config']['gateway']

export type { GatewayDeps, Caller, RewriteError, RewrittenError, UpstreamErrorContext, Service } from './types.js'
export { installGracefulShutdown } from './shutdown.js'
export { GATEWAY_ERRORS, GATEWAY_ERROR_CODES, REFUSAL_ERRORS, type GatewayErrorCode } from './errors.js'
export * from './rewrite/index.js'

/**
 * Builds the gateway (never listens). Routes: `/:database/auth/v1/*`, `/:database/rest/v1/*`;
 * `/healthz`, `/readyz`, `/metrics` answer 404 here (they are on the admin listener, see
 * buildPartAdmin). Close it with `app.close()` (keep-alive upstream
 * sockets are destroyed on close) or through installGracefulShutdown().
 */
export function buildGateway(deps: GatewayDeps): FastifyInstance {
  const g = deps.config.gateway
  // The fast path's listener, set once the pipeline exists (below).
  let fastPath: FastPath | null = null
  let responder: GatewayResponder | null = null
  const app = createPartApp({
    tracer: deps.tracer,
    logger: deps.logger,
    log: deps.config.log,
    loggerOptions: deps.loggerOptions,
    childLoggerFactory: lazyChildLoggerFactory,
    fastify: fastifyOptions(
      g,
      () => fastPath,
      undecodableUrl(() => responder!),
    ),
  })
  installServerHooks(app)
  const state = gatewayState(app)
  const metrics = createGatewayMetrics({ tenantLabel: deps.config.metrics.tenant_label })
  if (deps.tenants.health !== undefined) registerStoreHealth(metrics.registry, deps.tenants.health.bind(deps.tenants))
  const cors = createCors(g.cors_origins)
  const answers = new GatewayResponder({ cors, metrics, shuttingDown: () => state.shuttingDown, log: app.log })
  responder = answers
  installErrorHandlers(app, answers)

  // Set when app.close() begins (before the listener stops).
  let closing = false
  app.addHook('preClose', (done) => {
    closing = true
    done()
  })
  instrumentPart(app, {
    part: 'gateway',
    registry: metrics.registry,
    stopping: () => state.shuttingDown,
    checks: readinessChecks(deps.ready),
  })

  const pipelineDeps = proxyDeps(
    deps,
    app,
    cors,
    answers,
    metrics,
    () => state.shuttingDown,
    () => closing,
  )
  const pipeline = createProxyPipeline(pipelineDeps)
  void app.register(pipeline.plugin.bind(pipeline))
  if (deps.fastPath !== false)
    fastPath = createFastPath({ pipeline, log: app.log, tracer: deps.tracer, isClosing: () => closing })

  app.addHook('onClose', async () => closePipeline(pipelineDeps))
  return app
}

/** Upstream sockets, the rate limiter's Redis connection and the caches go with the gateway. */
function closePipeline(deps: ProxyRouteDeps): void {
  deps.upstream.close()
  deps.rateLimiter.close()
  deps.authenticator.clear()
  deps.tokens.clear()
}

/** fastify's frameworkErrors: a URL it cannot decode is our 400 invalid_path. */
function undecodableUrl(responder: () => GatewayResponder) {
  return (error: Error, request: FastifyRequest, reply: FastifyReply): void => {
    const r = responder().bare(new MalformedPathError('the URL cannot be decoded', { cause: error }), request)
    request.log.info({ code: r.code }, 'request refused')
    void reply.code(r.status).headers(r.headers).send(r.body)
  }
}

/**
 * Expect: 100-continue is answered by the route, once it reads the body: a request refused
 * before (a declared body over the limit, a bad key) gets its answer instead of an
 * invitation to send a body it would drop (Node would send 100 Continue at once).
 * Upgrades (WebSocket) are refused.
 */
function installServerHooks(app: FastifyInstance): void {
  app.server.on('checkContinue', (req, res) => {
    app.server.emit('request', req, res)
  })
  app.server.on('upgrade', (req, socket) => {
    refuseUpgrade(req, socket)
  })
}

/** The gateway's readiness check on the admin listener, when the caller gave one. */
function readinessChecks(ready: GatewayDeps['ready']): { name: string; check: () => Promise<void> }[] {
  if (ready === undefined) return []
  const check = async (): Promise<void> => {
    if (!(await ready())) throw new Error('its readiness check failed')
  }
  return [{ name: 'gateway', check }]
}

/**
 * fastify's options for the gateway: the server fastify listens with is ours
 * (serverFactory), its request listener trying the fast path first.
 */
function fastifyOptions(
  g: GatewayConfig,
  fastPath: () => FastPath | null,
  frameworkErrors: (error: Error, request: FastifyRequest, reply: FastifyReply) => void,
): FastifyServerOptions {
  return {
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
      querystringParser: () => ({}),
    } as FastifyServerOptions['routerOptions'],
    // fastify's own server set-up (lib/server.js), on a server whose listener tries the
    // fast path first.
    serverFactory: (handler: http.RequestListener, o: FastifyServerOptions) => {
      // Requests and responses of the gateway's own classes (http-objects.ts).
      const options = {
        ...(o as { http?: http.ServerOptions }).http,
        IncomingMessage: GatewayRequest,
        ServerResponse: GatewayResponse,
      } as http.ServerOptions
      const server = http.createServer(options, (req, res) => {
        const fast = fastPath()
        if (fast === null || !fast(req, res)) handler(req, res)
      })
      server.keepAliveTimeout = o.keepAliveTimeout!
      server.requestTimeout = o.requestTimeout!
      server.setTimeout(o.connectionTimeout!)
      if ((o.maxRequestsPerSocket ?? 0) > 0) server.maxRequestsPerSocket = o.maxRequestsPerSocket!
      return server
    },
    frameworkErrors: frameworkErrors as FastifyServerOptions['frameworkErrors'],
  }
}

/** fastify's error and not-found handlers, and the admin paths answered 404 here. */
function installErrorHandlers(app: FastifyInstance, answers: GatewayResponder): void {
  app.setErrorHandler((err, request, reply) => {
    const r = answers.render(err, request)
    void reply.code(r.status).headers(r.headers).send(r.body)
    const info = requestInfo(request.raw)
    if (info !== undefined) answers.complete(info, r.status)
  })
  const notFound = async (request: FastifyRequest, reply: FastifyReply): Promise<void> => {
    const r = answers.bare(new NotFoundError(), request)
    await reply.code(r.status).headers(r.headers).send(r.body)
  }
  app.setNotFoundHandler(notFound)
  // Health, readiness and metrics are served on the admin listener only (serve.ts); here
  // they are unknown paths, answered before any tenant look-up.
  for (const url of ['/healthz', '/readyz', '/metrics']) app.route({ method: ['GET', 'HEAD'], url, handler: notFound })
}

/** The proxy pipeline's parts, from the gateway's configuration. */
function proxyDeps(
  deps: GatewayDeps,
  app: FastifyInstance,
  cors: ProxyRouteDeps['cors'],
  answers: GatewayResponder,
  metrics: GatewayMetrics,
  shuttingDown: () => boolean,
  closing: () => boolean,
): ProxyRouteDeps {
  const { config } = deps
  const g = config.gateway
  const now = deps.now ?? Date.now
  const publicUrl = new URL(config.public_url)
  const slots: InflightSlots = createInflightSlots(g.tenant_max_inflight, g.client_max_inflight_share)
  return {
    baseHeaders: (ex) => answers.baseHeaders(ex),
    fail: (ex, err) => {
      answers.fail(ex, err)
    },
    clientIp: clientIpOf(g, app),
    cors,
    tenants: deps.tenants,
    authenticator: new Authenticator({ publicUrl: config.public_url, now }),
    tokens: createUpstreamTokens({ ttlSeconds: g.upstream_token_ttl_seconds, now }),
    upstream: upstreamClient(deps, slots, answers, metrics, shuttingDown),
    isClosing: closing,
    limits: bodyLimits(g),
    slots,
    rateLimiter: createRestRateLimiter({ redisUrl: config.redis.url, keyPrefix: config.redis.key_prefix }),
    onClientGone: (info) => {
      info.errorCode = 'client_closed'
      answers.complete(info, 499)
    },
    forwardedProto: publicUrl.protocol.replace(/:$/, ''),
    forwardedHost: publicUrl.host,
    tracer: deps.tracer,
  }
}

/** The undici client that carries the gateway's traffic to the engines. */
function upstreamClient(
  deps: GatewayDeps,
  slots: InflightSlots,
  answers: GatewayResponder,
  metrics: GatewayMetrics,
  shuttingDown: () => boolean,
): UpstreamClient {
  const g = deps.config.gateway
  return new UpstreamClient({
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
    isShuttingDown: shuttingDown,
    onUpstreamError: (ctx, code) => metrics.upstreamError(ctx.tenant.database, ctx.service, code),
    onComplete: (info, status) => answers.complete(info, status),
    ...(deps.now !== undefined ? { now: deps.now } : {}),
  })
}

/** Request body limits and rates, from the gateway's configuration. */
function bodyLimits(g: GatewayConfig): ProxyRouteDeps['limits'] {
  return {
    restMaxBodyBytes: g.rest_max_body_bytes,
    authMaxBodyBytes: g.auth_max_body_bytes,
    bodyIdleMs: g.body_idle_timeout_ms,
    bodyTimeoutMs: g.body_timeout_ms,
    bufferBodyBytes: g.buffer_body_bytes,
    minBodyBytesPerSecond: g.min_body_bytes_per_second,
    bodyRateWindowMs: g.body_rate_window_ms,
    tenantMaxInflight: g.tenant_max_inflight,
  }
}

/**
 * The client address (sent upstream as the only X-Forwarded-For entry), as fastify's
 * request.ip with this trustProxy setting: the socket's, or the nearest untrusted hop of
 * X-Forwarded-For when the peer is a listed proxy. Without trusted proxies: a warning when
 * most traffic comes from what looks like one.
 */
function clientIpOf(g: GatewayConfig, app: FastifyInstance): (raw: http.IncomingMessage) => string {
  if (g.trusted_proxies.length > 0) {
    const trust = proxyAddr.compile([...g.trusted_proxies])
    return (raw) => proxyAddr(raw, trust) ?? ''
  }
  const hint = createProxyHint(app.log)
  return (raw) => {
    hint(raw)
    return raw.socket.remoteAddress ?? ''
  }
}

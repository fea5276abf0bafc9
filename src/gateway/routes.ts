// The proxy pipeline of `/:database/auth/v1/*` and `/:database/rest/v1/*`, in one place
// (path -> tenant -> key/token -> upstream token -> body within its limits -> the
// tenant's in-flight slot -> headers), then the proxy, the response streamed. It works on
// the raw node:http request and response only, so the same pipeline serves two entries:
// the plain node:http fast path ahead of fastify (index.ts, most requests) and fastify's
// catch-all route (the rest: bodies with a content type fastify must vet, encoded paths;
// and inject()). Errors it meets are answered by `fail`, the same renderer as fastify's
// error handler. The hot path only touches caches.
import type { FastifyBaseLogger, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import type { IncomingHttpHeaders, IncomingMessage, OutgoingHttpHeaders, ServerResponse } from 'node:http'
import type { Tenant, TenantLookup } from '../tenants/index.js'
import { ClientTooManyConcurrentRequestsError, LengthRequiredError, RateLimitedError, NotReadyError, TenantNotFoundError, TooManyConcurrentRequestsError } from './errors.js'
import { isOpenAuthRoute, isTablePath, notServedError, parseGatewayPath } from './request/path.js'
import { rewriteQuery } from './request/query.js'
import { isUnverifiedTokenRefusal, type Authenticator } from './request/authenticate.js'
import type { UpstreamTokens } from './proxy/upstream-token.js'
import { hasRequestBody, upstreamPath, type UpstreamProxy } from './proxy/proxy-server.js'
import { buildUpstreamHeaders } from './proxy/headers.js'
import { firstHeader, type PartTracer } from '../shared/index.js'
import { UNKNOWN_TENANT } from './metrics.js'
import type { Cors } from './cors.js'
import type { Caller, RequestInfo } from './types.js'
import { ClientAbortedError, declaredTooLarge, lingerThenClose, readBody, type BodyStream } from './body.js'
import type { InflightSlots } from './inflight.js'
import type { RestRateLimiter } from './rate-limits.js'
import { performance } from 'node:perf_hooks'

const kInfo = Symbol('gatehouse.requestInfo')
type WithInfo = IncomingMessage & { [kInfo]?: RequestInfo }

/** The caller of an /auth/v1 request whose bearer JWT failed verification: no role, the token as sent. */
function unverifiedAuthCaller (headers: IncomingHttpHeaders): Caller {
  const m = /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(firstHeader(headers.authorization) ?? '')
  return { kind: 'anon', claims: null, token: m?.[1] ?? null, exp: null, keyKind: null, cacheKey: '' }
}

export function setRequestInfo (raw: IncomingMessage, reqId: string): RequestInfo {
  const info: RequestInfo = { reqId, method: raw.method ?? 'GET', url: raw.url ?? '/', start: performance.now(), tenant: UNKNOWN_TENANT, service: 'none', errorCode: null, done: false }
  ;(raw as WithInfo)[kInfo] = info
  return info
}

export function requestInfo (raw: IncomingMessage): RequestInfo | undefined {
  return (raw as WithInfo)[kInfo]
}

/** One request as the pipeline sees it, from either entry. */
export interface Exchange {
  raw: IncomingMessage
  res: ServerResponse
  /** The request id (requestIdOf()). */
  id: string
  /** The per-request logger (reqId bound). */
  log: FastifyBaseLogger
}

export interface ProxyRouteDeps {
  /** Request id, CORS and shutdown headers every response carries. */
  baseHeaders: (ex: { id: string, raw: IncomingMessage }) => Record<string, string>
  /** Answers an error the pipeline met (rendered, logged, counted) on ex.res. */
  fail: (ex: Exchange, err: unknown) => void
  /** The client address sent upstream (the socket's, or X-Forwarded-For from trusted proxies). */
  clientIp: (raw: IncomingMessage) => string
  cors: Cors
  tenants: TenantLookup
  authenticator: Authenticator
  tokens: UpstreamTokens
  upstream: UpstreamProxy
  /** True once the gateway is closing: new requests get 503 not_ready. */
  isClosing: () => boolean
  /** Body limits (the REST one a tenant's rest.max_body_bytes overrides) and the per-tenant cap. */
  limits: {
    restMaxBodyBytes: number
    authMaxBodyBytes: number
    bodyIdleMs: number
    bodyTimeoutMs: number
    /** Bytes read before a slot is taken; a larger body streams (body.ts). */
    bufferBodyBytes: number
    minBodyBytesPerSecond: number
    bodyRateWindowMs: number
    tenantMaxInflight: number
  }
  slots: InflightSlots
  /** The request-rate limits of /rest/v1 (a tenant's rest.rate_limits). */
  rateLimiter: RestRateLimiter
  /** The client went away while sending its body: log line and metrics (499). */
  onClientGone: (info: RequestInfo) => void
  /** X-Forwarded-Proto / -Host values (from config.public_url). */
  forwardedProto: string
  forwardedHost: string
  /** Sets the upstream request's `traceparent` to the gateway's span (tracing on). */
  tracer?: PartTracer
}

/** The methods the pipeline serves (others: fastify's not-found answer). */
export const PROXY_METHODS: readonly string[] = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']

export interface ProxyPipeline {
  /** Runs one request to its end (errors answered through deps.fail); never rejects. */
  handle (ex: Exchange): Promise<void>
  /** fastify's entry: the catch-all route, its body left unparsed (hijacked). */
  plugin (instance: FastifyInstance): Promise<void>
}

export function createProxyPipeline (deps: ProxyRouteDeps): ProxyPipeline {
  const { tenants, authenticator, tokens, upstream, limits, slots } = deps
  const busy = { 'retry-after': '1' }
  const bases = new Map<string, URL>()

  function baseUrl (url: string): URL {
    let u = bases.get(url)
    if (u === undefined) {
      u = new URL(url)
      if (bases.size > 10_000) bases.clear()
      bases.set(url, u)
    }
    return u
  }

  function handle (ex: Exchange): Promise<void> {
    return run(ex).catch((err: unknown) => {
      try {
        deps.fail(ex, err)
      } catch (failure) {
        // Nothing sensible left to send (the response cannot be written): cut the
        // connection rather than leave the client waiting or the rejection unhandled.
        ex.log.error({ err: failure, cause: err }, 'answering a failed request failed')
        ex.res.destroy()
      }
    })
  }

  /**
   * The tenant's rest.rate_limits (rate-limits.ts): the RateLimit fields go into `ours`;
   * over a limit, 429 (a request with a body is answered and its connection closed).
   */
  async function checkRate (raw: IncomingMessage, tenant: Tenant, client: string, apikey: string, hasBody: boolean, ours: OutgoingHttpHeaders): Promise<void> {
    const verdict = await deps.rateLimiter.check(tenant.rest.rate_limits, { database: tenant.database, client, apikey })
    if (verdict === null) return
    Object.assign(ours, verdict.headers)
    const r = verdict.refused
    if (r === null) return
    const headers: Record<string, string> = { ...verdict.headers, 'retry-after': String(r.retryAfter) }
    if (hasBody) { headers.connection = 'close'; lingerThenClose(raw) }
    throw new RateLimitedError(r.policy, r.quota, r.window, { headers })
  }

  /** The body within its limits (body.ts); null when the client went away (its socket is cut). */
  async function readWithin (raw: IncomingMessage, res: ServerResponse, maxBytes: number): Promise<Buffer | BodyStream | null> {
    try {
      if (/\b100-continue\b/i.test(raw.headers.expect ?? '')) res.writeContinue()
      return await readBody(raw, {
        maxBytes,
        idleMs: limits.bodyIdleMs,
        totalMs: limits.bodyTimeoutMs,
        minBytesPerSecond: limits.minBodyBytesPerSecond,
        rateWindowMs: limits.bodyRateWindowMs
      }, limits.bufferBodyBytes)
    } catch (err) {
      if (!(err instanceof ClientAbortedError)) throw err
      raw.socket.destroy()
      return null
    }
  }

  /**
   * One of the tenant's in-flight slots for this client: its address and the kind of key it
   * sends (a backend's secret key does not share the browsers' share behind one address).
   * 429 when the tenant's cap or the client's share is reached.
   */
  function takeSlot (database: string, caller: Caller, clientIp: string, res: ServerResponse, raw: IncomingMessage, body: Buffer | BodyStream | null): void {
    const taken = slots.take(database, caller.keyKind === 'svc' ? `${clientIp} svc` : clientIp, res)
    if (taken === 'ok') return
    if (body !== null && !Buffer.isBuffer(body)) { body.destroy(); lingerThenClose(raw) }
    throw taken === 'tenant'
      ? new TooManyConcurrentRequestsError(limits.tenantMaxInflight, { headers: busy })
      : new ClientTooManyConcurrentRequestsError(slots.perClient, { headers: busy })
  }

  async function run (ex: Exchange): Promise<void> {
    const raw = ex.raw
    const res = ex.res
    const method = raw.method ?? 'GET'
    // CORS preflight: answered for any path, before any tenant look-up, without a key.
    if (method === 'OPTIONS' && raw.headers['access-control-request-method'] !== undefined && raw.headers.origin !== undefined) {
      const h = deps.cors.preflight(firstHeader(raw.headers.origin)!, firstHeader(raw.headers['access-control-request-headers']))
      res.writeHead(200, h === null ? deps.baseHeaders(ex) : { ...deps.baseHeaders(ex), ...h, 'content-length': '0' })
      res.end()
      return
    }
    const info = setRequestInfo(raw, ex.id)
    if (deps.tracer !== undefined) info.trace = deps.tracer.logFields?.(raw)
    if (deps.isClosing()) throw new NotReadyError()
    // A DELETE or OPTIONS body must come with a length: proxies in front of an engine (and
    // http-proxy-3) send one without Content-Length as `Content-Length: 0`, and a chunked
    // body would then follow as bare bytes, read as the next request on the connection.
    if ((method === 'DELETE' || method === 'OPTIONS') && raw.headers['transfer-encoding'] !== undefined) throw new LengthRequiredError(method)

    const gp = parseGatewayPath(raw.url ?? '/')
    // Supabase's other services are not offered by any database: said before any look-up.
    if (gp.service === null) throw notServedError(gp.path)
    const tenant = await tenants.get(gp.database)
    if (tenant === null || tenant === undefined) throw new TenantNotFoundError(gp.database)
    info.tenant = tenant.database
    const service = gp.service
    info.service = service
    const hasBody = hasRequestBody(raw.headers)
    const maxBody = service === 'rest' ? (tenant.rest.max_body_bytes ?? limits.restMaxBodyBytes) : limits.authMaxBodyBytes
    if (hasBody) {
      const tooLarge = declaredTooLarge(raw, maxBody)
      if (tooLarge !== null) { lingerThenClose(raw); throw tooLarge }
    }

    const open = service === 'auth' && isOpenAuthRoute(method, gp.path)
    const limit = service === 'rest' && (method === 'GET' || method === 'HEAD') && isTablePath(gp.path)
      ? { default: tenant.rest.default_limit, max: tenant.rest.max_limit }
      : null
    const q = rewriteQuery(gp.query, limit)
    // Cached verdicts and tokens come back synchronously: no await (no microtask) for them.
    let caller: Caller
    try {
      const authenticated = authenticator.authenticate(tenant, raw.headers, q.apikey, open, raw.socket)
      caller = authenticated instanceof Promise ? await authenticated : authenticated
    } catch (err) {
      // A bearer JWT that fails verification on /auth/v1 goes to the auth engine as it came
      // (with no role of ours): it refuses it GoTrue's way ("invalid JWT: ...", the answer
      // auth clients such as admin.signOut expect). The API key was checked before.
      if (service !== 'auth' || !isUnverifiedTokenRefusal(err)) throw err
      caller = unverifiedAuthCaller(raw.headers)
    }

    // Authorization for the upstream (contract in docs/service.md §5):
    //   REST: always our re-signed token (role = this tenant's Postgres role).
    //   auth: a user JWT passes unchanged; a secret key becomes a service_role token;
    //         a public key sends none.
    let authorization: string | undefined
    if (service === 'rest') {
      const t = tokens.rest(tenant, caller)
      authorization = `Bearer ${typeof t === 'string' ? t : await t}`
    } else if (caller.token !== null) {
      authorization = `Bearer ${caller.token}`
    } else if (caller.keyKind === 'svc') {
      const f = authenticator.facts(tenant)
      const t = tokens.authService(tenant, f.issuer, f.fp)
      authorization = `Bearer ${typeof t === 'string' ? t : await t}`
    }

    const ours: OutgoingHttpHeaders = deps.baseHeaders(ex)
    if (q.limitAdded !== null) ours['x-gatehouse-default-limit'] = String(q.limitAdded)
    if (q.limitCapped !== null) ours['x-gatehouse-max-limit'] = String(q.limitCapped)
    const clientIp = deps.clientIp(raw)
    // Request-rate limits before any body is read: a limited client uploads nothing.
    if (service === 'rest' && tenant.rest.rate_limits !== undefined) {
      await checkRate(raw, tenant, clientIp, firstHeader(raw.headers.apikey) ?? q.apikey ?? '', hasBody, ours)
    }
    // The body, up to gateway.buffer_body_bytes, before the request takes a slot or an
    // upstream socket (413 / 408 refuse it here); a larger one streams from there.
    let body: Buffer | BodyStream | null = null
    if (hasBody) {
      body = await readWithin(raw, res, maxBody)
      if (body === null) { deps.onClientGone(info); return }
    }
    takeSlot(tenant.database, caller, clientIp, res, raw, body)

    const target = baseUrl(service === 'rest' ? tenant.upstreams.rest : tenant.upstreams.auth)
    raw.headers = buildUpstreamHeaders(raw.headers, authorization, ex.id, {
      for: clientIp,
      proto: deps.forwardedProto,
      host: deps.forwardedHost
    }, raw.headersDistinct) as IncomingHttpHeaders
    // The engine's span is a child of ours (else the client's traceparent goes on as sent).
    deps.tracer?.inject(raw, raw.headers as OutgoingHttpHeaders)
    // Tell the engine which limit was ours, not the caller's (client copies were stripped
    // above), so it can say when a result was cut by it (Content-Range `*`, X-Gatehouse-Limit-Applied).
    if (q.limitAdded !== null) raw.headers['x-gatehouse-default-limit'] = String(q.limitAdded)
    if (body !== null) {
      // A whole body is sent with its length, however the client framed it; a streamed one
      // with the client's Content-Length, or chunked by the upstream client when it had none.
      delete raw.headers['transfer-encoding']
      if (Buffer.isBuffer(body)) raw.headers['content-length'] = String(body.length)
    }
    raw.url = upstreamPath(target, gp.path, q.query)

    upstream.web(raw, res, {
      target,
      requestId: ex.id,
      tenant,
      service,
      caller,
      method,
      hasBody,
      body,
      path: gp.path,
      query: q.query,
      responseHeaders: ours,
      info,
      log: ex.log
    })
  }

  return {
    handle,
    async plugin (instance: FastifyInstance): Promise<void> {
      // Bodies are never parsed: every content type (and none) leaves the stream unread
      // for the proxy to pipe.
      instance.removeAllContentTypeParsers()
      instance.addContentTypeParser('*', (_request, _payload, done) => { done(null) })
      instance.route({
        method: [...PROXY_METHODS],
        url: '/*',
        handler: (request: FastifyRequest, reply: FastifyReply) => {
          reply.hijack()
          return handle({ raw: request.raw, res: reply.raw, id: request.id, log: request.log })
        }
      })
    }
  }
}

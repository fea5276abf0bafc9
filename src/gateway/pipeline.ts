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
import {
  ClientTooManyConcurrentRequestsError,
  LengthRequiredError,
  RateLimitedError,
  NotReadyError,
  TenantNotFoundError,
  TooManyConcurrentRequestsError,
} from './errors.js'
import { DATABASE_HINT, isOpenAuthRoute, notServedError, parseGatewayPath, type GatewayPath } from './request/path.js'
import { addLimitHeaders, cutWatch, limitPolicyOf, rewriteQuery, type QueryRewrite } from './request/default-limit.js'
import { isUnverifiedTokenRefusal, type Authenticator } from './request/authenticate.js'
import type { UpstreamTokens } from './proxy/upstream-token.js'
import { hasRequestBody, upstreamPath, type UpstreamClient } from './proxy/upstream-client.js'
import { buildUpstreamHeaders } from './proxy/headers.js'
import { bearerToken, firstHeader, type PartTracer } from '../shared/index.js'
import { UNKNOWN_TENANT } from './metrics.js'
import type { Cors } from './cors.js'
import type { Caller, RequestInfo, Service } from './types.js'
import { ClientAbortedError, declaredTooLarge, lingerThenClose, readBody, type BodyStream } from './body.js'
import type { InflightSlots } from './inflight.js'
import type { RestRateLimiter } from './rate-limits.js'
import { performance } from 'node:perf_hooks'
import { kInfo } from './http-objects.js'

type WithInfo = IncomingMessage & { [kInfo]?: RequestInfo }

/** What the /auth/v1 callers with no role of ours have in common. */
const NO_ROLE = { claims: null, exp: null, keyKind: null, cacheKey: '' } as const

/** The caller of an /auth/v1 request whose bearer JWT failed verification: no role, the token as sent. */
function unverifiedAuthCaller(headers: IncomingHttpHeaders): Caller {
  const token = bearerToken(firstHeader(headers.authorization) ?? '')
  return { ...NO_ROLE, kind: 'unverified', token }
}

/**
 * POST /auth/v1/oauth/token with an OAuth client's `Authorization: Basic` credentials (RFC 6749
 * §2.3.1): no key and no role of ours; the auth engine checks the credentials.
 */
function oauthClientCaller(raw: IncomingMessage, r: Routed, open: boolean): Caller | null {
  if (!open || r.path !== '/oauth/token') return null
  const h = firstHeader(raw.headers.authorization)
  if (h === undefined || !h.startsWith('Basic ')) return null
  return { ...NO_ROLE, kind: 'oauth_client', token: null, clientAuthorization: h }
}

/** An /auth/v1 request whose bearer JWT failed verification goes on without a role; other refusals stand. */
function unverifiedOnAuth(err: unknown, r: Routed, raw: IncomingMessage): Caller {
  if (r.service !== 'auth' || !isUnverifiedTokenRefusal(err)) throw err
  return unverifiedAuthCaller(raw.headers)
}

function setRequestInfo(raw: IncomingMessage, reqId: string): RequestInfo {
  const info: RequestInfo = {
    reqId,
    method: raw.method ?? 'GET',
    url: raw.url ?? '/',
    start: performance.now(),
    tenant: UNKNOWN_TENANT,
    service: 'none',
    errorCode: null,
    done: false,
  }
  ;(raw as WithInfo)[kInfo] = info
  return info
}

export function requestInfo(raw: IncomingMessage): RequestInfo | undefined {
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
  baseHeaders: (ex: { id: string; raw: IncomingMessage }) => Record<string, string>
  /** Answers an error the pipeline met (rendered, logged, counted) on ex.res. */
  fail: (ex: Exchange, err: unknown) => void
  /** The client address sent upstream (the socket's, or X-Forwarded-For from trusted proxies). */
  clientIp: (raw: IncomingMessage) => string
  cors: Cors
  tenants: TenantLookup
  authenticator: Authenticator
  tokens: UpstreamTokens
  upstream: UpstreamClient
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

/** The tenant, service and path of a request, once resolved. */
interface Routed {
  tenant: Tenant
  service: Service
  path: string
  /** The query string as forwarded (`apikey` taken out, limits added) and what was taken. */
  q: QueryRewrite
  hasBody: boolean
  maxBody: number
}

/** Stages of one proxied request (PostgREST's App.hs reads the same way: one function, stage by stage). */
class ProxyPipeline {
  readonly #deps: ProxyRouteDeps
  /** Parsed upstream base URLs (one per tenant upstream string). */
  readonly #bases = new Map<string, URL>()

  constructor(deps: ProxyRouteDeps) {
    this.#deps = deps
  }

  /**
   * Runs one request to its end (errors answered through deps.fail); never rejects. One
   * async function: a cached tenant, caller and token cost no promise of their own.
   */
  async handle(ex: Exchange): Promise<void> {
    try {
      const raw = ex.raw
      if (this.#preflight(ex)) return
      const info = setRequestInfo(raw, ex.id)
      if (this.#deps.tracer !== undefined) info.trace = this.#deps.tracer.logFields?.(raw)
      this.#admit(raw)
      const gp = parseGatewayPath(raw.url ?? '/')
      // Supabase's other services are not offered by any database: said before any look-up.
      if (gp.service === null) throw notServedError(gp.path)
      // A cached record comes back as a value: no promise and no await for it.
      const tenants = this.#deps.tenants
      const known = tenants.cached?.(gp.database)
      const r = this.#route(raw, info, gp, known !== undefined ? known : await tenants.get(gp.database))
      // Cached verdicts and tokens come back as values: awaited only when they are promises.
      const c = this.#authenticate(raw, r)
      const caller = c instanceof Promise ? await c : c
      const a = this.#upstreamAuthorization(r, caller)
      const authorization = a instanceof Promise ? await a : a
      const ours: OutgoingHttpHeaders = this.#ours(ex, r.q)
      const clientIp = this.#deps.clientIp(raw)
      // Request-rate limits before any body is read: a limited client uploads nothing.
      if (r.service === 'rest' && r.tenant.rest.rate_limits !== undefined) {
        await this.#checkRate(raw, r, clientIp, firstHeader(raw.headers.apikey) ?? r.q.apikey ?? '', ours)
      }
      // The body, up to gateway.buffer_body_bytes, before the request takes a slot or an
      // upstream socket (413 / 408 refuse it here); a larger one streams from there.
      let body: Buffer | BodyStream | null = null
      if (r.hasBody) {
        body = await this.#readWithin(raw, ex.res, r.maxBody)
        if (body === null) {
          this.#deps.onClientGone(info)
          return
        }
      }
      this.#takeSlot(r.tenant.database, caller, clientIp, ex, body)
      this.#forwardHoldingSlot(ex, { r, caller, authorization, clientIp, body, ours, info })
    } catch (err) {
      this.#failed(ex, err)
    }
  }

  #failed(ex: Exchange, err: unknown): void {
    try {
      this.#deps.fail(ex, err)
    } catch (failure) {
      // Nothing sensible left to send (the response cannot be written): cut the
      // connection rather than leave the client waiting or the rejection unhandled.
      ex.log.error({ err: failure, cause: err }, 'answering a failed request failed')
      ex.res.destroy()
    }
  }

  /** Our headers of the response: the base ones and the row-limit notices. */
  #ours(ex: Exchange, q: QueryRewrite): OutgoingHttpHeaders {
    const ours: OutgoingHttpHeaders = this.#deps.baseHeaders(ex)
    addLimitHeaders(q, ours)
    return ours
  }

  /** fastify's entry: the catch-all route, its body left unparsed (hijacked). */
  async plugin(instance: FastifyInstance): Promise<void> {
    // Bodies are never parsed: every content type (and none) leaves the stream unread
    // for the proxy to pipe.
    instance.removeAllContentTypeParsers()
    instance.addContentTypeParser('*', (_request, _payload, done) => {
      done(null)
    })
    instance.route({
      method: [...PROXY_METHODS],
      url: '/*',
      handler: (request: FastifyRequest, reply: FastifyReply) => {
        reply.hijack()
        return this.handle({ raw: request.raw, res: reply.raw, id: request.id, log: request.log })
      },
    })
  }

  /** CORS preflight: answered for any path, before any tenant look-up, without a key. */
  #preflight(ex: Exchange): boolean {
    const h = ex.raw.headers
    if (ex.raw.method !== 'OPTIONS' || h['access-control-request-method'] === undefined || h.origin === undefined)
      return false
    const allowed = this.#deps.cors.preflight(firstHeader(h.origin)!, firstHeader(h['access-control-request-headers']))
    const base = this.#deps.baseHeaders(ex)
    ex.res.writeHead(200, allowed === null ? base : { ...base, ...allowed, 'content-length': '0' })
    ex.res.end()
    return true
  }

  /** Refusals before any look-up: a closing gateway, a DELETE/OPTIONS body without a length. */
  #admit(raw: IncomingMessage): void {
    if (this.#deps.isClosing()) throw new NotReadyError()
    // A DELETE or OPTIONS body must come with a length: proxies in front of an engine (and
    // http-proxy-3) send one without Content-Length as `Content-Length: 0`, and a chunked
    // body would then follow as bare bytes, read as the next request on the connection.
    const method = raw.method
    if ((method === 'DELETE' || method === 'OPTIONS') && raw.headers['transfer-encoding'] !== undefined)
      throw new LengthRequiredError(method)
  }

  /** The tenant and service the path names; a declared body over the limit is refused here. */
  #route(raw: IncomingMessage, info: RequestInfo, gp: GatewayPath, tenant: Tenant | null | undefined): Routed {
    if (tenant === null || tenant === undefined) throw new TenantNotFoundError(gp.database, { hint: DATABASE_HINT })
    const service = gp.service!
    info.tenant = tenant.database
    info.service = service
    const limits = this.#deps.limits
    const hasBody = hasRequestBody(raw.headers)
    const maxBody =
      service === 'rest' ? (tenant.rest.max_body_bytes ?? limits.restMaxBodyBytes) : limits.authMaxBodyBytes
    if (hasBody) {
      const tooLarge = declaredTooLarge(raw, maxBody)
      if (tooLarge !== null) {
        lingerThenClose(raw)
        throw tooLarge
      }
    }
    const q = rewriteQuery(gp.query, limitPolicyOf(raw.method ?? 'GET', service, gp.path, tenant))
    return { tenant, service, path: gp.path, q, hasBody, maxBody }
  }

  /**
   * Who calls. Cached verdicts come back synchronously (no promise, no microtask for them). A
   * bearer JWT that fails verification on /auth/v1 goes to the auth engine as it came (with
   * no role of ours): it refuses it GoTrue's way ("invalid JWT: ...", the answer auth clients
   * such as admin.signOut expect). The API key was checked before.
   */
  #authenticate(raw: IncomingMessage, r: Routed): Caller | Promise<Caller> {
    const open = r.service === 'auth' && isOpenAuthRoute(raw.method ?? 'GET', r.path)
    const client = oauthClientCaller(raw, r, open)
    if (client !== null) return client
    let authenticated: Caller | Promise<Caller>
    try {
      authenticated = this.#deps.authenticator.authenticate(r.tenant, raw.headers, r.q.apikey, open, raw.socket)
    } catch (err) {
      return unverifiedOnAuth(err, r, raw)
    }
    return authenticated instanceof Promise
      ? authenticated.catch((err: unknown) => unverifiedOnAuth(err, r, raw))
      : authenticated
  }

  /**
   * Authorization for the upstream (contract in docs/service.md §5): REST always gets our
   * re-signed token (role = this tenant's Postgres role); auth gets a user JWT unchanged, a
   * service_role token for a secret key, and none for a public key. A value when the
   * token is cached, else a promise.
   */
  #upstreamAuthorization(r: Routed, caller: Caller): string | undefined | Promise<string | undefined> {
    const tokens = this.#deps.tokens
    if (r.service === 'rest') return tokens.restAuthorization(r.tenant, caller)
    if (caller.token !== null) return `Bearer ${caller.token}`
    if (caller.clientAuthorization !== undefined) return caller.clientAuthorization
    if (caller.keyKind !== 'svc') return undefined
    const f = this.#deps.authenticator.facts(r.tenant)
    const t = tokens.authService(r.tenant, f.issuer, f.fp)
    return typeof t === 'string' ? `Bearer ${t}` : t.then((token) => `Bearer ${token}`)
  }

  /**
   * The tenant's rest.rate_limits (rate-limits.ts): the RateLimit fields go into `ours`;
   * over a limit, 429 (a request with a body is answered and its connection closed).
   */
  async #checkRate(
    raw: IncomingMessage,
    r: Routed,
    client: string,
    apikey: string,
    ours: OutgoingHttpHeaders,
  ): Promise<void> {
    const verdict = await this.#deps.rateLimiter.check(r.tenant.rest.rate_limits, {
      database: r.tenant.database,
      client,
      apikey,
    })
    if (verdict === null) return
    Object.assign(ours, verdict.headers)
    const refused = verdict.refused
    if (refused === null) return
    const headers: Record<string, string> = { ...verdict.headers, 'retry-after': String(refused.retryAfter) }
    if (r.hasBody) {
      headers.connection = 'close'
      lingerThenClose(raw)
    }
    throw new RateLimitedError(refused.policy, refused.quota, refused.window, { headers })
  }

  /** The body within its limits (body.ts); null when the client went away (its socket is cut). */
  async #readWithin(raw: IncomingMessage, res: ServerResponse, maxBytes: number): Promise<Buffer | BodyStream | null> {
    const limits = this.#deps.limits
    try {
      if (/\b100-continue\b/i.test(raw.headers.expect ?? '')) res.writeContinue()
      return await readBody(
        raw,
        {
          maxBytes,
          idleMs: limits.bodyIdleMs,
          totalMs: limits.bodyTimeoutMs,
          minBytesPerSecond: limits.minBodyBytesPerSecond,
          rateWindowMs: limits.bodyRateWindowMs,
        },
        limits.bufferBodyBytes,
      )
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
  #takeSlot(database: string, caller: Caller, clientIp: string, ex: Exchange, body: Buffer | BodyStream | null): void {
    const slots = this.#deps.slots
    // No 'close' listener of its own: the upstream client gives the slot back on every path
    // (#forwardHoldingSlot).
    const taken = slots.take(database, caller.keyKind === 'svc' ? `${clientIp} svc` : clientIp, ex.res)
    if (taken === 'ok') return
    if (body !== null && !Buffer.isBuffer(body)) {
      body.destroy()
      lingerThenClose(ex.raw)
    }
    throw taken === 'tenant'
      ? new TooManyConcurrentRequestsError(this.#deps.limits.tenantMaxInflight, { headers: BUSY })
      : new ClientTooManyConcurrentRequestsError(slots.perClient, { headers: BUSY })
  }

  /**
   * #forward with the slot just taken: the upstream client gives it back when the upstream
   * request is over or the client goes away; here when forwarding fails before that.
   */
  #forwardHoldingSlot(ex: Exchange, f: Forwarding): void {
    try {
      this.#forward(ex, f)
    } catch (err) {
      this.#deps.slots.release(ex.res)
      throw err
    }
  }

  /** The request as the upstream gets it (headers, path), handed to the upstream client. */
  #forward(ex: Exchange, f: Forwarding): void {
    const { r, body } = f
    const raw = ex.raw
    const method = raw.method ?? 'GET'
    const target = this.#baseUrl(r.service === 'rest' ? r.tenant.upstreams.rest : r.tenant.upstreams.auth)
    const cutAt = cutWatch(r.q, method, firstHeader(raw.headers.range))
    raw.headers = buildUpstreamHeaders(
      raw.headers,
      f.authorization,
      ex.id,
      {
        for: f.clientIp,
        proto: this.#deps.forwardedProto,
        host: this.#deps.forwardedHost,
      },
      () => raw.headersDistinct,
    ) as IncomingHttpHeaders
    // The engine's span is a child of ours (else the client's traceparent goes on as sent).
    this.#deps.tracer?.inject(raw, raw.headers as OutgoingHttpHeaders)
    if (body !== null) {
      // A whole body is sent with its length, however the client framed it; a streamed one
      // with the client's Content-Length, or chunked by the upstream client when it had none.
      delete raw.headers['transfer-encoding']
      if (Buffer.isBuffer(body)) raw.headers['content-length'] = String(body.length)
    }
    const query = r.q.query
    raw.url = upstreamPath(target, r.path, query)
    this.#deps.upstream.forward(raw, ex.res, {
      target,
      requestId: ex.id,
      tenant: r.tenant,
      service: r.service,
      caller: f.caller,
      method,
      hasBody: r.hasBody,
      body,
      path: r.path,
      query,
      responseHeaders: f.ours,
      cutAt,
      info: f.info,
      log: ex.log,
    })
  }

  #baseUrl(url: string): URL {
    let u = this.#bases.get(url)
    if (u === undefined) {
      u = new URL(url)
      if (this.#bases.size > 10_000) this.#bases.clear()
      this.#bases.set(url, u)
    }
    return u
  }
}

/** What #forward needs of the stages before it. */
interface Forwarding {
  r: Routed
  caller: Caller
  authorization: string | undefined
  clientIp: string
  body: Buffer | BodyStream | null
  ours: OutgoingHttpHeaders
  info: RequestInfo
}

const BUSY = { 'retry-after': '1' }

export function createProxyPipeline(deps: ProxyRouteDeps): ProxyPipeline {
  return new ProxyPipeline(deps)
}

export type { ProxyPipeline }

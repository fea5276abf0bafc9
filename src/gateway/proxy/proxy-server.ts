// The one http-proxy-3 ProxyServer of a gateway, one keep-alive agent per upstream origin
// (idle timeout shorter than the upstream's: supabase/cli #6674), connect and response
// timeouts, and the response side: success bodies stream untouched, error bodies with a
// JSON type are buffered (bounded) for the refusal rewriter. Errors never reach
// http-proxy-3's default listener (it rethrows): every call passes its own callback.
import http from 'node:http'
import https from 'node:https'
import type { IncomingHttpHeaders, OutgoingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http'
import type { Socket } from 'node:net'
import { Stream } from 'node:stream'
import { ProxyServer } from 'http-proxy-3'
import type { FastifyBaseLogger } from 'fastify'
import { isJsonContentType } from '../../shared/http.js'
import type { Tenant } from '../../tenants/schema.js'
import { UpstreamBusyError, UpstreamTimeoutError, UpstreamUnavailableError } from '../errors.js'
import { renderError } from '../render.js'
import type { Caller, RequestInfo, RewriteError, Service } from '../types.js'
import { buildResponseHeaders } from './headers.js'

/** Everything the response side needs about one proxied request. */
export interface ForwardContext {
  target: URL
  requestId: string
  tenant: Tenant
  service: Service
  caller: Caller
  method: string
  path: string
  query: string
  /** The client request has a body (hasRequestBody() of its own headers). */
  hasBody: boolean
  /** The body, read whole by the gateway (body.ts); null when there is none. */
  body: Buffer | null
  /** Headers we add to the client response (request id, CORS, limit notice). */
  responseHeaders: OutgoingHttpHeaders
  log: FastifyBaseLogger
  info: RequestInfo
  /** The refusal rewriter holds the response: completion is reported after it. */
  rewriting?: boolean
}

export interface UpstreamProxyOptions {
  timeoutMs: number
  connectTimeoutMs: number
  /** Sockets per upstream origin (shared by every tenant on it). */
  maxSockets: number
  /** Longest wait for a socket when all maxSockets are busy: then 503 upstream_busy. */
  queueTimeoutMs: number
  keepAliveMs: number
  maxErrorBodyBytes: number
  rewriteError?: RewriteError
  /** True once shutdown began: responses then close their connection. */
  isShuttingDown: () => boolean
  onUpstreamError?: (ctx: ForwardContext, code: string) => void
  /** The response is complete (or cut): log line and metrics. */
  onComplete?: (info: RequestInfo, status: number) => void
}

/** The upstream request target: the base URL's path joined with the path below the service. */
export function upstreamPath (base: URL, path: string, query: string): string {
  const p = base.pathname
  const joined = p.endsWith('/') ? p + path.slice(1) : p + path
  return query === '' ? joined : `${joined}?${query}`
}

export interface UpstreamProxy {
  /**
   * Streams req to ctx.target's origin and the answer back; req.url must be the full
   * upstream path (upstreamPath()). The reply must already be hijacked.
   */
  web (req: IncomingMessage, res: ServerResponse, ctx: ForwardContext): void
  /** Destroys the keep-alive sockets. */
  close (): void
}

const kCtx = Symbol('gatehouse.forward')
type WithCtx = IncomingMessage & { [kCtx]?: ForwardContext }

function ctxOf (req: IncomingMessage): ForwardContext | undefined {
  return (req as WithCtx)[kCtx]
}

const TIMEOUT = Symbol('gatehouse.upstreamTimeout')

/**
 * Whether a client request carries a body (RFC 9112 §6.3: only these two headers say so).
 * Asked of the client's headers, before the upstream headers replace them.
 */
export function hasRequestBody (headers: IncomingHttpHeaders): boolean {
  return headers['content-length'] !== undefined || headers['transfer-encoding'] !== undefined
}

/**
 * http-proxy-3's `buffer` option for requests without a body: it calls `buffer.pipe(proxyReq)`
 * instead of `req.pipe(proxyReq)`, and this ends the upstream request at once. Piping an
 * empty IncomingMessage costs a stream pipe per request (listeners, a resume tick, an 'end'
 * tick) for nothing; the unread request is dumped by Node when the response finishes.
 */
class NoBody extends Stream {
  override pipe<T extends NodeJS.WritableStream> (dest: T): T { dest.end(); return dest }
}
const NO_BODY = new NoBody()

/** A body the gateway read whole: written to the upstream request in one piece. */
class WholeBody extends Stream {
  readonly #bytes: Buffer
  constructor (bytes: Buffer) { super(); this.#bytes = bytes }
  override pipe<T extends NodeJS.WritableStream> (dest: T): T { dest.end(this.#bytes); return dest }
}

const BUSY = 'EUPSTREAM_BUSY'

type QueuingAgent = http.Agent & { requests: Record<string, http.ClientRequest[] | undefined>, getName (o: unknown): string }

/** `req` waited too long in its agent's queue: taken out of it and failed (503 upstream_busy). */
function queueTimedOut (agent: QueuingAgent, name: string, req: http.ClientRequest): void {
  const q = agent.requests[name]
  const i = q === undefined ? -1 : q.indexOf(req)
  if (i < 0) return
  q!.splice(i, 1)
  if (q!.length === 0) delete agent.requests[name]
  // Without a socket, destroy() only marks the request; its error is ours to emit.
  req.destroy()
  req.emit('error', Object.assign(new Error('no upstream socket became free in time'), { code: BUSY }))
}

/**
 * An agent whose queued requests (all maxSockets busy) wait at most `queueTimeoutMs` for a
 * socket. Requests that get one at once cost nothing extra.
 */
function queueTimedAgent<A extends typeof http.Agent> (Base: A, queueTimeoutMs: number): A {
  return class extends (Base as typeof http.Agent) {
    addRequest (req: http.ClientRequest, options: unknown): void {
      const self = this as unknown as QueuingAgent
      const name = self.getName(options)
      const before = self.requests[name]?.length ?? 0
      ;(http.Agent.prototype as unknown as { addRequest: (r: unknown, o: unknown) => void }).addRequest.call(this, req, options)
      if ((self.requests[name]?.length ?? 0) > before) {
        const timer = setTimeout(queueTimedOut, queueTimeoutMs, self, name, req)
        const clear = (): void => clearTimeout(timer)
        req.once('socket', clear)
        req.once('close', clear)
      }
    }
  } as unknown as A
}

interface ProxyCallOptions { target: URL, agent: http.Agent, buffer: Stream | undefined }
interface CallOptions { withBody: ProxyCallOptions, noBody: ProxyCallOptions }

const kClientResponse = Symbol('gatehouse.clientResponse')
type WithClientResponse = IncomingMessage & { [kClientResponse]?: ServerResponse }

/** 'error' listener of an upstream response (`this`): cut the client's response too. */
function destroyClientResponse (this: WithClientResponse): void { this[kClientResponse]?.destroy() }

/** `this` is the upstream request that took too long (to connect or to answer). */
function upstreamTimedOut (this: http.ClientRequest): void {
  this.destroy(Object.assign(new Error('upstream timed out'), { code: 'ETIMEDOUT', [TIMEOUT]: true }))
}

/**
 * A flat header list with `set` replacing same-named entries and `drop` removing them
 * (names case-insensitive; `drop` in lower case).
 */
function replaceHeaders (list: string[], set: Record<string, string>, drop: readonly string[] = []): string[] {
  const names = new Set([...Object.keys(set).map((n) => n.toLowerCase()), ...drop])
  const out: string[] = []
  for (let i = 0; i < list.length; i += 2) {
    if (!names.has(list[i]!.toLowerCase())) out.push(list[i]!, list[i + 1]!)
  }
  for (const [k, v] of Object.entries(set)) out.push(k, v)
  return out
}

export function createUpstreamProxy (opts: UpstreamProxyOptions): UpstreamProxy {
  // The client's Host is never forwarded (headers.ts), so Node sets the upstream's.
  // `target`, `agent` and `buffer` come with every call (buffer possibly undefined);
  // declaring all three first here keeps the merged per-call options in one shape, which
  // keeps http-proxy-3's option spread and passes monomorphic: a per-call property missing
  // here cost ~13 µs per request (bench/rest-read.ts, profiled).
  // toProxy + no prependPath: req.url is sent as we built it (the full upstream path,
  // already checked), byte for byte, instead of being re-parsed as a WHATWG URL.
  // connectTimeout: http-proxy-3 bounds the connect phase of a new upstream connection
  // (reused keep-alive sockets are not timed) and destroys it with ECONNECT_TIMEOUT.
  const proxy = new ProxyServer({ target: undefined, agent: undefined, buffer: undefined, xfwd: false, prependPath: false, toProxy: true, selfHandleResponse: true, connectTimeout: opts.connectTimeoutMs })
  const agents = new Map<string, http.Agent>()
  // Per target URL object (routes.ts caches one per upstream base): the per-call options,
  // built once, with and without a body. http-proxy-3 spreads them into a fresh object and
  // never mutates them.
  const callOptions = new WeakMap<URL, CallOptions>()

  function optionsFor (target: URL, body: Buffer | null): ProxyCallOptions {
    let o = callOptions.get(target)
    if (o === undefined) {
      const agent = agentFor(target)
      o = { withBody: { target, agent, buffer: undefined }, noBody: { target, agent, buffer: NO_BODY } }
      callOptions.set(target, o)
    }
    // Same shape either way (see above).
    return body === null ? o.noBody : { target, agent: o.withBody.agent, buffer: new WholeBody(body) }
  }

  const HttpAgent = queueTimedAgent(http.Agent, opts.queueTimeoutMs)
  const HttpsAgent = queueTimedAgent(https.Agent, opts.queueTimeoutMs)

  function agentFor (target: URL): http.Agent {
    let agent = agents.get(target.origin)
    if (agent === undefined) {
      const o: http.AgentOptions = {
        keepAlive: true,
        keepAliveMsecs: 1000,
        // Idle sockets are closed after this; it must be shorter than the upstream's idle
        // timeout so we never write to a socket the upstream is closing.
        timeout: opts.keepAliveMs,
        maxSockets: opts.maxSockets,
        maxFreeSockets: 256,
        scheduling: 'lifo'
      }
      agent = target.protocol === 'https:' ? new HttpsAgent(o) : new HttpAgent(o)
      agents.set(target.origin, agent)
    }
    return agent
  }

  // The response timeout, armed when the request gets its socket (the connect phase is
  // http-proxy-3's connectTimeout). No closure per request: a module-level handler that
  // marks the error.
  proxy.on('proxyReq', (proxyReq) => {
    proxyReq.setTimeout(opts.timeoutMs, upstreamTimedOut)
  })

  // The upstream body has been piped out (http-proxy-3 emits 'end' after our pipe ended the
  // response): report completion without any per-request listener.
  proxy.on('end', (req, res) => {
    const ctx = ctxOf(req)
    if (ctx !== undefined && ctx.rewriting !== true) opts.onComplete?.(ctx.info, res.statusCode)
  })

  // The client went away before the answer: logged as 499 (nginx's "client closed request").
  proxy.on('econnreset', (_err, req) => {
    const ctx = ctxOf(req)
    if (ctx !== undefined) opts.onComplete?.(ctx.info, 499)
  })

  proxy.on('proxyRes', (proxyRes, req, res) => {
    const ctx = ctxOf(req)
    if (ctx === undefined) { res.destroy(); return }
    const status = proxyRes.statusCode ?? 502
    let ours = opts.isShuttingDown() ? { ...ctx.responseHeaders, connection: 'close' } : ctx.responseHeaders
    // Every 503 the gateway sends says when to retry, an engine's too.
    if (status === 503 && proxyRes.headers['retry-after'] === undefined) ours = { ...ours, 'retry-after': '1' }
    // rawHeaders only: Node builds proxyRes.headers lazily, on first use.
    const headers = buildResponseHeaders(proxyRes.rawHeaders, ours)
    ;(proxyRes as WithClientResponse)[kClientResponse] = res
    proxyRes.on('error', destroyClientResponse) // on, not once: no wrapper per request
    if (opts.rewriteError !== undefined && status >= 400 && ctx.method !== 'HEAD' &&
        isJsonContentType(proxyRes.headers['content-type']) && proxyRes.headers['content-encoding'] === undefined) {
      ctx.rewriting = true
      bufferError(proxyRes, res, status, headers, ctx, opts.rewriteError)
      return
    }
    // The upstream's reason phrase goes on with its status (PostgREST's, which clients show).
    if (proxyRes.statusMessage) res.statusMessage = proxyRes.statusMessage
    res.writeHead(status, headers)
    proxyRes.pipe(res)
  })

  function bufferError (proxyRes: IncomingMessage, res: ServerResponse, status: number, headers: string[],
    ctx: ForwardContext, rewrite: RewriteError): void {
    const chunks: Buffer[] = []
    let size = 0
    const onData = (chunk: Buffer): void => {
      chunks.push(chunk)
      size += chunk.length
      if (size > opts.maxErrorBodyBytes) {
        // Too large to rewrite: send what we have and stream the rest as it comes.
        proxyRes.removeListener('data', onData)
        proxyRes.removeListener('end', onEnd)
        if (proxyRes.statusMessage) res.statusMessage = proxyRes.statusMessage
        res.writeHead(status, headers)
        for (const c of chunks) res.write(c)
        chunks.length = 0
        proxyRes.pipe(res)
        proxyRes.once('end', () => opts.onComplete?.(ctx.info, status))
      }
    }
    const onEnd = (): void => {
      const raw = Buffer.concat(chunks, size)
      void finishRewrite(raw, res, status, headers, ctx, rewrite, proxyRes.headers, proxyRes.statusMessage)
    }
    proxyRes.on('data', onData)
    proxyRes.on('end', onEnd)
  }

  async function finishRewrite (raw: Buffer, res: ServerResponse, status: number, headers: string[],
    ctx: ForwardContext, rewrite: RewriteError, upstreamHeaders: IncomingMessage['headers'], statusMessage: string | undefined): Promise<void> {
    let body: unknown
    try { body = JSON.parse(raw.toString('utf8')) } catch { body = undefined }
    let out = { status, headers, body: raw }
    try {
      const r = await rewrite({
        tenant: ctx.tenant,
        service: ctx.service,
        caller: ctx.caller,
        method: ctx.method,
        path: ctx.path,
        query: ctx.query,
        status,
        headers: upstreamHeaders,
        body,
        raw,
        requestId: ctx.requestId,
        log: ctx.log
      })
      if (r !== null && r !== undefined) {
        const buf = Buffer.from(JSON.stringify(r.body), 'utf8')
        const newStatus = r.status ?? status
        out = {
          status: newStatus,
          // The upstream's Bearer challenge belongs to its 401 (RFC 9110 §11.6.1): a refusal
          // rewritten to another status does not carry it on.
          headers: replaceHeaders(headers, { 'content-type': 'application/json; charset=utf-8', ...(r.headers ?? {}) },
            newStatus === 401 ? [] : ['www-authenticate']),
          body: buf
        }
      }
    } catch (err) {
      ctx.log.error({ tenant: ctx.tenant.database, err }, 'refusal rewriter failed; the upstream error is sent unchanged')
    }
    if (res.destroyed || res.writableEnded) return
    // A status the rewriter kept keeps the upstream's reason phrase; a new one gets Node's.
    if (out.status === status && statusMessage) res.statusMessage = statusMessage
    res.writeHead(out.status, replaceHeaders(out.headers, { 'content-length': String(out.body.length) }))
    res.end(out.body)
    opts.onComplete?.(ctx.info, out.status)
  }

  // Refused, reset, unreachable or too slow: 502 / 504 with our JSON body, unless the
  // response already started (then the client connection is cut, as a proxy must).
  function onProxyError (err: Error, req: IncomingMessage, res: ServerResponse | Socket): void {
    const ctx = ctxOf(req)
    const response = res as ServerResponse
    const timedOut = (err as { [TIMEOUT]?: boolean })[TIMEOUT] === true || (err as NodeJS.ErrnoException).code === 'ECONNECT_TIMEOUT'
    const error = (err as NodeJS.ErrnoException).code === BUSY
      ? new UpstreamBusyError({ cause: err })
      : timedOut
        ? new UpstreamTimeoutError({ cause: err })
        : new UpstreamUnavailableError({ cause: err })
    if (ctx !== undefined) {
      ctx.log.error({ tenant: ctx.tenant.database, err, upstream: ctx.target.origin, code: error.code }, 'upstream request failed')
      opts.onUpstreamError?.(ctx, error.code)
    }
    if (response.headersSent || response.writableEnded || response.destroyed) {
      response.destroy()
      if (ctx !== undefined) opts.onComplete?.(ctx.info, response.statusCode)
      return
    }
    const r = renderError(error, ctx?.requestId ?? 'unknown', { auth: ctx?.service === 'auth', apiVersion: req.headers['x-supabase-api-version'] })
    const headers: OutgoingHttpHeaders = { ...(ctx?.responseHeaders ?? {}), ...r.headers, 'content-length': String(Buffer.byteLength(r.body)) }
    if (opts.isShuttingDown()) headers.connection = 'close'
    response.writeHead(r.status, headers)
    response.end(r.body)
    if (ctx !== undefined) { ctx.info.errorCode = error.code; opts.onComplete?.(ctx.info, r.status) }
  }

  return {
    web (req, res, ctx) {
      (req as WithCtx)[kCtx] = ctx
      proxy.web(req, res, optionsFor(ctx.target, ctx.body), onProxyError)
    },
    close () {
      for (const a of agents.values()) a.destroy()
      agents.clear()
    }
  }
}

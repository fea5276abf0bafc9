// The gateway's upstream client: one undici Pool per upstream origin (keep-alive, idle
// timeout shorter than the upstream's: supabase/cli #6674), at most maxSockets requests in
// flight per origin (the rest wait in a queue bounded by queueTimeoutMs), connect and
// response timeouts, and the response side: success bodies stream untouched (backpressure
// both ways), error bodies with a JSON type are buffered (bounded) for the refusal
// rewriter. undici's dispatch() with a handler object per request: no WHATWG fetch, no
// node:http ClientRequest, no stream pipe (bench/gateway.ts measures the three).
import type { IncomingHttpHeaders, OutgoingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http'
import { Pool, type Dispatcher } from 'undici'
import type { FastifyBaseLogger } from 'fastify'
import { isJsonContentType, standardReasonPhrase } from '../../shared/index.js'
import type { Tenant } from '../../tenants/index.js'
import { UpstreamBusyError, UpstreamTimeoutError, UpstreamUnavailableError } from '../errors.js'
import { renderError } from '../render.js'
import type { Caller, RequestInfo, RewriteError, Service } from '../types.js'
import { buildResponseHeaders } from './headers.js'
import { BodyStream, ClientAbortedError } from '../body.js'
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
  /** The body, read whole by the gateway or streaming within its limits (body.ts); null when there is none. */
  body: Buffer | BodyStream | null
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
  /**
   * Bytes of the answer held for a client that reads slower than the upstream sends
   * (undici keeps reading the upstream until then, so its request completes and its slot
   * is free); beyond it the upstream is held back until the client drains. Default 0.
   */
  responseBufferBytes?: number
  /** A client that takes no byte of its answer for this long is disconnected (nginx's send_timeout). */
  sendTimeoutMs?: number
  /** The upstream request is over (complete, failed, or left the queue): its slot can go back. */
  onUpstreamDone?: (res: ServerResponse) => void
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
   * Sends req (its method, url and headers; the body is ctx.body) to ctx.target's origin
   * and streams the answer back; req.url must be the full upstream path (upstreamPath()).
   * The reply must already be hijacked.
   */
  web (req: IncomingMessage, res: ServerResponse, ctx: ForwardContext): void
  /** Destroys the keep-alive sockets; queued requests fail. */
  close (): void
}

/**
 * Whether a client request carries a body (RFC 9112 §6.3: only these two headers say so).
 * Asked of the client's headers, before the upstream headers replace them.
 */
export function hasRequestBody (headers: IncomingHttpHeaders): boolean {
  return headers['content-length'] !== undefined || headers['transfer-encoding'] !== undefined
}

const BUSY = 'EUPSTREAM_BUSY'
const TIMEOUT_CODES = new Set(['UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT', 'UND_ERR_CONNECT_TIMEOUT'])

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

/** Node's parsed-headers shape from a raw list (only for error bodies the rewriter reads). */
function headersObject (raw: string[]): IncomingHttpHeaders {
  const out: Record<string, string | string[]> = {}
  for (let i = 0; i < raw.length; i += 2) {
    const k = raw[i]!.toLowerCase()
    const v = raw[i + 1]!
    const had = out[k]
    if (had === undefined) out[k] = k === 'set-cookie' ? [v] : v
    else if (Array.isArray(had)) had.push(v)
    else out[k] = `${had}, ${v}`
  }
  return out as IncomingHttpHeaders
}

/** One upstream origin: its pool and the requests waiting for one of its maxSockets. */
interface Origin {
  origin: string
  pool: Pool
  active: number
  queue: Forward[]
}

const kForward = Symbol('gatehouse.forward')
type Tracked = ServerResponse & { [kForward]?: Forward }

/** 'close' of a client response: the client went away before the answer was complete. */
function onClientClose (this: Tracked): void {
  const f = this[kForward]
  if (f !== undefined && !this.writableFinished) f.clientGone()
}

/** 'drain' of a client response: let the upstream body flow again. */
function onClientDrain (this: Tracked): void {
  this[kForward]?.resume?.()
}

const kSendWatch = Symbol('gatehouse.sendWatch')
type Watched = ServerResponse & { [kSendWatch]?: NodeJS.Timeout }

/**
 * Cuts `res` when its client takes no byte of it for `ms` (the kernel took none from the
 * socket), checked every `ms` until the answer is written out or the response closes. Armed
 * once per response, when a write is first held back.
 */
function watchSend (res: ServerResponse, ms: number): void {
  const w = res as Watched
  if (w[kSendWatch] !== undefined) return
  // Bytes the kernel took from the socket (bytesWritten counts the ones still queued too).
  const sent = (): number => res.socket === null ? 0 : res.socket.bytesWritten - res.socket.writableLength
  let last = sent()
  const timer = setInterval(() => {
    const now = sent()
    if (now === last && res.writableLength > 0) res.destroy()
    last = now
  }, ms)
  timer.unref()
  w[kSendWatch] = timer
  const stop = (): void => { clearInterval(timer) }
  res.once('finish', stop)
  res.once('close', stop)
}

interface Internals {
  opts: UpstreamProxyOptions
  release (o: Origin): void
  fail (f: Forward, err: Error): void
}

/**
 * One proxied request: undici's dispatch handler (its legacy callbacks, which undici calls
 * without the wrapper its newer handler API needs) and the state of the exchange.
 */
class Forward implements Dispatcher.DispatchHandler {
  readonly req: IncomingMessage
  readonly res: Tracked
  readonly ctx: ForwardContext
  readonly origin: Origin
  readonly internals: Internals
  /** undici's abort of the request, once it has a socket. */
  abort: ((err?: Error) => void) | null = null
  resume: (() => void) | null = null
  queueTimer: NodeJS.Timeout | null = null
  /** Still in the origin's queue / in flight (holding one of its slots) / settled. */
  state: 'queued' | 'active' | 'done' = 'queued'
  gone = false
  status = 0
  /** Buffered error body for the rewriter (null: streaming). */
  chunks: Buffer[] | null = null
  size = 0
  headers: string[] = []
  statusText = ''

  constructor (req: IncomingMessage, res: ServerResponse, ctx: ForwardContext, origin: Origin, internals: Internals) {
    this.req = req
    this.res = res as Tracked
    this.ctx = ctx
    this.origin = origin
    this.internals = internals
  }

  /** The client went away: abort the upstream request (or leave the queue), log 499. */
  clientGone (): void {
    if (this.gone) return
    this.gone = true
    if (this.state === 'queued') {
      this.settle()
    } else if (this.state === 'active') {
      if (this.abort !== null) this.abort()
      // Without a socket yet: onConnect aborts at once.
    }
    this.internals.opts.onComplete?.(this.ctx.info, 499)
  }

  /** Leaves the queue or gives the origin's slot back (once). */
  settle (): void {
    if (this.queueTimer !== null) { clearTimeout(this.queueTimer); this.queueTimer = null }
    const was = this.state
    this.state = 'done'
    if (was === 'active') this.internals.release(this.origin)
    else if (was === 'queued') {
      const q = this.origin.queue
      const i = q.indexOf(this)
      if (i >= 0) q.splice(i, 1)
    }
    if (was !== 'done') this.internals.opts.onUpstreamDone?.(this.res)
  }

  onConnect (abort: (err?: Error) => void): void {
    this.abort = abort
    if (this.gone) abort()
  }

  onHeaders (statusCode: number, rawHeaders: Buffer[], resume: () => void, statusText: string): boolean {
    this.resume = resume
    const raw: string[] = new Array(rawHeaders.length)
    let contentType: string | undefined
    let encoded = false
    let retryAfter = false
    for (let i = 0; i < rawHeaders.length; i += 2) {
      const k = rawHeaders[i]!.toString('latin1')
      const v = rawHeaders[i + 1]!.toString('latin1')
      raw[i] = k
      raw[i + 1] = v
      // Lengths first: most names are none of these three.
      if (k.length === 12 && k.toLowerCase() === 'content-type') contentType ??= v
      else if (k.length === 16 && k.toLowerCase() === 'content-encoding') encoded = true
      else if (k.length === 11 && k.toLowerCase() === 'retry-after') retryAfter = true
    }
    const opts = this.internals.opts
    const ctx = this.ctx
    const res = this.res
    this.status = statusCode
    this.statusText = statusText
    if (this.gone || res.destroyed) return false
    let ours = opts.isShuttingDown() ? { ...ctx.responseHeaders, connection: 'close' } : ctx.responseHeaders
    // Every 503 the gateway sends says when to retry, an engine's too.
    if (statusCode === 503 && !retryAfter) ours = { ...ours, 'retry-after': '1' }
    const headers = buildResponseHeaders(raw, ours)
    if (opts.rewriteError !== undefined && statusCode >= 400 && ctx.method !== 'HEAD' && isJsonContentType(contentType) && !encoded) {
      ctx.rewriting = true
      this.chunks = []
      this.headers = headers
      this.upstreamRaw = raw
      return true
    }
    // The upstream's reason phrase goes on with its status (PostgREST's, which clients show).
    if (statusText) res.statusMessage = statusText
    res.writeHead(statusCode, headers)
    return true
  }

  upstreamRaw: string[] = []

  onData (chunk: Buffer): boolean {
    if (this.gone) return false
    const res = this.res
    const chunks = this.chunks
    if (chunks !== null) {
      chunks.push(chunk)
      this.size += chunk.length
      if (this.size <= this.internals.opts.maxErrorBodyBytes) return true
      // Too large to rewrite: send what we have and stream the rest as it comes.
      this.chunks = null
      this.ctx.rewriting = false
      if (this.statusText) res.statusMessage = this.statusText
      res.writeHead(this.status, this.headers)
      let ok = true
      for (const c of chunks) ok = res.write(c)
      return ok || this.backpressure()
    }
    return res.write(chunk) || this.backpressure()
  }

  /**
   * The client reads slower than the upstream sends: hold the answer up to
   * responseBufferBytes (reading on), then stop reading the upstream until the client
   * drains; either way a client that takes nothing for sendTimeoutMs is cut.
   */
  backpressure (): boolean {
    const opts = this.internals.opts
    if (opts.sendTimeoutMs !== undefined) watchSend(this.res, opts.sendTimeoutMs)
    if (this.res.writableLength <= (opts.responseBufferBytes ?? 0)) return true
    if (!this.drainHooked) { this.drainHooked = true; this.res.on('drain', onClientDrain) }
    return false
  }

  drainHooked = false

  onComplete (): void {
    const chunks = this.chunks
    const ctx = this.ctx
    this.settle()
    if (this.gone) return
    if (chunks !== null) {
      this.chunks = null
      void finishRewrite(Buffer.concat(chunks, this.size), this, this.internals.opts.rewriteError!)
      return
    }
    this.res.end()
    this.internals.opts.onComplete?.(ctx.info, this.status)
  }

  onError (err: Error): void {
    this.settle()
    if (this.gone) return
    this.internals.fail(this, err)
  }
}

async function finishRewrite (raw: Buffer, f: Forward, rewrite: RewriteError): Promise<void> {
  const { ctx, res, status } = f
  const opts = f.internals.opts
  let headers = f.headers
  let body: unknown
  try { body = JSON.parse(raw.toString('utf8')) } catch { body = undefined }
  let out = { status, headers, body: raw }
  let rewritten = false
  try {
    const r = await rewrite({
      tenant: ctx.tenant,
      service: ctx.service,
      caller: ctx.caller,
      method: ctx.method,
      path: ctx.path,
      query: ctx.query,
      status,
      headers: headersObject(f.upstreamRaw),
      body,
      raw,
      requestId: ctx.requestId,
      log: ctx.log
    })
    if (r !== null && r !== undefined) {
      rewritten = true
      const buf = Buffer.from(JSON.stringify(r.body), 'utf8')
      const newStatus = r.status ?? status
      headers = replaceHeaders(headers, { 'content-type': 'application/json; charset=utf-8', ...(r.headers ?? {}) },
        // The upstream's Bearer challenge belongs to its 401 (RFC 9110 §11.6.1): a refusal
        // rewritten to another status does not carry it on.
        newStatus === 401 ? [] : ['www-authenticate'])
      out = { status: newStatus, headers, body: buf }
    }
  } catch (err) {
    ctx.log.error({ tenant: ctx.tenant.database, err }, 'refusal rewriter failed; the upstream error is sent unchanged')
  }
  if (res.destroyed || res.writableEnded) return
  // The upstream's reason phrase belongs to its own body: a rewritten answer gets the
  // standard phrase of its status (PostgREST's, else Node's), even when the status stayed.
  if (!rewritten) {
    if (f.statusText) res.statusMessage = f.statusText
  } else {
    const phrase = standardReasonPhrase(out.status)
    if (phrase !== null) res.statusMessage = phrase
  }
  res.writeHead(out.status, replaceHeaders(out.headers, { 'content-length': String(out.body.length) }))
  res.end(out.body)
  opts.onComplete?.(ctx.info, out.status)
}

/** The size of an engine's response headers the gateway reads at most. */
const UPSTREAM_MAX_HEADER_BYTES = 256 * 1024

export function createUpstreamProxy (opts: UpstreamProxyOptions): UpstreamProxy {
  const origins = new Map<string, Origin>()
  // Per target URL object (routes.ts keeps one per upstream base URL): URL's origin getter
  // builds a new string on every call.
  const byTarget = new WeakMap<URL, Origin>()

  function originOf (target: URL): Origin {
    const known = byTarget.get(target)
    if (known !== undefined && origins.get(known.origin) === known) return known
    let o = origins.get(target.origin)
    if (o === undefined) {
      const pool = new Pool(target.origin, {
        connections: opts.maxSockets,
        pipelining: 1,
        // Idle sockets are closed after this (also when the upstream's Keep-Alive hint is
        // longer): shorter than the upstream's idle timeout, so we never write to a socket
        // the upstream is closing.
        keepAliveTimeout: opts.keepAliveMs,
        keepAliveMaxTimeout: opts.keepAliveMs,
        connect: { timeout: opts.connectTimeoutMs },
        // An engine's response headers may echo the request (PostgREST's Content-Location
        // re-encodes the query string, up to three times the client's URL): well above
        // what a client may send, so a long URL is never a 502.
        maxHeaderSize: UPSTREAM_MAX_HEADER_BYTES
      })
      // A pool-level failure is reported to each request's handler; nothing to do here.
      pool.on('connectionError', () => {})
      o = { origin: target.origin, pool, active: 0, queue: [] }
      origins.set(target.origin, o)
    }
    byTarget.set(target, o)
    return o
  }

  const internals: Internals = {
    opts,
    release (o) {
      o.active--
      // The next queued request (in arrival order) gets the slot.
      const next = o.queue.shift()
      if (next !== undefined) start(next)
    },
    fail: onProxyError
  }

  function queueTimedOut (f: Forward): void {
    f.queueTimer = null
    if (f.state !== 'queued') return
    f.settle()
    onProxyError(f, Object.assign(new Error('no upstream socket became free in time'), { code: BUSY }))
  }

  function start (f: Forward): void {
    if (f.queueTimer !== null) { clearTimeout(f.queueTimer); f.queueTimer = null }
    f.state = 'active'
    f.origin.active++
    const req = f.req
    f.origin.pool.dispatch({
      path: req.url ?? '/',
      method: (req.method ?? 'GET') as Dispatcher.HttpMethod,
      headers: req.headers as Record<string, string | string[]>,
      body: f.ctx.body,
      headersTimeout: opts.timeoutMs,
      bodyTimeout: opts.timeoutMs
    }, f)
  }

  // Refused, reset, unreachable or too slow: 502 / 504 with our JSON body, unless the
  // response already started (then the client connection is cut, as a proxy must).
  function onProxyError (f: Forward, err: Error): void {
    const { ctx, req } = f
    const response = f.res
    const body = ctx.body
    if (body instanceof BodyStream && (body.refusal !== null || body.errored instanceof ClientAbortedError)) {
      bodyFailed(f, body)
      return
    }
    const code = (err as NodeJS.ErrnoException).code
    const error = code === BUSY
      ? new UpstreamBusyError({ cause: err })
      : code !== undefined && TIMEOUT_CODES.has(code)
        ? new UpstreamTimeoutError({ cause: err })
        : new UpstreamUnavailableError({ cause: err })
    ctx.log.error({ tenant: ctx.tenant.database, err, upstream: ctx.target.origin, code: error.code }, 'upstream request failed')
    opts.onUpstreamError?.(ctx, error.code)
    if (response.headersSent || response.writableEnded || response.destroyed) {
      response.destroy()
      opts.onComplete?.(ctx.info, response.statusCode)
      return
    }
    const r = renderError(error, ctx.requestId, { auth: ctx.service === 'auth', apiVersion: req.headers['x-supabase-api-version'] })
    const headers: OutgoingHttpHeaders = { ...ctx.responseHeaders, ...r.headers, 'content-length': String(Buffer.byteLength(r.body)) }
    if (opts.isShuttingDown()) headers.connection = 'close'
    response.writeHead(r.status, headers)
    response.end(r.body)
    ctx.info.errorCode = error.code
    opts.onComplete?.(ctx.info, r.status)
  }

  // A streamed body was cut (over its limit, too slow, or the client went away): the
  // upstream request was aborted with it; the client gets the 413 / 408 (or nothing).
  function bodyFailed (f: Forward, body: BodyStream): void {
    const { ctx, req } = f
    const response = f.res
    const refusal = body.refusal
    if (refusal === null) {
      req.socket.destroy()
      ctx.info.errorCode = 'client_closed'
      opts.onComplete?.(ctx.info, 499)
      return
    }
    if (response.headersSent || response.writableEnded || response.destroyed) {
      response.destroy()
      opts.onComplete?.(ctx.info, response.statusCode)
      return
    }
    const r = renderError(refusal, ctx.requestId, { auth: ctx.service === 'auth', apiVersion: req.headers['x-supabase-api-version'] })
    response.writeHead(r.status, { ...ctx.responseHeaders, ...r.headers, 'content-length': String(Buffer.byteLength(r.body)) })
    response.end(r.body)
    ctx.info.errorCode = refusal.code
    opts.onComplete?.(ctx.info, r.status)
  }

  return {
    web (req, res, ctx) {
      const o = originOf(ctx.target)
      const f = new Forward(req, res, ctx, o, internals)
      ;(res as Tracked)[kForward] = f
      res.on('close', onClientClose)
      if (o.active < opts.maxSockets) { start(f); return }
      // All of the origin's sockets are busy: wait (bounded) for one.
      f.queueTimer = setTimeout(queueTimedOut, opts.queueTimeoutMs, f)
      o.queue.push(f)
    },
    close () {
      for (const o of origins.values()) {
        for (const f of o.queue.splice(0)) { f.settle(); onProxyError(f, new Error('the gateway is closing')) }
        void o.pool.destroy().catch(() => {})
      }
      origins.clear()
    }
  }
}

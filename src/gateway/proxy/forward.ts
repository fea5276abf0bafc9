// One proxied request on its way back: undici's dispatch handler for it (Forward), which
// streams a success answer to the client untouched (backpressure both ways, a bounded
// buffer for slow readers, nginx's send_timeout), and buffers a JSON error answer (bounded)
// for the refusal rewriter (finishRewrite). The upstream client (upstream-client.ts) makes
// one per request and owns the origins' slots it gives back.
import type { IncomingHttpHeaders, OutgoingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http'
import type { Dispatcher } from 'undici'
import type { FastifyBaseLogger } from 'fastify'
import { isJsonContentType, standardReasonPhrase } from '../../shared/index.js'
import type { ProxiedRequest, RequestInfo, RewriteError } from '../types.js'
import { latin1Strings, readUpstreamHead, withOurs } from './headers.js'
import type { BodyStream } from '../body.js'
import { kForward, kSendWatch } from '../http-objects.js'
import { limitApplied } from '../request/default-limit.js'

/** Everything the response side needs about one proxied request. */
export interface ForwardContext extends ProxiedRequest {
  target: URL
  requestId: string
  /** The client request has a body (hasRequestBody() of its own headers). */
  hasBody: boolean
  /** The body, read whole by the gateway or streaming within its limits (body.ts); null when there is none. */
  body: Buffer | BodyStream | null
  /** Headers we add to the client response (request id, CORS, limit notice). */
  responseHeaders: OutgoingHttpHeaders
  /** The default limit a full page of this read is reported against (default-limit.ts cutWatch); null: none. */
  cutAt: number | null
  log: FastifyBaseLogger
  info: RequestInfo
}

export interface UpstreamClientOptions {
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
  /** Clock in milliseconds (when an engine's outage was last logged); default Date.now. */
  now?: () => number
}

/**
 * A flat header list with `set` replacing same-named entries and `drop` removing them
 * (names case-insensitive; `drop` in lower case).
 */
function replaceHeaders(list: string[], set: Record<string, string>, drop: readonly string[] = []): string[] {
  const names = new Set([...Object.keys(set).map((n) => n.toLowerCase()), ...drop])
  const out: string[] = []
  for (let i = 0; i < list.length; i += 2) {
    if (!names.has(list[i]!.toLowerCase())) out.push(list[i]!, list[i + 1]!)
  }
  for (const [k, v] of Object.entries(set)) out.push(k, v)
  return out
}

/** Node's parsed-headers shape from a raw list (only for error bodies the rewriter reads). */
function headersObject(raw: string[]): IncomingHttpHeaders {
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
export interface Origin {
  origin: string
  pool: Dispatcher
  active: number
  queue: Forward[]
}
export type Tracked = ServerResponse & { [kForward]?: Forward }

/** 'close' of a client response: the client went away before the answer was complete. */
export function onClientClose(this: Tracked): void {
  const f = this[kForward]
  if (f !== undefined && !this.writableFinished) f.clientGone()
}

/** 'drain' of a client response: let the upstream body flow again. */
function onClientDrain(this: Tracked): void {
  this[kForward]?.resume?.()
}

type Watched = ServerResponse & { [kSendWatch]?: NodeJS.Timeout }

/**
 * Cuts `res` when its client takes no byte of it for `ms` (the kernel took none from the
 * socket), checked every `ms` until the answer is written out or the response closes. Armed
 * once per response, when a write is first held back.
 */
function watchSend(res: ServerResponse, ms: number): void {
  const w = res as Watched
  if (w[kSendWatch] !== undefined) return
  // Bytes the kernel took from the socket (bytesWritten counts the ones still queued too).
  const sent = (): number => (res.socket === null ? 0 : res.socket.bytesWritten - res.socket.writableLength)
  let last = sent()
  const timer = setInterval(() => {
    const now = sent()
    if (now === last && res.writableLength > 0) res.destroy()
    last = now
  }, ms)
  timer.unref()
  w[kSendWatch] = timer
  const stop = (): void => {
    clearInterval(timer)
  }
  res.once('finish', stop)
  res.once('close', stop)
}

/** What a Forward needs of the client that made it. */
export interface Internals {
  opts: UpstreamClientOptions
  release(o: Origin): void
  fail(f: Forward, err: Error): void
}

/**
 * One proxied request: undici's dispatch handler (its legacy callbacks, which undici calls
 * without the wrapper its newer handler API needs) and the state of the exchange.
 */
export class Forward implements Dispatcher.DispatchHandler {
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

  constructor(req: IncomingMessage, res: ServerResponse, ctx: ForwardContext, origin: Origin, internals: Internals) {
    this.req = req
    this.res = res as Tracked
    this.ctx = ctx
    this.origin = origin
    this.internals = internals
  }

  /** The client went away: abort the upstream request (or leave the queue), log 499. */
  clientGone(): void {
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
  settle(): void {
    if (this.queueTimer !== null) {
      clearTimeout(this.queueTimer)
      this.queueTimer = null
    }
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

  onConnect(abort: (err?: Error) => void): void {
    this.abort = abort
    if (this.gone) abort()
  }

  onHeaders(statusCode: number, rawHeaders: Buffer[], resume: () => void, statusText: string): boolean {
    this.resume = resume
    const opts = this.internals.opts
    const ctx = this.ctx
    const res = this.res
    this.status = statusCode
    this.statusText = statusText
    if (this.gone || res.destroyed) return false
    const head = readUpstreamHead(rawHeaders, ctx.responseHeaders.vary !== undefined)
    let ours = opts.isShuttingDown() ? { ...ctx.responseHeaders, connection: 'close' } : ctx.responseHeaders
    // Every 503 the gateway sends says when to retry, an engine's too.
    if (statusCode === 503 && !head.retryAfter) ours = { ...ours, 'retry-after': '1' }
    const cut = ctx.cutAt === null ? null : limitApplied(ctx.cutAt, statusCode, head.contentRange)
    if (cut !== null) ours = { ...ours, 'x-gatehouse-limit-applied': cut }
    const headers = withOurs(head, ours)
    if (
      opts.rewriteError !== undefined &&
      statusCode >= 400 &&
      ctx.method !== 'HEAD' &&
      isJsonContentType(head.contentType) &&
      !head.encoded
    ) {
      this.chunks = []
      this.headers = headers
      this.upstreamRaw = latin1Strings(rawHeaders)
      return true
    }
    // The upstream's reason phrase goes on with its status (PostgREST's, which clients show).
    if (statusText) res.statusMessage = statusText
    res.writeHead(statusCode, headers)
    return true
  }

  /** The upstream's headers as strings (for the refusal rewriter). */
  upstreamRaw: string[] = []

  onData(chunk: Buffer): boolean {
    if (this.gone) return false
    const res = this.res
    const chunks = this.chunks
    if (chunks !== null) {
      chunks.push(chunk)
      this.size += chunk.length
      if (this.size <= this.internals.opts.maxErrorBodyBytes) return true
      // Too large to rewrite: send what we have and stream the rest as it comes.
      this.chunks = null
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
  backpressure(): boolean {
    const opts = this.internals.opts
    if (opts.sendTimeoutMs !== undefined) watchSend(this.res, opts.sendTimeoutMs)
    if (this.res.writableLength <= (opts.responseBufferBytes ?? 0)) return true
    if (!this.drainHooked) {
      this.drainHooked = true
      this.res.on('drain', onClientDrain)
    }
    return false
  }

  drainHooked = false

  onComplete(): void {
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

  onError(err: Error): void {
    this.settle()
    if (this.gone) return
    this.internals.fail(this, err)
  }
}

async function finishRewrite(raw: Buffer, f: Forward, rewrite: RewriteError): Promise<void> {
  const { ctx, res, status } = f
  const opts = f.internals.opts
  let headers = f.headers
  let body: unknown
  try {
    body = JSON.parse(raw.toString('utf8'))
  } catch {
    body = undefined
  }
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
      log: ctx.log,
    })
    if (r !== null && r !== undefined) {
      rewritten = true
      const buf = Buffer.from(JSON.stringify(r.body), 'utf8')
      const newStatus = r.status ?? status
      headers = replaceHeaders(
        headers,
        { 'content-type': 'application/json; charset=utf-8', ...(r.headers ?? {}) },
        // The upstream's Bearer challenge belongs to its 401 (RFC 9110 §11.6.1): a refusal
        // rewritten to another status does not carry it on.
        newStatus === 401 ? [] : ['www-authenticate'],
      )
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

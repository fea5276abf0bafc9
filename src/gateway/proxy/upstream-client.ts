// The gateway's upstream client: one undici Pool per upstream origin (keep-alive, idle
// timeout shorter than the upstream's: supabase/cli #6674), at most maxSockets requests in
// flight per origin (the rest wait in a queue bounded by queueTimeoutMs), connect and
// response timeouts. undici's dispatch() with a handler object per request (forward.ts): no
// WHATWG fetch, no node:http ClientRequest, no stream pipe (bench/gateway.ts measures the
// three). Failures before the answer started become our 502 / 503 / 504.
import type { IncomingHttpHeaders, OutgoingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http'
import { Pool, type Dispatcher } from 'undici'
import { LogThrottle } from '../../shared/index.js'
import { UpstreamBusyError, UpstreamRefusedError, UpstreamTimeoutError, UpstreamUnavailableError } from '../errors.js'
import { renderError } from '../render.js'
import { BodyStream, ClientAbortedError } from '../body.js'
import { kForward } from '../http-objects.js'
import {
  Forward,
  onClientClose,
  type ForwardContext,
  type Internals,
  type Origin,
  type Tracked,
  type UpstreamClientOptions,
} from './forward.js'

export type { ForwardContext, UpstreamClientOptions } from './forward.js'

/** The upstream request target: the base URL's path joined with the path below the service. */
export function upstreamPath(base: URL, path: string, query: string): string {
  const p = base.pathname
  const joined = p.endsWith('/') ? p + path.slice(1) : p + path
  return query === '' ? joined : `${joined}?${query}`
}

/**
 * Whether a client request carries a body (RFC 9112 §6.3: only these two headers say so).
 * Asked of the client's headers, before the upstream headers replace them.
 */
export function hasRequestBody(headers: IncomingHttpHeaders): boolean {
  return headers['content-length'] !== undefined || headers['transfer-encoding'] !== undefined
}

const BUSY = 'EUPSTREAM_BUSY'
const TIMEOUT_CODES = new Set(['UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT', 'UND_ERR_CONNECT_TIMEOUT'])

/** The size of an engine's response headers the gateway reads at most. */
const UPSTREAM_MAX_HEADER_BYTES = 256 * 1024

/** How long an engine's "upstream request failed" error stands for the failures that follow it. */
const DOWN_LOG_WINDOW_MS = 30_000

/**
 * Sends requests to the engines and streams their answers back. forward() takes a request
 * whose method, url (the full upstream path: upstreamPath()) and headers are the upstream's;
 * the body is ctx.body. close() destroys the keep-alive sockets; queued requests fail.
 */
export class UpstreamClient {
  readonly #opts: UpstreamClientOptions
  readonly #origins = new Map<string, Origin>()
  // Per target URL object (the pipeline keeps one per upstream base URL): URL's origin
  // getter builds a new string on every call.
  readonly #byTarget = new WeakMap<URL, Origin>()
  /** What each Forward calls back. */
  readonly #internals: Internals
  readonly #down: LogThrottle

  constructor(opts: UpstreamClientOptions) {
    this.#opts = opts
    this.#down = new LogThrottle({ windowMs: DOWN_LOG_WINDOW_MS, now: opts.now ?? Date.now })
    this.#internals = {
      opts,
      release: (o) => {
        o.active--
        // The next queued request (in arrival order) gets the slot.
        const next = o.queue.shift()
        if (next !== undefined) this.#start(next)
      },
      fail: (f, err) => {
        this.#fail(f, err)
      },
    }
  }

  forward(req: IncomingMessage, res: ServerResponse, ctx: ForwardContext): void {
    const o = this.#originOf(ctx.target)
    const f = new Forward(req, res, ctx, o, this.#internals)
    ;(res as Tracked)[kForward] = f
    res.on('close', onClientClose)
    if (o.active < this.#opts.maxSockets) {
      this.#start(f)
      return
    }
    // All of the origin's sockets are busy: wait (bounded) for one.
    f.queueTimer = setTimeout(() => {
      this.#queueTimedOut(f)
    }, this.#opts.queueTimeoutMs)
    o.queue.push(f)
  }

  close(): void {
    for (const o of this.#origins.values()) {
      for (const f of o.queue.splice(0)) {
        f.settle()
        this.#fail(f, new Error('the gateway is closing'))
      }
      void o.pool.destroy().catch(() => {})
    }
    this.#origins.clear()
  }

  #originOf(target: URL): Origin {
    const known = this.#byTarget.get(target)
    if (known !== undefined && this.#origins.get(known.origin) === known) return known
    let o = this.#origins.get(target.origin)
    if (o === undefined) {
      o = { origin: target.origin, pool: newPool(target.origin, this.#opts), active: 0, queue: [] }
      this.#origins.set(target.origin, o)
    }
    this.#byTarget.set(target, o)
    return o
  }

  #queueTimedOut(f: Forward): void {
    f.queueTimer = null
    if (f.state !== 'queued') return
    f.settle()
    this.#fail(f, Object.assign(new Error('no upstream socket became free in time'), { code: BUSY }))
  }

  #start(f: Forward): void {
    if (f.queueTimer !== null) {
      clearTimeout(f.queueTimer)
      f.queueTimer = null
    }
    f.state = 'active'
    f.origin.active++
    const req = f.req
    f.origin.pool.dispatch(
      {
        path: req.url ?? '/',
        method: (req.method ?? 'GET') as Dispatcher.HttpMethod,
        headers: req.headers as Record<string, string | string[]>,
        body: f.ctx.body,
        headersTimeout: this.#opts.timeoutMs,
        bodyTimeout: this.#opts.timeoutMs,
      },
      f,
    )
  }

  /**
   * Refused, reset, unreachable or too slow: 503 / 502 / 504 with our JSON body, unless the
   * response already started (then the client connection is cut, as a proxy must). A
   * streamed body that was cut answers its own refusal (#bodyFailed).
   */
  #fail(f: Forward, err: Error): void {
    const { ctx } = f
    const body = ctx.body
    if (body instanceof BodyStream && (body.refusal !== null || body.errored instanceof ClientAbortedError)) {
      this.#bodyFailed(f, body)
      return
    }
    const code = (err as NodeJS.ErrnoException).code
    const error =
      code === BUSY
        ? new UpstreamBusyError({ cause: err })
        : code !== undefined && TIMEOUT_CODES.has(code)
          ? new UpstreamTimeoutError({ cause: err })
          : code === 'ECONNREFUSED'
            ? new UpstreamRefusedError({ cause: err })
            : new UpstreamUnavailableError({ cause: err })
    const fields = { tenant: ctx.tenant.database, upstream: ctx.target.origin, code: error.code }
    if (this.#down.first(`${fields.tenant}\0${fields.upstream}\0${fields.code}`))
      ctx.log.error({ ...fields, err }, 'upstream request failed')
    else ctx.log.debug(fields, 'upstream request failed (logged already)')
    this.#opts.onUpstreamError?.(ctx, error.code)
    this.#answerError(f, error)
  }

  // A streamed body was cut (over its limit, too slow, or the client went away): the
  // upstream request was aborted with it; the client gets the 413 / 408 (or nothing).
  #bodyFailed(f: Forward, body: BodyStream): void {
    const refusal = body.refusal
    if (refusal !== null) {
      this.#answerError(f, refusal)
      return
    }
    f.req.socket.destroy()
    f.ctx.info.errorCode = 'client_closed'
    this.#opts.onComplete?.(f.ctx.info, 499)
  }

  /** Our error as the answer, or a cut connection when the upstream's answer already began. */
  #answerError(f: Forward, error: Error & { code: string }): void {
    const { ctx, req } = f
    const response = f.res
    if (response.headersSent || response.writableEnded || response.destroyed) {
      response.destroy()
      this.#opts.onComplete?.(ctx.info, response.statusCode)
      return
    }
    const r = renderError(error, ctx.requestId, {
      auth: ctx.service === 'auth',
      apiVersion: req.headers['x-supabase-api-version'],
    })
    const headers: OutgoingHttpHeaders = {
      ...ctx.responseHeaders,
      ...r.headers,
      'content-length': String(Buffer.byteLength(r.body)),
    }
    if (this.#opts.isShuttingDown()) headers.connection = 'close'
    response.writeHead(r.status, headers)
    response.end(r.body)
    ctx.info.errorCode = error.code
    this.#opts.onComplete?.(ctx.info, r.status)
  }
}

/** The keep-alive pool of one upstream origin. */
function newPool(origin: string, opts: UpstreamClientOptions): Pool {
  const pool = new Pool(origin, {
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
    maxHeaderSize: UPSTREAM_MAX_HEADER_BYTES,
  })
  // A pool-level failure is reported to each request's handler; nothing to do here.
  pool.on('connectionError', () => {})
  return pool
}

// Request bodies within their limits. A body is read into memory up to the buffer size
// (gateway.buffer_body_bytes) before the request takes a tenant's in-flight slot or an
// upstream socket (nginx's proxy_request_buffering, Kong's request_buffering), so a client
// that dawdles over an upload holds neither while it arrives. A larger body then streams to
// the upstream (BodyStream), bytes counted on the way. Either way a body that passes its
// limit, stalls longer than the idle time, arrives slower than the minimum rate over a
// window (nginx's client_body_timeout judges single reads; this judges the rate) or takes
// longer than the body time in all is cut there: a streamed body's upstream request is
// aborted mid-body (the engine never gets a complete body, so it never acts on one) and
// the client gets its 413 / 408. A declared Content-Length over the limit is refused
// before anything is read.
import type { IncomingMessage } from 'node:http'
import { Readable } from 'node:stream'
import type { GatehouseError } from '../shared/index.js'
import { PayloadTooLargeError, RequestTimeoutError } from './errors.js'

export interface BodyLimits {
  maxBytes: number
  /** Longest pause between two chunks, ms. */
  idleMs: number
  /** Longest time for the whole body, ms. */
  totalMs: number
  /** Least bytes per second over each rateWindowMs (0: no minimum). */
  minBytesPerSecond?: number
  rateWindowMs?: number
}

/** The responses that refuse a body close the connection: its unread rest is never parsed as a request. */
const CLOSE = { connection: 'close' }

/** How long the rest of a refused body is read and dropped before the socket is cut. */
const LINGER_MS = 5_000

/**
 * After a refusal: read and drop what the client still sends, so it can read our answer
 * instead of failing on a write to a closed socket (nginx's lingering close), and cut the
 * connection after LINGER_MS whatever it does.
 */
export function lingerThenClose(req: IncomingMessage): void {
  req.resume()
  const socket = req.socket
  // Node's server ends a `connection: close` answer with socket.destroySoon(), which
  // destroys the socket as soon as the answer is written: unread body bytes then make the
  // kernel reset the connection, and the client may lose the answer with it. Only the
  // sending side is closed here; the socket goes when the client closes its side (the
  // server's half-open handling) or when LINGER_MS is over.
  socket.destroySoon = function (this: typeof socket) {
    this.end()
  }
  setTimeout(() => {
    socket.destroy()
  }, LINGER_MS).unref()
}

/** A declared Content-Length over the limit (checked before anything is read), or null. */
export function declaredTooLarge(req: IncomingMessage, maxBytes: number): GatehouseError | null {
  const cl = req.headers['content-length']
  if (cl === undefined) return null
  const n = Number(cl)
  return Number.isFinite(n) && n > maxBytes ? new PayloadTooLargeError(maxBytes, { headers: CLOSE }) : null
}

/** Marks a read the client abandoned (the socket closed): nothing is sent back. */
export class ClientAbortedError extends Error {
  constructor() {
    super('the client closed the connection while sending the body')
    this.name = 'ClientAbortedError'
  }
}

/**
 * Reads the request body within the limits: into one Buffer when it is at most
 * `streamAbove` bytes, else a BodyStream carrying what was read so far (the first
 * `streamAbove` bytes, whatever Content-Length declares) and the rest as it comes. Rejects with a 413
 * or 408 GatehouseError (both close the connection), or ClientAbortedError.
 */
export function readBody(
  req: IncomingMessage,
  limits: BodyLimits,
  streamAbove = Infinity,
): Promise<Buffer | BodyStream> {
  const started = Date.now()
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = []
    let size = 0
    let settled = false
    const detach = (): void => {
      settled = true
      clearTimeout(idle)
      clearTimeout(total)
      rate?.stop()
      listen(req, 'off', handlers)
    }
    const finish = (err: Error | null): void => {
      if (settled) return
      detach()
      if (err === null) {
        resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size))
        return
      }
      if (!(err instanceof ClientAbortedError)) lingerThenClose(req)
      reject(err)
    }
    const onIdle = (): void => finish(idleTimeout(limits))
    const onTotal = (): void => finish(totalTimeout(limits))
    const idle = setTimeout(onIdle, limits.idleMs)
    const total = setTimeout(onTotal, limits.totalMs)
    const rate = RateWatch.of(limits, (err) => finish(err))
    const onData = (chunk: Buffer): void => {
      size += chunk.length
      rate?.add(chunk.length)
      if (size > limits.maxBytes) {
        finish(new PayloadTooLargeError(limits.maxBytes, { headers: CLOSE }))
        return
      }
      chunks.push(chunk)
      idle.refresh()
      if (size > streamAbove) {
        // Large: the rest streams through (the limits go on counting there).
        req.pause()
        detach()
        resolve(new BodyStream(req, chunks, size, limits, started))
      }
    }
    const onEnd = (): void => finish(null)
    const onError = (): void => finish(new ClientAbortedError())
    const onClose = (): void => {
      if (!req.complete) finish(new ClientAbortedError())
    }
    const handlers = { data: onData, end: onEnd, error: onError, close: onClose }
    listen(req, 'on', handlers)
  })
}

interface BodyHandlers {
  data: (chunk: Buffer) => void
  end: () => void
  error: () => void
  close: () => void
}

/** Adds or removes the body reader's listeners. */
function listen(req: IncomingMessage, how: 'on' | 'off', h: BodyHandlers): void {
  req[how]('data', h.data)
  req[how]('end', h.end)
  req[how]('error', h.error)
  req[how]('close', h.close)
}

function idleTimeout(limits: BodyLimits): GatehouseError {
  return new RequestTimeoutError(`no part of the body arrived for ${limits.idleMs} ms`, { headers: CLOSE })
}

function totalTimeout(limits: BodyLimits): GatehouseError {
  return new RequestTimeoutError(`the body took longer than ${limits.totalMs} ms`, { headers: CLOSE })
}

/**
 * The minimum rate: at the end of each window the bytes that arrived in it must reach
 * minBytesPerSecond x the window, else `onSlow` gets a 408. A window in which the gateway
 * itself held the body back (hold()) is not judged.
 */
class RateWatch {
  readonly #timer: NodeJS.Timeout
  readonly #need: number
  #bytes = 0
  /** Held back at some point of this window / now. */
  #held = false
  #holding = false

  static of(limits: BodyLimits, onSlow: (err: GatehouseError) => void): RateWatch | null {
    const min = limits.minBytesPerSecond ?? 0
    const windowMs = limits.rateWindowMs ?? 10_000
    return min > 0 ? new RateWatch(min, windowMs, onSlow) : null
  }

  private constructor(min: number, windowMs: number, onSlow: (err: GatehouseError) => void) {
    this.#need = Math.ceil((min * windowMs) / 1000)
    this.#timer = setInterval(() => {
      if (!this.#held && this.#bytes < this.#need) {
        onSlow(
          new RequestTimeoutError(`the body arrived slower than ${min} bytes per second over ${windowMs} ms`, {
            headers: CLOSE,
          }),
        )
        return
      }
      this.#bytes = 0
      this.#held = this.#holding
    }, windowMs)
  }

  add(n: number): void {
    this.#bytes += n
  }
  /** The gateway paused the body (upstream backpressure): no window is judged until release(). */
  hold(): void {
    this.#held = true
    this.#holding = true
  }
  release(): void {
    this.#holding = false
  }
  stop(): void {
    clearInterval(this.#timer)
  }
}

/**
 * A request body on its way to the upstream, within the limits: it fails (and the upstream
 * request with it) with a 413 / 408 GatehouseError as soon as the body passes the limit or
 * the idle or total time, or with ClientAbortedError when the client goes away. Backpressure
 * from the upstream pauses the client request.
 */
export class BodyStream extends Readable {
  readonly #req: IncomingMessage
  readonly #limits: BodyLimits
  #size: number
  #idle: NodeJS.Timeout | null
  #total: NodeJS.Timeout | null
  readonly #rate: RateWatch | null
  /** The 413 / 408 that cut the body (also set when nobody was reading any more). */
  refusal: GatehouseError | null = null

  constructor(req: IncomingMessage, head: Buffer[], size: number, limits: BodyLimits, started: number) {
    super()
    this.#req = req
    this.#limits = limits
    this.#size = size
    for (const c of head) this.push(c)
    this.#idle = setTimeout(() => this.#refuse(idleTimeout(limits)), limits.idleMs)
    this.#total = setTimeout(
      () => this.#refuse(totalTimeout(limits)),
      Math.max(0, limits.totalMs - (Date.now() - started)),
    )
    this.#rate = RateWatch.of(limits, (err) => this.#refuse(err))
    // The request stays paused (readBody paused it) until the upstream reads: held till then.
    this.#rate?.hold()
    req.on('data', this.#onData)
    req.on('end', this.#onEnd)
    req.on('error', this.#onAbort)
    req.on('close', this.#onClose)
  }

  #onData = (chunk: Buffer): void => {
    this.#size += chunk.length
    if (this.#size > this.#limits.maxBytes) {
      this.#refuse(new PayloadTooLargeError(this.#limits.maxBytes, { headers: CLOSE }))
      return
    }
    this.#idle?.refresh()
    this.#rate?.add(chunk.length)
    if (!this.push(chunk)) {
      this.#rate?.hold()
      this.#req.pause()
    }
  }

  #onEnd = (): void => {
    this.#detach()
    this.push(null)
  }

  #onAbort = (): void => {
    this.#detach()
    this.destroy(new ClientAbortedError())
  }

  #onClose = (): void => {
    if (!this.#req.complete) this.#onAbort()
  }

  #detach(): void {
    if (this.#idle !== null) {
      clearTimeout(this.#idle)
      this.#idle = null
    }
    if (this.#total !== null) {
      clearTimeout(this.#total)
      this.#total = null
    }
    this.#rate?.stop()
    this.#req.off('data', this.#onData)
    this.#req.off('end', this.#onEnd)
    this.#req.off('error', this.#onAbort)
    this.#req.off('close', this.#onClose)
  }

  #refuse(err: GatehouseError): void {
    this.#detach()
    this.refusal = err
    lingerThenClose(this.#req)
    this.destroy(err)
  }

  override _read(): void {
    this.#rate?.release()
    this.#req.resume()
  }

  override _destroy(err: Error | null, cb: (err?: Error | null) => void): void {
    this.#detach()
    cb(err)
  }
}

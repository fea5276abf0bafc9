// Request bodies are read whole by the gateway before it takes an upstream socket (as
// nginx's request buffering does): a body over its limit is refused with 413 (a declared
// Content-Length at once, a chunked one as soon as it passes the limit), a body that stalls
// longer than the idle time, or takes longer than the body time in all, with 408. Either
// way nothing reaches the engine and no upstream socket is held while a client dawdles.
import type { IncomingMessage } from 'node:http'
import type { GatehouseError } from '../shared/errors.js'
import { PayloadTooLargeError, RequestTimeoutError } from './errors.js'

export interface BodyLimits {
  maxBytes: number
  /** Longest pause between two chunks, ms. */
  idleMs: number
  /** Longest time for the whole body, ms. */
  totalMs: number
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
export function lingerThenClose (req: IncomingMessage): void {
  req.resume()
  const socket = req.socket
  // Node's server ends a `connection: close` answer with socket.destroySoon(), which
  // destroys the socket as soon as the answer is written: unread body bytes then make the
  // kernel reset the connection, and the client may lose the answer with it. Only the
  // sending side is closed here; the socket goes when the client closes its side (the
  // server's half-open handling) or when LINGER_MS is over.
  socket.destroySoon = function (this: typeof socket) { this.end() }
  setTimeout(() => { socket.destroy() }, LINGER_MS).unref()
}

/** A declared Content-Length over the limit (checked before anything is read), or null. */
export function declaredTooLarge (req: IncomingMessage, maxBytes: number): GatehouseError | null {
  const cl = req.headers['content-length']
  if (cl === undefined) return null
  const n = Number(cl)
  return Number.isFinite(n) && n > maxBytes ? new PayloadTooLargeError(maxBytes, { headers: CLOSE }) : null
}

/** Marks a read the client abandoned (the socket closed): nothing is sent back. */
export class ClientAbortedError extends Error {
  constructor () { super('the client closed the connection while sending the body'); this.name = 'ClientAbortedError' }
}

/**
 * Reads the request body into one Buffer within the limits. Rejects with a 413 or 408
 * GatehouseError (both close the connection), or ClientAbortedError.
 */
export function readBody (req: IncomingMessage, limits: BodyLimits): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = []
    let size = 0
    let settled = false
    const finish = (err: Error | null): void => {
      if (settled) return
      settled = true
      clearTimeout(idle)
      clearTimeout(total)
      req.off('data', onData)
      req.off('end', onEnd)
      req.off('error', onError)
      req.off('close', onClose)
      if (err === null) { resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size)); return }
      if (!(err instanceof ClientAbortedError)) lingerThenClose(req)
      reject(err)
    }
    const onIdle = (): void => finish(new RequestTimeoutError(`no part of the body arrived for ${limits.idleMs} ms`, { headers: CLOSE }))
    const onTotal = (): void => finish(new RequestTimeoutError(`the body took longer than ${limits.totalMs} ms`, { headers: CLOSE }))
    const idle = setTimeout(onIdle, limits.idleMs)
    const total = setTimeout(onTotal, limits.totalMs)
    const onData = (chunk: Buffer): void => {
      size += chunk.length
      if (size > limits.maxBytes) { finish(new PayloadTooLargeError(limits.maxBytes, { headers: CLOSE })); return }
      chunks.push(chunk)
      idle.refresh()
    }
    const onEnd = (): void => finish(null)
    const onError = (): void => finish(new ClientAbortedError())
    const onClose = (): void => { if (!req.complete) finish(new ClientAbortedError()) }
    req.on('data', onData)
    req.on('end', onEnd)
    req.on('error', onError)
    req.on('close', onClose)
  })
}

// pino options shared by every process: level, redaction of credentials (authorization,
// apikey, cookies, tokens, passwords) in logged objects and in URLs, the request serializer,
// and a buffered stdout destination for busy processes.
// Keys, tokens and passwords must never reach a log line; test/gateway/logging.test.ts proves it.
import fs from 'node:fs'
import { pino, type Logger, type LoggerOptions, type DestinationStream } from 'pino'

const REDACTED = '[REDACTED]'

/** Field names whose values are credentials, wherever they appear (case-insensitive). */
const SECRET_FIELDS: ReadonlySet<string> = new Set([
  'authorization',
  'proxy-authorization',
  'apikey',
  'api_key',
  'x-api-key',
  'cookie',
  'set-cookie',
  'password',
  'new_password',
  'token',
  'access_token',
  'refresh_token',
  'id_token',
  'token_hash',
  'secret',
  'jwt',
  'upstream_secret',
  'client_secret',
  'code_verifier',
])

/** String fields holding URLs, whose query may carry a credential (`?apikey=`, `?token=`). */
const URL_FIELDS: ReadonlySet<string> = new Set(['url', 'path', 'location', 'redirect_to', 'referer', 'href'])

/** Values pino's serializers take care of (and which must not be walked: sockets, requests). */
const SERIALIZED: ReadonlySet<string> = new Set(['req', 'res', 'err', 'error'])

function isPlain(v: object): boolean {
  const proto = Object.getPrototypeOf(v)
  return proto === Object.prototype || proto === null || Array.isArray(v)
}

/**
 * A copy of a log object with credentials censored: fields named in SECRET_FIELDS at any
 * depth up to 4, credential query values in URL fields. Untouched objects are returned as
 * they are (no copy). Used as pino's log and bindings formatters: one pass over the keys
 * the caller logged, far cheaper per line than path-based redaction.
 */
function censor<T>(obj: T, depth = 0): T {
  if (obj === null || typeof obj !== 'object') return obj
  let out: Record<string, unknown> | unknown[] | null = null
  const src = obj as Record<string, unknown>
  for (const key in src) {
    const v = src[key]
    if (v === undefined) continue
    const lower = key.toLowerCase()
    let next: unknown = v
    if (SECRET_FIELDS.has(lower)) {
      next = REDACTED
    } else if (typeof v === 'string') {
      if (URL_FIELDS.has(lower) && v.includes('?')) next = redactUrl(v)
    } else if (
      typeof v === 'object' &&
      v !== null &&
      depth < 4 &&
      !(depth === 0 && SERIALIZED.has(lower)) &&
      isPlain(v)
    ) {
      next = censor(v, depth + 1)
    }
    if (next !== v) {
      out ??= Array.isArray(obj) ? [...obj] : { ...src }
      ;(out as Record<string, unknown>)[key] = next
    }
  }
  return (out ?? obj) as T
}

/** Query parameters whose values are credentials (GoTrue links, OAuth callbacks, `?apikey=`). */
const SECRET_PARAMS = new Set([
  'apikey',
  'api_key',
  'access_token',
  'refresh_token',
  'id_token',
  'token',
  'token_hash',
  'password',
  'secret',
  'code',
  'code_verifier',
  'jwt',
])

function decodeKey(raw: string): string {
  if (!raw.includes('%') && !raw.includes('+')) return raw.toLowerCase()
  try {
    return decodeURIComponent(raw.replace(/\+/g, ' ')).toLowerCase()
  } catch {
    return raw.toLowerCase()
  }
}

// Any parameter name that could be one of SECRET_PARAMS (or encoded: `%`): only then is
// the query taken apart. Most URLs carry none and return at once.
const MAYBE_SECRET =
  /[?&](?:[^=&]*%|apikey|api_key|access_token|refresh_token|id_token|token|token_hash|password|secret|code|code_verifier|jwt)[^=&]*=/i

/** A URL (or path + query) with credential-bearing query values replaced by [REDACTED]. */
export function redactUrl(url: string): string {
  const q = url.indexOf('?')
  if (q === -1 || !MAYBE_SECRET.test(url)) return url
  const hash = url.indexOf('#', q)
  const query = url.slice(q + 1, hash === -1 ? undefined : hash)
  let changed = false
  const parts = query.split('&').map((part) => {
    const eq = part.indexOf('=')
    const key = eq === -1 ? part : part.slice(0, eq)
    if (eq !== -1 && SECRET_PARAMS.has(decodeKey(key))) {
      changed = true
      return `${key}=${REDACTED}`
    }
    return part
  })
  if (!changed) return url
  return url.slice(0, q + 1) + parts.join('&') + (hash === -1 ? '' : url.slice(hash))
}

interface RequestLike {
  method?: string
  url?: string
  id?: string
  ip?: string
  socket?: { remoteAddress?: string }
}

/** Request serializer: method, redacted URL, id and peer; never headers. */
function serializeRequest(req: RequestLike): Record<string, unknown> {
  return {
    method: req.method,
    url: req.url === undefined ? undefined : redactUrl(req.url),
    id: req.id,
    remoteAddress: req.ip ?? req.socket?.remoteAddress,
  }
}

export interface LogSettings {
  level: string
}

/**
 * pino options with our redaction (censor() as the log and bindings formatters) and the
 * request serializer; pass to fastify's `logger` or to pino(). The caller's extra options
 * (level, stream ...) apply, but never replace the redaction.
 */
export function loggerOptions(log: LogSettings, extra: LoggerOptions = {}): LoggerOptions {
  const theirs = extra.formatters ?? {}
  return {
    level: log.level,
    ...extra,
    formatters: {
      ...theirs,
      log: theirs.log ? (o) => censor(theirs.log!(o)) : censor,
      bindings: theirs.bindings ? (b) => censor(theirs.bindings!(b)) : censor,
    },
    // pino formats child bindings without the formatters: top-level paths cover them
    // (explicit top-level paths cost nothing on lines that lack those keys).
    redact: { paths: [...SECRET_FIELDS].map((f) => (f.includes('-') ? `["${f}"]` : f)), censor: REDACTED },
    serializers: { ...(extra.serializers ?? {}), req: serializeRequest as never },
  }
}

/** A pino logger with our options, writing to `destination` (stdout by default). */
export function createLogger(log: LogSettings, destination?: DestinationStream, extra: LoggerOptions = {}): Logger {
  const opts = loggerOptions(log, extra)
  return destination ? pino(opts, destination) : pino(opts)
}

export interface BatchedDestinationOptions {
  /** File descriptor to write to (default 1, stdout). */
  fd?: number
  /** Write as soon as this many bytes are pending (default 64 KiB). */
  maxBytes?: number
  /** Otherwise write at most this long after the first pending line (default 50 ms). */
  flushMs?: number
  /** Lines beyond this many pending bytes (a sink that cannot keep up) are dropped and counted (default 16 MiB). */
  maxPendingBytes?: number
}

export interface BatchedDestination extends DestinationStream {
  /** Writes everything pending, synchronously (process exit). */
  flushSync(): void
  /** Stops the timer and writes what is pending. */
  end(): void
  /** Lines dropped because the sink could not keep up. */
  readonly dropped: number
  /**
   * Resolves once no asynchronous write is in flight, or after `timeoutMs` (a sink that takes
   * nothing). A process that waits for it before exiting writes no batch twice: the exit flush
   * writes an in-flight batch again, not knowing whether it reached the sink.
   */
  settled(timeoutMs: number): Promise<void>
}

/** The longest the exit flush waits for a sink that takes nothing (a full pipe nobody reads). */
const EXIT_FLUSH_MS = 1_000

/**
 * A log destination that queues lines in memory and writes them in batches (one write per
 * 64 KiB or per 50 ms). A line costs an array push: pino's sonic-boom re-measures its
 * growing buffer string on every line, so a buffer this large makes it far dearer than the
 * request itself (`npm run bench -- logger`, docs/benchmarks.md "Log writes"). Everything pending is written synchronously when the process exits; only a
 * SIGKILL can lose the last lines. A write never holds the process: when the sink is gone
 * (a closed pipe: `gatehouse serve gateway | head -3`) lines are dropped from then on, and
 * the exit flush gives up on a sink that takes nothing for EXIT_FLUSH_MS (sonic-boom's
 * flushSync, pino's default at exit, retries a closed pipe forever).
 */
class BatchedFdDestination implements BatchedDestination {
  readonly #fd: number
  readonly #maxBytes: number
  readonly #flushMs: number
  readonly #maxPending: number
  #chunks: string[] = []
  #pending = 0
  #writing = false
  /** The batch an asynchronous write is carrying (written again by flushSync at exit). */
  #inflight: Buffer | null = null
  #timer: NodeJS.Timeout | null = null
  #dropped = 0
  #ended = false
  /** The sink failed for good (EPIPE and the like): lines are dropped. */
  #gone = false
  /** settled() callers waiting for the in-flight write. */
  #waiters: Array<() => void> = []
  readonly #onExit = (): void => {
    this.#flushSync(true)
  }

  constructor(opts: BatchedDestinationOptions) {
    this.#fd = opts.fd ?? 1
    this.#maxBytes = opts.maxBytes ?? 65_536
    this.#flushMs = opts.flushMs ?? 50
    this.#maxPending = opts.maxPendingBytes ?? 16 * 1024 * 1024
    process.once('exit', this.#onExit)
  }

  get dropped(): number {
    return this.#dropped
  }

  write(line: string): void {
    if (this.#ended || this.#gone) return
    if (this.#pending > this.#maxPending) {
      this.#dropped++
      return
    }
    this.#chunks.push(line)
    this.#pending += line.length
    if (this.#pending >= this.#maxBytes) this.#flush()
    else if (this.#timer === null && !this.#writing)
      this.#timer = setTimeout(() => {
        this.#flush()
      }, this.#flushMs).unref()
  }

  flushSync(): void {
    this.#flushSync(false)
  }

  settled(timeoutMs: number): Promise<void> {
    if (!this.#writing) return Promise.resolve()
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, timeoutMs)
      this.#waiters.push(() => {
        clearTimeout(timer)
        resolve()
      })
    })
  }

  #idle(): void {
    const waiters = this.#waiters
    this.#waiters = []
    for (const w of waiters) w()
  }

  end(): void {
    this.#ended = true
    process.removeListener('exit', this.#onExit)
    this.#flushSync(false)
  }

  #take(): string {
    const data = this.#chunks.length === 1 ? this.#chunks[0]! : this.#chunks.join('')
    this.#chunks = []
    this.#pending = 0
    return data
  }

  #stopTimer(): void {
    if (this.#timer !== null) {
      clearTimeout(this.#timer)
      this.#timer = null
    }
  }

  #flush(): void {
    this.#stopTimer()
    if (this.#writing || this.#pending === 0) return
    this.#writing = true
    this.#send(Buffer.from(this.#take(), 'utf8'))
  }

  #send(buf: Buffer): void {
    this.#inflight = buf
    fs.write(this.#fd, buf, 0, buf.length, null, (err, n) => {
      if (err) {
        this.#failed(err, buf)
        return
      }
      if (n < buf.length) {
        this.#send(buf.subarray(n))
        return
      }
      this.#writing = false
      this.#inflight = null
      this.#idle()
      if (this.#pending >= this.#maxBytes) this.#flush()
      else if (this.#pending > 0 && this.#timer === null)
        this.#timer = setTimeout(() => {
          this.#flush()
        }, this.#flushMs).unref()
    })
  }

  /** EAGAIN: try the batch again; anything else: the sink is gone (closed pipe), lines are dropped. */
  #failed(err: NodeJS.ErrnoException, buf: Buffer): void {
    if (err.code === 'EAGAIN') {
      setTimeout(() => {
        this.#send(buf)
      }, 10).unref()
      return
    }
    this.#writing = false
    this.#inflight = null
    this.#gone = true
    this.#take()
    this.#idle()
  }

  // At exit an asynchronous write may not have completed: its batch is written again
  // (a line may then appear twice; none is lost).
  #flushSync(atExit: boolean): void {
    this.#stopTimer()
    const parts: Buffer[] = []
    if (atExit && this.#inflight !== null) {
      parts.push(this.#inflight)
      this.#inflight = null
    }
    if (this.#pending > 0) parts.push(Buffer.from(this.#take(), 'utf8'))
    if (parts.length === 0 || this.#gone) return
    let buf = parts.length === 1 ? parts[0]! : Buffer.concat(parts)
    const deadline = Date.now() + EXIT_FLUSH_MS
    while (buf.length > 0 && Date.now() < deadline) {
      try {
        buf = buf.subarray(fs.writeSync(this.#fd, buf))
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EAGAIN') {
          this.#gone = true
          return
        }
        Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 5)
      }
    }
  }
}

export function createBatchedDestination(opts: BatchedDestinationOptions = {}): BatchedDestination {
  return new BatchedFdDestination(opts)
}

/** Stdout through createBatchedDestination(): what a busy gateway process should log to. */
export function bufferedStdout(opts: Omit<BatchedDestinationOptions, 'fd'> = {}): BatchedDestination {
  return createBatchedDestination({ ...opts, fd: 1 })
}

// pino options shared by every process: level, redaction of credentials (authorization,
// apikey, cookies, tokens, passwords) in logged objects and in URLs, the request serializer,
// and a buffered stdout destination for busy processes.
// Keys, tokens and passwords must never reach a log line; test/gateway/logging.test.ts proves it.
import { pino, destination, type Logger, type LoggerOptions, type DestinationStream } from 'pino'

export const REDACTED = '[REDACTED]'

/** Field names whose values are credentials, wherever they appear (case-insensitive). */
const SECRET_FIELDS: ReadonlySet<string> = new Set([
  'authorization', 'proxy-authorization', 'apikey', 'api_key', 'x-api-key', 'cookie', 'set-cookie',
  'password', 'new_password', 'token', 'access_token', 'refresh_token', 'id_token', 'token_hash',
  'secret', 'jwt', 'upstream_secret', 'client_secret', 'code_verifier'
])

/** String fields holding URLs, whose query may carry a credential (`?apikey=`, `?token=`). */
const URL_FIELDS: ReadonlySet<string> = new Set(['url', 'path', 'location', 'redirect_to', 'referer', 'href'])

/** Values pino's serializers take care of (and which must not be walked: sockets, requests). */
const SERIALIZED: ReadonlySet<string> = new Set(['req', 'res', 'err', 'error'])

function isPlain (v: object): boolean {
  const proto = Object.getPrototypeOf(v)
  return proto === Object.prototype || proto === null || Array.isArray(v)
}

/**
 * A copy of a log object with credentials censored: fields named in SECRET_FIELDS at any
 * depth up to 4, credential query values in URL fields. Untouched objects are returned as
 * they are (no copy). Used as pino's log and bindings formatters: one pass over the keys
 * the caller logged, far cheaper per line than path-based redaction.
 */
export function censor<T> (obj: T, depth = 0): T {
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
    } else if (typeof v === 'object' && v !== null && depth < 4 && !(depth === 0 && SERIALIZED.has(lower)) && isPlain(v)) {
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
  'apikey', 'api_key', 'access_token', 'refresh_token', 'id_token', 'token', 'token_hash',
  'password', 'secret', 'code', 'code_verifier', 'jwt'
])

function decodeKey (raw: string): string {
  if (!raw.includes('%') && !raw.includes('+')) return raw.toLowerCase()
  try { return decodeURIComponent(raw.replace(/\+/g, ' ')).toLowerCase() } catch { return raw.toLowerCase() }
}

// Any parameter name that could be one of SECRET_PARAMS (or encoded: `%`): only then is
// the query taken apart. Most URLs carry none and return at once.
const MAYBE_SECRET = /[?&](?:[^=&]*%|apikey|api_key|access_token|refresh_token|id_token|token|token_hash|password|secret|code|code_verifier|jwt)[^=&]*=/i

/** A URL (or path + query) with credential-bearing query values replaced by [REDACTED]. */
export function redactUrl (url: string): string {
  const q = url.indexOf('?')
  if (q === -1 || !MAYBE_SECRET.test(url)) return url
  const hash = url.indexOf('#', q)
  const query = url.slice(q + 1, hash === -1 ? undefined : hash)
  let changed = false
  const parts = query.split('&').map((part) => {
    const eq = part.indexOf('=')
    const key = eq === -1 ? part : part.slice(0, eq)
    if (eq !== -1 && SECRET_PARAMS.has(decodeKey(key))) { changed = true; return `${key}=${REDACTED}` }
    return part
  })
  if (!changed) return url
  return url.slice(0, q + 1) + parts.join('&') + (hash === -1 ? '' : url.slice(hash))
}

interface RequestLike { method?: string, url?: string, id?: string, ip?: string, socket?: { remoteAddress?: string } }

/** Request serializer: method, redacted URL, id and peer; never headers. */
export function serializeRequest (req: RequestLike): Record<string, unknown> {
  return {
    method: req.method,
    url: req.url === undefined ? undefined : redactUrl(req.url),
    id: req.id,
    remoteAddress: req.ip ?? req.socket?.remoteAddress
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
export function loggerOptions (log: LogSettings, extra: LoggerOptions = {}): LoggerOptions {
  const theirs = extra.formatters ?? {}
  return {
    level: log.level,
    ...extra,
    formatters: {
      ...theirs,
      log: theirs.log ? (o) => censor(theirs.log!(o)) : censor,
      bindings: theirs.bindings ? (b) => censor(theirs.bindings!(b)) : censor
    },
    // pino formats child bindings without the formatters: top-level paths cover them
    // (explicit top-level paths cost nothing on lines that lack those keys).
    redact: { paths: [...SECRET_FIELDS].map((f) => (f.includes('-') ? `["${f}"]` : f)), censor: REDACTED },
    serializers: { ...(extra.serializers ?? {}), req: serializeRequest as never }
  }
}

/** A pino logger with our options, writing to `destination` (stdout by default). */
export function createLogger (log: LogSettings, destination?: DestinationStream, extra: LoggerOptions = {}): Logger {
  const opts = loggerOptions(log, extra)
  return destination ? pino(opts, destination) : pino(opts)
}

/**
 * Stdout written in 4 KiB batches instead of one write per line (the gateway logs a line
 * per request). pino flushes it synchronously when the process exits; only a SIGKILL can
 * lose the last lines.
 */
export function bufferedStdout (minLength = 4096): DestinationStream {
  return destination({ dest: 1, sync: false, minLength })
}

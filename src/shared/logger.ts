// pino options shared by every process: level, redaction of credentials (authorization,
// apikey, cookies, tokens, passwords) in objects and in URLs, and the request serializer.
// Keys, tokens and passwords must never reach a log line; test/gateway/logging.test.ts proves it.
import { pino, type Logger, type LoggerOptions, type DestinationStream } from 'pino'

export const REDACTED = '[REDACTED]'

/** Object fields that may carry a credential, wherever they appear (one level of nesting). */
const SECRET_FIELDS = [
  'authorization', 'apikey', 'api_key', 'cookie', 'set-cookie', 'password', 'new_password',
  'token', 'access_token', 'refresh_token', 'id_token', 'token_hash', 'secret', 'jwt',
  'upstream_secret', 'client_secret', 'code_verifier'
]

const REDACT_PATHS: string[] = [
  'req.headers.authorization', 'req.headers.apikey', 'req.headers.cookie', 'req.headers["x-api-key"]',
  'req.headers["proxy-authorization"]',
  'res.headers["set-cookie"]',
  'headers.authorization', 'headers.apikey', 'headers.cookie', 'headers["set-cookie"]',
  'headers["proxy-authorization"]',
  ...SECRET_FIELDS.map((f) => f.includes('-') ? `["${f}"]` : f),
  ...SECRET_FIELDS.map((f) => f.includes('-') ? `*["${f}"]` : `*.${f}`)
]

/** Query parameters whose values are credentials (GoTrue links, OAuth callbacks, `?apikey=`). */
const SECRET_PARAMS = new Set([
  'apikey', 'api_key', 'access_token', 'refresh_token', 'id_token', 'token', 'token_hash',
  'password', 'secret', 'code', 'code_verifier', 'jwt'
])

function decodeKey (raw: string): string {
  if (!raw.includes('%') && !raw.includes('+')) return raw.toLowerCase()
  try { return decodeURIComponent(raw.replace(/\+/g, ' ')).toLowerCase() } catch { return raw.toLowerCase() }
}

/** A URL (or path + query) with credential-bearing query values replaced by [REDACTED]. */
export function redactUrl (url: string): string {
  const q = url.indexOf('?')
  if (q === -1) return url
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

/** pino options with our redaction; pass to fastify's `logger` or to pino(). */
export function loggerOptions (log: LogSettings, extra: LoggerOptions = {}): LoggerOptions {
  return {
    level: log.level,
    ...extra,
    redact: { paths: REDACT_PATHS, censor: REDACTED },
    serializers: { req: serializeRequest as never, ...(extra.serializers ?? {}) }
  }
}

/** A pino logger with our options, writing to `destination` (stdout by default). */
export function createLogger (log: LogSettings, destination?: DestinationStream, extra: LoggerOptions = {}): Logger {
  const opts = loggerOptions(log, extra)
  return destination ? pino(opts, destination) : pino(opts)
}

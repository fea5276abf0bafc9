// HTTP header helpers shared by the gateway and the engines: the hop-by-hop and
// Connection-listed header names (RFC 9110 §7.6.1), request id validation, content-type
// tests. Pure functions over Node's header objects; nothing here does I/O.
import { bareRecord } from './own.js'

/** Headers that describe one connection, never forwarded by a proxy (RFC 9110 §7.6.1). */
export const HOP_BY_HOP: ReadonlySet<string> = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'proxy-authenticate',
  'proxy-authorization',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
])

/** The header names a `Connection` header lists (lower case); empty when none. */
export function connectionListed(connection: string | string[] | undefined): Set<string> {
  const out = new Set<string>()
  if (connection === undefined) return out
  const values = Array.isArray(connection) ? connection : [connection]
  for (const v of values) {
    for (const token of v.split(',')) {
      const name = token.trim().toLowerCase()
      if (name) out.add(name)
    }
  }
  return out
}

/** Accepted shape of a client-supplied X-Request-Id; anything else is replaced. */
const REQUEST_ID = /^[A-Za-z0-9._:@-]{1,128}$/

export function isValidRequestId(value: unknown): value is string {
  return typeof value === 'string' && REQUEST_ID.test(value)
}

/** `application/json`, `application/vnd.pgrst.object+json`, `application/problem+json` ... */
export function isJsonContentType(value: unknown): boolean {
  if (typeof value !== 'string') return false
  const type = value.split(';', 1)[0]!.trim().toLowerCase()
  return type === 'application/json' || (type.startsWith('application/') && type.endsWith('+json'))
}

/** The first value of a header that may repeat. */
export function firstHeader(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value
}

/**
 * The token of an `Authorization: Bearer <token>` value (scheme case-insensitive, RFC 6750
 * §2.1; one token, blanks around it allowed); null when the value is not of that form.
 */
export function bearerToken(authorization: string): string | null {
  const m = /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(authorization)
  return m === null ? null : m[1]!
}

/** A Cookie header as name -> value (first occurrence wins), as request.cookies carries it. */
export function parseCookieHeader(h: string | string[] | undefined): Record<string, string> {
  const out = bareRecord<string>()
  const v = Array.isArray(h) ? h.join('; ') : h
  if (!v) return out
  for (const part of v.split(';')) {
    const eq = part.indexOf('=')
    if (eq <= 0) continue
    const k = part.slice(0, eq).trim()
    if (k && !Object.hasOwn(out, k)) out[k] = part.slice(eq + 1).trim()
  }
  return out
}

// HTTP reason phrases (supabase-js shows them as statusText): PostgREST's, which are the
// http-types package's names (RFC 2616/7231 wording where Node uses RFC 9110's, e.g. 413
// "Request Entity Too Large"); a status they do not name keeps Node's.
const REASON_PHRASES: ReadonlyMap<number, string> = new Map([
  [100, 'Continue'],
  [101, 'Switching Protocols'],
  [200, 'OK'],
  [201, 'Created'],
  [202, 'Accepted'],
  [203, 'Non-Authoritative Information'],
  [204, 'No Content'],
  [205, 'Reset Content'],
  [206, 'Partial Content'],
  [300, 'Multiple Choices'],
  [301, 'Moved Permanently'],
  [302, 'Found'],
  [303, 'See Other'],
  [304, 'Not Modified'],
  [305, 'Use Proxy'],
  [307, 'Temporary Redirect'],
  [308, 'Permanent Redirect'],
  [400, 'Bad Request'],
  [401, 'Unauthorized'],
  [402, 'Payment Required'],
  [403, 'Forbidden'],
  [404, 'Not Found'],
  [405, 'Method Not Allowed'],
  [406, 'Not Acceptable'],
  [407, 'Proxy Authentication Required'],
  [408, 'Request Timeout'],
  [409, 'Conflict'],
  [410, 'Gone'],
  [411, 'Length Required'],
  [412, 'Precondition Failed'],
  [413, 'Request Entity Too Large'],
  [414, 'Request-URI Too Long'],
  [415, 'Unsupported Media Type'],
  [416, 'Requested Range Not Satisfiable'],
  [417, 'Expectation Failed'],
  [418, "I'm a teapot"],
  [422, 'Unprocessable Entity'],
  [426, 'Upgrade Required'],
  [428, 'Precondition Required'],
  [429, 'Too Many Requests'],
  [431, 'Request Header Fields Too Large'],
  [500, 'Internal Server Error'],
  [501, 'Not Implemented'],
  [502, 'Bad Gateway'],
  [503, 'Service Unavailable'],
  [504, 'Gateway Timeout'],
  [505, 'HTTP Version Not Supported'],
  [511, 'Network Authentication Required'],
])

/** PostgREST's reason phrase of a status, null when it names none (then Node's applies). */
export function standardReasonPhrase(status: number): string | null {
  return REASON_PHRASES.get(status) ?? null
}

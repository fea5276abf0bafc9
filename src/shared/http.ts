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
  'upgrade'
])

/** The header names a `Connection` header lists (lower case); empty when none. */
export function connectionListed (connection: string | string[] | undefined): Set<string> {
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
export const REQUEST_ID = /^[A-Za-z0-9._:@-]{1,128}$/

export function isValidRequestId (value: unknown): value is string {
  return typeof value === 'string' && REQUEST_ID.test(value)
}

/** `application/json`, `application/vnd.pgrst.object+json`, `application/problem+json` ... */
export function isJsonContentType (value: unknown): boolean {
  if (typeof value !== 'string') return false
  const type = value.split(';', 1)[0]!.trim().toLowerCase()
  return type === 'application/json' || (type.startsWith('application/') && type.endsWith('+json'))
}

/** The first value of a header that may repeat. */
export function firstHeader (value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value
}

/** A Cookie header as name -> value (first occurrence wins), as request.cookies carries it. */
export function parseCookieHeader (h: string | string[] | undefined): Record<string, string> {
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

// Request helpers of the auth engine: GoTrue-style body field access (null = absent,
// wrong type = bad_json), email and phone validation, client metadata, and redirect_to
// validation against the tenant's site URL and allow list (docs/auth-protocol.md §1.5).
import { isIP, isIPv4 } from 'node:net'
import type { FastifyRequest } from 'fastify'
import type { AuthSettings } from '../tenants/index.js'
import { BadJsonError, ValidationFailedError } from './errors.js'

export type Body = Record<string, unknown>

/** The JSON body as an object ({} when empty); arrays and scalars are bad_json. */
export function bodyOf(req: FastifyRequest): Body {
  const b = req.body
  if (b === undefined || b === null || b === '') return {}
  if (typeof b !== 'object' || Array.isArray(b))
    throw new BadJsonError('Could not parse request body as JSON: expected an object')
  return b as Body
}

/** The field `key` when present (null counts as absent); bad_json when it is not of the `kind` asked for. */
function optField(b: Body, key: string, kind: 'string' | 'boolean' | 'object'): unknown {
  const v = b[key]
  if (v === undefined || v === null) return undefined
  if (typeof v !== kind || Array.isArray(v))
    throw new BadJsonError(
      `Could not parse request body as JSON: field ${key} must be a${kind === 'object' ? 'n' : ''} ${kind}`,
    )
  return v
}

export const optString = (b: Body, key: string) => optField(b, key, 'string') as string | undefined
export const optBool = (b: Body, key: string) => optField(b, key, 'boolean') as boolean | undefined
export const optObject = (b: Body, key: string) => optField(b, key, 'object') as Record<string, unknown> | undefined

export function queryParam(req: FastifyRequest, key: string): string | undefined {
  const v = (req.query as Record<string, unknown> | undefined)?.[key]
  if (Array.isArray(v)) return typeof v[0] === 'string' ? v[0] : undefined
  return typeof v === 'string' ? v : undefined
}

const EMAIL =
  /^[a-zA-Z0-9.!#$%&'*+/=?^_`{|}~-]+@[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?)*$/

/**
 * GoTrue's validateEmail: required, at most 255 characters, a valid address (not trimmed:
 * surrounding spaces make it invalid), lower-cased.
 */
export function normaliseEmail(email: string): string {
  if (email === '') throw new ValidationFailedError('request', 'An email address is required')
  if (email.length > 255) throw new ValidationFailedError('request', 'An email address is too long')
  if (!EMAIL.test(email)) throw new ValidationFailedError('request', 'Unable to validate email address: invalid format')
  return email.toLowerCase()
}

/** E.164 digits without '+' (docs/auth-protocol.md §3.3). */
export function normalisePhone(phone: string): string {
  const p = phone.replace(/[+\s]/g, '')
  if (!/^[1-9][0-9]{1,14}$/.test(p))
    throw new ValidationFailedError('request', 'Invalid phone number format (E.164 required)')
  return p
}

export function clientMeta(req: FastifyRequest): { userAgent: string | null; ip: string | null } {
  const ua = req.headers['user-agent']
  const ip = req.ip && /^[0-9a-fA-F:.]+$/.test(req.ip) ? req.ip : null
  return { userAgent: typeof ua === 'string' ? ua.slice(0, 1024) : null, ip }
}

// ----- redirect_to (docs/auth-protocol.md §1.5) -------------------------------------------------------------

function isLoopback(host: string): boolean {
  return host === 'localhost' || host === '127.0.0.1' || host === '[::1]' || host === '::1'
}

/** net.ParseIP(host).IsLoopback(): 127.0.0.0/8, ::1 and IPv4-mapped 127/8. */
function isLoopbackIp(ip: string): boolean {
  if (isIPv4(ip)) return ip.startsWith('127.')
  const v6 = ip.toLowerCase()
  if (v6 === '::1' || /^(0{0,4}:){7}0{0,3}1$/.test(v6)) return true
  const mapped = /^(?:0{0,4}:){0,5}(?::|0{0,4}:)?ffff:(\d+\.\d+\.\d+\.\d+)$/.exec(v6)
  return !!mapped && mapped[1]!.startsWith('127.')
}

/** The host of a URL as Go's url.Hostname() reads it: as written, brackets of IPv6 removed. */
function rawHostname(candidate: string): string | null {
  const m = /^[a-zA-Z][a-zA-Z0-9+.-]*:\/\/(?:[^@/?#]*@)?(\[[^\]]*\]|[^:/?#]*)/.exec(candidate)
  if (!m) return null
  const host = m[1]!
  return host.startsWith('[') ? host.slice(1, -1) : host
}

/** A glob of the allow list: separators '.' and '/'; `*` stays within a segment, `**` crosses. */
function globToRegExp(glob: string): RegExp {
  let out = ''
  for (let i = 0; i < glob.length; i++) {
    const c = glob[i]!
    if (c === '*') {
      if (glob[i + 1] === '*') {
        out += '.*'
        i++
      } else out += '[^./]*'
    } else if (c === '?') out += '[^./]'
    else out += c.replace(/[\\^$+.()|{}[\]]/g, '\\$&')
  }
  return new RegExp('^' + out + '$')
}

const REGULAR_HOSTNAME = /^[a-zA-Z0-9]([a-zA-Z0-9.-]*[a-zA-Z0-9])?$/

/**
 * GoTrue's IsRedirectURLValid: the site URL's scheme, host and port (any port on loopback);
 * never a decimal-integer host; an IP literal only when it is a loopback address; an http(s)
 * host only of ordinary characters; else a match of the allow list (fragment ignored).
 */
export function isRedirectAllowed(
  candidate: string,
  settings: Pick<AuthSettings, 'site_url' | 'redirect_urls'>,
): boolean {
  if (candidate === '') return false
  let url: URL
  try {
    url = new URL(candidate)
  } catch {
    return false
  }
  try {
    const site = new URL(settings.site_url)
    if (
      site.protocol === url.protocol &&
      site.hostname === url.hostname &&
      (site.port === url.port || (isLoopback(site.hostname) && isLoopback(url.hostname)))
    )
      return true
  } catch {
    /* a bad site_url matches nothing */
  }
  const host = rawHostname(candidate) ?? url.hostname
  const isHttp = url.protocol === 'http:' || url.protocol === 'https:'
  if (/^[0-9]+$/.test(host)) return false
  if (isIP(host) !== 0) return isLoopbackIp(host)
  if (isHttp && !REGULAR_HOSTNAME.test(host)) return false
  const bare = candidate.split('#')[0]!
  return settings.redirect_urls.some((g) => globToRegExp(g).test(bare))
}

/**
 * GoTrue's GetReferrer: the `redirect_to` header, else the query's `redirect_to`, when
 * allowed; else the Referer when allowed; else the site URL. `bodyValue` (generate_link's
 * body field) wins over both when it is allowed.
 */
export function redirectUrlOf(
  req: FastifyRequest,
  settings: Pick<AuthSettings, 'site_url' | 'redirect_urls'>,
  bodyValue?: string,
): string {
  if (bodyValue && isRedirectAllowed(bodyValue, settings)) return bodyValue
  const header = req.headers.redirect_to
  const asked =
    (typeof header === 'string' && header !== '' ? header : undefined) ?? queryParam(req, 'redirect_to') ?? ''
  if (isRedirectAllowed(asked, settings)) return asked
  const referer = typeof req.headers.referer === 'string' ? req.headers.referer : ''
  if (isRedirectAllowed(referer, settings)) return referer
  return settings.site_url
}

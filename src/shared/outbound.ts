// Requests our processes make to addresses that tenants or panel members configure (identity
// providers: issuer discovery, token, userinfo, JWKS). Only https, and only to public
// addresses: a name that resolves to loopback, private, link-local, CGNAT, metadata or other
// special ranges (IPv4 and IPv6, IPv4-mapped included) is refused, unless the operator lists
// the host in the process config (`outbound.allow_hosts`). Each request resolves DNS once,
// checks every address and connects to the checked one (no second look-up a rebinding DNS
// could answer differently); each redirect is checked the same way.
import { safeUrl } from './urls.js'
import { BlockList, isIP } from 'node:net'
import { lookup as dnsLookup } from 'node:dns/promises'
import http from 'node:http'
import https from 'node:https'

export interface OutboundPolicy {
  /** Host names or IP literals (optionally `:port`) that may be reached over http and at non-public addresses. */
  allowHosts: readonly string[]
}

export const DEFAULT_OUTBOUND_POLICY: OutboundPolicy = Object.freeze({ allowHosts: [] })

/** A request refused before anything was sent; `reason` says why, in words a person can act on. */
export class OutboundRefusedError extends Error {
  readonly reason: string
  constructor(url: string, reason: string) {
    super(`request to ${safeUrl(url)} refused: ${reason}`)
    this.name = 'OutboundRefusedError'
    this.reason = reason
  }
}

// ---- address ranges ---------------------------------------------------------------------

const RANGES: Array<[string, number, 'ipv4' | 'ipv6', string]> = [
  ['0.0.0.0', 8, 'ipv4', 'an unspecified address'],
  ['10.0.0.0', 8, 'ipv4', 'a private address'],
  ['100.64.0.0', 10, 'ipv4', 'a carrier-grade NAT address'],
  ['127.0.0.0', 8, 'ipv4', 'a loopback address'],
  ['169.254.0.0', 16, 'ipv4', 'a link-local or cloud metadata address'],
  ['172.16.0.0', 12, 'ipv4', 'a private address'],
  ['192.0.0.0', 24, 'ipv4', 'a reserved address'],
  ['192.0.2.0', 24, 'ipv4', 'a documentation address'],
  ['192.88.99.0', 24, 'ipv4', 'a reserved address'],
  ['192.168.0.0', 16, 'ipv4', 'a private address'],
  ['198.18.0.0', 15, 'ipv4', 'a benchmarking address'],
  ['198.51.100.0', 24, 'ipv4', 'a documentation address'],
  ['203.0.113.0', 24, 'ipv4', 'a documentation address'],
  ['224.0.0.0', 4, 'ipv4', 'a multicast address'],
  ['240.0.0.0', 4, 'ipv4', 'a reserved address'],
  ['::', 128, 'ipv6', 'an unspecified address'],
  ['::1', 128, 'ipv6', 'a loopback address'],
  ['64:ff9b:1::', 48, 'ipv6', 'a local-use NAT64 address'],
  // What is left of ::/8 (IETF-reserved) once the forms that embed an IPv4 address were judged by it.
  ['::', 8, 'ipv6', 'a reserved address'],
  ['100::', 64, 'ipv6', 'a discard address'],
  ['2001::', 23, 'ipv6', 'a reserved address'],
  ['2001:db8::', 32, 'ipv6', 'a documentation address'],
  ['fc00::', 7, 'ipv6', 'a private (unique local) or cloud metadata address'],
  ['fe80::', 10, 'ipv6', 'a link-local address'],
  ['fec0::', 10, 'ipv6', 'a site-local address'],
  ['ff00::', 8, 'ipv6', 'a multicast address'],
]

const lists = RANGES.map(([net, prefix, type, reason]) => {
  const b = new BlockList()
  b.addSubnet(net, prefix, type)
  return { b, type, reason }
})

/** The 16 bytes of an IPv6 address (any textual form, `%zone` ignored). */
function ipv6Bytes(addr: string): number[] | null {
  let a = addr.split('%')[0]!
  const out: number[] = []
  const tailV4 = /(\d+\.\d+\.\d+\.\d+)$/.exec(a)
  if (tailV4) {
    const v4 = tailV4[1]!.split('.').map(Number)
    a =
      a.slice(0, -tailV4[1]!.length) +
      ((v4[0]! << 8) | v4[1]!).toString(16) +
      ':' +
      ((v4[2]! << 8) | v4[3]!).toString(16)
  }
  const halves = a.split('::')
  if (halves.length > 2) return null
  const head = halves[0] ? halves[0].split(':') : []
  const tail = halves.length === 2 && halves[1] ? halves[1].split(':') : []
  const fill = halves.length === 2 ? 8 - head.length - tail.length : 0
  const groups = [...head, ...Array(Math.max(0, fill)).fill('0'), ...tail]
  if (groups.length !== 8) return null
  for (const g of groups) {
    const n = parseInt(g, 16)
    if (!/^[0-9a-f]{1,4}$/i.test(g) || Number.isNaN(n)) return null
    out.push(n >> 8, n & 255)
  }
  return out
}

/**
 * The IPv4 address an IPv6 address carries (mapped, SIIT, compatible, NAT64, 6to4), or null;
 * the embedded address is then judged as itself (docs/security.md "Outbound requests"). Forms
 * whose embedding is not fixed are refused whole by RANGES: local-use NAT64 64:ff9b:1::/48
 * (RFC 8215, any RFC 6052 prefix length) and Teredo 2001::/32 (inside 2001::/23).
 */
function embeddedIpv4(addr: string): string | null {
  const b = ipv6Bytes(addr)
  if (b === null) return null
  const zeros = (from: number, to: number) => b.slice(from, to).every((x) => x === 0)
  const v4 = (at: number) => b.slice(at, at + 4).join('.')
  if (zeros(0, 10) && b[10] === 0xff && b[11] === 0xff) return v4(12) // ::ffff:a.b.c.d
  if (zeros(0, 8) && b[8] === 0xff && b[9] === 0xff && zeros(10, 12)) return v4(12) // ::ffff:0:a.b.c.d (SIIT, RFC 6145)
  if (zeros(0, 12) && !(b[12] === 0 && b[13] === 0 && b[14] === 0 && (b[15] === 0 || b[15] === 1))) return v4(12) // ::a.b.c.d
  if (b[0] === 0x00 && b[1] === 0x64 && b[2] === 0xff && b[3] === 0x9b && zeros(4, 12)) return v4(12) // 64:ff9b::/96
  if (b[0] === 0x20 && b[1] === 0x02) return v4(2) // 2002::/16
  return null
}

/** Why an IP address is not a public one (e.g. "a loopback address"), or null when it is public. */
export function nonPublicReason(ip: string): string | null {
  const family = isIP(ip)
  if (family === 0) return 'not an IP address'
  if (family === 6) {
    const v4 = embeddedIpv4(ip)
    if (v4 !== null) return nonPublicReason(v4)
  }
  const type = family === 4 ? 'ipv4' : 'ipv6'
  for (const l of lists) if (l.type === type && l.b.check(ip, type)) return l.reason
  return null
}

// ---- the policy ---------------------------------------------------------------------------

/** The host of a URL without IPv6 brackets, lower case. */
function hostOf(u: URL): string {
  return u.hostname.replace(/^\[|\]$/g, '').toLowerCase()
}

function isAllowed(policy: OutboundPolicy, u: URL): boolean {
  const host = hostOf(u)
  const port = u.port || (u.protocol === 'https:' ? '443' : '80')
  for (const entry of policy.allowHosts) {
    const e = entry
      .trim()
      .toLowerCase()
      .replace(/^\[|\](?=(:\d+)?$)/g, '')
    if (e === host || e === `${host}:${port}` || e === `[${host}]:${port}`) return true
  }
  return false
}

interface Target {
  url: URL
  address: string
  family: 4 | 6
  allowed: boolean
}

/** Checks a URL and resolves its host once: the address to connect to, or OutboundRefusedError. */
async function resolveTarget(raw: string | URL, policy: OutboundPolicy): Promise<Target> {
  let u: URL
  try {
    u = new URL(raw)
  } catch {
    throw new OutboundRefusedError(String(raw), 'not an absolute URL')
  }
  const text = u.toString()
  if (u.protocol !== 'https:' && u.protocol !== 'http:')
    throw new OutboundRefusedError(text, `scheme ${u.protocol} is not allowed (https only)`)
  if (u.username || u.password) throw new OutboundRefusedError(text, 'credentials in the URL are not allowed')
  const allowed = isAllowed(policy, u)
  if (!allowed && u.protocol !== 'https:') throw new OutboundRefusedError(text, 'only https is allowed')
  const host = hostOf(u)
  let addrs: Array<{ address: string; family: number }>
  if (isIP(host) !== 0) {
    addrs = [{ address: host, family: isIP(host) }]
  } else {
    try {
      addrs = await dnsLookup(host, { all: true, verbatim: true })
    } catch (err) {
      throw new OutboundRefusedError(
        text,
        `host ${host} does not resolve (${(err as { code?: string }).code ?? 'DNS error'})`,
      )
    }
    if (addrs.length === 0) throw new OutboundRefusedError(text, `host ${host} does not resolve`)
  }
  if (!allowed) {
    for (const a of addrs) {
      const why = nonPublicReason(a.address)
      if (why !== null) {
        throw new OutboundRefusedError(
          text,
          `${host} resolves to ${a.address}, ${why}; list the host in outbound.allow_hosts of the process config to allow it`,
        )
      }
    }
  }
  const first = addrs[0]!
  return { url: u, address: first.address, family: first.family === 6 ? 6 : 4, allowed }
}

/**
 * Checks a URL as it would be fetched now (scheme, credentials, every resolved address);
 * throws OutboundRefusedError. For validating settings when they are written.
 */
export async function checkOutboundUrl(raw: string, policy: OutboundPolicy): Promise<void> {
  await resolveTarget(raw, policy)
}

export interface OutboundInit {
  method?: string
  headers?: Record<string, string> | Headers | Array<[string, string]>
  body?: string
  signal?: AbortSignal | null
  /** Largest response body read; larger is an error. Default 1 MiB. */
  maxBytes?: number
  /** Time limit when no signal is given. Default 10 s. */
  timeoutMs?: number
}

function headerRecord(h: OutboundInit['headers']): Record<string, string> {
  if (h === undefined) return {}
  if (h instanceof Headers) return Object.fromEntries(h.entries())
  if (Array.isArray(h)) return Object.fromEntries(h)
  return { ...h }
}

/** One request to a checked address; the response read whole (up to maxBytes). */
function requestOnce(
  t: Target,
  init: OutboundInit,
  signal: AbortSignal,
): Promise<{ status: number; headers: Headers; body: Buffer }> {
  const maxBytes = init.maxBytes ?? 1024 * 1024
  return new Promise((resolve, reject) => {
    const lib = t.url.protocol === 'https:' ? https : http
    const req = lib.request(
      t.url,
      {
        method: init.method ?? 'GET',
        headers: headerRecord(init.headers),
        // The connection goes to the address checked above, whatever DNS says now; TLS still
        // verifies the certificate against the host name (servername defaults to it).
        lookup: (_host, opts, cb) => {
          if ((opts as { all?: boolean }).all)
            (cb as unknown as (e: null, a: Array<{ address: string; family: number }>) => void)(null, [
              { address: t.address, family: t.family },
            ])
          else cb(null, t.address, t.family)
        },
        agent: false,
        signal,
      },
      (res) => {
        const chunks: Buffer[] = []
        let size = 0
        res.on('data', (c: Buffer) => {
          size += c.length
          if (size > maxBytes) {
            req.destroy(new Error(`response larger than ${maxBytes} bytes`))
            return
          }
          chunks.push(c)
        })
        res.on('end', () => {
          const headers = new Headers()
          for (const [k, v] of Object.entries(res.headers)) {
            if (Array.isArray(v)) for (const x of v) headers.append(k, x)
            else if (v !== undefined) headers.set(k, v)
          }
          resolve({ status: res.statusCode ?? 0, headers, body: Buffer.concat(chunks) })
        })
        res.on('error', reject)
      },
    )
    req.on('error', reject)
    if (init.body !== undefined) req.write(init.body)
    req.end()
  })
}

/**
 * fetch() for configured outbound URLs: every hop checked by the policy and pinned to the
 * address checked; answers a standard Response (the body already read, size-limited).
 */
export async function outboundFetch(url: string | URL, init: OutboundInit, policy: OutboundPolicy): Promise<Response> {
  const signal = init.signal ?? AbortSignal.timeout(init.timeoutMs ?? 10_000)
  const method = (init.method ?? 'GET').toUpperCase()
  // Redirects followed for GET/HEAD (each checked); other methods never follow one.
  let redirects = 3
  let current: string | URL = url
  for (;;) {
    const target = await resolveTarget(current, policy)
    const r = await requestOnce(target, init, signal)
    const location = r.headers.get('location')
    if (r.status >= 300 && r.status < 400 && location !== null) {
      if ((method !== 'GET' && method !== 'HEAD') || redirects <= 0) {
        throw new OutboundRefusedError(target.url.toString(), `redirect (HTTP ${r.status}) not followed`)
      }
      redirects--
      current = new URL(location, target.url)
      continue
    }
    const nullBody = r.status === 204 || r.status === 304 || method === 'HEAD'
    return new Response(nullBody ? null : new Uint8Array(r.body), { status: r.status, headers: r.headers })
  }
}

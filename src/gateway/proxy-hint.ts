// A gateway with no trusted proxies takes the socket's address as the client. Behind an
// ingress, a load balancer or an nginx on the same host that makes every client one client:
// auth rate limits, the per-client share of a database's slots and the MFA challenge's IP
// binding then count everyone together (docs/edge.md). This notices it: over each window of
// WINDOW requests, when one address that looks like a proxy in front (a private or
// carrier-grade NAT address, or loopback sending X-Forwarded-For) sent most of them, it logs
// one warning naming gateway.trusted_proxies. One Map update per request until it warned;
// an address is classified when it differs from the last request's.
import type { IncomingMessage } from 'node:http'

const WINDOW = 200
/** The share of a window one address must have sent. */
const MOST = 0.8

export interface ProxyHintLogger {
  warn(obj: object, msg: string): void
}

/** IPv4 (or IPv4-mapped IPv6) private or carrier-grade NAT, or IPv6 unique local. */
export function isPrivateAddress(address: string): boolean {
  const a = address.startsWith('::ffff:') ? address.slice(7) : address
  const m = /^(\d+)\.(\d+)\.\d+\.\d+$/.exec(a)
  if (m !== null) {
    const x = Number(m[1])
    const y = Number(m[2])
    return (
      x === 10 || (x === 172 && y >= 16 && y <= 31) || (x === 192 && y === 168) || (x === 100 && y >= 64 && y <= 127)
    )
  }
  return /^f[cd][0-9a-f]{2}:/i.test(a)
}

function isLoopback(address: string): boolean {
  return address === '::1' || address.startsWith('127.') || address.startsWith('::ffff:127.')
}

/** The per-request hook of a gateway without trusted proxies. */
export function createProxyHint(log: ProxyHintLogger): (raw: IncomingMessage) => void {
  let counts = new Map<string, number>()
  let seen = 0
  let warned = false
  // The last address and what it is (a keep-alive client sends from one address request
  // after request): classified once, not once per request.
  let last = ''
  let lastPrivate = false
  let lastLoopback = false
  return (raw) => {
    if (warned) return
    const address = raw.socket.remoteAddress ?? ''
    if (address !== last) {
      last = address
      lastPrivate = isPrivateAddress(address)
      lastLoopback = isLoopback(address)
    }
    const proxyLike = lastPrivate || (lastLoopback && raw.headers['x-forwarded-for'] !== undefined)
    if (proxyLike) counts.set(address, (counts.get(address) ?? 0) + 1)
    if (++seen < WINDOW) return
    for (const [peer, n] of counts) {
      if (n >= WINDOW * MOST) {
        warned = true
        log.warn(
          { peer, requests: n, of: seen, setting: 'gateway.trusted_proxies' },
          `most requests (${n} of ${seen}) come from ${peer}, which looks like a proxy in front of the gateway, while gateway.trusted_proxies is empty: ` +
            'every client behind it counts as one (auth rate limits, the per-client share of in-flight requests, MFA IP binding). ' +
            'List that proxy in gateway.trusted_proxies (docs/edge.md)',
        )
      }
    }
    counts = new Map()
    seen = 0
  }
}

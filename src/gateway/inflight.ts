// Requests each tenant has in flight to its upstreams, capped per tenant: the upstream
// sockets (one pool per engine origin, shared by every tenant on it) cannot all be taken by
// one tenant's slow requests; and within a tenant, capped per client (its address and the
// kind of API key it sends) at a share of the tenant's cap, so one client cannot take all
// of a database's slots from its other callers (as Envoy's per-downstream connection
// limits and Kong's per-consumer limits keep one caller from the rest). A slot is taken
// after the body was read (body.ts) and given back when the upstream's answer is complete
// (release(), from the proxy) or when the client response closes, whichever comes first; a
// slow reader never holds one once the upstream has answered. No closure per request.
import type { ServerResponse } from 'node:http'

const kTenant = Symbol('gatehouse.inflightTenant')
const kClient = Symbol('gatehouse.inflightClient')
type Tracked = ServerResponse & { [kTenant]?: string; [kClient]?: string }

/** take()'s answer: a slot, or which cap refused one. */
type TakeResult = 'ok' | 'tenant' | 'client'

export interface InflightSlots {
  /**
   * Takes a slot of `tenant` for `client` and `res` (given back by release(res) or when res
   * closes); 'tenant' / 'client' when that cap is reached.
   */
  take(tenant: string, client: string, res: ServerResponse): TakeResult
  /** Gives back res's slot (once; later calls and the close do nothing). */
  release(res: ServerResponse): void
  /** Requests of `tenant` in flight now. */
  count(tenant: string): number
  /** The most one client may hold of a tenant's slots. */
  readonly perClient: number
}

export function createInflightSlots(maxPerTenant: number, clientShare = 1): InflightSlots {
  const counts = new Map<string, number>()
  // Per client within a tenant: key `${tenant}\n${client}`.
  const clients = new Map<string, number>()
  const perClient = Math.max(1, Math.floor(maxPerTenant * clientShare))

  const dec = (map: Map<string, number>, key: string): void => {
    const n = (map.get(key) ?? 1) - 1
    if (n <= 0) map.delete(key)
    else map.set(key, n)
  }

  function release(this: Tracked): void {
    const tenant = this[kTenant]
    if (tenant === undefined) return
    this[kTenant] = undefined
    dec(counts, tenant)
    const client = this[kClient]
    if (client !== undefined) {
      this[kClient] = undefined
      dec(clients, client)
    }
  }

  return {
    perClient,
    take(tenant, client, res) {
      const n = counts.get(tenant) ?? 0
      if (n >= maxPerTenant) return 'tenant'
      const key = `${tenant}\n${client}`
      const c = clients.get(key) ?? 0
      if (c >= perClient) return 'client'
      counts.set(tenant, n + 1)
      clients.set(key, c + 1)
      const tracked = res as Tracked
      tracked[kTenant] = tenant
      tracked[kClient] = key
      res.on('close', release)
      return 'ok'
    },
    release(res) {
      release.call(res as Tracked)
    },
    count(tenant) {
      return counts.get(tenant) ?? 0
    },
  }
}

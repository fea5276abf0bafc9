// Requests each tenant has in flight to its upstreams, capped per tenant: the upstream
// sockets (one pool per engine origin, shared by every tenant on it) cannot all be taken by
// one tenant's slow requests; and within a tenant, capped per client (its address and the
// kind of API key it sends) at a share of the tenant's cap, so one client cannot take all
// of a database's slots from its other callers (as Envoy's per-downstream connection
// limits and Kong's per-consumer limits keep one caller from the rest). A slot is taken
// after the body was read (body.ts) and given back when the upstream's answer is complete
// (release(), from the proxy) or when the client response closes, whichever comes first; a
// slow reader never holds one once the upstream has answered. No closure per request, and
// no key string made per request: the counts are a map of clients per tenant (an entry per
// tenant that was ever served, bounded by the tenants; a client's entry goes when it has none).
import type { ServerResponse } from 'node:http'
import { kClient, kTenant } from './http-objects.js'

/** One tenant's requests in flight, in all and per client. */
interface TenantCount {
  n: number
  clients: Map<string, number>
}

type Tracked = ServerResponse & { [kTenant]?: TenantCount; [kClient]?: string }

/** take()'s answer: a slot, or which cap refused one. */
type TakeResult = 'ok' | 'tenant' | 'client'

export interface InflightSlots {
  /**
   * Takes a slot of `tenant` for `client` and `res`, given back by release(res), which the
   * caller promises on every path; 'tenant' / 'client' when that cap is reached.
   */
  take(tenant: string, client: string, res: ServerResponse): TakeResult
  /** Gives back res's slot (once; later calls do nothing). */
  release(res: ServerResponse): void
  /** The most one client may hold of a tenant's slots. */
  readonly perClient: number
}

export function createInflightSlots(maxPerTenant: number, clientShare: number): InflightSlots {
  const tenants = new Map<string, TenantCount>()
  const perClient = Math.max(1, Math.floor(maxPerTenant * clientShare))
  return {
    perClient,
    take(tenant, client, res) {
      let t = tenants.get(tenant)
      if (t === undefined) {
        t = { n: 0, clients: new Map() }
        tenants.set(tenant, t)
      }
      if (t.n >= maxPerTenant) return 'tenant'
      const c = t.clients.get(client) ?? 0
      if (c >= perClient) return 'client'
      t.n++
      t.clients.set(client, c + 1)
      const tracked = res as Tracked
      tracked[kTenant] = t
      tracked[kClient] = client
      return 'ok'
    },
    release(res) {
      const tracked = res as Tracked
      const t = tracked[kTenant]
      if (t === undefined) return
      tracked[kTenant] = undefined
      t.n--
      const client = tracked[kClient]!
      tracked[kClient] = undefined
      const c = (t.clients.get(client) ?? 1) - 1
      if (c <= 0) t.clients.delete(client)
      else t.clients.set(client, c)
    },
  }
}

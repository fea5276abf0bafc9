// Requests each tenant has in flight to its upstreams, capped per tenant: the upstream
// sockets (one pool per engine origin, shared by every tenant on it) cannot all be taken by
// one tenant's slow requests. A slot is taken just before proxying and given back when the
// client response closes (finished, failed or abandoned alike). No closure per request.
import type { ServerResponse } from 'node:http'

const kTenant = Symbol('gatehouse.inflightTenant')
type Tracked = ServerResponse & { [kTenant]?: string }

export interface InflightSlots {
  /** Takes a slot of `tenant` for `res` (released when res closes); false when none is free. */
  take (tenant: string, res: ServerResponse): boolean
  /** Requests of `tenant` in flight now. */
  count (tenant: string): number
}

export function createInflightSlots (maxPerTenant: number): InflightSlots {
  const counts = new Map<string, number>()

  function release (this: Tracked): void {
    const tenant = this[kTenant]
    if (tenant === undefined) return
    this[kTenant] = undefined
    const n = (counts.get(tenant) ?? 1) - 1
    if (n <= 0) counts.delete(tenant)
    else counts.set(tenant, n)
  }

  return {
    take (tenant, res) {
      const n = counts.get(tenant) ?? 0
      if (n >= maxPerTenant) return false
      counts.set(tenant, n + 1)
      ;(res as Tracked)[kTenant] = tenant
      res.on('close', release)
      return true
    },
    count (tenant) { return counts.get(tenant) ?? 0 }
  }
}

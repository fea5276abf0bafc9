// Prometheus gauges of per-tenant pools, read from their snapshots at scrape time (nothing
// is counted on the hot path). Several parts may report into one registry: each series is
// labelled with its part. Tenant labels come from the owner (a database name, never a
// connection URL), and several pool keys of one tenant add up.
import { Gauge, type Registry } from 'prom-client'
import type { TenantPoolsSnapshot } from './tenant-pools.js'

export interface PoolMetricsSource {
  /** The part the pools belong to (`rest`, `auth`, `gateway-catalog`, `panel`). */
  part: string
  snapshot(): TenantPoolsSnapshot
  /** The tenant label of a pool key (default: the key itself). */
  tenantOf?(key: string): string
}

const sourcesOf = new WeakMap<Registry, Map<string, PoolMetricsSource>>()

/** Reports `source`'s pools in `registry` (replacing an earlier source of the same part). */
export function registerPoolMetrics(registry: Registry, source: PoolMetricsSource): void {
  let sources = sourcesOf.get(registry)
  if (sources === undefined) {
    const all = new Map<string, PoolMetricsSource>()
    sources = all
    sourcesOf.set(registry, all)
    const tenants = (): Array<{ part: string; tenant: string; inUse: number; idle: number; waiting: number }> => {
      const rows = new Map<string, { part: string; tenant: string; inUse: number; idle: number; waiting: number }>()
      for (const s of all.values()) {
        for (const t of s.snapshot().tenants) {
          const tenant = s.tenantOf?.(t.key) ?? t.key
          const k = JSON.stringify([s.part, tenant])
          const row = rows.get(k) ?? { part: s.part, tenant, inUse: 0, idle: 0, waiting: 0 }
          row.inUse += t.inUse
          row.idle += t.idle
          row.waiting += t.waiting
          rows.set(k, row)
        }
      }
      return [...rows.values()]
    }
    new Gauge({
      name: 'gatehouse_pool_connections',
      help: 'Connections of a tenant pool by state (in_use: handed out or opening; idle)',
      labelNames: ['part', 'tenant', 'state'],
      registers: [registry],
      collect() {
        this.reset()
        for (const r of tenants()) {
          this.set({ part: r.part, tenant: r.tenant, state: 'in_use' }, r.inUse)
          this.set({ part: r.part, tenant: r.tenant, state: 'idle' }, r.idle)
        }
      },
    })
    new Gauge({
      name: 'gatehouse_pool_waiting',
      help: 'Requests waiting for a connection of a tenant pool',
      labelNames: ['part', 'tenant'],
      registers: [registry],
      collect() {
        this.reset()
        for (const r of tenants()) this.set({ part: r.part, tenant: r.tenant }, r.waiting)
      },
    })
    new Gauge({
      name: 'gatehouse_pool_budget',
      help: 'Connections a part may hold for all tenants together',
      labelNames: ['part'],
      registers: [registry],
      collect() {
        this.reset()
        for (const s of all.values()) this.set({ part: s.part }, s.snapshot().budget)
      },
    })
  }
  sources.set(source.part, source)
}

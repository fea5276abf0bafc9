// Connections of the panel: the shared per-tenant pools keyed by (tenant, connection URL),
// a few connections per key and a bounded number of keys (the least recently used idle one
// is closed), so a panel serving many tenants holds few connections and a changed URL gets
// fresh ones. Idle connections let the process exit.
import { TenantPools, type PoolLike, type TenantPoolsSnapshot } from '../shared/index.js'

export interface PanelPools {
  /** The pool of `url` for `database` (created on first use). */
  get (database: string, url: string): PoolLike
  /** Every key's pool numbers (metrics). */
  snapshot (): TenantPoolsSnapshot
  close (): Promise<void>
}

export function createPanelPools (opts: { max?: number, size?: number, applicationName: string }): PanelPools {
  const max = opts.max ?? 50
  const size = opts.size ?? 2
  const pools = new TenantPools({
    budget: max * size,
    perTenant: size,
    maxTenants: max,
    idleMs: 10_000,
    acquireTimeoutMs: 5_000,
    connectTimeoutMs: 5_000,
    applicationName: opts.applicationName,
    allowExitOnIdle: true
  })
  return {
    get: (database, url) => pools.pool(JSON.stringify([database, url]), url),
    snapshot: () => pools.snapshot(),
    close: () => pools.close()
  }
}

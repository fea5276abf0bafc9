// Small pools for the queries a part runs beside the engines' request traffic (the gateway's
// catalog look-ups, the panel's checks and test queries): a few connections per (database,
// connection URL), a bounded number of such pools (the least recently used idle one is
// closed), idle connections closed after 10 s and never keeping the process alive. A changed
// URL is a new key, so it gets fresh connections. Keys are JSON tuples, never concatenations.
import { TenantPools, type PoolLike, type TenantPoolsOptions, type TenantPoolsSnapshot } from './tenant-pools.js'

export interface SidePoolsOptions {
  /** Most pools kept open. */
  maxPools: number
  /** Connections per pool. */
  poolSize: number
  /** How long a query waits for a connection, and for a new connection to open. */
  timeoutMs: number
  applicationName: string
  /** Further pg.Client settings (statement_timeout, query_timeout, ...). */
  clientConfig?: TenantPoolsOptions['clientConfig']
}

export interface SidePools {
  /** The pool of `url` for `database` (created on first use). */
  get(database: string, url: string): PoolLike
  /** Every pool's numbers (metrics); keys are JSON [database, url]. */
  snapshot(): TenantPoolsSnapshot
  /** Closes every pool. */
  close(): Promise<void>
}

export function createSidePools(opts: SidePoolsOptions): SidePools {
  const pools = new TenantPools({
    budget: opts.maxPools * opts.poolSize,
    perTenant: opts.poolSize,
    maxTenants: opts.maxPools,
    idleMs: 10_000,
    acquireTimeoutMs: opts.timeoutMs,
    connectTimeoutMs: opts.timeoutMs,
    clientConfig: opts.clientConfig,
    applicationName: opts.applicationName,
    allowExitOnIdle: true,
  })
  return {
    get: (database, url) => pools.pool(JSON.stringify([database, url]), url),
    snapshot: () => pools.snapshot(),
    close: () => pools.close(),
  }
}

/** The database of a side pool's key (JSON [database, url]): the tenant label of its metrics. */
export function sidePoolTenant(key: string): string {
  try {
    return String((JSON.parse(key) as unknown[])[0])
  } catch {
    return key
  }
}

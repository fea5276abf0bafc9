// Connection pools of the panel: one small pool per (tenant, connection URL), kept in an
// LRU (the least recently used pool is ended), so a changed URL gets a fresh pool and a
// panel serving many tenants holds few connections. Pools let the process exit when idle.
import pg from 'pg'
import { LRUCache } from 'lru-cache'

export interface PanelPools {
  /** The pool of `url` for `database` (created on first use). */
  get (database: string, url: string): pg.Pool
  close (): Promise<void>
}

export function createPanelPools (opts: { max?: number, size?: number, applicationName: string }): PanelPools {
  const ending = new Set<Promise<void>>()
  const pools = new LRUCache<string, pg.Pool>({
    max: opts.max ?? 50,
    dispose: (pool) => {
      const p = pool.end().catch(() => {})
      ending.add(p)
      void p.then(() => ending.delete(p))
    }
  })
  return {
    get (database, url) {
      const key = JSON.stringify([database, url])
      let pool = pools.get(key)
      if (pool === undefined) {
        pool = new pg.Pool({
          connectionString: url,
          max: opts.size ?? 2,
          idleTimeoutMillis: 10_000,
          connectionTimeoutMillis: 5_000,
          application_name: opts.applicationName,
          allowExitOnIdle: true
        })
        pool.on('error', () => {})
        pools.set(key, pool)
      }
      return pool
    },
    async close () {
      pools.clear()
      await Promise.all([...ending])
    }
  }
}

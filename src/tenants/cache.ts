// The per-process tenant cache (lru-cache with a fetchMethod) in front of a TenantStore.
// Positive entries live until invalidated or the TTL backstop; unknown databases are
// remembered briefly. Invalidation arrives through the store's onChange and is repeated a
// little later to drop a copy an in-flight read may have put back (as Neon's proxy does).
// When the store fails, a cached tenant keeps serving; an uncached one fails loudly (503).
import { LRUCache } from 'lru-cache'
import type { Config } from '../config/index.js'
import { DATABASE_NAME, type Tenant } from './schema.js'
import { ALL_TENANTS, silentLogger, type StoreLogger, type TenantLookup, type TenantStore } from './types.js'
import { TenantStoreUnavailableError } from './errors.js'

export interface TenantCacheOptions {
  /** TTL backstop of a cached tenant, ms (config tenants.cache_ttl_seconds * 1000). Default 60 000. */
  ttlMs?: number
  /** How long an unknown database is remembered, ms; 0 = not at all (config tenants.negative_ttl_seconds * 1000). Default 5000. */
  negativeTtlMs?: number
  /** Most entries kept (config tenants.cache_max). Default 10 000. */
  max?: number
  /** Delay of the second invalidation, ms; 0 disables it (config tenants.reinvalidate_ms). Default 500. */
  reinvalidateMs?: number
  logger?: StoreLogger
  /** Millisecond clock for TTLs (tests). Default performance.now. */
  now?: () => number
}

/** Cache options from the process config's `tenants` section. */
export function tenantCacheOptions (tenants: Pick<Config['tenants'], 'cache_ttl_seconds' | 'negative_ttl_seconds' | 'cache_max' | 'reinvalidate_ms'>): TenantCacheOptions {
  return {
    ttlMs: tenants.cache_ttl_seconds * 1000,
    negativeTtlMs: tenants.negative_ttl_seconds * 1000,
    max: tenants.cache_max,
    reinvalidateMs: tenants.reinvalidate_ms
  }
}

export interface TenantCache extends TenantLookup {
  /** Drops a database now and again after reinvalidateMs (ALL_TENANTS drops all). */
  invalidate (database: string): void
  /** Number of cached entries, negative ones included. */
  readonly size: number
  /** Stops listening to the store and cancels pending re-invalidations; does not close the store. */
  close (): void
}

interface Entry { tenant: Tenant | null }

function deepFreeze<T> (o: T): T {
  if (o && typeof o === 'object' && !Object.isFrozen(o)) {
    Object.freeze(o)
    for (const v of Object.values(o)) deepFreeze(v)
  }
  return o
}

export function createTenantCache (store: TenantStore, opts: TenantCacheOptions = {}): TenantCache {
  const ttlMs = opts.ttlMs ?? 60_000
  const negativeMs = opts.negativeTtlMs ?? 5_000
  const reinvalidateMs = opts.reinvalidateMs ?? 500
  const log = opts.logger ?? silentLogger
  const timers = new Set<NodeJS.Timeout>()
  let degraded = false

  const lru = new LRUCache<string, Entry>({
    max: opts.max ?? 10_000,
    ttl: ttlMs,
    ttlResolution: 0,
    ...(opts.now ? { perf: { now: opts.now } } : {}),
    // A fetch interrupted by an invalidation still answers its callers, but its result
    // is not cached (the slot no longer holds that fetch).
    ignoreFetchAbort: true,
    // Stale on error: a cached tenant keeps serving while the store is down.
    allowStaleOnFetchRejection: true,
    fetchMethod: async (database, stale, { options }) => {
      try {
        const tenant = await store.get(database)
        if (degraded) {
          degraded = false
          log.info?.({ store: store.kind }, 'tenant store reachable again')
        }
        if (tenant === null && negativeMs > 0) options.ttl = negativeMs
        // Shared by every caller of this process: frozen so nobody edits it in place.
        return { tenant: tenant === null ? null : deepFreeze(tenant) }
      } catch (err) {
        if (!degraded) {
          degraded = true
          log.warn({ store: store.kind, err: (err as Error)?.message ?? String(err) },
            'tenant store unreachable: serving cached tenants, uncached databases fail with 503')
        }
        // Only a known tenant is served stale: "not found" must not outlive an outage.
        if (!stale?.tenant) {
          options.allowStaleOnFetchRejection = false
          options.noDeleteOnFetchRejection = false
        }
        throw err
      }
    }
  })

  const drop = (database: string) => {
    if (database === ALL_TENANTS) lru.clear()
    else lru.delete(database)
  }

  const invalidate = (database: string) => {
    drop(database)
    if (reinvalidateMs > 0) {
      const timer = setTimeout(() => { timers.delete(timer); drop(database) }, reinvalidateMs)
      timer.unref()
      timers.add(timer)
    }
  }

  const unsubscribe = store.onChange(invalidate)

  return {
    async get (database) {
      // Strict name check first: an invalid name never reaches the store.
      if (typeof database !== 'string' || !DATABASE_NAME.test(database)) return null
      let entry: Entry | undefined
      try {
        entry = await lru.fetch(database)
      } catch (err) {
        throw new TenantStoreUnavailableError(database, { internal: err })
      }
      if (entry === undefined) throw new TenantStoreUnavailableError(database)
      if (entry.tenant === null && negativeMs === 0) lru.delete(database)
      return entry.tenant
    },
    invalidate,
    get size () { return lru.size },
    close () {
      unsubscribe()
      for (const t of timers) clearTimeout(t)
      timers.clear()
    }
  }
}

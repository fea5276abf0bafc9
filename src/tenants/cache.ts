// The per-process tenant cache (lru-cache with a fetchMethod) in front of a TenantStore.
// Positive entries live until invalidated or the TTL backstop; unknown databases are
// remembered briefly. Invalidation arrives through the store's onChange and is repeated a
// little later to drop a copy an in-flight read may have put back (as Neon's proxy does).
// When the store fails (unreachable, or answering without the data it held: Redis restarted
// empty), every tenant this process resolved before keeps serving from its last good record
// (kept apart from the LRU, so invalidations and TTLs do not drop it) and the state is
// reported (one log line per episode, health() for metrics) until the store answers again;
// a database never resolved fails loudly (503).
import { LRUCache } from 'lru-cache'
import type { Config } from '../config/index.js'
import { DATABASE_NAME, type Tenant } from './schema.js'
import { ALL_TENANTS, silentLogger, type StoreLogger, type TenantLookup, type TenantStore } from './types.js'
import { TenantStoreEmptyError, TenantStoreUnavailableError } from './errors.js'

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
  /** While the store fails, how long a last good record is served before the store is asked again, ms. Default 5000. */
  degradedRetryMs?: number
}

/** What the cache knows of its store (for metrics and readiness). */
export interface TenantStoreHealth {
  /** `ok`; `unreachable` (commands fail); `empty` (the store lost the tenants it held). */
  state: 'ok' | 'unreachable' | 'empty'
  /** Databases with a last good record this process can fall back to. */
  lastGood: number
  /** Look-ups answered from a last good record because the store failed (since start). */
  lastGoodServed: number
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
  /** The store's state as the last look-up saw it. */
  health (): TenantStoreHealth
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
  const degradedRetryMs = Math.min(opts.degradedRetryMs ?? 5_000, ttlMs)
  const max = opts.max ?? 10_000
  const log = opts.logger ?? silentLogger
  const timers = new Set<NodeJS.Timeout>()
  let state: TenantStoreHealth['state'] = 'ok'
  let lastGoodServed = 0
  // The newest record the store gave for each database (insertion order = age, bounded by
  // max). Invalidations leave it: it is only replaced by a newer record or removed when the
  // store, answering normally, says the database is gone.
  const lastGood = new Map<string, Tenant>()

  const remember = (database: string, tenant: Tenant): void => {
    lastGood.delete(database)
    lastGood.set(database, tenant)
    if (lastGood.size > max) lastGood.delete(lastGood.keys().next().value as string)
  }

  const enter = (next: 'unreachable' | 'empty', err: unknown): void => {
    if (state === next) return
    state = next
    const detail = { store: store.kind, lastGood: lastGood.size, err: (err as Error)?.message ?? String(err) }
    if (next === 'empty') {
      const msg = 'tenant store lost its tenants (restarted without persistence?): serving the last good records until `gatehouse tenants apply` restores them'
      if (log.error !== undefined) log.error(detail, msg)
      else log.warn(detail, msg)
    } else {
      log.warn(detail, 'tenant store unreachable: serving the last good records, databases never resolved fail with 503')
    }
  }

  const lru = new LRUCache<string, Entry>({
    max,
    ttl: ttlMs,
    ttlResolution: 0,
    ...(opts.now ? { perf: { now: opts.now } } : {}),
    // A fetch interrupted by an invalidation still answers its callers, but its result
    // is not cached (the slot no longer holds that fetch).
    ignoreFetchAbort: true,
    fetchMethod: async (database, _stale, { options }) => {
      let tenant: Tenant | null
      try {
        tenant = await store.get(database)
      } catch (err) {
        enter(err instanceof TenantStoreEmptyError ? 'empty' : 'unreachable', err)
        const good = lastGood.get(database)
        if (good === undefined) throw err
        // Served from the last good record, asked again soon.
        lastGoodServed++
        options.ttl = degradedRetryMs
        return { tenant: good }
      }
      if (state !== 'ok') {
        log.info?.({ store: store.kind, was: state }, 'tenant store answering again: records are read from it')
        state = 'ok'
      }
      if (tenant === null) {
        lastGood.delete(database)
        if (negativeMs > 0) options.ttl = negativeMs
        return { tenant: null }
      }
      // Shared by every caller of this process: frozen so nobody edits it in place.
      const frozen = deepFreeze(tenant)
      remember(database, frozen)
      return { tenant: frozen }
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
    health () { return { state, lastGood: lastGood.size, lastGoodServed } },
    close () {
      unsubscribe()
      for (const t of timers) clearTimeout(t)
      timers.clear()
    }
  }
}

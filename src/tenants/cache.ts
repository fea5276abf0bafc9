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
import { deepFreeze } from '../shared/index.js'
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
}

/** What the cache knows of its store (for metrics and readiness). */
interface TenantStoreHealth {
  /** `ok`; `unreachable` (commands fail); `empty` (the store lost the tenants it held). */
  state: 'ok' | 'unreachable' | 'empty'
  /** Databases with a last good record this process can fall back to. */
  lastGood: number
  /** Look-ups answered from a last good record because the store failed (since start). */
  lastGoodServed: number
}

/** Cache options from the process config's `tenants` section. */
export function tenantCacheOptions(
  tenants: Pick<Config['tenants'], 'cache_ttl_seconds' | 'negative_ttl_seconds' | 'cache_max' | 'reinvalidate_ms'>,
): TenantCacheOptions {
  return {
    ttlMs: tenants.cache_ttl_seconds * 1000,
    negativeTtlMs: tenants.negative_ttl_seconds * 1000,
    max: tenants.cache_max,
    reinvalidateMs: tenants.reinvalidate_ms,
  }
}

export interface TenantCache extends TenantLookup {
  /** Drops a database now and again after reinvalidateMs (ALL_TENANTS drops all). */
  invalidate(database: string): void
  /** Number of cached entries, negative ones included. */
  readonly size: number
  /** The store's state as the last look-up saw it. */
  health(): TenantStoreHealth
  /** Stops listening to the store and cancels pending re-invalidations; does not close the store. */
  close(): void
}

interface Entry {
  tenant: Tenant | null
}

/** Reports a change of the store's state once per episode. */
function reportState(log: StoreLogger, next: 'unreachable' | 'empty', detail: Record<string, unknown>): void {
  if (next === 'empty') {
    const msg =
      'tenant store lost its tenants (restarted without persistence?): serving the last good records until `gatehouse tenants apply` restores them'
    if (log.error !== undefined) log.error(detail, msg)
    else log.warn(detail, msg)
  } else {
    log.warn(detail, 'tenant store unreachable: serving the last good records, databases never resolved fail with 503')
  }
}

/** The cache: an LRU whose fetch asks the store, the last good records beside it. */
class StoreTenantCache implements TenantCache {
  readonly #store: TenantStore
  readonly #log: StoreLogger
  readonly #negativeMs: number
  readonly #reinvalidateMs: number
  readonly #degradedRetryMs: number
  readonly #max: number
  readonly #timers = new Set<NodeJS.Timeout>()
  #state: TenantStoreHealth['state'] = 'ok'
  #lastGoodServed = 0
  /**
   * The newest record the store gave for each database (insertion order = age, bounded by
   * max). Invalidations leave it: it is only replaced by a newer record or removed when the
   * store, answering normally, says the database is gone.
   */
  readonly #lastGood = new Map<string, Tenant>()
  readonly #lru: LRUCache<string, Entry>
  readonly #unsubscribe: () => void

  constructor(store: TenantStore, opts: TenantCacheOptions) {
    const ttlMs = opts.ttlMs ?? 60_000
    this.#store = store
    this.#log = opts.logger ?? silentLogger
    this.#negativeMs = opts.negativeTtlMs ?? 5_000
    this.#reinvalidateMs = opts.reinvalidateMs ?? 500
    // While the store fails, a last good record is served this long before the store is asked again.
    this.#degradedRetryMs = Math.min(5_000, ttlMs)
    this.#max = opts.max ?? 10_000
    this.#lru = new LRUCache<string, Entry>({
      max: this.#max,
      ttl: ttlMs,
      ttlResolution: 0,
      ...(opts.now ? { perf: { now: opts.now } } : {}),
      // A fetch interrupted by an invalidation still answers its callers, but its result
      // is not cached (the slot no longer holds that fetch).
      ignoreFetchAbort: true,
      fetchMethod: (database, _stale, { options }) => this.#fetch(database, options),
    })
    this.#unsubscribe = store.onChange((database) => {
      this.invalidate(database)
    })
  }

  async get(database: string): Promise<Tenant | null> {
    // Strict name check first: an invalid name never reaches the store.
    if (typeof database !== 'string' || !DATABASE_NAME.test(database)) return null
    let entry: Entry | undefined
    try {
      entry = await this.#lru.fetch(database)
    } catch (err) {
      throw new TenantStoreUnavailableError(database, { internal: err })
    }
    if (entry === undefined) throw new TenantStoreUnavailableError(database)
    if (entry.tenant === null && this.#negativeMs === 0) this.#lru.delete(database)
    return entry.tenant
  }

  cached(database: string): Tenant | null | undefined {
    // Only names get() accepted are ever cached; an entry still being fetched is undefined.
    return this.#lru.get(database)?.tenant
  }

  invalidate(database: string): void {
    this.#drop(database)
    if (this.#reinvalidateMs > 0) {
      const timer = setTimeout(() => {
        this.#timers.delete(timer)
        this.#drop(database)
      }, this.#reinvalidateMs)
      timer.unref()
      this.#timers.add(timer)
    }
  }

  get size(): number {
    return this.#lru.size
  }

  health(): TenantStoreHealth {
    return { state: this.#state, lastGood: this.#lastGood.size, lastGoodServed: this.#lastGoodServed }
  }

  close(): void {
    this.#unsubscribe()
    for (const t of this.#timers) clearTimeout(t)
    this.#timers.clear()
  }

  #drop(database: string): void {
    if (database === ALL_TENANTS) this.#lru.clear()
    else this.#lru.delete(database)
  }

  #remember(database: string, tenant: Tenant): void {
    this.#lastGood.delete(database)
    this.#lastGood.set(database, tenant)
    if (this.#lastGood.size > this.#max) this.#lastGood.delete(this.#lastGood.keys().next().value as string)
  }

  #enter(next: 'unreachable' | 'empty', err: unknown): void {
    if (this.#state === next) return
    this.#state = next
    reportState(this.#log, next, {
      store: this.#store.kind,
      lastGood: this.#lastGood.size,
      err: (err as Error)?.message ?? String(err),
    })
  }

  async #fetch(database: string, options: { ttl?: number }): Promise<Entry> {
    let tenant: Tenant | null
    try {
      tenant = await this.#store.get(database)
    } catch (err) {
      this.#enter(err instanceof TenantStoreEmptyError ? 'empty' : 'unreachable', err)
      const good = this.#lastGood.get(database)
      if (good === undefined) throw err
      // Served from the last good record, asked again soon.
      this.#lastGoodServed++
      options.ttl = this.#degradedRetryMs
      return { tenant: good }
    }
    if (this.#state !== 'ok') {
      this.#log.info?.(
        { store: this.#store.kind, was: this.#state },
        'tenant store answering again: records are read from it',
      )
      this.#state = 'ok'
    }
    if (tenant === null) {
      this.#lastGood.delete(database)
      if (this.#negativeMs > 0) options.ttl = this.#negativeMs
      return { tenant: null }
    }
    // Shared by every caller of this process: frozen so nobody edits it in place.
    const frozen = deepFreeze(tenant)
    this.#remember(database, frozen)
    return { tenant: frozen }
  }
}

export function createTenantCache(store: TenantStore, opts: TenantCacheOptions = {}): TenantCache {
  return new StoreTenantCache(store, opts)
}

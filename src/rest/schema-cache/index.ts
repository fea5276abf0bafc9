// The per-tenant schema cache store: loads a tenant's cache on first use and keeps it
// until the tenant's pool closes. It reloads when
// - a request's transaction read a schema version (platform.schema_version, moved by the
//   DDL event trigger when a transaction that ran DDL commits) newer than the cache's: the
//   requests after that wait for the reload (the one that saw it runs again, see the engine);
// - a `NOTIFY pgrst, 'reload schema'` (or an empty payload) arrives on one of the tenant's
//   pool connections (they LISTEN): PostgREST's convention, for whatever DDL cannot tell;
//   like PostgREST, the reload runs in the background and the requests after it wait for it;
//   `NOTIFY pgrst, 'reload config'` too: the cache holds the request roles' own settings
//   (ALTER ROLE ... SET), which PostgREST rereads on both;
// - a request misses (unknown table, relationship or function), at most once a second.
// A failed reload keeps the old cache in service and is tried again on a request at most
// once per missReloadIntervalMs. Connections come from the source it is given (the executor).
import { SchemaCacheLoadError } from '../errors.js'
import { isBackoffRefusal, loggedConnectFailure } from '../reconnect.js'
import { loadSchemaCacheBatch, type CatalogBatch } from './load.js'
import type { SchemaCache } from './types.js'

export type * from './types.js'
export { qnKey } from './types.js'
export { buildSchemaCache } from './build.js'
export { loadSchemaCache, type CatalogStatement } from './load.js'
export { SCHEMA_VERSION_SQL } from './queries.js'
export { parseViewColumns } from './view-defs.js'

/** How the store reaches one tenant's database. */
export interface CacheSource {
  /** Runs catalog statements in one read-only transaction (one round trip). */
  withCatalog: CatalogBatch
  /** The cluster the database is on: its databases share the server's time zone names. */
  cluster?: () => string
}

interface CacheLogger {
  warn(obj: object, msg?: string): void
}

interface Entry {
  key: string
  schemas: string
  source: CacheSource
  cache: SchemaCache | null
  /** Generation wanted (bumped by notifications, misses, schema list changes). */
  wanted: number
  /** Generation of `cache`. */
  have: number
  loading: Promise<SchemaCache> | null
  /** When the last load ended (or started, while one runs): a miss reloads at most once per interval after it. */
  lastLoadAt: number
  /** When the last load failed (0: it did not). */
  failedAt: number
  /**
   * The last schema version a request read that differed from the cache's, for which a
   * reload was asked ('' when it could not be read): the same news from other requests asks
   * for no further reload.
   */
  reported: string | null
}

let versionCounter = 0

export interface SchemaCacheStore {
  /** The cache of `key` for `schemas`; loads, or waits for a reload that was asked for. */
  get(key: string, schemas: readonly string[], source: CacheSource): Promise<SchemaCache>
  /** After a miss (unknown table or relationship): reloads unless one started in the last second. */
  reloadOnMiss(key: string, schemas: readonly string[], source: CacheSource): Promise<SchemaCache | null>
  /** Forces a reload (tests, admin); null when the tenant has no cache yet. */
  reload(key: string): Promise<SchemaCache | null>
  /**
   * A notification on the pgrst channel: 'reload schema', 'reload config' (the request roles'
   * settings are part of the cache) or an empty payload reloads in the background.
   */
  notified(key: string, payload: string): void
  /**
   * A request's transaction read the database's schema version `version` (null: it could not
   * be read): a cache of another version reloads now, and get() waits for the reload.
   */
  observed(key: string, version: string | null): void
  /** Drops a tenant's cache (its pool was closed). */
  drop(key: string): void
  close(): Promise<void>
}

interface SchemaCacheStoreOptions {
  logger?: CacheLogger
  /** A miss reloads at most once per this interval (default 1 s); so does a reload after a failed one. */
  missReloadIntervalMs?: number
  /** The clock of those intervals (tests inject one; default Date.now). */
  now?: () => number
}

/** At most this many clusters' time zone names are kept. */
const MAX_CLUSTERS = 1_000

export function createSchemaCacheStore(opts: SchemaCacheStoreOptions = {}): SchemaCacheStore {
  return new TenantSchemaCaches(opts)
}

/** The store: one Entry per tenant; a load per entry at a time, asked for again by bumping `wanted`. */
class TenantSchemaCaches implements SchemaCacheStore {
  readonly #entries = new Map<string, Entry>()
  readonly #missInterval: number
  readonly #now: () => number
  readonly #logger: CacheLogger | undefined
  /** pg_timezone_names by cluster: the server's, read once per cluster (it is slow: it reads the zone files). */
  readonly #zonesByCluster = new Map<string, ReadonlySet<string>>()
  #closed = false

  constructor(opts: SchemaCacheStoreOptions) {
    this.#missInterval = opts.missReloadIntervalMs ?? 1_000
    this.#now = opts.now ?? Date.now
    this.#logger = opts.logger
  }

  #startLoad(e: Entry): Promise<SchemaCache> {
    const gen = e.wanted
    e.lastLoadAt = this.#now()
    const schemas = JSON.parse(e.schemas) as string[]
    const cluster = e.source.cluster?.()
    const timezones = e.cache?.timezones ?? (cluster === undefined ? undefined : this.#zonesByCluster.get(cluster))
    const p = loadSchemaCacheBatch(e.source.withCatalog, schemas, ++versionCounter, timezones).then((cache) => {
      e.cache = cache
      e.have = Math.max(e.have, gen)
      e.failedAt = 0
      if (cluster !== undefined) this.#keepZones(cluster, cache)
      return cache
    })
    e.loading = p
    p.then(
      () => {
        e.lastLoadAt = this.#now()
        if (e.loading === p) e.loading = null
        // Asked for again during the load (a notification, another version): load again.
        if (!this.#closed && e.have < e.wanted && this.#entries.get(e.key) === e) this.#startLoad(e).catch(() => {})
      },
      (err: unknown) => {
        if (e.loading === p) e.loading = null
        e.failedAt = this.#now()
        // A database known to be unreachable: the failed connect was logged already (docs/operating.md).
        if (!isBackoffRefusal(err))
          this.#logger?.warn({ err: (err as Error)?.message, tenant: e.key }, 'rest: schema cache load failed')
      },
    )
    return p
  }

  #keepZones(cluster: string, cache: SchemaCache): void {
    if (cache.timezones === undefined || cache.timezones.size === 0 || this.#zonesByCluster.has(cluster)) return
    if (this.#zonesByCluster.size >= MAX_CLUSTERS) this.#zonesByCluster.clear()
    this.#zonesByCluster.set(cluster, cache.timezones)
  }

  async #current(e: Entry): Promise<SchemaCache> {
    const target = e.wanted
    while (!e.cache || e.have < target) {
      try {
        await (e.loading ?? this.#startLoad(e))
      } catch (err) {
        if (e.cache) return e.cache // best effort: keep serving the old cache
        const refusal = new SchemaCacheLoadError({ cause: err, internal: (err as Error)?.message })
        throw isBackoffRefusal(err) ? loggedConnectFailure(refusal) : refusal
      }
    }
    return e.cache
  }

  #requestReload(e: Entry): void {
    e.wanted++
    if (!e.loading) this.#startLoad(e).catch(() => {})
  }

  #entryFor(key: string, schemas: readonly string[], source: CacheSource): Entry {
    const s = JSON.stringify(schemas)
    let e = this.#entries.get(key)
    if (!e) {
      e = {
        key,
        schemas: s,
        source,
        cache: null,
        wanted: 0,
        have: 0,
        loading: null,
        lastLoadAt: 0,
        failedAt: 0,
        reported: null,
      }
      this.#entries.set(key, e)
    } else if (e.schemas !== s) {
      e.schemas = s
      e.source = source
      e.wanted++
    }
    return e
  }

  async get(key: string, schemas: readonly string[], source: CacheSource): Promise<SchemaCache> {
    const e = this.#entryFor(key, schemas, source)
    if (e.cache !== null) {
      if (e.have >= e.wanted) return e.cache
      // A reload failed a moment ago: the old cache serves until the next try is due.
      if (e.loading === null && e.failedAt !== 0 && this.#now() - e.failedAt < this.#missInterval) return e.cache
    }
    return this.#current(e)
  }

  async reloadOnMiss(key: string, schemas: readonly string[], source: CacheSource): Promise<SchemaCache | null> {
    const e = this.#entryFor(key, schemas, source)
    if (!e.loading && this.#now() - e.lastLoadAt < this.#missInterval) return null
    if (!e.loading) e.wanted++
    return this.#current(e)
  }

  async reload(key: string): Promise<SchemaCache | null> {
    const e = this.#entries.get(key)
    if (!e) return null
    e.wanted++
    return this.#current(e)
  }

  notified(key: string, payload: string): void {
    // 'reload config': the request roles' settings, read with the catalog, as PostgREST rereads them.
    if (payload !== '' && payload !== 'reload schema' && payload !== 'reload config') return
    const e = this.#entries.get(key)
    if (e !== undefined && e.cache !== null) this.#requestReload(e)
  }

  observed(key: string, version: string | null): void {
    const e = this.#entries.get(key)
    const v = version ?? ''
    // Any other version than the cache's (a database made again starts lower) is news, once.
    if (e === undefined || e.cache === null || v === e.cache.dbVersion || v === e.reported) return
    e.reported = v
    this.#requestReload(e)
  }

  drop(key: string): void {
    this.#entries.delete(key)
  }

  async close(): Promise<void> {
    this.#closed = true
    const all = [...this.#entries.values()]
    this.#entries.clear()
    await Promise.all(all.map((e) => e.loading?.catch(() => {})))
  }
}

// The per-tenant schema cache store: loads a tenant's cache on first use, keeps one
// LISTEN connection per tenant and reloads on `NOTIFY pgrst, 'reload schema'` (or an
// empty payload), serves the old cache while a reload fails, and reloads on a miss at
// most once a second. Connections come from the source it is given (the executor).
import { SchemaCacheLoadError } from '../errors.js'
import { loadSchemaCache, type CatalogQuery } from './load.js'
import type { SchemaCache } from './types.js'

export type * from './types.js'
export { qnKey, isToOne } from './types.js'
export { buildSchemaCache, loadSchemaCache, type CatalogRows, type CatalogQuery } from './load.js'
export { parseViewColumns } from './view-defs.js'

/** How the store reaches one tenant's database. */
export interface CacheSource {
  /** Runs catalog queries on one connection. */
  withCatalog<T> (fn: (query: CatalogQuery) => Promise<T>): Promise<T>
  /** Starts listening on the pgrst channel; resolves to a closer. */
  listen (onNotify: (payload: string) => void, onLost: () => void): Promise<() => Promise<void>>
}

export interface CacheLogger {
  warn (obj: object, msg?: string): void
  info? (obj: object, msg?: string): void
}

interface Entry {
  key: string
  schemas: string
  source: CacheSource
  cache: SchemaCache | null
  /** Generation wanted (bumped by notifications, lost LISTEN, schema list changes). */
  wanted: number
  /** Generation of `cache`. */
  have: number
  loading: Promise<SchemaCache> | null
  /** When the last load ended (or started, while one runs): a miss reloads at most once per interval after it. */
  lastLoadAt: number
  unlisten: (() => Promise<void>) | null
  listening: boolean
  /** After a failed LISTEN: no new try before this time (ms since epoch), the wait doubling per failure. */
  listenRetryAt: number
  listenRetryMs: number
}

let versionCounter = 0

export interface SchemaCacheStore {
  /** The cache of `key` for `schemas`; loads, or waits for a reload a notification asked for. */
  get (key: string, schemas: readonly string[], source: CacheSource): Promise<SchemaCache>
  /** After a miss (unknown table or relationship): reloads unless one started in the last second. */
  reloadOnMiss (key: string, schemas: readonly string[], source: CacheSource): Promise<SchemaCache | null>
  /** Forces a reload (tests, admin); null when the tenant has no cache yet. */
  reload (key: string): Promise<SchemaCache | null>
  /** Drops a tenant's cache and its LISTEN connection (its pool went idle). */
  drop (key: string): Promise<void>
  close (): Promise<void>
}

export interface SchemaCacheStoreOptions {
  logger?: CacheLogger
  /** A miss reloads at most once per this interval (default 1 s). */
  missReloadIntervalMs?: number
  /**
   * After a LISTEN connection could not be made (too many connections, say), the next try
   * waits this long, doubling per failure up to listenRetryMaxMs (defaults 1 s, 32 s).
   * Requests are served meanwhile; the cache reloads on misses only.
   */
  listenRetryMs?: number
  listenRetryMaxMs?: number
}

export function createSchemaCacheStore (opts: SchemaCacheStoreOptions = {}): SchemaCacheStore {
  const entries = new Map<string, Entry>()
  const missInterval = opts.missReloadIntervalMs ?? 1_000
  const retryFirst = opts.listenRetryMs ?? 1_000
  const retryMax = Math.max(retryFirst, opts.listenRetryMaxMs ?? 32_000)
  let closed = false

  function startLoad (e: Entry): Promise<SchemaCache> {
    const gen = e.wanted
    e.lastLoadAt = Date.now()
    const schemas = JSON.parse(e.schemas) as string[]
    const p = e.source.withCatalog((q) => loadSchemaCache(q, schemas, ++versionCounter, e.cache?.timezones)).then((cache) => {
      e.cache = cache
      e.have = Math.max(e.have, gen)
      return cache
    })
    e.loading = p
    p.then(() => {
      e.lastLoadAt = Date.now()
      if (e.loading === p) e.loading = null
      // A notification arrived during the load: load again.
      if (!closed && e.have < e.wanted && entries.get(e.key) === e) startLoad(e).catch(() => {})
    }, (err: unknown) => {
      if (e.loading === p) e.loading = null
      opts.logger?.warn({ err: (err as Error)?.message, tenant: e.key }, 'rest: schema cache load failed')
    })
    return p
  }

  async function current (e: Entry): Promise<SchemaCache> {
    const target = e.wanted
    while (!e.cache || e.have < target) {
      try {
        await (e.loading ?? startLoad(e))
      } catch (err) {
        if (e.cache) return e.cache // best effort: keep serving the old cache
        throw new SchemaCacheLoadError({ cause: err, internal: (err as Error)?.message })
      }
    }
    return e.cache
  }

  function requestReload (e: Entry): void {
    e.wanted++
    if (!e.loading) startLoad(e).catch(() => {})
  }

  async function ensureListening (e: Entry): Promise<void> {
    if (e.listening || closed) return
    e.listening = true
    try {
      const unlisten = await e.source.listen((payload) => {
        if (payload === '' || payload === 'reload schema') requestReload(e)
      }, () => {
        // The connection is gone: notifications may be missed, so reload on next use.
        e.listening = false
        e.unlisten = null
        e.wanted++
      })
      if (closed || entries.get(e.key) !== e) await unlisten()
      else e.unlisten = unlisten
      // Listening again after refusals: notifications of the time between were missed.
      if (e.listenRetryMs !== 0 && e.cache !== null) requestReload(e)
      e.listenRetryMs = 0
    } catch (err) {
      e.listening = false
      e.listenRetryMs = e.listenRetryMs === 0 ? retryFirst : Math.min(e.listenRetryMs * 2, retryMax)
      e.listenRetryAt = Date.now() + e.listenRetryMs
      opts.logger?.warn({ err: (err as Error)?.message, tenant: e.key }, 'rest: cannot LISTEN for schema reloads')
    }
  }

  function entryFor (key: string, schemas: readonly string[], source: CacheSource): Entry {
    const s = JSON.stringify(schemas)
    let e = entries.get(key)
    if (!e) {
      e = { key, schemas: s, source, cache: null, wanted: 0, have: 0, loading: null, lastLoadAt: 0, unlisten: null, listening: false, listenRetryAt: 0, listenRetryMs: 0 }
      entries.set(key, e)
    } else if (e.schemas !== s) {
      e.schemas = s
      e.source = source
      e.wanted++
    }
    return e
  }

  return {
    async get (key, schemas, source) {
      const e = entryFor(key, schemas, source)
      if (!e.listening && Date.now() >= e.listenRetryAt) void ensureListening(e)
      if (e.cache && e.have >= e.wanted) return e.cache
      return current(e)
    },
    async reloadOnMiss (key, schemas, source) {
      const e = entryFor(key, schemas, source)
      if (!e.loading && Date.now() - e.lastLoadAt < missInterval) return null
      if (!e.loading) e.wanted++
      return current(e)
    },
    async reload (key) {
      const e = entries.get(key)
      if (!e) return null
      e.wanted++
      return current(e)
    },
    async drop (key) {
      const e = entries.get(key)
      if (!e) return
      entries.delete(key)
      await e.unlisten?.()
    },
    async close () {
      closed = true
      const all = [...entries.values()]
      entries.clear()
      await Promise.all(all.map(async (e) => {
        await e.unlisten?.()
        await e.loading?.catch(() => {})
      }))
    }
  }
}

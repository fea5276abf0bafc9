// Types shared by the tenant store modules: the look-up contract every HTTP part depends
// on, the store interface both backends implement, and the small logger shape we accept.
// Importing a type from here never drags in a backend.
import type { Tenant } from './schema.js'

/** What every HTTP part depends on: resolve a database name to its tenant, or null. */
export interface TenantLookup {
  get (database: string): Promise<Tenant | null>
  /** The state of the store behind it, when the look-up knows it (the cache does). */
  health? (): { state: 'ok' | 'unreachable' | 'empty', lastGood: number, lastGoodServed: number }
}

/**
 * Sentinel passed to change listeners when any tenant may have changed (e.g. the
 * subscriber reconnected and may have missed messages, or a memory store reloaded
 * everything). Never a valid database name (DATABASE_NAME forbids `*`).
 */
export const ALL_TENANTS = '*'

/** Called with a database name, or ALL_TENANTS. */
export type ChangeListener = (database: string) => void

/** A tenant backend: Redis (production) or YAML files in memory (embedded default). */
export interface TenantStore extends TenantLookup {
  /** `redis` or `files`. */
  readonly kind: 'redis' | 'files'
  /** The tenant of `database`, or null when there is none. Rejects when the backend is unreachable. */
  get (database: string): Promise<Tenant | null>
  /** All database names, sorted. */
  list (): Promise<string[]>
  /** Writes every tenant (all or nothing where the backend allows), then publishes one change per database. */
  putAll (tenants: Tenant[]): Promise<void>
  /** Removes a tenant and publishes the change; false when there was none. */
  delete (database: string): Promise<boolean>
  /** Listens for changes (this process's and, for Redis, every other process's). Returns an unsubscribe function. */
  onChange (listener: ChangeListener): () => void
  /** Resolves when the backend answers now (Redis PING); rejects naming why not (readiness). */
  ping (): Promise<void>
  /** Closes connections and timers. Idempotent. */
  close (): Promise<void>
}

/** The logger shape we accept (pino fits). */
export interface StoreLogger {
  warn (obj: unknown, msg?: string): void
  info? (obj: unknown, msg?: string): void
  error? (obj: unknown, msg?: string): void
}

export const silentLogger: StoreLogger = { warn () {} }

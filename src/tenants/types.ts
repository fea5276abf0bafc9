// Types shared by the tenant store modules: the look-up contract every HTTP part depends
// on, the store interface both backends implement, and the small logger shape we accept.
// Importing a type from here never drags in a backend.
import type { Tenant } from './schema.js'

/** What every HTTP part depends on: resolve a database name to its tenant, or null. */
export interface TenantLookup {
  get(database: string): Promise<Tenant | null>
  /**
   * What get() would answer, when that is at hand without waiting (the cache holds a fresh
   * entry): the record, or null for a database remembered as unknown; undefined otherwise
   * (then ask get()). A busy gateway reads its tenants this way without a promise per request.
   */
  cached?(database: string): Tenant | null | undefined
  /** The state of the store behind it, when the look-up knows it (the cache does). */
  health?(): { state: 'ok' | 'unreachable' | 'empty'; lastGood: number; lastGoodServed: number }
}

/**
 * Sentinel passed to change listeners when any tenant may have changed (e.g. the
 * subscriber reconnected and may have missed messages, or a memory store reloaded
 * everything). Never a valid database name (DATABASE_NAME forbids `*`).
 */
export const ALL_TENANTS = '*'

/** Called with a database name, or ALL_TENANTS. */
export type ChangeListener = (database: string) => void

/** Tells every listener of a change to `database`; a listener's failure is its own. */
export function notifyListeners(listeners: ReadonlySet<ChangeListener>, database: string): void {
  for (const l of [...listeners]) {
    try {
      l(database)
    } catch {
      /* a listener's failure is its own */
    }
  }
}

/** A record and its version (an opaque string: Redis counts, files hash their content). */
export interface VersionedTenant {
  tenant: Tenant
  version: string
}

/** One control-plane change as the audit trail keeps it (never a secret value). */
export interface AuditEntry {
  at: string
  /** The panel user's subject, or `cli`. */
  who: string
  /** Where it came from: `panel`, `cli`, `apply`, `files` (a tenant file read by the dev stack). */
  via: string
  database: string
  /** What was done: `auth-settings`, `rest-settings`, `rotate`, `revoke`, `retire-legacy`, `apply`, ... */
  action: string
  /** Names of the fields changed (docs/tenant-state.md), never their values. */
  fields: string[]
  old_version: string | null
  new_version: string
}

/** What a write records in the audit trail besides versions and time. */
type AuditInput = Pick<AuditEntry, 'who' | 'via' | 'action' | 'fields'>

export interface WriteOptions {
  audit: AuditInput
  /** The file as applied (Redis: kept for the next apply's three-way merge). */
  lastApplied?: Tenant
}

/** The outcome of a compare-and-set write. */
export type WriteResult =
  { ok: true; version: string; entry: AuditEntry | null } | { ok: false; version: string | null }

/** The audit entries stored as JSON lines; a line that is not one is skipped. */
export function auditEntries(lines: readonly string[]): AuditEntry[] {
  return lines.flatMap((l) => {
    try {
      return l ? [JSON.parse(l) as AuditEntry] : []
    } catch {
      return []
    }
  })
}

/** How many audit entries are kept per database. */
export const AUDIT_KEEP = 100

/** A tenant backend: Redis (production) or YAML files in memory (embedded default). */
export interface TenantStore extends TenantLookup {
  /** `redis` or `files`. */
  readonly kind: 'redis' | 'files'
  /** The tenant of `database`, or null when there is none. Rejects when the backend is unreachable. */
  get(database: string): Promise<Tenant | null>
  /** All database names, sorted. */
  list(): Promise<string[]>
  /** Writes every tenant (all or nothing where the backend allows), then publishes one change per database. */
  putAll(tenants: Tenant[]): Promise<void>
  /** The record with its version, read from the backend itself (never a cached copy). */
  read(database: string): Promise<VersionedTenant | null>
  /**
   * Compare-and-set: writes `next` only while the stored version is still `expected` (null:
   * while there is no record), records the audit entry with it and publishes the change.
   * A revoked key may not come back, nor a tombstone go (TenantStoreConfigError).
   */
  write(database: string, expected: string | null, next: Tenant, opts: WriteOptions): Promise<WriteResult>
  /** The newest audit entries of a database, newest first (at most AUDIT_KEEP). */
  history(database: string): Promise<AuditEntry[]>
  /** The file as last applied (Redis), or null. */
  lastApplied(database: string): Promise<Tenant | null>
  /** Removes a tenant and publishes the change; false when there was none. */
  delete(database: string): Promise<boolean>
  /** Listens for changes (this process's and, for Redis, every other process's). Returns an unsubscribe function. */
  onChange(listener: ChangeListener): () => void
  /** Resolves when the backend answers now (Redis PING); rejects naming why not (readiness). */
  ping(): Promise<void>
  /** Closes connections and timers. Idempotent. */
  close(): Promise<void>
}

/** The logger shape we accept (pino fits). */
export interface StoreLogger {
  warn(obj: unknown, msg?: string): void
  info?(obj: unknown, msg?: string): void
  error?(obj: unknown, msg?: string): void
}

export const silentLogger: StoreLogger = { warn() {} }

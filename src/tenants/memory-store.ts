// The in-memory tenant store: the embedded default (tenants.source = files). Holds the
// tenants of a directory of YAML files (or records put by tests); reload() re-reads the
// directory and notifies listeners of what changed. A change made through write() (the
// panel, the CLI) is written into the tenant file it came from (file-writer.ts), so the file
// stays the truth and the change survives a restart (docs/tenant-state.md). The version of a
// record is a hash of its content; the audit trail and the revocations live in a state
// directory (`<stateDir>/audit.log`, `<stateDir>/revocations.json`), so a revoked key stays
// revoked even when a file is edited to list it again.
import { createHash } from 'node:crypto'
import { appendFileSync, existsSync, mkdirSync, readFileSync } from 'node:fs'
import path from 'node:path'
import { isDeepStrictEqual } from 'node:util'
import { tenantFileEnvironment } from '../config/index.js'
import { writeFileAtomic } from '../shared/index.js'
import { loadTenantFileEntries } from './yaml-loader.js'
import { toTenant, type Tenant, type TenantFile } from './schema.js'
import { TenantStoreConfigError } from './errors.js'
import { writeTenantChanges } from './file-writer.js'
import { keepRevocations } from './fields.js'
import { revivalProblem, revokedKeysListed, type RevokedKey } from './signing-keys.js'
import {
  AUDIT_KEEP,
  auditEntries,
  notifyListeners,
  silentLogger,
  type AuditEntry,
  type ChangeListener,
  type StoreLogger,
  type TenantStore,
  type WriteOptions,
  type WriteResult,
} from './types.js'

export interface MemoryStoreOptions {
  /** A file or directory of tenant files; without it the store starts empty. */
  dir?: string
  /** Values for `${ENV}` in tenant files. */
  env?: NodeJS.ProcessEnv
  /** Initial records (tests). */
  tenants?: Tenant[]
  /**
   * The tenant file a change of `database` is written into; default the file it was read
   * from. null: the change stays in memory (records put by tests).
   */
  fileOf?: (database: string) => string | null
  /** The audit log and revocations; default `<dir>/.gatehouse` (no dir: nothing is kept). */
  stateDir?: string
  /** Told of each text this store wrote into a tenant file, and the text it replaced (the dev stack's watcher skips its own writes). */
  onFileWritten?: (file: string, text: string, previous: string) => void
  logger?: StoreLogger
}

export interface MemoryTenantStore extends TenantStore {
  readonly kind: 'files'
  /** Re-reads the directory (all files validated first; on error nothing changes). Returns the changed databases. */
  reload(): Promise<string[]>
}

/** The version of a record: a hash of its content (keys sorted), the same after a restart. */
function contentVersion(t: Tenant): string {
  const canonical = JSON.stringify(t, (_k, v: unknown) =>
    v && typeof v === 'object' && !Array.isArray(v)
      ? Object.fromEntries(
          Object.entries(v as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)),
        )
      : v,
  )
  return createHash('sha256').update(canonical).digest('hex').slice(0, 20)
}

interface Revocations {
  revoked_keys?: RevokedKey[]
  legacy_secret_retired?: { retired_at: string; retired_by: string }
}

/** The state directory's files: the audit log and the revocations of every database. */
function stateFiles(stateDir: string | undefined) {
  const audit = stateDir === undefined ? undefined : path.join(stateDir, 'audit.log')
  const revocations = stateDir === undefined ? undefined : path.join(stateDir, 'revocations.json')
  const readRevocations = (): Record<string, Revocations> => {
    if (revocations === undefined || !existsSync(revocations)) return {}
    try {
      return JSON.parse(readFileSync(revocations, 'utf8')) as Record<string, Revocations>
    } catch {
      return {}
    }
  }
  const atomicWrite = (file: string, text: string): void => {
    mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 })
    writeFileAtomic(file, text, { mode: 0o600 })
  }
  return {
    readRevocations,
    saveRevocations(database: string, t: Tenant): void {
      if (revocations === undefined) return
      if (t.jwt.revoked_keys === undefined && t.jwt.legacy_secret_retired === undefined) return
      const all = readRevocations()
      all[database] = { revoked_keys: t.jwt.revoked_keys, legacy_secret_retired: t.jwt.legacy_secret_retired }
      atomicWrite(revocations, JSON.stringify(all, null, 2) + '\n')
    },
    readAudit(): AuditEntry[] {
      if (audit === undefined || !existsSync(audit)) return []
      return auditEntries(readFileSync(audit, 'utf8').split('\n'))
    },
    appendAudit(entry: AuditEntry, all: () => AuditEntry[]): void {
      if (audit === undefined) return
      mkdirSync(path.dirname(audit), { recursive: true, mode: 0o700 })
      appendFileSync(audit, JSON.stringify(entry) + '\n', { mode: 0o600 })
      const entries = all()
      const mine = entries.filter((e) => e.database === entry.database)
      if (mine.length <= AUDIT_KEEP) return
      // Keep the newest AUDIT_KEEP of this database.
      const drop = new Set(mine.slice(0, mine.length - AUDIT_KEEP))
      atomicWrite(
        audit,
        entries
          .filter((e) => !drop.has(e))
          .map((e) => JSON.stringify(e) + '\n')
          .join(''),
      )
    },
  }
}

/**
 * The store of the files source: records in memory, read from tenant files, each change
 * written back into its file (comments kept) with its audit entry. The interface's methods
 * are arrow properties: a wrapper made with Object.create(store) (tests) still reaches the
 * instance's state.
 */
class FileTenantStore implements MemoryTenantStore {
  readonly kind = 'files' as const
  readonly #opts: MemoryStoreOptions
  readonly #env: NodeJS.ProcessEnv
  readonly #log: StoreLogger
  readonly #records = new Map<string, Tenant>()
  readonly #sources = new Map<string, string>()
  readonly #listeners = new Set<ChangeListener>()
  readonly #state: ReturnType<typeof stateFiles>
  /** Databases put by the caller (tests), not read from a file. */
  readonly #initial: Set<string>
  #lock: Promise<unknown> = Promise.resolve()

  constructor(opts: MemoryStoreOptions) {
    this.#opts = opts
    this.#env = opts.env ?? tenantFileEnvironment()
    this.#log = opts.logger ?? silentLogger
    this.#state = stateFiles(opts.stateDir ?? (opts.dir === undefined ? undefined : path.join(opts.dir, '.gatehouse')))
    for (const [k, v] of this.#readDir()) this.#records.set(k, v)
    for (const t of opts.tenants ?? []) this.#records.set(t.database, structuredClone(t))
    this.#initial = new Set((opts.tenants ?? []).map((t) => t.database))
  }

  get = async (database: string): Promise<Tenant | null> => {
    const t = this.#records.get(database)
    return t ? structuredClone(t) : null
  }

  read = async (database: string): Promise<{ tenant: Tenant; version: string } | null> => {
    const t = this.#records.get(database)
    return t ? { tenant: structuredClone(t), version: contentVersion(t) } : null
  }

  write = (database: string, expected: string | null, next: Tenant, o: WriteOptions): Promise<WriteResult> =>
    this.#serial(() => this.#write(database, expected, next, o))

  history = async (database: string): Promise<AuditEntry[]> =>
    this.#state
      .readAudit()
      .filter((e) => e.database === database)
      .reverse()
      .slice(0, AUDIT_KEEP)

  lastApplied = async (): Promise<Tenant | null> => null

  ping = async (): Promise<void> => {}

  list = async (): Promise<string[]> => [...this.#records.keys()].sort()

  putAll = async (tenants: Tenant[]): Promise<void> => {
    await this.#serial(() => {
      for (const t of tenants)
        this.#records.set(t.database, this.#revoked(structuredClone(t), this.#fileOf(t.database) ?? t.database))
    })
    for (const t of tenants) notifyListeners(this.#listeners, t.database)
  }

  delete = async (database: string): Promise<boolean> => {
    const had = this.#records.delete(database)
    if (had) notifyListeners(this.#listeners, database)
    return had
  }

  onChange = (listener: ChangeListener): (() => void) => {
    this.#listeners.add(listener)
    return () => {
      this.#listeners.delete(listener)
    }
  }

  reload = async (): Promise<string[]> => {
    const next = this.#readDir()
    const changed: string[] = []
    for (const [k, v] of next) if (!isDeepStrictEqual(this.#records.get(k), v)) changed.push(k)
    for (const k of this.#records.keys()) if (!next.has(k)) changed.push(k)
    this.#records.clear()
    for (const [k, v] of next) this.#records.set(k, v)
    for (const k of changed.sort()) notifyListeners(this.#listeners, k)
    return changed
  }

  close = async (): Promise<void> => {
    this.#listeners.clear()
  }

  /** `t` with every revocation this store knows of (its own record, the state directory). */
  #revoked(t: Tenant, source: string, listed: Tenant['jwt'] | TenantFile['jwt'] = t.jwt): Tenant {
    const kept = this.#state.readRevocations()[t.database]
    let next = t
    const current = this.#records.get(t.database)
    if (current !== undefined) next = keepRevocations(current, next)
    if (kept !== undefined) next = keepRevocations({ ...next, jwt: { ...next.jwt, ...kept } } as Tenant, next)
    for (const { kid } of revokedKeysListed(listed, next.jwt.revoked_keys ?? [])) {
      this.#log.warn(
        { database: t.database, kid, file: source },
        `tenant file ${source} lists signing key ${kid}, which was revoked: it is left out and never verifies again`,
      )
    }
    return next
  }

  #readDir(): Map<string, Tenant> {
    const next = new Map<string, Tenant>()
    if (this.#opts.dir) {
      for (const e of loadTenantFileEntries(this.#opts.dir, this.#env)) {
        next.set(e.file.database, this.#revoked(toTenant(e.file), e.path, e.file.jwt))
        this.#sources.set(e.file.database, e.path)
      }
    }
    return next
  }

  #fileOf(database: string): string | null {
    return this.#opts.fileOf !== undefined ? this.#opts.fileOf(database) : (this.#sources.get(database) ?? null)
  }

  /** Runs `fn` after every earlier write of this store (one writer at a time). */
  #serial<T>(fn: () => T | Promise<T>): Promise<T> {
    const run = this.#lock.then(fn, fn)
    this.#lock = run.catch(() => {})
    return run
  }

  #write(database: string, expected: string | null, next: Tenant, o: WriteOptions): WriteResult {
    const current = this.#records.get(database) ?? null
    const version = current === null ? null : contentVersion(current)
    if (version !== expected) return { ok: false, version }
    const problem = revivalProblem(current?.jwt ?? null, next.jwt)
    if (problem !== null) throw new TenantStoreConfigError(`${database}: ${problem}`)
    if (current !== null) this.#writeFile(database, current, next)
    const stored = structuredClone(next)
    this.#records.set(database, stored)
    this.#state.saveRevocations(database, stored)
    const entry: AuditEntry = {
      at: new Date().toISOString(),
      ...o.audit,
      database,
      old_version: expected,
      new_version: contentVersion(stored),
    }
    this.#state.appendAudit(entry, () => this.#state.readAudit())
    notifyListeners(this.#listeners, database)
    return { ok: true, version: entry.new_version, entry }
  }

  /** A record read from a file is changed there or not at all: never in memory only. */
  #writeFile(database: string, current: Tenant, next: Tenant): void {
    const file = this.#fileOf(database)
    if (file === null && this.#opts.dir !== undefined && !this.#initial.has(database)) {
      throw new TenantStoreConfigError(
        `${database}: its tenant file is gone, so the change cannot be written into it; restore the file and try again`,
      )
    }
    if (file === null) return
    const { text, previous } = writeTenantChanges(file, current, next, this.#env)
    this.#opts.onFileWritten?.(file, text, previous)
  }
}

export function createMemoryStore(opts: MemoryStoreOptions = {}): MemoryTenantStore {
  return new FileTenantStore(opts)
}

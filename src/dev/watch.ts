// The development stack follows its tenant files while it runs: a file created (by
// `gatehouse tenants create`, say) or edited in the source directory is validated, its
// database provisioned or migrated, its generated copy rewritten and its record put into
// the tenant store (whose change notice reaches every part's cache); a removed file takes
// its record out. A file that fails is reported and the database keeps its last good record.
// What the store itself wrote into a file (a panel change, docs/tenant-state.md) is not loaded
// again: the store already holds it, and a reload could briefly put back an older state.
import { watch, existsSync, readFileSync, rmSync, type FSWatcher } from 'node:fs'
import path from 'node:path'
import { parseTenantFile, redactSecrets, toTenant, type TenantFile, type TenantStore } from '../tenants/index.js'
import { ensureTenant, type ConnectionLimits } from '../platform/index.js'
import {
  runtimeTenantRecord,
  writeRuntimeTenantFile,
  tenantSourceFiles,
  TENANT_FILE,
  type DevEngines,
} from './tenant-files.js'

export interface TenantWatcherOptions {
  /** The directory a developer edits (config/tenants). */
  sourceDir: string
  /** The generated copies the store was loaded from (.gatehouse/tenants). */
  runtimeDir: string
  /** Superuser URL of the stack's cluster. */
  adminUrl: string
  /** The logins' CONNECTION LIMITs (config postgres.*_connection_limit). */
  connectionLimits?: ConnectionLimits
  engines: DevEngines
  store: TenantStore
  env: NodeJS.ProcessEnv
  /** What happened, one line each (a file loaded, refused or removed). */
  report(level: 'info' | 'error', message: string, fields: Record<string, unknown>): void
  /** True for a text the store itself wrote into `file` (a panel change): nothing to load. */
  isOwnWrite?: (file: string, text: string) => boolean
  /** How a Redis store takes a file (merged three ways); the files source puts the record. */
  apply?: (entries: Array<{ path: string; file: TenantFile }>) => Promise<void>
  /** A database is served from a file that loaded, or no longer (null: its file went). */
  served?: (database: string, file: TenantFile | null) => void
}

export interface TenantWatcher {
  close(): void
}

/** Quiet period after the last change of a file before it is read (editors write in steps). */
const SETTLE_MS = 100

/** The tenant file watcher: each change settles, then loads in order, one at a time. */
class TenantFileWatcher implements TenantWatcher {
  readonly #opts: TenantWatcherOptions
  /** Source file -> the database it last loaded (to take it out when the file goes). */
  readonly #known = new Map<string, string>()
  readonly #timers = new Map<string, NodeJS.Timeout>()
  #chain: Promise<void> = Promise.resolve()
  #closed = false
  #watcher: FSWatcher | undefined

  constructor(opts: TenantWatcherOptions) {
    this.#opts = opts
    for (const src of tenantSourceFiles(opts.sourceDir)) {
      try {
        this.#known.set(src, runtimeTenantRecord(src, opts.adminUrl, opts.engines).database as string)
      } catch {
        /* reported when it changes */
      }
    }
    try {
      this.#watcher = watch(opts.sourceDir, { persistent: false }, (_event, name) => {
        if (name) this.#schedule(String(name))
      })
      this.#watcher.on('error', (err) => opts.report('error', `watching ${opts.sourceDir} failed: ${err.message}`, {}))
    } catch (err) {
      opts.report(
        'error',
        `cannot watch ${opts.sourceDir}: ${(err as Error).message}; tenant files are read at start only`,
        {},
      )
    }
  }

  close(): void {
    this.#closed = true
    this.#watcher?.close()
    for (const t of this.#timers.values()) clearTimeout(t)
    this.#timers.clear()
  }

  #schedule(name: string): void {
    if (this.#closed || !TENANT_FILE.test(name)) return
    const src = path.join(this.#opts.sourceDir, name)
    clearTimeout(this.#timers.get(src))
    this.#timers.set(
      src,
      setTimeout(() => {
        this.#timers.delete(src)
        this.#chain = this.#chain
          .then(() => this.#load(src))
          .catch((err: unknown) => {
            this.#opts.report(
              'error',
              `tenant file ${src}: ${redactSecrets((err as Error).message, { excerpt: false })}`,
              { file: src },
            )
          })
      }, SETTLE_MS),
    )
  }

  /** Takes `database` out of the store and the generated copies. */
  async #unserve(database: string): Promise<void> {
    await this.#opts.store.delete(database)
    rmSync(path.join(this.#opts.runtimeDir, `${database}.yaml`), { force: true })
    this.#opts.served?.(database, null)
  }

  async #load(src: string): Promise<void> {
    const label = path.relative(process.cwd(), src) || src
    if (!existsSync(src)) return this.#removed(src, label)
    let own = false
    try {
      own = this.#opts.isOwnWrite?.(src, readFileSync(src, 'utf8')) === true
    } catch {
      /* read again below */
    }
    if (own) return
    const file = await this.#provision(src, label)
    if (file === null) return
    const before = this.#known.get(src)
    if (before !== undefined && before !== file.database) await this.#unserve(before)
    this.#known.set(src, file.database)
    const { store, apply } = this.#opts
    if (store.kind === 'redis' && apply !== undefined) await apply([{ path: src, file }])
    else await store.putAll([toTenant(file)])
    this.#opts.served?.(file.database, file)
    this.#opts.report('info', `tenant file ${label} loaded: database ${file.database}`, {
      file: label,
      database: file.database,
    })
  }

  async #removed(src: string, label: string): Promise<void> {
    const database = this.#known.get(src)
    if (database === undefined) return
    this.#known.delete(src)
    await this.#unserve(database)
    this.#opts.report('info', `tenant file ${label} removed: database ${database} is no longer served`, {
      file: label,
      database,
    })
  }

  /** The file validated, its database provisioned or migrated and its generated copy written; null (reported) when it fails. */
  async #provision(src: string, label: string): Promise<TenantFile | null> {
    const { adminUrl, connectionLimits, engines, env, runtimeDir } = this.#opts
    try {
      const raw = runtimeTenantRecord(src, adminUrl, engines)
      const file = parseTenantFile(raw, label, env)
      await ensureTenant({ adminUrl, file, connectionLimits })
      writeRuntimeTenantFile(runtimeDir, raw)
      return file
    } catch (err) {
      const database = this.#known.get(src)
      this.#opts.report(
        'error',
        `tenant file ${label} is not valid: ${redactSecrets((err as Error).message, { excerpt: false })}` +
          (database !== undefined ? ` (database ${database} keeps its last good record)` : ''),
        { file: label, database },
      )
      return null
    }
  }
}

export function watchTenantFiles(opts: TenantWatcherOptions): TenantWatcher {
  return new TenantFileWatcher(opts)
}

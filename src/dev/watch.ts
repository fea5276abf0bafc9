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
import { ensureTenant } from '../platform/index.js'
import { runtimeTenantRecord, writeRuntimeTenantFile, tenantSourceFiles, TENANT_FILE, type DevEngines } from './tenant-files.js'

export interface TenantWatcherOptions {
  /** The directory a developer edits (config/tenants). */
  sourceDir: string
  /** The generated copies the store was loaded from (.gatehouse/tenants). */
  runtimeDir: string
  /** Superuser URL of the stack's cluster. */
  adminUrl: string
  engines: DevEngines
  store: TenantStore
  env: NodeJS.ProcessEnv
  /** What happened, one line each (a file loaded, refused or removed). */
  report (level: 'info' | 'error', message: string, fields: Record<string, unknown>): void
  /** Quiet period after the last change of a file before it is read (editors write in steps). */
  settleMs?: number
  /** True for a text the store itself wrote into `file` (a panel change): nothing to load. */
  isOwnWrite?: (file: string, text: string) => boolean
  /** How a Redis store takes a file (merged three ways); the files source puts the record. */
  apply?: (entries: Array<{ path: string, file: TenantFile }>) => Promise<void>
}

export interface TenantWatcher {
  /** Resolves when every change seen so far has been handled (tests). */
  idle (): Promise<void>
  close (): void
}

export function watchTenantFiles (opts: TenantWatcherOptions): TenantWatcher {
  const settleMs = opts.settleMs ?? 100
  // Source file -> the database it last loaded (to take it out when the file goes).
  const known = new Map<string, string>()
  for (const src of tenantSourceFiles(opts.sourceDir)) {
    try { known.set(src, runtimeTenantRecord(src, opts.adminUrl, opts.engines).database as string) } catch { /* reported when it changes */ }
  }
  const timers = new Map<string, NodeJS.Timeout>()
  let chain: Promise<void> = Promise.resolve()
  let closed = false

  async function load (src: string): Promise<void> {
    const label = path.relative(process.cwd(), src) || src
    if (!existsSync(src)) {
      const database = known.get(src)
      if (database === undefined) return
      known.delete(src)
      await opts.store.delete(database)
      rmSync(path.join(opts.runtimeDir, `${database}.yaml`), { force: true })
      opts.report('info', `tenant file ${label} removed: database ${database} is no longer served`, { file: label, database })
      return
    }
    let own = false
    try { own = opts.isOwnWrite?.(src, readFileSync(src, 'utf8')) === true } catch { /* read again below */ }
    if (own) return
    let file: TenantFile
    try {
      const raw = runtimeTenantRecord(src, opts.adminUrl, opts.engines)
      file = parseTenantFile(raw, label, opts.env)
      await ensureTenant({ adminUrl: opts.adminUrl, file })
      writeRuntimeTenantFile(opts.runtimeDir, raw)
    } catch (err) {
      const database = known.get(src)
      opts.report('error', `tenant file ${label} is not valid: ${redactSecrets((err as Error).message, { excerpt: false })}` +
        (database !== undefined ? ` (database ${database} keeps its last good record)` : ''), { file: label, database })
      return
    }
    const before = known.get(src)
    if (before !== undefined && before !== file.database) {
      await opts.store.delete(before)
      rmSync(path.join(opts.runtimeDir, `${before}.yaml`), { force: true })
    }
    known.set(src, file.database)
    if (opts.store.kind === 'redis' && opts.apply !== undefined) await opts.apply([{ path: src, file }])
    else await opts.store.putAll([toTenant(file)])
    opts.report('info', `tenant file ${label} loaded: database ${file.database}`, { file: label, database: file.database })
  }

  function schedule (name: string): void {
    if (closed || !TENANT_FILE.test(name)) return
    const src = path.join(opts.sourceDir, name)
    clearTimeout(timers.get(src))
    timers.set(src, setTimeout(() => {
      timers.delete(src)
      chain = chain.then(() => load(src)).catch((err: unknown) => {
        opts.report('error', `tenant file ${src}: ${redactSecrets((err as Error).message, { excerpt: false })}`, { file: src })
      })
    }, settleMs))
  }

  let watcher: FSWatcher | undefined
  try {
    watcher = watch(opts.sourceDir, { persistent: false }, (_event, name) => { if (name) schedule(String(name)) })
    watcher.on('error', (err) => opts.report('error', `watching ${opts.sourceDir} failed: ${err.message}`, {}))
  } catch (err) {
    opts.report('error', `cannot watch ${opts.sourceDir}: ${(err as Error).message}; tenant files are read at start only`, {})
  }

  return {
    async idle () {
      while (timers.size > 0) await new Promise((resolve) => setTimeout(resolve, settleMs))
      await chain
    },
    close () {
      closed = true
      watcher?.close()
      for (const t of timers.values()) clearTimeout(t)
      timers.clear()
    }
  }
}

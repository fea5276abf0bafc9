// The in-memory tenant store: the embedded default (tenants.source = files). Holds the
// tenants of a directory of YAML files (or records put by tests); reload() re-reads the
// directory and notifies listeners of what changed. Nothing here survives the process.
import { isDeepStrictEqual } from 'node:util'
import { loadTenantFiles } from './yaml-loader.js'
import { toTenant, type Tenant } from './schema.js'
import { type ChangeListener, type TenantStore } from './types.js'

export interface MemoryStoreOptions {
  /** A file or directory of tenant files; without it the store starts empty. */
  dir?: string
  /** Values for `${ENV}` in tenant files. */
  env?: NodeJS.ProcessEnv
  /** Initial records (tests). */
  tenants?: Tenant[]
}

export interface MemoryTenantStore extends TenantStore {
  readonly kind: 'files'
  /** Re-reads the directory (all files validated first; on error nothing changes). Returns the changed databases. */
  reload (): Promise<string[]>
}

export function createMemoryStore (opts: MemoryStoreOptions = {}): MemoryTenantStore {
  const env = opts.env ?? process.env
  const records = new Map<string, Tenant>()
  const listeners = new Set<ChangeListener>()

  const notify = (database: string) => {
    for (const l of [...listeners]) {
      try { l(database) } catch { /* a listener's failure is its own */ }
    }
  }

  const readDir = (): Map<string, Tenant> => {
    const next = new Map<string, Tenant>()
    if (opts.dir) for (const f of loadTenantFiles(opts.dir, env)) next.set(f.database, toTenant(f))
    return next
  }

  for (const [k, v] of readDir()) records.set(k, v)
  for (const t of opts.tenants ?? []) records.set(t.database, structuredClone(t))

  return {
    kind: 'files',
    async get (database) {
      const t = records.get(database)
      return t ? structuredClone(t) : null
    },
    async ping () {},
    async list () {
      return [...records.keys()].sort()
    },
    async putAll (tenants) {
      for (const t of tenants) records.set(t.database, structuredClone(t))
      for (const t of tenants) notify(t.database)
    },
    async delete (database) {
      const had = records.delete(database)
      if (had) notify(database)
      return had
    },
    onChange (listener) {
      listeners.add(listener)
      return () => { listeners.delete(listener) }
    },
    async reload () {
      const next = readDir()
      const changed: string[] = []
      for (const [k, v] of next) if (!isDeepStrictEqual(records.get(k), v)) changed.push(k)
      for (const k of records.keys()) if (!next.has(k)) changed.push(k)
      records.clear()
      for (const [k, v] of next) records.set(k, v)
      for (const k of changed.sort()) notify(k)
      return changed
    },
    async close () {
      listeners.clear()
    }
  }
}

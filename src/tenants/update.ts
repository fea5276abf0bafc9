// One control-plane change of a tenant record (the panel, the CLI): read the record and its
// version, make the change, write it compare-and-set with its audit entry. A change sent with
// the version it was made on (If-Match) is refused when the record moved on; one sent without
// is made again on the fresh record until it lands, so concurrent changes of different fields
// all land (docs/tenant-state.md). A change that leaves the record invalid (the schema, its
// bounds, the size cap) is refused, naming the fields, before anything is written.
import { tenantRecordProblems, type Tenant } from './schema.js'
import { changedFields } from './fields.js'
import {
  TenantNotInStoreError,
  TenantRecordInvalidError,
  TenantStoreBusyError,
  TenantVersionMismatchError,
} from './errors.js'
import type { AuditEntry, TenantStore } from './types.js'

export interface UpdateOptions {
  /** The panel user's subject, or `cli`. */
  who: string
  via: 'panel' | 'cli'
  action: string
  /** The version the change was made on (an If-Match value; `*` matches any). */
  ifMatch?: string
  /** Throws when the record may not be changed by this caller (the panel: another organization). */
  check?: (t: Tenant) => void
}

/** Writes that lose to concurrent changes are made again at most this often. */
const ATTEMPTS = 200

export interface UpdateResult {
  tenant: Tenant
  version: string
  /** null when the change changed nothing (nothing was written). */
  entry: AuditEntry | null
}

/** Reads, changes and writes `database` (see the file comment). */
export async function updateTenant(
  store: TenantStore,
  database: string,
  change: (current: Tenant) => Tenant | Promise<Tenant>,
  opts: UpdateOptions,
): Promise<UpdateResult> {
  const pinned = opts.ifMatch !== undefined && opts.ifMatch !== '*'
  for (let i = 0; i < ATTEMPTS; i++) {
    const current = await store.read(database)
    if (current === null) throw new TenantNotInStoreError(database)
    opts.check?.(current.tenant)
    if (pinned && opts.ifMatch !== current.version)
      throw new TenantVersionMismatchError(database, opts.ifMatch!, current.version)
    const next = await change(structuredClone(current.tenant))
    const fields = changedFields(current.tenant, next)
    if (fields.length === 0) return { tenant: current.tenant, version: current.version, entry: null }
    const problems = tenantRecordProblems(next)
    if (problems.length > 0) throw new TenantRecordInvalidError(database, problems.join('; '))
    const res = await store.write(database, current.version, next, {
      audit: { who: opts.who, via: opts.via, action: opts.action, fields },
    })
    if (res.ok) return { tenant: next, version: res.version, entry: res.entry }
    if (pinned) throw new TenantVersionMismatchError(database, opts.ifMatch!, res.version)
  }
  throw new TenantStoreBusyError(database, ATTEMPTS)
}

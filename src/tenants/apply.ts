// `tenants apply`, `diff` and `export` over a store (docs/tenant-state.md). Apply merges three
// ways per database (the file now, the file as last applied, the store now): fields the file
// changed since the last apply are taken, fields changed elsewhere are kept, a field changed
// on both sides is a conflict that refuses the whole apply (nothing written) unless forced.
// Each write is compare-and-set; one that loses to a concurrent change is planned again.
import { stringify as toYaml } from 'yaml'
import type { LoadedTenantFile } from './yaml-loader.js'
import { TenantFileSchema, tenantRecordProblems, toTenant, type Tenant } from './schema.js'
import { escapeSecretFields, secretReferences } from './secret-fields.js'
import { changedFields, displayValue, fieldName, fieldsOf, threeWayMerge, type FieldConflict } from './fields.js'
import { mergeTombstones, revokedKeysListed } from './signing-keys.js'
import { TenantApplyConflictError, TenantRecordInvalidError, TenantStoreBusyError } from './errors.js'
import type { AuditEntry, TenantStore } from './types.js'
import { isDeepStrictEqual } from 'node:util'

export interface ApplyPlan {
  database: string
  path: string
  /** The version planned on (null: a new record). */
  expected: string | null
  merged: Tenant
  /** The file's record, kept as the last applied one. */
  fileTenant: Tenant
  /** Fields the write changes in the store. */
  fields: string[]
  /** Fields kept as changed elsewhere since the last apply. */
  kept: string[]
  conflicts: Array<FieldConflict & { by: AuditEntry | null }>
  /** Signing keys the file lists although they are revoked (left out). */
  revokedListed: string[]
  /** True when the store has no record of a last apply of this database. */
  noLastApplied: boolean
}

/** The newest audit entry that changed `field` (or a field under it), or null. */
function lastChangeOf(history: AuditEntry[], field: string): AuditEntry | null {
  return (
    history.find((e) => e.fields.some((f) => f === field || field.startsWith(f + '.') || f.startsWith(field + '.'))) ??
    null
  )
}

/** What applying one file would do now. */
export async function planApply(store: TenantStore, entry: LoadedTenantFile, force: boolean): Promise<ApplyPlan> {
  const database = entry.file.database
  const [current, last] = await Promise.all([store.read(database), store.lastApplied(database)])
  const fileTenant = toTenant(entry.file)
  const tombstones = mergeTombstones(current?.tenant.jwt.revoked_keys, entry.file.jwt.revoked_keys)
  const revokedListed = revokedKeysListed(entry.file.jwt, tombstones).map((r) => r.kid)
  const plan: ApplyPlan = {
    database,
    path: entry.path,
    expected: current?.version ?? null,
    merged: fileTenant,
    fileTenant,
    fields: [],
    kept: [],
    conflicts: [],
    revokedListed,
    noLastApplied: current !== null && last === null,
  }
  if (current === null) {
    plan.fields = changedFields(null, fileTenant)
    return plan
  }
  const m = threeWayMerge(fileTenant, last, current.tenant, force)
  plan.merged = m.merged
  plan.kept = m.kept
  plan.fields = changedFields(current.tenant, m.merged)
  if (m.conflicts.length > 0) {
    const history = await store.history(database)
    plan.conflicts = m.conflicts.map((c) => ({ ...c, by: lastChangeOf(history, c.field) }))
  }
  return plan
}

function who(e: AuditEntry | null): string {
  return e === null ? '' : ` (changed by ${e.who} via ${e.via} at ${e.at})`
}

/** The refusal of an apply with conflicts, naming each field and both values. */
export function conflictMessage(plans: ApplyPlan[]): string {
  const lines = plans.flatMap((p) =>
    p.conflicts.map(
      (c) =>
        `  ${p.database}: ${c.field}: the file says ${c.file}, the store says ${c.store}${who(c.by)}; both changed it since the last apply (then ${c.last})`,
    ),
  )
  return (
    `refused: ${lines.length} field(s) changed both in the tenant files and in the store since the last apply; nothing was written.\n` +
    `${lines.join('\n')}\n` +
    "Bring the store's values into the files (`gatehouse tenants export <database>`) or pass --force to let the files win."
  )
}

/** Refuses a plan whose merged record is not a valid record (a bound or the size cap broken by the merge). */
function checkMerged(plan: ApplyPlan): void {
  const problems = tenantRecordProblems(plan.merged)
  if (problems.length > 0) throw new TenantRecordInvalidError(plan.database, problems.join('; '))
}

export interface ApplyOutcome {
  plan: ApplyPlan
  version: string | null
  written: boolean
}

/**
 * Applies every file (all planned first; any conflict refuses the whole apply unless
 * `force`). Returns what each database got.
 */
export async function applyTenantFiles(
  store: TenantStore,
  entries: LoadedTenantFile[],
  opts: { force?: boolean; who?: string } = {},
): Promise<ApplyOutcome[]> {
  const force = opts.force === true
  const plans = await Promise.all(entries.map((e) => planApply(store, e, force)))
  if (!force && plans.some((p) => p.conflicts.length > 0)) throw new TenantApplyConflictError(conflictMessage(plans))
  plans.forEach(checkMerged)
  const out: ApplyOutcome[] = []
  for (let i = 0; i < plans.length; i++) {
    let plan = plans[i]!
    for (let attempt = 0; ; attempt++) {
      const unchanged = plan.fields.length === 0
      const lastSame = unchanged && isDeepStrictEqual(await store.lastApplied(plan.database), plan.fileTenant)
      if (lastSame) {
        out.push({ plan, version: plan.expected, written: false })
        break
      }
      const res = await store.write(plan.database, plan.expected, plan.merged, {
        audit: { who: opts.who ?? 'cli', via: 'apply', action: 'apply', fields: plan.fields },
        lastApplied: plan.fileTenant,
      })
      if (res.ok) {
        out.push({ plan, version: res.version, written: !unchanged })
        break
      }
      if (attempt >= 20) throw new TenantStoreBusyError(plan.database, attempt + 1)
      // Someone changed the record since it was planned: plan again on what is there now.
      plan = await planApply(store, entries[i]!, force)
      checkMerged(plan)
      if (!force && plan.conflicts.length > 0) throw new TenantApplyConflictError(conflictMessage([plan]))
    }
  }
  return out
}

// ---- diff ------------------------------------------------------------------------------------

export interface DiffRow {
  database: string
  field: string
  file: string
  store: string
  /** Who changed it since the last apply: the file, the store (someone), both, or unknown (no apply recorded). */
  changed: 'file' | 'store' | 'both' | 'unknown' | 'new'
  by: AuditEntry | null
}

/** Field by field, where the store and the files differ. */
export async function diffTenantFiles(store: TenantStore, entries: LoadedTenantFile[]): Promise<DiffRow[]> {
  const rows: DiffRow[] = []
  for (const e of entries) {
    const database = e.file.database
    const [current, last, history] = await Promise.all([
      store.read(database),
      store.lastApplied(database),
      store.history(database),
    ])
    const F = fieldsOf(toTenant(e.file))
    if (current === null) {
      rows.push({ database, field: '(record)', file: e.path, store: '(absent)', changed: 'new', by: null })
      continue
    }
    const S = fieldsOf(current.tenant)
    const L = last === null ? null : fieldsOf(last)
    for (const k of new Set([...F.keys(), ...S.keys()])) {
      const path = (F.get(k) ?? S.get(k))!.path
      const name = fieldName(path)
      const f = F.get(k)?.value
      const s = S.get(k)?.value
      if (isDeepStrictEqual(f, s)) continue
      // A revoked key a file still lists is not a difference an apply would change.
      if (
        name.startsWith('jwt.signing_keys.') &&
        s === undefined &&
        (current.tenant.jwt.revoked_keys ?? []).some((r) => r.kid === path[2])
      )
        continue
      if (name.startsWith('jwt.revoked_keys.') || name.startsWith('jwt.legacy_secret_retired.')) {
        if (f === undefined)
          rows.push({
            database,
            field: name,
            file: '(absent)',
            store: displayValue(path, s),
            changed: 'store',
            by: lastChangeOf(history, name),
          })
        continue
      }
      const l = L?.get(k)?.value
      const changed: DiffRow['changed'] =
        L === null ? 'unknown' : isDeepStrictEqual(f, l) ? 'store' : isDeepStrictEqual(s, l) ? 'file' : 'both'
      rows.push({
        database,
        field: name,
        file: displayValue(path, f),
        store: displayValue(path, s),
        changed,
        by: changed === 'store' || changed === 'both' ? lastChangeOf(history, name) : null,
      })
    }
  }
  return rows
}

/** One diff row as a line. */
export function describeDiffRow(r: DiffRow): string {
  if (r.changed === 'new') return `${r.database}: not in the store (apply adds it from ${r.file})`
  if (r.field === '(record)')
    return `${r.database}: only in the store, no tenant file (apply leaves it; \`tenants export ${r.database}\` writes one)`
  const what = {
    file: 'changed in the file since the last apply (apply takes it)',
    store: `changed in the store since the last apply${who(r.by)} (apply keeps it; export brings it into the file)`,
    both: `CONFLICT: changed in both since the last apply${who(r.by)} (apply refuses it without --force)`,
    unknown: "differs (no last apply recorded: apply takes the file's value)",
  }[r.changed]
  return `${r.database}: ${r.field}: file ${r.file}, store ${r.store}: ${what}`
}

// ---- export ----------------------------------------------------------------------------------

/**
 * The effective record as a tenant file: API keys as their hashes (the store never held
 * more), the signing keys without their derived public JWKs, each field the schema declares
 * secret as a `${ENV}` reference unless `includeSecrets` (the names are returned so the caller
 * can list them), then escaped (`$$`) so that it reads back as itself.
 */
export function exportTenantFile(
  t: Tenant,
  opts: { includeSecrets?: boolean; version?: string } = {},
): { text: string; env: string[] } {
  const inc = opts.includeSecrets === true
  const env: string[] = []
  const record = {
    ...t,
    jwt: {
      ...t.jwt,
      signing_keys: (t.jwt.signing_keys ?? []).map((k) => ({ kid: k.kid, alg: k.alg, private_key: k.private_key })),
    },
  }
  const prefix = t.database.toUpperCase().replace(/[^A-Z0-9]/g, '_')
  const file = inc
    ? escapeSecretFields(TenantFileSchema, record)
    : secretReferences(TenantFileSchema, record, prefix, env)
  const head = [
    `# ${t.database}: exported by \`gatehouse tenants export\`${opts.version !== undefined ? ` (version ${opts.version})` : ''}: the record as the store holds it.`,
    '# keys: the hashes of the API keys (the store holds no more); they work as written.',
    inc
      ? '# Holds the JWT secrets, private keys and database passwords in plain text: keep it out of git.'
      : `# Secrets are \${ENV} references; set ${env.join(', ') || '(none)'} before applying it.`,
  ]
  return { text: head.join('\n') + '\n' + toYaml(JSON.parse(JSON.stringify(file)), { lineWidth: 0 }), env }
}

// A tenant record as a set of fields (docs/tenant-state.md): every leaf of the record by its
// path (`auth.magic_link`, `rest.max_rows`), arrays whole, except the signing keys and their
// tombstones, which are one field per kid (`jwt.signing_keys.<kid>`). What changed between
// two records (the audit trail's field list), the three-way merge of `tenants apply` (file
// now, file as last applied, store now, as `kubectl apply` merges) and values as people may
// see them (secrets masked) are computed on this form. Nothing here does I/O.
import { isDeepStrictEqual } from 'node:util'
import { TenantFileSchema, type Tenant } from './schema.js'
import { isPlainObject, maskUrlPassword } from '../shared/index.js'
import { maskSecretFields, secretAt } from './secret-fields.js'
import { mergeTombstones, withoutRevoked, type TenantSigningKey } from './signing-keys.js'

type Path = readonly string[]
interface Field {
  path: Path
  value: unknown
}

/** Keyed collections: one field per element, named by its kid. */
const KEYED = new Set(['jwt.signing_keys', 'jwt.revoked_keys'])

function keyedValue(collection: string, el: Record<string, unknown>): unknown {
  if (collection === 'jwt.signing_keys') return { alg: el.alg, private_key: el.private_key }
  const { kid: _kid, ...rest } = el
  return rest
}

function walk(value: unknown, path: string[], out: Map<string, Field>): void {
  const dotted = path.join('.')
  if (KEYED.has(dotted) && Array.isArray(value)) {
    for (const el of value as Array<Record<string, unknown>>) {
      const p = [...path, String(el.kid)]
      out.set(JSON.stringify(p), { path: p, value: keyedValue(dotted, el) })
    }
    return
  }
  if (isPlainObject(value)) {
    for (const [k, v] of Object.entries(value)) if (v !== undefined) walk(v, [...path, k], out)
    return
  }
  out.set(JSON.stringify(path), { path, value })
}

/** Every field of a record, keyed by its JSON path. */
export function fieldsOf(t: Tenant): Map<string, Field> {
  const out = new Map<string, Field>()
  walk(t, [], out)
  return out
}

/** A field's name as people read it. */
export function fieldName(path: Path): string {
  return path.join('.')
}

/** The names of the fields that differ between two records, sorted. */
export function changedFields(before: Tenant | null, after: Tenant): string[] {
  const a = before === null ? new Map<string, Field>() : fieldsOf(before)
  const b = fieldsOf(after)
  const names = new Set<string>()
  for (const [k, f] of b) if (!isDeepStrictEqual(a.get(k)?.value, f.value)) names.add(fieldName(f.path))
  for (const [k, f] of a) if (!b.has(k)) names.add(fieldName(f.path))
  return [...names].sort()
}

/**
 * A field's value as it may be printed: a field declared secret in the schema masked (a
 * connection string's password only), the secrets inside a value (a signing key's) too.
 */
export function displayValue(path: Path, value: unknown): string {
  if (value === undefined) return '(absent)'
  const declared = secretAt(TenantFileSchema, path)
  if (declared !== null && typeof value === 'string') return declared.kind === 'url' ? maskUrlPassword(value) : '****'
  if (declared !== null && declared.kind !== 'url') return '****'
  return JSON.stringify(maskSecretFields(TenantFileSchema, value, '****', path))
}

function setPath(target: Record<string, unknown>, path: Path, value: unknown): void {
  let o = target
  for (const k of path.slice(0, -1)) {
    if (!isPlainObject(o[k])) o[k] = {}
    o = o[k] as Record<string, unknown>
  }
  o[path[path.length - 1]!] = structuredClone(value)
}

function deletePath(target: Record<string, unknown>, path: Path): void {
  let o: unknown = target
  for (const k of path.slice(0, -1)) {
    if (!isPlainObject(o)) return
    o = o[k]
  }
  if (isPlainObject(o)) delete o[path[path.length - 1]!]
}

/** One field both sides changed since the last apply (values masked). */
export interface FieldConflict {
  field: string
  file: string
  store: string
  last: string
}

export interface MergeResult {
  merged: Tenant
  /** Fields taken from the file (it changed them since the last apply, or no apply is recorded). */
  fromFile: string[]
  /** Fields kept as the store holds them (changed elsewhere since the last apply). */
  kept: string[]
  /** Fields changed on both sides to different values. */
  conflicts: FieldConflict[]
}

/** What a field of `file` should become, given the last applied file and the store. */
type Verdict = 'same' | 'file' | 'keep' | 'conflict'

function verdict(f: unknown, l: unknown, s: unknown, hasLast: boolean): Verdict {
  if (isDeepStrictEqual(f, s)) return 'same'
  // No apply recorded (kubectl's apply without its annotation): the file sets what it
  // names; what it does not name is kept, since nobody can tell it was removed.
  if (!hasLast) return f === undefined ? 'keep' : 'file'
  if (isDeepStrictEqual(f, l)) return 'keep'
  if (isDeepStrictEqual(s, l)) return 'file'
  return 'conflict'
}

/** Applies one signing-key field of the file to the merged record's list. */
function takeSigningKey(merged: Tenant, file: Tenant, kid: string): void {
  const list = [...(merged.jwt.signing_keys ?? [])]
  const fromFile = (file.jwt.signing_keys ?? []).find((k) => k.kid === kid)
  const at = list.findIndex((k) => k.kid === kid)
  if (fromFile === undefined) {
    if (at >= 0) list.splice(at, 1)
  } else if (at >= 0) list[at] = structuredClone(fromFile) as TenantSigningKey
  else list.push(structuredClone(fromFile) as TenantSigningKey)
  merged.jwt.signing_keys = list
}

/** Leaves no `{}` behind where the file has no object (a section the file removed). */
function prune(merged: Record<string, unknown>, file: Tenant, path: Path): void {
  for (let n = path.length - 1; n > 0; n--) {
    const parent = path.slice(0, n)
    let o: unknown = merged
    for (const k of parent) o = isPlainObject(o) ? o[k] : undefined
    let f: unknown = file
    for (const k of parent) f = isPlainObject(f) ? f[k] : undefined
    if (!isPlainObject(o) || Object.keys(o).length > 0 || f !== undefined) return
    deletePath(merged, parent)
  }
}

/**
 * The three-way merge of `tenants apply`: each field the file changed since `last` (the file
 * as last applied) is taken, each field changed only in the store is kept, a field changed on
 * both sides is a conflict (taken from the file when `force`). Without a last applied file
 * every field the file names comes from it, and fields it does not name are kept. Tombstones and a retired legacy secret are never undone:
 * both sides' are kept, and a revoked key stays out of the merged record.
 */
export function threeWayMerge(file: Tenant, last: Tenant | null, store: Tenant, force = false): MergeResult {
  const F = fieldsOf(file)
  const L = last === null ? new Map<string, Field>() : fieldsOf(last)
  const S = fieldsOf(store)
  const merged = structuredClone(store) as Tenant
  const out: MergeResult = { merged, fromFile: [], kept: [], conflicts: [] }
  const keys = new Set([...F.keys(), ...L.keys(), ...S.keys()])
  for (const k of keys) {
    const path = (F.get(k) ?? L.get(k) ?? S.get(k))!.path
    const name = fieldName(path)
    if (name.startsWith('jwt.revoked_keys.') || name.startsWith('jwt.legacy_secret_retired.')) continue
    const f = F.get(k)?.value
    const s = S.get(k)?.value
    const v = verdict(f, L.get(k)?.value, s, last !== null)
    if (v === 'same') continue
    if (v === 'keep') {
      out.kept.push(name)
      continue
    }
    if (v === 'conflict') {
      out.conflicts.push({
        field: name,
        file: displayValue(path, f),
        store: displayValue(path, s),
        last: displayValue(path, L.get(k)?.value),
      })
      if (!force) continue
    }
    out.fromFile.push(name)
    if (path.length === 3 && path[0] === 'jwt' && path[1] === 'signing_keys') takeSigningKey(merged, file, path[2]!)
    else if (f === undefined) {
      deletePath(merged as unknown as Record<string, unknown>, path)
      prune(merged as unknown as Record<string, unknown>, file, path)
    } else setPath(merged as unknown as Record<string, unknown>, path, f)
  }
  const tombstones = mergeTombstones(store.jwt.revoked_keys, file.jwt.revoked_keys)
  if (tombstones.length > 0) merged.jwt.revoked_keys = tombstones
  const retired = store.jwt.legacy_secret_retired ?? file.jwt.legacy_secret_retired
  if (retired !== undefined) merged.jwt.legacy_secret_retired = structuredClone(retired)
  merged.jwt.signing_keys = withoutRevoked(merged.jwt.signing_keys ?? [], tombstones)
  // A retired legacy secret never signs again: the store's algorithm stays.
  if (retired !== undefined && (merged.jwt.signing_algorithm ?? 'HS256') === 'HS256') {
    merged.jwt.signing_algorithm = store.jwt.signing_algorithm
    out.fromFile = out.fromFile.filter((f) => f !== 'jwt.signing_algorithm')
    if (!out.kept.includes('jwt.signing_algorithm')) out.kept.push('jwt.signing_algorithm')
  }
  for (const list of [out.fromFile, out.kept]) list.sort()
  return out
}

/** `next` with the tombstones and the legacy retirement `current` holds; revoked keys left out. */
export function keepRevocations(current: Tenant, next: Tenant): Tenant {
  const tombstones = mergeTombstones(current.jwt.revoked_keys, next.jwt.revoked_keys)
  const retired = current.jwt.legacy_secret_retired ?? next.jwt.legacy_secret_retired
  if (tombstones.length === 0 && retired === undefined) return next
  return {
    ...next,
    jwt: {
      ...next.jwt,
      signing_keys: withoutRevoked(next.jwt.signing_keys ?? [], tombstones),
      ...(tombstones.length > 0 ? { revoked_keys: tombstones } : {}),
      ...(retired !== undefined ? { legacy_secret_retired: retired } : {}),
    },
  }
}

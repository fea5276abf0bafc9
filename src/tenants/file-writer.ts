// Writes a change of a tenant record back into its tenant file (tenants.source: files; see
// docs/tenant-state.md): only the fields that changed are set or removed, through the `yaml`
// package's Document API, so comments, layout and `${ENV}` references of every other field
// stay as written. A value is written as data: in a field declared secret, where `${ENV}` is
// expanded, every `$` is doubled (`$$`), so it reads back as itself. Removing a setting removes
// its whole entry (no `{}` left behind). The new text must load and hold exactly the change
// (round trip) or nothing is written. The file is replaced atomically: a temporary file beside
// it, fsync, a check that nobody changed the file meanwhile (else the change is made again on
// what is there now), rename, fsync of the directory.
import { closeSync, fsyncSync, openSync, readFileSync, statSync } from 'node:fs'
import path from 'node:path'
import { isMap, isSeq, parseDocument, type Document } from 'yaml'
import { isDeepStrictEqual } from 'node:util'
import { tenantFileEnvironment } from '../config/index.js'
import { ConfigError, writeFileAtomic } from '../shared/index.js'
import { TenantFileRoundTripError, TenantStoreConfigError } from './errors.js'
import { fieldsOf, fieldName } from './fields.js'
import { TenantFileSchema, toTenant, type Tenant } from './schema.js'
import { escapeSecretFields } from './secret-fields.js'
import { parseTenantText } from './yaml-loader.js'

type Change = { path: readonly string[]; value: unknown }

/** The field changes from `before` to `after` (value undefined: removed). */
function changes(before: Tenant, after: Tenant): Change[] {
  const a = fieldsOf(before)
  const b = fieldsOf(after)
  const out: Change[] = []
  for (const [k, f] of b) {
    const old = a.get(k)
    if (old === undefined || JSON.stringify(old.value) !== JSON.stringify(f.value))
      out.push({ path: f.path, value: f.value })
  }
  for (const [k, f] of a) if (!b.has(k)) out.push({ path: f.path, value: undefined })
  return out
}

/** The index of the element with `kid` in a sequence of the document, or -1. */
function indexOfKid(doc: Document, seqPath: string[], kid: string): number {
  const seq = doc.getIn(seqPath, true)
  if (!isSeq(seq)) return -1
  return seq.items.findIndex((item) => isMap(item) && String(item.get('kid')) === kid)
}

function applyKeyed(doc: Document, after: Tenant, c: Change): void {
  const [, collection, kid] = c.path as [string, 'signing_keys' | 'revoked_keys', string]
  const seqPath = ['jwt', collection]
  const at = indexOfKid(doc, seqPath, kid)
  if (c.value === undefined) {
    if (at >= 0) doc.deleteIn([...seqPath, at])
    return
  }
  const el = (after.jwt[collection] ?? []).find((k) => k.kid === kid) as Record<string, unknown> | undefined
  if (el === undefined) return
  const { public_jwk: _derived, ...plain } = el
  const entry = escapeSecretFields(TenantFileSchema, plain, [...seqPath, '0'])
  if (at >= 0) {
    doc.setIn([...seqPath, at], doc.createNode(entry))
    return
  }
  if (isSeq(doc.getIn(seqPath, true))) doc.addIn(seqPath, doc.createNode(entry))
  else doc.setIn(seqPath, doc.createNode([entry]))
}

/** Takes `path` out of the document, and each map above it that it leaves empty and `after` does not hold. */
function removeEntry(doc: Document, after: Tenant, path: readonly string[]): void {
  doc.deleteIn(path as string[])
  for (let n = path.length - 1; n > 0; n--) {
    const parent = path.slice(0, n)
    const node = doc.getIn(parent, true)
    let kept: unknown = after
    for (const k of parent)
      kept = kept !== null && typeof kept === 'object' ? (kept as Record<string, unknown>)[k] : undefined
    if (!isMap(node) || node.items.length > 0 || kept !== undefined) return
    doc.deleteIn(parent)
  }
}

/** `text` with the changes from `before` to `after` made; refuses a change of the API keys. */
function changedTenantText(text: string, file: string, before: Tenant, after: Tenant): string {
  const doc = parseDocument(text)
  if (doc.errors.length > 0)
    throw new TenantStoreConfigError(
      `${file}: not valid YAML, so the change cannot be written into it (line ${doc.errors[0]!.linePos?.[0]?.line ?? '?'})`,
    )
  for (const c of changes(before, after)) {
    if (c.path[0] === 'keys')
      throw new TenantStoreConfigError(
        `${file}: ${fieldName(c.path)} cannot be written back (the store holds only its hash)`,
      )
    if (c.path[0] === 'jwt' && (c.path[1] === 'signing_keys' || c.path[1] === 'revoked_keys') && c.path.length === 3)
      applyKeyed(doc, after, c)
    else if (c.value === undefined) removeEntry(doc, after, c.path)
    else doc.setIn(c.path as string[], doc.createNode(escapeSecretFields(TenantFileSchema, c.value, c.path)))
  }
  return doc.toString({ lineWidth: 0 })
}

function fsyncDir(dir: string): void {
  try {
    const fd = openSync(dir, 'r')
    try {
      fsyncSync(fd)
    } finally {
      closeSync(fd)
    }
  } catch {
    /* not every platform syncs a directory */
  }
}

/** Replaces `file` with `text` atomically when it still holds `expected`; false when it does not. */
function replaceFileIfUnchanged(file: string, expected: string, text: string): boolean {
  const replaced = writeFileAtomic(file, text, {
    mode: statSync(file).mode & 0o777,
    // Checked before the rename: a writer that came between our read and now wins; we redo ours.
    onlyIf: () => readFileSync(file, 'utf8') === expected,
  })
  if (replaced) fsyncDir(path.dirname(file))
  return replaced
}

/** The record a tenant file's text holds, or the problems that keep it from loading. */
function loaded(text: string, file: string, env: NodeJS.ProcessEnv): Map<string, unknown> | string[] {
  try {
    const fields = fieldsOf(toTenant(parseTenantText(text, file, env)))
    return new Map([...fields].map(([k, f]) => [k, f.value]))
  } catch (err) {
    if (err instanceof ConfigError) return err.problems.length > 0 ? err.problems : [err.message]
    throw err
  }
}

/**
 * Refuses `next` unless it loads as the file would be read and holds `after` in every field
 * the change touched or the write moved; a field neither touched differs only as it did
 * before (a revocation kept in the state directory, a revoked key the file still lists).
 */
function checkRoundTrip(
  file: string,
  texts: { text: string; next: string },
  before: Tenant,
  after: Tenant,
  env: NodeJS.ProcessEnv,
): void {
  const now = loaded(texts.next, file, env)
  if (Array.isArray(now)) throw new TenantFileRoundTripError(file, now.join('; '))
  const was = loaded(texts.text, file, env)
  const wanted = fieldsOf(after)
  const had = fieldsOf(before)
  const wrong: string[] = []
  for (const k of new Set([...wanted.keys(), ...now.keys()])) {
    if (isDeepStrictEqual(wanted.get(k)?.value, now.get(k))) continue
    const untouched = isDeepStrictEqual(had.get(k)?.value, wanted.get(k)?.value)
    if (untouched && !Array.isArray(was) && isDeepStrictEqual(was.get(k), now.get(k))) continue
    wrong.push(fieldName(JSON.parse(k) as string[]))
  }
  if (wrong.length > 0) throw new TenantFileRoundTripError(file, `${wrong.sort().join(', ')} would read back otherwise`)
}

/**
 * Writes the change from `before` to `after` into `file` (its `${ENV}` read from `env`);
 * returns the text written and the text it replaced.
 */
export function writeTenantChanges(
  file: string,
  before: Tenant,
  after: Tenant,
  env: NodeJS.ProcessEnv = tenantFileEnvironment(),
): { text: string; previous: string } {
  for (let attempt = 0; attempt < 10; attempt++) {
    const text = readFileSync(file, 'utf8')
    const next = changedTenantText(text, file, before, after)
    if (next === text) return { text, previous: text }
    checkRoundTrip(file, { text, next }, before, after, env)
    if (replaceFileIfUnchanged(file, text, next)) return { text: next, previous: text }
  }
  throw new TenantStoreConfigError(`${file}: changed by another writer at every attempt; try again`)
}

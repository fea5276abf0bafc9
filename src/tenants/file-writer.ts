// Writes a change of a tenant record back into its tenant file (tenants.source: files; see
// docs/tenant-state.md): only the fields that changed are set or removed, through the `yaml`
// package's Document API, so comments, layout and `${ENV}` references of every other field
// stay as written. The file is replaced atomically: a temporary file beside it, fsync, a
// check that nobody changed the file meanwhile (else the change is made again on what is
// there now), rename, fsync of the directory.
import { closeSync, fsyncSync, openSync, readFileSync, renameSync, rmSync, statSync, writeSync } from 'node:fs'
import { randomBytes } from 'node:crypto'
import path from 'node:path'
import { isMap, isSeq, parseDocument, type Document } from 'yaml'
import { TenantStoreConfigError } from './errors.js'
import { fieldsOf, fieldName } from './fields.js'
import type { Tenant } from './schema.js'

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
  const { public_jwk: _derived, ...entry } = el
  if (at >= 0) {
    doc.setIn([...seqPath, at], doc.createNode(entry))
    return
  }
  if (isSeq(doc.getIn(seqPath, true))) doc.addIn(seqPath, doc.createNode(entry))
  else doc.setIn(seqPath, doc.createNode([entry]))
}

/** `text` with the changes from `before` to `after` made; refuses a change of the API keys. */
export function changedTenantText(text: string, file: string, before: Tenant, after: Tenant): string {
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
    else if (c.value === undefined) doc.deleteIn(c.path as string[])
    else doc.setIn(c.path as string[], doc.createNode(c.value))
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
export function replaceFileIfUnchanged(file: string, expected: string, text: string): boolean {
  const dir = path.dirname(file)
  const tmp = path.join(dir, `.${path.basename(file)}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`)
  const fd = openSync(tmp, 'wx', statSync(file).mode & 0o777)
  try {
    writeSync(fd, text)
    fsyncSync(fd)
  } finally {
    closeSync(fd)
  }
  try {
    // Check before rename: a writer that came between our read and now wins; we redo ours.
    if (readFileSync(file, 'utf8') !== expected) {
      rmSync(tmp, { force: true })
      return false
    }
    renameSync(tmp, file)
  } catch (err) {
    rmSync(tmp, { force: true })
    throw err
  }
  fsyncDir(dir)
  return true
}

/** Writes the change from `before` to `after` into `file`; returns the text written and the text it replaced. */
export function writeTenantChanges(file: string, before: Tenant, after: Tenant): { text: string; previous: string } {
  for (let attempt = 0; attempt < 10; attempt++) {
    const text = readFileSync(file, 'utf8')
    const next = changedTenantText(text, file, before, after)
    if (next === text) return { text, previous: text }
    if (replaceFileIfUnchanged(file, text, next)) return { text: next, previous: text }
  }
  throw new TenantStoreConfigError(`${file}: changed by another writer at every attempt; try again`)
}

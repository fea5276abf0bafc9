// The secret fields of the tenant record (docs/tenant-state.md), declared once: a field's
// schema in schema.ts carries `secret: {kind, env}`, and that declaration alone decides where
// an operator's `${ENV}` reference is expanded (nowhere else: a value the panel, the CLI or an
// apply wrote is data), how a value is escaped when it is written into a tenant file, what is
// masked wherever a record is shown (the panel, `tenants show`, `export`, `diff`, apply's
// conflicts) and what an export replaces by a reference. Nothing here does I/O.
import { isPlainObject, maskUrlPassword } from '../shared/index.js'
import type { TSchema } from '@sinclair/typebox'

/**
 * value: the value is a secret; url: a connection URL whose password is; hashed: an API key,
 * of which the store holds only the hash (exported as that hash, which works as written).
 */
type SecretKind = 'value' | 'url' | 'hashed'

export interface SecretDeclaration {
  kind: SecretKind
  /**
   * The name an export writes for it, `${<DATABASE>_<env>}`: `{2}` is the field's path segment
   * 2 (a provider's or an app setting's name), `{2+}` that segment (an index) plus one.
   */
  env?: string
}

/** The schema option that declares a field secret (and every string under it). */
export function secret(kind: SecretKind, env?: string): { secret: SecretDeclaration } {
  return { secret: env === undefined ? { kind } : { kind, env } }
}

type Path = readonly string[]
type StringMap = (s: string, declared: SecretDeclaration | null, path: Path) => string

/** The schema of `key` under `s` (a property, a record's entry, an array's element), or undefined. */
function child(s: TSchema | undefined, key: string): TSchema | undefined {
  if (s === undefined) return undefined
  if (Array.isArray(s.anyOf)) {
    for (const branch of s.anyOf as TSchema[]) {
      const c = child(branch, key)
      if (c !== undefined) return c
    }
    return undefined
  }
  if (s.type === 'array') return s.items as TSchema | undefined
  if (s.type !== 'object') return undefined
  const props = s.properties as Record<string, TSchema> | undefined
  if (props !== undefined && Object.hasOwn(props, key)) return props[key]
  const patterns = s.patternProperties as Record<string, TSchema> | undefined
  if (patterns !== undefined) return Object.values(patterns)[0]
  return isPlainObject(s.additionalProperties) ? (s.additionalProperties as TSchema) : undefined
}

function declarationOf(s: TSchema | undefined): SecretDeclaration | null {
  return (s?.secret as SecretDeclaration | undefined) ?? null
}

function mapWith(s: TSchema | undefined, outer: SecretDeclaration | null, value: unknown, path: Path, fn: StringMap) {
  const declared = declarationOf(s) ?? outer
  if (typeof value === 'string') return fn(value, declared, path)
  if (Array.isArray(value))
    return value.map((v, i): unknown => mapWith(child(s, String(i)), declared, v, [...path, String(i)], fn))
  if (!isPlainObject(value)) return value
  const out: Record<string, unknown> = {}
  for (const [k, v] of Object.entries(value)) out[k] = mapWith(child(s, k), declared, v, [...path, k], fn)
  return out
}

/**
 * `value`, found at `path` of a record of schema `root`, with every string mapped by `fn`,
 * which is told the secret declaration in force there (the string's own field's or an
 * enclosing one's; null: not a secret).
 */
function mapStrings(root: TSchema, value: unknown, fn: StringMap, path: Path = []): unknown {
  const { s, declared } = schemaAt(root, path)
  return mapWith(s, declared, value, path, fn)
}

/** The schema at `path` of `root`, and the declaration in force there (its own field's or an enclosing one's). */
function schemaAt(root: TSchema, path: Path): { s: TSchema | undefined; declared: SecretDeclaration | null } {
  let s: TSchema | undefined = root
  let declared: SecretDeclaration | null = null
  for (const k of path) {
    declared = declarationOf(s) ?? declared
    s = child(s, k)
  }
  return { s, declared: declarationOf(s) ?? declared }
}

/** The declaration in force at `path` (its own field's or an enclosing one's), or null. */
export function secretAt(root: TSchema, path: Path): SecretDeclaration | null {
  return schemaAt(root, path).declared
}

/** The property names that are declared secret (value or hashed), anywhere in `root`. */
export function secretPropertyNames(root: TSchema): string[] {
  const names = new Set<string>()
  const visit = (s: TSchema | undefined): void => {
    if (s === undefined) return
    for (const b of (s.anyOf as TSchema[] | undefined) ?? []) visit(b)
    if (s.type === 'array') visit(s.items as TSchema)
    for (const [k, p] of Object.entries((s.properties as Record<string, TSchema> | undefined) ?? {})) {
      const d = declarationOf(p)
      if (d !== null && d.kind !== 'url') names.add(k)
      visit(p)
    }
    for (const p of Object.values((s.patternProperties as Record<string, TSchema> | undefined) ?? {})) visit(p)
  }
  visit(root)
  return [...names].sort()
}

// `${NAME}` is a reference, `$$` a literal `$` (as docker-compose reads them); any other `$` is itself.
const REFERENCE = /\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)\}/g

/**
 * A tenant file's values as the record holds them: in secret fields, `${NAME}` replaced by
 * `env`'s value (a variable not set is a problem naming the field) and `$$` by `$`; every
 * other field as written.
 */
export function expandSecretFields(root: TSchema, raw: unknown, env: NodeJS.ProcessEnv, problems: string[]): unknown {
  return mapStrings(root, raw, (s, declared, path) => {
    if (declared === null || !s.includes('$')) return s
    return s.replace(REFERENCE, (m, name: string | undefined) => {
      if (name === undefined) return '$'
      const v = env[name]
      if (v !== undefined) return v
      problems.push(`${path.join('.') || '(root)'}: environment variable ${name} is not set`)
      return m
    })
  })
}

/** A value of a secret field as a tenant file must hold it to read back as itself. */
function escaped(s: string): string {
  return s.replace(/\$/g, () => '$$')
}

/** `value` (at `path`) as a tenant file holds it: every `$` of a secret field doubled, others as they are. */
export function escapeSecretFields(root: TSchema, value: unknown, path: Path = []): unknown {
  return mapStrings(root, value, (s, declared) => (declared === null ? s : escaped(s)), path)
}

/** `value` (at `path`) with every secret replaced by `mask` (a URL's password only). */
export function maskSecretFields(root: TSchema, value: unknown, mask: string, path: Path = []): unknown {
  return mapStrings(
    root,
    value,
    (s, declared) => (declared === null ? s : declared.kind === 'url' ? maskUrlPassword(s, mask) : mask),
    path,
  )
}

function envName(declared: SecretDeclaration, path: Path): string {
  const template = declared.env ?? path.join('_')
  return template
    .replace(/\{(\d+)(\+?)\}/g, (_m, i: string, plus: string) => {
      const seg = path[Number(i)] ?? ''
      return plus ? String(Number(seg) + 1) : seg
    })
    .toUpperCase()
    .replace(/[^A-Z0-9]/g, '_')
}

/**
 * A record as a tenant file without its secrets: each one a `${<prefix>_<NAME>}` reference
 * (a URL's password only; hashed keys as their hashes), its name pushed on `names`.
 */
export function secretReferences(root: TSchema, value: unknown, prefix: string, names: string[]): unknown {
  return mapStrings(root, value, (s, declared, path) => {
    if (declared === null) return s
    if (declared.kind === 'hashed') return escaped(s)
    const name = `${prefix}_${envName(declared, path)}`
    if (declared.kind === 'url') {
      const masked = maskUrlPassword(s)
      if (masked === s || !masked.includes(':****@')) return escaped(s)
      names.push(name)
      return escaped(masked).replace(':****@', `:\${${name}}@`)
    }
    names.push(name)
    return `\${${name}}`
  })
}

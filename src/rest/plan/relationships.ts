// Embedding: which relationship `origin?select=target!hint(...)` means (PostgREST's
// findRel, docs/rest-protocol.md §2.2), with PGRST200 when none matches and PGRST201 (300) with the
// candidates when several do. Pure.
import { AmbiguousRelationshipError, NoRelationshipError } from '../errors.js'
import { qnKey, type Relationship, type SchemaCache } from '../schema-cache/types.js'
import { FuzzySet } from './fuzzy.js'

function singleColumn(rel: Relationship, side: 0 | 1): string | null {
  const c = rel.cardinality
  if (c.kind === 'm2m' || c.kind === 'computed' || c.columns.length !== 1) return null
  return c.columns[0][side]
}

function constraintOf(rel: Relationship): string | null {
  const c = rel.cardinality
  return c.kind === 'm2m' || c.kind === 'computed' ? null : c.constraint
}

/** Whether a relationship matches `target` (and `hint`) as PostgREST decides. */
function relationshipMatches(rel: Relationship, target: string, hint: string | null): boolean {
  const card = rel.cardinality.kind
  // A computed relationship is named by its function; hints do not apply.
  if (rel.cardinality.kind === 'computed') return target === rel.cardinality.function.name
  if (rel.isSelf) {
    if (hint === null) {
      // Self reference: the table name selects the O2M side, the FK column the M2O side.
      return (target === rel.foreignTable.name && card === 'o2m') || (singleColumn(rel, 0) === target && card === 'm2o')
    }
    return target === rel.foreignTable.name && card === 'o2m' && singleColumn(rel, 1) === hint
  }
  if (hint === null) {
    return (
      target === rel.foreignTable.name ||
      (!rel.foreignTableIsView && (constraintOf(rel) === target || singleColumn(rel, 0) === target))
    )
  }
  if (target !== rel.foreignTable.name) return false
  return (
    constraintOf(rel) === hint ||
    singleColumn(rel, 0) === hint ||
    singleColumn(rel, 1) === hint ||
    (rel.cardinality.kind === 'm2m' && rel.cardinality.junction.table.name === hint)
  )
}

const CARDINALITY_NAMES = { m2o: 'many-to-one', o2m: 'one-to-many', o2o: 'one-to-one', m2m: 'many-to-many' } as const

/** PGRST201's `details` entry for one candidate. */
function describeRelationship(
  rel: Relationship,
): { cardinality: string; embedding: string; relationship: string } | Record<string, never> {
  const els = (cols: readonly string[]): string => '(' + cols.join(', ') + ')'
  const c = rel.cardinality
  // As PostgREST: two computed relationships can never be ambiguous with each other.
  if (c.kind === 'computed') return {}
  const relationship =
    c.kind === 'm2m'
      ? `${c.junction.table.name} using ${c.junction.constraint1}${els(c.junction.columns1.map((p) => p[1]))} and ${c.junction.constraint2}${els(c.junction.columns2.map((p) => p[1]))}`
      : `${c.constraint} using ${rel.table.name}${els(c.columns.map((p) => p[0]))} and ${rel.foreignTable.name}${els(c.columns.map((p) => p[1]))}`
  return {
    cardinality: CARDINALITY_NAMES[c.kind],
    embedding: `${rel.table.name} with ${rel.foreignTable.name}`,
    relationship,
  }
}

/**
 * PostgREST's suggestion for PGRST200: an origin without relationships gets the closest
 * origin of the schema that has some; else the closest target among its relationships
 * (an exact match suggests nothing: then the embed hint was the problem). An origin whose
 * only relationships go through a junction outside the exposed schemas has relationships
 * for this (PostgREST keeps its key with an empty list), and none to suggest.
 */
function closestRelation(
  cache: SchemaCache,
  schema: string,
  origin: string,
  target: string,
  rels: readonly Relationship[],
): { origin: string } | { target: string } | null {
  if (rels.length === 0) {
    const origins = originsOf(cache, schema)
    if (origins.has(qnKey(schema, origin))) return null
    const o = new FuzzySet([...origins.values()]).getOne(origin)
    return o === null ? null : { origin: o }
  }
  const targets = new FuzzySet(rels.map((r) => r.foreignTable.name))
  const t = targets.get(target).find((m) => m.score < 1)
  return t === undefined ? null : { target: t.value }
}

/** PostgREST's relationship keys for targets in `schema`: the origins, by key, with their names. */
function originsOf(cache: SchemaCache, schema: string): Map<string, string> {
  const origins = new Map<string, string>()
  for (const list of cache.relationships.values()) {
    const r = list.find((x) => x.foreignTable.schema === schema)
    if (r !== undefined) origins.set(qnKey(r.table.schema, r.table.name), r.table.name)
  }
  for (const [o, targetSchema] of cache.hiddenJunctionOrigins ?? []) {
    if (targetSchema === schema) origins.set(qnKey(o.schema, o.name), o.name)
  }
  return origins
}

// -- PostgREST's order of relationships (the derived Ord of its Relationship type) --------

type Cmp = number

/** Text as Haskell compares it: by code points. */
function cmpText(a: string, b: string): Cmp {
  if (a === b) return 0
  const x = [...a]
  const y = [...b]
  for (let i = 0; i < x.length && i < y.length; i++) {
    if (x[i] !== y[i]) return (x[i].codePointAt(0) ?? 0) - (y[i].codePointAt(0) ?? 0)
  }
  return x.length - y.length
}

const cmpBool = (a: boolean, b: boolean): Cmp => Number(a) - Number(b)
const cmpQn = (a: { schema: string; name: string }, b: { schema: string; name: string }): Cmp =>
  cmpText(a.schema, b.schema) || cmpText(a.name, b.name)
function cmpPairs(a: readonly (readonly [string, string])[], b: readonly (readonly [string, string])[]): Cmp {
  for (let i = 0; i < a.length && i < b.length; i++) {
    const c = cmpText(a[i][0], b[i][0]) || cmpText(a[i][1], b[i][1])
    if (c !== 0) return c
  }
  return a.length - b.length
}

/** Constructor order of PostgREST's Cardinality: O2M, M2O, O2O, M2M (computed ones come after every other). */
const CARDINALITY_RANK = { o2m: 0, m2o: 1, o2o: 2, m2m: 3, computed: 4 } as const

function cmpCardinality(a: Relationship['cardinality'], b: Relationship['cardinality']): Cmp {
  const r = CARDINALITY_RANK[a.kind] - CARDINALITY_RANK[b.kind]
  if (r !== 0) return r
  if (a.kind === 'm2m' && b.kind === 'm2m') {
    const x = a.junction
    const y = b.junction
    return (
      cmpQn(x.table, y.table) ||
      cmpText(x.constraint1, y.constraint1) ||
      cmpText(x.constraint2, y.constraint2) ||
      cmpPairs(x.columns1, y.columns1) ||
      cmpPairs(x.columns2, y.columns2)
    )
  }
  if ('constraint' in a && 'constraint' in b) {
    const c = cmpText(a.constraint, b.constraint) || cmpPairs(a.columns, b.columns)
    return c !== 0 || a.kind !== 'o2o' || b.kind !== 'o2o' ? c : cmpBool(a.isParent, b.isParent)
  }
  return 0
}

/**
 * PostgREST's order of the relationships of one origin (it sorts each list of its schema
 * cache): foreign table, self, cardinality (one-to-many, many-to-one, one-to-one,
 * many-to-many, then constraint and columns), views; computed relationships last, by function.
 */
function compareRelationships(a: Relationship, b: Relationship): Cmp {
  const ca = a.cardinality
  const cb = b.cardinality
  if (ca.kind === 'computed' || cb.kind === 'computed') {
    if (ca.kind !== 'computed') return -1
    if (cb.kind !== 'computed') return 1
    return (
      cmpQn(ca.function, cb.function) ||
      cmpQn(a.table, b.table) ||
      cmpQn(a.foreignTable, b.foreignTable) ||
      cmpBool(ca.toOne, cb.toOne) ||
      cmpBool(a.isSelf, b.isSelf)
    )
  }
  return (
    cmpQn(a.table, b.table) ||
    cmpQn(a.foreignTable, b.foreignTable) ||
    cmpBool(a.isSelf, b.isSelf) ||
    cmpCardinality(ca, cb) ||
    cmpBool(a.tableIsView, b.tableIsView) ||
    cmpBool(a.foreignTableIsView, b.foreignTableIsView)
  )
}

/** The one relationship from `origin` (in `schema`) for `target!hint`, or PGRST200 / PGRST201. */
export function findRelationship(
  cache: SchemaCache,
  schema: string,
  origin: string,
  target: string,
  hint: string | null,
): Relationship {
  // As PostgREST, which keys its relationships by origin and the target's schema: only
  // targets in the request's schema are candidates.
  const all = (cache.relationships.get(qnKey(schema, origin)) ?? []).filter((r) => r.foreignTable.schema === schema)
  const found = all.filter((r) => relationshipMatches(r, target, hint)).sort(compareRelationships)
  if (found.length === 1) return found[0]
  if (found.length === 0) {
    throw new NoRelationshipError(
      origin,
      target,
      hint,
      schema,
      closestRelation(cache, schema, origin, target, [...all].sort(compareRelationships)),
    )
  }
  const hints = found.map((r) => {
    const c = r.cardinality
    // As PostgREST: a computed relationship contributes an empty entry.
    if (c.kind === 'computed') return ''
    return `'${r.foreignTable.name}!${c.kind === 'm2m' ? c.junction.table.name : c.constraint}'`
  })
  throw new AmbiguousRelationshipError(origin, target, {
    hint: `Try changing '${target}' to one of the following: ${hints.join(', ')}. Find the desired relationship in the 'details' key.`,
    extra: { details: found.map(describeRelationship) },
  })
}

// Relationships of the schema cache (PostgREST's SchemaCache relationship inference):
// every foreign key gives many-to-one / one-to-many (one-to-one when the key columns are
// the PK or unique), repeated for the views that expose the key columns, and two
// many-to-one keys of a junction whose PK covers them give many-to-many. Pure.
import { qnKey, type ColumnPairs, type QualifiedName, type Relationship } from './types.js'

/** A relation that can stand for a base table: the table itself or a view over it. */
export interface Stand {
  readonly qn: QualifiedName
  readonly isView: boolean
  /** Base column -> this relation's column. */
  readonly map: ReadonlyMap<string, string>
}

export interface ForeignKey {
  readonly name: string
  readonly table: number
  readonly foreignTable: number
  readonly columns: readonly string[]
  readonly foreignColumns: readonly string[]
}

interface RelationshipInput {
  readonly foreignKeys: readonly ForeignKey[]
  /** The exposed relations standing for a base table's given columns (the table, views). */
  readonly standsFor: (baseOid: number, columns: readonly string[]) => Stand[]
  /** Whether `columns` of the base table are its PK or one of its unique keys. */
  readonly isUniqueKey: (baseOid: number, columns: readonly string[]) => boolean
  /** PK columns of an exposed relation (views: mapped from the base table). */
  readonly pkOf: (qn: QualifiedName) => readonly string[]
}

const same = (a: QualifiedName, b: QualifiedName): boolean => a.schema === b.schema && a.name === b.name

function mapPairs(
  pairs: ColumnPairs,
  left: ReadonlyMap<string, string>,
  right: ReadonlyMap<string, string>,
): ColumnPairs {
  return pairs.map(([a, b]) => [left.get(a) as string, right.get(b) as string] as const)
}

const swap = (pairs: ColumnPairs): ColumnPairs => pairs.map(([a, b]) => [b, a] as const)

/** All relationships (both directions, plus many-to-many), unordered. */
export function inferRelationships(input: RelationshipInput): Relationship[] {
  const out: Relationship[] = []
  const m2o: Relationship[] = []
  for (const fk of input.foreignKeys) {
    const o2o = input.isUniqueKey(fk.table, fk.columns)
    for (const [child, parent] of keyRelationships(fk, o2o, input)) {
      out.push(child, parent)
      if (!o2o) m2o.push(child)
    }
  }
  return out.concat(junctionRelationships(m2o, input))
}

/** Both directions of one foreign key, for every pair of relations standing for its two tables. */
function keyRelationships(
  fk: ForeignKey,
  o2o: boolean,
  input: RelationshipInput,
): Array<[child: Relationship, parent: Relationship]> {
  const basePairs: ColumnPairs = fk.columns.map((c, i) => [c, fk.foreignColumns[i]] as const)
  const targets = input.standsFor(fk.foreignTable, fk.foreignColumns)
  return input.standsFor(fk.table, fk.columns).flatMap((s) =>
    targets.map((t): [Relationship, Relationship] => {
      const pairs = mapPairs(basePairs, s.map, t.map)
      const isSelf = same(s.qn, t.qn)
      const child: Relationship = {
        table: s.qn,
        foreignTable: t.qn,
        isSelf,
        cardinality: o2o
          ? { kind: 'o2o', constraint: fk.name, columns: pairs, isParent: false }
          : { kind: 'm2o', constraint: fk.name, columns: pairs },
        tableIsView: s.isView,
        foreignTableIsView: t.isView,
      }
      const parent: Relationship = {
        table: t.qn,
        foreignTable: s.qn,
        isSelf,
        cardinality: o2o
          ? { kind: 'o2o', constraint: fk.name, columns: swap(pairs), isParent: true }
          : { kind: 'o2m', constraint: fk.name, columns: swap(pairs) },
        tableIsView: t.isView,
        foreignTableIsView: s.isView,
      }
      return [child, parent]
    }),
  )
}

/** Many-to-many: two different many-to-one keys of one junction, both inside its PK. */
function junctionRelationships(m2o: readonly Relationship[], input: RelationshipInput): Relationship[] {
  const byJunction = new Map<string, Relationship[]>()
  for (const r of m2o) {
    const k = qnKey(r.table.schema, r.table.name)
    const list = byJunction.get(k)
    if (list) list.push(r)
    else byJunction.set(k, [r])
  }
  const out: Relationship[] = []
  for (const rels of byJunction.values()) {
    const pk = new Set(rels.length < 2 ? [] : input.pkOf(rels[0].table))
    if (pk.size === 0) continue
    for (const r1 of rels) {
      for (const r2 of rels) {
        const m2m = manyToMany(r1, r2, pk)
        if (m2m !== null) out.push(m2m)
      }
    }
  }
  return out
}

/** The many-to-many relationship through the junction of `r1` and `r2`, or null when they do not make one. */
function manyToMany(r1: Relationship, r2: Relationship, pk: ReadonlySet<string>): Relationship | null {
  if (r1 === r2 || r1.cardinality.kind !== 'm2o' || r2.cardinality.kind !== 'm2o') return null
  if (r1.cardinality.constraint === r2.cardinality.constraint) return null
  const jcols = [...r1.cardinality.columns.map(([j]) => j), ...r2.cardinality.columns.map(([j]) => j)]
  if (!jcols.every((c) => pk.has(c))) return null
  return {
    table: r1.foreignTable,
    foreignTable: r2.foreignTable,
    isSelf: same(r1.foreignTable, r2.foreignTable),
    cardinality: {
      kind: 'm2m',
      junction: {
        table: r1.table,
        constraint1: r1.cardinality.constraint,
        constraint2: r2.cardinality.constraint,
        columns1: swap(r1.cardinality.columns),
        columns2: swap(r2.cardinality.columns),
      },
    },
    tableIsView: r1.foreignTableIsView,
    foreignTableIsView: r2.foreignTableIsView,
  }
}

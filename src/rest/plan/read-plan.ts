// ApiRequest + SchemaCache -> ReadNode tree (PostgREST's readPlan): a chain of small
// passes over a draft tree: build from select -> filters -> orders -> ranges -> logic
// trees -> relationships -> fields and aliases -> related orders -> null-embed filters
// -> to-many spreads -> max rows. Pure; unknown tables and relationships are rejected
// here (PGRST2xx) before any SQL exists. Unknown columns are left to Postgres (42703).
import {
  AggregatesNotAllowedError, NotEmbeddedError, NotImplementedError, RelatedOrderNotToOneError, TableNotFoundError
} from '../errors.js'
import { capRange, intersectRanges, rangeOf } from '../api-request/range.js'
import type {
  ApiRequest, EmbedPath, Field, Filter, LogicTree, OrderTerm, RowRange, SelectField, SelectItem
} from '../api-request/types.js'
import { isToOne, qnKey, type QualifiedName, type Relationship, type SchemaCache, type Table } from '../schema-cache/types.js'
import { findRelationship } from './relationships.js'
import type {
  CoercibleField, Condition, JoinCondition, PlannedOrder, Qualifier, ReadNode, SelectColumn, Spread
} from './types.js'

export interface ReadPlanOptions {
  /** Tenant max_rows: caps every node's range. */
  maxRows: number | null
}

/** The mutable tree the passes work on. */
interface Draft {
  from: QualifiedName
  alias: string | null
  depth: number
  relName: string
  relAlias: string | null
  hint: string | null
  joinType: 'inner' | 'left' | null
  isSpread: boolean
  aggAlias: string
  relationship: Relationship | null
  junction: QualifiedName | null
  joinConditions: JoinCondition[]
  fields: SelectField[]
  filters: Filter[]
  logic: LogicTree[]
  order: OrderTerm[]
  range: RowRange
  children: Draft[]
}

export function findTable (cache: SchemaCache, schema: string, name: string): Table {
  const t = cache.tables.get(qnKey(schema, name))
  if (!t) throw new TableNotFoundError(schema, name, { hint: null })
  return t
}

function newDraft (from: QualifiedName, depth: number, relName: string): Draft {
  return {
    from, alias: null, depth, relName, relAlias: null, hint: null, joinType: null, isSpread: false, aggAlias: '',
    relationship: null, junction: null, joinConditions: [], fields: [], filters: [], logic: [], order: [],
    range: { offset: 0, limit: null }, children: []
  }
}

// -- pass: select -> tree -------------------------------------------------------------

function buildTree (node: Draft, items: readonly SelectItem[], schema: string): void {
  for (const item of items) {
    if (item.kind === 'field') {
      node.fields.push(item)
      continue
    }
    const child = newDraft({ schema, name: item.name }, node.depth + 1, item.name)
    child.hint = item.hint
    child.joinType = item.joinType
    if (item.kind === 'relation') child.relAlias = item.alias
    else child.isSpread = true
    buildTree(child, item.children, schema)
    node.children.push(child)
  }
}

// -- passes: scoped parameters ----------------------------------------------------------

const embedName = (d: Draft): string => d.relAlias ?? d.relName

/** The node an embed path names; legacy: an aliased embed may be named by its table. */
function nodeAt (root: Draft, path: EmbedPath): Draft {
  let node = root
  for (const seg of path) {
    const next = node.children.find((c) => embedName(c) === seg) ?? node.children.find((c) => c.relAlias !== null && c.relName === seg)
    if (!next) throw notEmbedded(seg)
    node = next
  }
  return node
}

function notEmbedded (name: string): Error {
  return new NotEmbeddedError(name, { hint: `Verify that '${name}' is included in the 'select' query parameter.` })
}

// -- pass: relationships ------------------------------------------------------------------

function qualifierOf (d: Draft): Qualifier {
  return d.alias ? { kind: 'alias', name: d.alias } : { kind: 'table', schema: d.from.schema, name: d.from.name }
}

function addRels (node: Draft, root: Draft, cache: SchemaCache, schema: string): void {
  for (const child of node.children) {
    const origin = node.from.name
    const rel = findRelationship(cache, schema, origin, child.relName, child.hint)
    child.relationship = rel
    child.from = rel.foreignTable
    child.aggAlias = `${rel.table.name}_${embedName(child)}_${child.depth}`
    const parentQ = qualifierOf(node)
    const c = rel.cardinality
    if (c.kind === 'm2m') {
      child.alias = null
      child.junction = c.junction.table
      const j: Qualifier = { kind: 'table', schema: c.junction.table.schema, name: c.junction.table.name }
      const target: Qualifier = { kind: 'table', schema: rel.foreignTable.schema, name: rel.foreignTable.name }
      child.joinConditions = [
        ...c.junction.columns2.map(([col, jcol]) => ({ left: [j, jcol] as const, right: [target, col] as const })),
        ...c.junction.columns1.map(([col, jcol]) => ({ left: [j, jcol] as const, right: [parentQ, col] as const }))
      ]
    } else {
      child.alias = `${rel.foreignTable.name}_${child.depth}`
      const childQ: Qualifier = { kind: 'alias', name: child.alias }
      child.joinConditions = c.columns.map(([col, fcol]) => ({ left: [childQ, fcol] as const, right: [parentQ, col] as const }))
    }
    addRels(child, root, cache, schema)
  }
}

// -- pass: fields ---------------------------------------------------------------------------

const JSON_TYPES = new Set(['json', 'jsonb'])

/** Resolves a field against its table's columns (unknown columns: to_jsonb for paths, no to_tsvector). */
function coerce (table: Table | undefined, field: Field, fts: { language: string | null } | null = null): CoercibleField {
  const col = table?.columnsByName.get(field.name)
  if (!col) return { name: field.name, jsonPath: field.jsonPath, toJson: true, toTsVector: null }
  if (JSON_TYPES.has(col.baseType)) return { name: field.name, jsonPath: field.jsonPath, toJson: false, toTsVector: fts }
  if (col.baseType === 'tsvector') return { name: field.name, jsonPath: field.jsonPath, toJson: true, toTsVector: null }
  return { name: field.name, jsonPath: field.jsonPath, toJson: true, toTsVector: fts }
}

/** Output key of an unaliased JSON path selection: its last key (spec §2.1). */
function jsonPathAlias (field: Field): string | null {
  if (field.jsonPath.length === 0) return null
  for (let i = field.jsonPath.length - 1; i >= 0; i--) {
    const op = field.jsonPath[i].operand
    if (op.kind === 'key') return op.key
  }
  return field.name
}

function toCondition (table: Table | undefined, f: Filter): Condition {
  const op = f.opExpr.operation
  const fts = op.kind === 'fts' ? { language: op.language } : null
  return { kind: 'filter', field: coerce(table, f.field, fts), opExpr: f.opExpr }
}

function logicToCondition (table: Table | undefined, t: LogicTree): Condition {
  if (t.kind === 'expr') return toCondition(table, t.filter)
  return { kind: 'logic', op: t.op, negated: t.negated, children: t.children.map((c) => logicToCondition(table, c)) }
}

// -- finishing: drafts -> ReadNode -----------------------------------------------------------

interface Finish { cache: SchemaCache, maxRows: number | null }

function finish (d: Draft, ctx: Finish): ReadNode {
  const table = ctx.cache.tables.get(qnKey(d.from.schema, d.from.name))
  if (d.fields.some((f) => f.aggregate !== null)) throw new AggregatesNotAllowedError()

  const children = d.children.map((c) => finish(c, ctx))
  const childByName = (name: string): ReadNode | undefined =>
    children.find((c) => (c.relAlias ?? c.relName) === name) ?? children.find((c) => c.relAlias !== null && c.relName === name)

  // select: fields with their aliases; `*` stays `*` except in to-many spreads (each column is aggregated)
  const toManySpread = d.isSpread && d.relationship !== null && !isToOne(d.relationship)
  let fields = d.fields
  if (toManySpread && table && fields.some((f) => f.field.name === '*' && f.field.jsonPath.length === 0)) {
    fields = fields.flatMap((f) => f.field.name === '*' && f.field.jsonPath.length === 0
      ? table.columns.map((c): SelectField => ({ kind: 'field', field: { name: c.name, jsonPath: [] }, alias: null, cast: null, aggregate: null, aggregateCast: null }))
      : [f])
  }
  const select: SelectColumn[] = fields.map((f) => ({
    field: coerce(table, f.field),
    alias: f.alias ?? jsonPathAlias(f.field),
    cast: f.cast
  }))

  // where: filters and logic trees; `rel=is.null` / `rel=not.is.null` on an embed test its lateral row
  const nullEmbed = (c: Condition): Condition => {
    if (c.kind === 'logic') return { ...c, children: c.children.map(nullEmbed) }
    if (c.kind !== 'filter' || c.field.jsonPath.length !== 0) return c
    const op = c.opExpr.operation
    if (op.kind !== 'is' || op.value !== 'null') return c
    const child = children.find((x) => (x.relAlias ?? x.relName) === c.field.name)
    if (!child) return c
    return { kind: 'null-embed', notNull: c.opExpr.negated, aggAlias: child.aggAlias, child }
  }
  const where: Condition[] = [
    ...d.filters.map((f) => toCondition(table, f)),
    ...d.logic.map((t) => logicToCondition(table, t))
  ].map(nullEmbed)

  // order, with related orders resolved to a to-one embed's lateral alias
  let order: PlannedOrder[] = d.order.map((t): PlannedOrder => {
    if (t.kind === 'field') return { kind: 'field', field: coerce(table, t.field), direction: t.direction, nulls: t.nulls }
    const child = childByName(t.relation)
    if (!child) throw notEmbedded(t.relation)
    if (!child.relationship || !isToOne(child.relationship)) {
      throw new RelatedOrderNotToOneError(t.relation, {
        details: `'${d.from.name}' and '${t.relation}' do not form a many-to-one or one-to-one relationship`
      })
    }
    return {
      kind: 'related',
      aggAlias: child.aggAlias,
      field: { name: t.field.name, jsonPath: t.field.jsonPath, toJson: false, toTsVector: null },
      direction: t.direction,
      nulls: t.nulls
    }
  })

  // to-many spread: order columns are selected under generated names and ordered inside json_agg
  let spread: Spread | null = null
  if (d.isSpread) {
    if (!toManySpread) {
      spread = { kind: 'to-one' }
    } else {
      const orderSelects: SelectColumn[] = []
      const spreadOrder: PlannedOrder[] = order.map((o, i) => {
        if (o.kind !== 'field') {
          throw new NotImplementedError({ details: 'Related orders are not implemented inside one-to-many or many-to-many spreads.' })
        }
        const alias = `${d.aggAlias}_${o.field.name}_${i + 1}`
        orderSelects.push({ field: o.field, alias, cast: null })
        return { kind: 'field', field: { name: alias, jsonPath: [], toJson: false, toTsVector: null }, direction: o.direction, nulls: o.nulls }
      })
      spread = { kind: 'to-many', orderSelects, order: spreadOrder }
      order = []
    }
  }

  return {
    from: d.from,
    alias: d.alias,
    depth: d.depth,
    relName: d.relName,
    relAlias: d.relAlias,
    hint: d.hint,
    joinType: d.joinType,
    aggAlias: d.aggAlias,
    relationship: d.relationship,
    spread,
    select,
    where,
    order,
    range: capRange(d.range, ctx.maxRows),
    joinConditions: d.joinConditions,
    junction: d.junction,
    children
  }
}

/**
 * The top-level range and whether its limit is one the caller did not choose: the
 * gateway's default limit (marked by `x-gatehouse-default-limit`) or max_rows. Then
 * `implicitLimit` is that limit, and the renderer fetches one row more to tell whether
 * the result was cut.
 */
export function topRange (req: ApiRequest, maxRows: number | null): { range: RowRange, implicitLimit: number | null } {
  const scoped = req.query.ranges.find((r) => r.path.length === 0)
  const gatewayLimit = req.defaultLimit !== null && scoped?.limit === req.defaultLimit
  const range = capRange(req.range, maxRows)
  if (range.limit === null) return { range, implicitLimit: null }
  // What the caller asked for: the query's limit/offset (without the gateway's) and Range.
  let caller = rangeOf(gatewayLimit ? { offset: scoped?.offset ?? null, limit: null } : scoped)
  if (req.rangeHeader) caller = intersectRanges(caller, req.rangeHeader)
  const end = range.offset + range.limit
  const callerEnd = caller.limit === null ? Infinity : caller.offset + caller.limit
  return { range, implicitLimit: end < callerEnd ? range.limit : null }
}

/** Plans the read tree of `GET|HEAD /<relation>`. */
export function planReadTree (req: ApiRequest, relation: string, cache: SchemaCache, opts: ReadPlanOptions): { table: Table, tree: ReadNode, implicitLimit: number | null } {
  const table = findTable(cache, req.schema, relation)
  const root = newDraft({ schema: table.schema, name: table.name }, 0, table.name)
  buildTree(root, req.query.select, req.schema)

  for (const { path, filter } of req.query.filters) nodeAt(root, path).filters.push(filter)
  for (const { path, terms } of req.query.order) nodeAt(root, path).order = [...terms]
  for (const r of req.query.ranges) {
    if (r.path.length === 0) continue
    nodeAt(root, r.path).range = rangeOf(r)
  }
  const top = topRange(req, opts.maxRows)
  root.range = top.range
  for (const { path, tree } of req.query.logic) nodeAt(root, path).logic.push(tree)

  addRels(root, root, cache, req.schema)
  const tree = finish(root, { cache, maxRows: opts.maxRows })
  return { table, tree, implicitLimit: top.implicitLimit }
}

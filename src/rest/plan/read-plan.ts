// ApiRequest + SchemaCache -> ReadNode tree (PostgREST's readPlan): a chain of small
// passes over a draft tree: build from select -> filters -> orders -> ranges -> logic
// trees -> relationships -> fields and aliases -> related orders -> null-embed filters
// -> to-many spreads -> max rows. Pure; unknown tables and relationships are rejected
// here (PGRST2xx) before any SQL exists. Unknown columns are left to Postgres (42703).
import {
  AggregatesNotAllowedError,
  NotEmbeddedError,
  NotImplementedError,
  RelatedOrderNotToOneError,
  TableNotFoundError,
} from '../errors.js'
import { FuzzySet } from './fuzzy.js'
import { capRange, rangeOf } from '../api-request/range.js'
import type {
  AggregateFunction,
  ApiRequest,
  EmbedPath,
  Field,
  Filter,
  LogicTree,
  OrderTerm,
  RowRange,
  SelectField,
  SelectItem,
} from '../api-request/types.js'
import {
  isToOne,
  qnKey,
  type QualifiedName,
  type Relationship,
  type SchemaCache,
  type Table,
} from '../schema-cache/types.js'
import { findRelationship } from './relationships.js'
import type {
  CoercibleField,
  ComputedSource,
  Condition,
  JoinCondition,
  PlannedOrder,
  Qualifier,
  ReadNode,
  SelectColumn,
  Spread,
  SpreadOrderSelect,
  SpreadSelect,
} from './types.js'

interface ReadPlanOptions {
  /** Tenant max_rows: caps every node's range. */
  maxRows: number | null
  /** Tenant rest.aggregates_enabled (PostgREST's db-aggregates-enabled): otherwise PGRST123. */
  aggregates?: boolean
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
  computed: ComputedSource | null
  joinConditions: JoinCondition[]
  fields: SelectField[]
  filters: Filter[]
  logic: LogicTree[]
  order: OrderTerm[]
  range: RowRange
  children: Draft[]
}

export function findTable(cache: SchemaCache, schema: string, name: string): Table {
  const t = cache.tables.get(qnKey(schema, name))
  if (!t) {
    // Matches PostgREST: the closest table name of the schema (similarity 0.75 or more) as a hint.
    const names = new FuzzySet([...cache.tables.values()].filter((x) => x.schema === schema).map((x) => x.name))
    throw new TableNotFoundError(schema, name, names.getOne(name, 0.75))
  }
  return t
}

function newDraft(from: QualifiedName, depth: number, relName: string): Draft {
  return {
    from,
    alias: null,
    depth,
    relName,
    relAlias: null,
    hint: null,
    joinType: null,
    isSpread: false,
    aggAlias: '',
    relationship: null,
    junction: null,
    computed: null,
    joinConditions: [],
    fields: [],
    filters: [],
    logic: [],
    order: [],
    range: { offset: 0, limit: null },
    children: [],
  }
}

// -- pass: select -> tree -------------------------------------------------------------

function buildTree(node: Draft, items: readonly SelectItem[], schema: string): void {
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

const embedName = (d: Pick<Draft, 'relAlias' | 'relName'>): string => d.relAlias ?? d.relName

/** The embed `name` names among `children`; legacy: an aliased embed may be named by its table. */
function childNamed<T extends Pick<Draft, 'relAlias' | 'relName'>>(children: readonly T[], name: string): T {
  const child =
    children.find((c) => embedName(c) === name) ?? children.find((c) => c.relAlias !== null && c.relName === name)
  if (!child) throw new NotEmbeddedError(name)
  return child
}

/** The node an embed path names. */
function nodeAt(root: Draft, path: EmbedPath): Draft {
  return path.reduce((node, seg) => childNamed(node.children, seg), root)
}

// -- pass: relationships ------------------------------------------------------------------

export function qualifierOf(d: Pick<ReadNode, 'alias' | 'from'>): Qualifier {
  return d.alias ? { kind: 'alias', name: d.alias } : { kind: 'table', schema: d.from.schema, name: d.from.name }
}

function addRels(node: Draft, root: Draft, cache: SchemaCache, schema: string): void {
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
        ...c.junction.columns1.map(([col, jcol]) => ({ left: [j, jcol] as const, right: [parentQ, col] as const })),
      ]
    } else if (c.kind === 'computed') {
      child.alias = `${rel.foreignTable.name}_${child.depth}`
      child.computed = { function: c.function, table: rel.table, parent: node.alias ?? node.from.name }
      child.joinConditions = []
    } else {
      child.alias = `${rel.foreignTable.name}_${child.depth}`
      const childQ: Qualifier = { kind: 'alias', name: child.alias }
      child.joinConditions = c.columns.map(([col, fcol]) => ({
        left: [childQ, fcol] as const,
        right: [parentQ, col] as const,
      }))
    }
    addRels(child, root, cache, schema)
  }
}

// -- pass: fields ---------------------------------------------------------------------------

const JSON_TYPES = new Set(['json', 'jsonb'])

/**
 * Resolves a field against its table's columns (unknown columns: to_jsonb for paths, no
 * to_tsvector). `reps`: the data representations that apply where the field stands (the
 * output one in a select, the text parser in a filter), as PostgREST's withTransformer.
 */
function coerce(
  table: Table | undefined,
  field: Field,
  fts: { language: string | null } | null = null,
  reps?: ReadonlyMap<number, QualifiedName>,
): CoercibleField {
  const col = table?.columnsByName.get(field.name)
  if (!col) return { name: field.name, jsonPath: field.jsonPath, toJson: true, toTsVector: null }
  const transform =
    reps !== undefined && col.typeOid !== undefined && field.jsonPath.length === 0 ? reps.get(col.typeOid) : undefined
  const out: CoercibleField = {
    name: field.name,
    jsonPath: field.jsonPath,
    toJson: !JSON_TYPES.has(col.baseType),
    toTsVector: col.baseType === 'tsvector' ? null : fts,
  }
  return transform === undefined ? out : { ...out, transform }
}

/** A column formatted by a data representation on output (PostgREST's hasOutputRep). */
function hasOutputRep(table: Table | undefined, reps: ReadonlyMap<number, QualifiedName> | undefined): boolean {
  if (reps === undefined || table === undefined) return false
  return table.columns.some((c) => c.typeOid !== undefined && reps.has(c.typeOid))
}

/** Output key of an unaliased JSON path selection: its last key (docs/rest-protocol.md §2.1). */
function jsonPathAlias(field: Field): string | null {
  if (field.jsonPath.length === 0) return null
  for (let i = field.jsonPath.length - 1; i >= 0; i--) {
    const op = field.jsonPath[i].operand
    if (op.kind === 'key') return op.key
  }
  return field.name
}

function toCondition(table: Table | undefined, f: Filter, reps?: ReadonlyMap<number, QualifiedName>): Condition {
  const op = f.opExpr.operation
  const fts = op.kind === 'fts' ? { language: op.language } : null
  return { kind: 'filter', field: coerce(table, f.field, fts, reps), opExpr: f.opExpr }
}

function logicToCondition(
  table: Table | undefined,
  t: LogicTree,
  reps?: ReadonlyMap<number, QualifiedName>,
): Condition {
  if (t.kind === 'expr') return toCondition(table, t.filter, reps)
  return {
    kind: 'logic',
    op: t.op,
    negated: t.negated,
    children: t.children.map((c) => logicToCondition(table, c, reps)),
  }
}

// -- finishing: drafts -> ReadNode -----------------------------------------------------------

interface Finish {
  cache: SchemaCache
  maxRows: number | null
  aggregates: boolean
}

/** An aggregate hoisted out of a to-one spread: applied where the spread's columns are selected. */
interface HoistedAggregate {
  readonly aggAlias: string
  readonly name: string
  readonly aggregate: AggregateFunction
  readonly aggregateCast: string | null
  readonly alias: string | null
}

const isStar = (f: Field): boolean => f.name === '*' && f.jsonPath.length === 0

/**
 * `*` becomes the table's columns when aggregates are in play in this node or above it (so
 * the node can be grouped by them) or in a to-many spread (each column is aggregated);
 * `count()` in a spread counts the relation's whole rows.
 */
function expandStars(
  fields: readonly SelectField[],
  table: Table | undefined,
  hasAgg: boolean,
  isSpread: boolean,
): Array<SelectField & { fullRow?: boolean }> {
  const counted = (f: SelectField): boolean => f.aggregate === null || (isSpread && f.aggregate === 'count')
  if (!hasAgg || !fields.some((f) => counted(f) && isStar(f.field))) return [...fields]
  return fields.flatMap((f) => {
    if (isStar(f.field) && f.aggregate === null) {
      return (table?.columns ?? []).map((c): SelectField => ({ ...f, field: { name: c.name, jsonPath: [] } }))
    }
    if (isStar(f.field) && isSpread && f.aggregate === 'count') return [{ ...f, fullRow: true }]
    return [f]
  })
}

/**
 * The output key of a select item (docs/rest-protocol.md §2.1): the alias, a JSON path's last key, an
 * aggregate's name in spreads, a column formatted by a data representation's own name.
 */
function selectAlias(f: SelectField, isSpread: boolean, transformed = false): string | null {
  if (f.alias !== null) return f.alias
  if (f.aggregate !== null) return isSpread ? f.aggregate : null
  return transformed ? f.field.name : jsonPathAlias(f.field)
}

/** Names (with their aggregates still unapplied) that a spread node lifts into its parent. */
function liftedSelects(select: readonly SelectColumn[], children: readonly ReadNode[]): SpreadSelect[] {
  const names = [
    ...select.map((s) => s.alias ?? s.field.name),
    ...children.flatMap((c) =>
      c.spread !== null ? c.spread.selects.map((x) => x.alias ?? x.name) : liftsNoColumn(c) ? [] : [embedName(c)],
    ),
  ]
  return names.map((name) => ({ name, aggregate: null, aggregateCast: null, alias: null }))
}

/**
 * An embed that lifts no column into a spread parent: not itself a spread, and its select
 * empty all the way down (`rel()`).
 */
function liftsNoColumn(n: ReadNode): boolean {
  return n.spread === null && n.select.length === 0 && n.children.every(liftsNoColumn)
}

/** How a draft is finished: whether it is a spread of which kind, and whether aggregates are in play. */
interface NodeShape {
  readonly table: Table | undefined
  readonly toManySpread: boolean
  readonly toOneSpread: boolean
  readonly hasAgg: boolean
}

function finish(d: Draft, ctx: Finish, parentHasAgg: boolean): { node: ReadNode; hoisted: HoistedAggregate[] } {
  const table = ctx.cache.tables.get(qnKey(d.from.schema, d.from.name))
  if (!ctx.aggregates && d.fields.some((f) => f.aggregate !== null)) throw new AggregatesNotAllowedError()
  const toManySpread = d.isSpread && d.relationship !== null && !isToOne(d.relationship)
  const shape: NodeShape = {
    table,
    toManySpread,
    toOneSpread: d.isSpread && !toManySpread && d.depth > 0,
    hasAgg: parentHasAgg || toManySpread || d.fields.some((f) => f.aggregate !== null),
  }
  const finished = d.children.map((c) => finish(c, ctx, shape.hasAgg))
  const childHoisted = finished.flatMap((f) => f.hoisted)
  const { select, hoisted } = finishSelect(d, shape, ctx.cache.representations)
  let children = finished.map((f) => f.node)
  // Aggregates of nested to-one spreads travel on up, now read through this node's lateral alias.
  if (shape.toOneSpread) for (const h of childHoisted) hoisted.push({ ...h, aggAlias: d.aggAlias })
  else if (childHoisted.length > 0) children = applyHoisted(children, childHoisted)
  const where = finishWhere(d, table, children, ctx.cache.representations?.fromText)
  const { order, spread } = finishSpread(d, shape, select, children, finishOrder(d, table, children))
  const { isSpread, fields, filters, logic, ...kept } = d
  return { node: { ...kept, spread, select, where, order, range: capRange(d.range, ctx.maxRows), children }, hoisted }
}

/** The select: fields with their aliases and aggregates; a to-one spread hands its aggregates to its parent. */
function finishSelect(
  d: Draft,
  shape: NodeShape,
  reps: SchemaCache['representations'],
): { select: SelectColumn[]; hoisted: HoistedAggregate[] } {
  const { table, toOneSpread } = shape
  const hoisted: HoistedAggregate[] = []
  // As PostgREST: `*` is expanded when a column of the table has an output representation.
  const expandForReps = hasOutputRep(table, reps?.toJson)
  const select = expandStars(d.fields, table, shape.hasAgg || expandForReps, d.isSpread).map((f): SelectColumn => {
    const field =
      f.fullRow === true ? { ...coerce(undefined, f.field), fullRow: true } : coerce(table, f.field, null, reps?.toJson)
    const alias = selectAlias(f, d.isSpread, field.transform !== undefined)
    if (toOneSpread && f.aggregate !== null) {
      hoisted.push({
        aggAlias: d.aggAlias,
        name: alias ?? f.field.name,
        aggregate: f.aggregate,
        aggregateCast: f.aggregateCast,
        alias,
      })
      return { field, alias, cast: f.cast, aggregate: null, aggregateCast: null }
    }
    return { field, alias, cast: f.cast, aggregate: f.aggregate, aggregateCast: f.aggregateCast }
  })
  return { select, hoisted }
}

/** Aggregates hoisted out of to-one spread children, applied to the columns those children lift into this node. */
function applyHoisted(children: readonly ReadNode[], childHoisted: readonly HoistedAggregate[]): ReadNode[] {
  return children.map((c) => {
    if (c.spread === null) return c
    const selects = c.spread.selects.map((s): SpreadSelect => {
      const h = childHoisted.find((x) => x.aggAlias === c.aggAlias && x.name === s.name)
      return h ? { ...s, aggregate: h.aggregate, aggregateCast: h.aggregateCast, alias: h.alias } : s
    })
    return { ...c, spread: { ...c.spread, selects } }
  })
}

/** The where: filters and logic trees; `rel=is.null` / `rel=not.is.null` on an embed test its lateral row. */
function finishWhere(
  d: Draft,
  table: Table | undefined,
  children: readonly ReadNode[],
  fromText?: ReadonlyMap<number, QualifiedName>,
): Condition[] {
  const nullEmbed = (c: Condition): Condition => {
    if (c.kind === 'logic') return { ...c, children: c.children.map(nullEmbed) }
    if (c.kind !== 'filter' || c.field.jsonPath.length !== 0) return c
    const op = c.opExpr.operation
    if (op.kind !== 'is' || op.value !== 'null') return c
    const child = children.find((x) => (x.relAlias ?? x.relName) === c.field.name)
    if (!child) return c
    return { kind: 'null-embed', notNull: c.opExpr.negated, aggAlias: child.aggAlias, child }
  }
  return [
    ...d.filters.map((f) => toCondition(table, f, fromText)),
    ...d.logic.map((t) => logicToCondition(table, t, fromText)),
  ].map(nullEmbed)
}

/** The order, with related orders resolved to a to-one embed's lateral alias. */
function finishOrder(d: Draft, table: Table | undefined, children: readonly ReadNode[]): PlannedOrder[] {
  return d.order.map((t): PlannedOrder => {
    if (t.kind === 'field')
      return { kind: 'field', field: coerce(table, t.field), direction: t.direction, nulls: t.nulls }
    const child = childNamed(children, t.relation)
    if (!child.relationship || !isToOne(child.relationship)) {
      throw new RelatedOrderNotToOneError(d.from.name, t.relation)
    }
    return {
      kind: 'related',
      aggAlias: child.aggAlias,
      field: { name: t.field.name, jsonPath: t.field.jsonPath, toJson: false, toTsVector: null },
      direction: t.direction,
      nulls: t.nulls,
    }
  })
}

/** Whether a node aggregates: its own columns, or those hoisted into its spreads. */
export function aggregates(select: readonly SelectColumn[], children: readonly ReadNode[]): boolean {
  return (
    select.some((s) => s.aggregate != null) ||
    children.some((c) => c.spread !== null && c.spread.selects.some((s) => s.aggregate !== null))
  )
}

/** A spread node's lift; a to-many spread's order columns are selected under generated names and ordered inside json_agg. */
function finishSpread(
  d: Draft,
  shape: NodeShape,
  select: readonly SelectColumn[],
  children: readonly ReadNode[],
  order: PlannedOrder[],
): { order: PlannedOrder[]; spread: Spread | null } {
  if (!d.isSpread) return { order, spread: null }
  const selects = liftedSelects(select, children)
  if (!shape.toManySpread) return { order, spread: { kind: 'to-one', selects } }
  if (aggregates(select, children))
    throw new NotImplementedError({
      details: 'Aggregates are not implemented for one-to-many or many-to-many spreads.',
    })
  const orderSelects: SpreadOrderSelect[] = []
  const spreadOrder: PlannedOrder[] = order.map((o, i) => {
    const alias = `${d.aggAlias}_${o.field.name}_${i + 1}`
    // A related order reads the column through the to-one child's lateral alias.
    orderSelects.push({
      from: o.kind === 'related' ? { kind: 'alias', name: o.aggAlias } : null,
      column: { field: o.field, alias, cast: null },
    })
    return {
      kind: 'field',
      field: { name: alias, jsonPath: [], toJson: false, toTsVector: null },
      direction: o.direction,
      nulls: o.nulls,
    }
  })
  return { order: [], spread: { kind: 'to-many', selects, orderSelects, order: spreadOrder } }
}

/** Plans the read tree of `GET|HEAD /<relation>`. */
export function planReadTree(
  req: ApiRequest,
  relation: string,
  cache: SchemaCache,
  opts: ReadPlanOptions,
): { table: Table; tree: ReadNode } {
  const table = findTable(cache, req.schema, relation)
  const root = newDraft({ schema: table.schema, name: table.name }, 0, table.name)
  buildTree(root, req.query.select, req.schema)

  for (const { path, filter } of req.query.filters) nodeAt(root, path).filters.push(filter)
  for (const { path, terms } of req.query.order) nodeAt(root, path).order = [...terms]
  for (const r of req.query.ranges) {
    if (r.path.length === 0) continue
    nodeAt(root, r.path).range = rangeOf(r)
  }
  // As PostgREST's db-max-rows: the top-level range capped, silently.
  root.range = capRange(req.range, opts.maxRows)
  for (const { path, tree } of req.query.logic) nodeAt(root, path).logic.push(tree)

  addRels(root, root, cache, req.schema)
  const tree = finish(root, { cache, maxRows: opts.maxRows, aggregates: opts.aggregates === true }, false).node
  return { table, tree }
}

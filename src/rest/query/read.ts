// ReadPlan -> SQL (PostgREST's QueryBuilder.readPlanToQuery / SqlFragment, docs/rest-protocol.md §8.3):
// the read tree as nested LATERAL joins, the count query, and the outer statement that
// makes Postgres build the whole body (json_agg / row_to_json / csv) as one text value.
// Pure; every value is a bind parameter, every name a quoted identifier.
import type { AggregateFunction, Operation, OpExpr } from '../api-request/types.js'
import type {
  CoercibleField,
  Condition,
  JoinCondition,
  MediaHandler,
  PlannedOrder,
  Qualifier,
  ReadNode,
  ReadPlan,
  SelectColumn,
  SpreadSelect,
} from '../plan/types.js'
import { aggregates, qualifierOf } from '../plan/read-plan.js'
import { isToOne, type QualifiedName } from '../schema-cache/types.js'
import {
  empty,
  ident,
  join,
  param,
  qualified,
  raw,
  render,
  sql,
  typeName,
  type Keyword,
  type Sql,
  type Statement,
} from './sql.js'

// -- names and fields -------------------------------------------------------------------

function renderQualifier(q: Qualifier): Sql {
  return q.kind === 'table' ? qualified(q.schema, q.name) : ident(q.name)
}

function column(q: Qualifier, name: string): Sql {
  return name === '*' ? sql`${renderQualifier(q)}.*` : sql`${renderQualifier(q)}.${ident(name)}`
}

function jsonPath(field: Pick<CoercibleField, 'jsonPath'>): Sql {
  return join(
    field.jsonPath.map((op) => {
      const operand = op.operand.kind === 'key' ? param(op.operand.key) : sql`${param(op.operand.idx)}::int`
      return sql`${raw(op.arrow)}${operand}`
    }),
    empty,
  )
}

/** A field's expression: `"q"."col"`, `to_jsonb("q"."col")->$1`, `to_tsvector($1, "q"."col")`. */
function renderField(q: Qualifier, f: CoercibleField): Sql {
  let expr: Sql
  if (f.fullRow === true) expr = ident(q.name)
  else if (f.jsonPath.length === 0) expr = column(q, f.name)
  else if (f.toJson) expr = sql`to_jsonb(${column(q, f.name)})${jsonPath(f)}`
  else expr = sql`${column(q, f.name)}${jsonPath(f)}`
  if (f.toTsVector) {
    expr =
      f.toTsVector.language === null
        ? sql`to_tsvector(${expr})`
        : sql`to_tsvector(${param(f.toTsVector.language)}, ${expr})`
  }
  return expr
}

const AGGREGATES: Record<AggregateFunction, Sql> = {
  count: sql`COUNT`,
  sum: sql`SUM`,
  avg: sql`AVG`,
  max: sql`MAX`,
  min: sql`MIN`,
}

/** `SUM(expr)`, `CAST( SUM(expr) AS int )`, or expr when there is no aggregate. */
function applyAggregate(
  expr: Sql,
  aggregate: AggregateFunction | null | undefined,
  cast: string | null | undefined,
): Sql {
  if (aggregate === null || aggregate === undefined) return expr
  const agg = sql`${AGGREGATES[aggregate]}(${expr})`
  return cast === null || cast === undefined ? agg : sql`CAST( ${agg} AS ${typeName(cast)} )`
}

function renderSelectColumn(q: Qualifier, s: SelectColumn): Sql {
  let expr = renderField(q, s.field)
  // A data representation formats the column (PostgREST's pgFmtTableCoerce).
  if (s.field.transform !== undefined)
    expr = sql`${qualified(s.field.transform.schema, s.field.transform.name)}(${expr})`
  if (s.cast !== null) expr = sql`CAST( ${expr} AS ${typeName(s.cast)} )`
  expr = applyAggregate(expr, s.aggregate, s.aggregateCast)
  return s.alias === null ? expr : sql`${expr} AS ${ident(s.alias)}`
}

function spreadColumn(aggAlias: string, name: string): Sql {
  return column({ kind: 'alias', name: aggAlias }, name)
}

function renderSpreadSelect(aggAlias: string, s: SpreadSelect): Sql {
  const expr = applyAggregate(spreadColumn(aggAlias, s.name), s.aggregate, s.aggregateCast)
  return s.alias === null ? expr : sql`${expr} AS ${ident(s.alias)}`
}

// -- conditions ---------------------------------------------------------------------------

const SIMPLE: Record<string, Keyword> = {
  neq: '<>',
  cs: '@>',
  cd: '<@',
  ov: '&&',
  sl: '<<',
  sr: '>>',
  nxr: '&<',
  nxl: '&>',
  adj: '-|-',
}
const QUANT: Record<string, Keyword> = {
  eq: '=',
  gt: '>',
  gte: '>=',
  lt: '<',
  lte: '<=',
  like: 'LIKE',
  ilike: 'ILIKE',
  match: '~',
  imatch: '~*',
}
const FTS: Record<string, Keyword> = {
  fts: 'to_tsquery',
  plfts: 'plainto_tsquery',
  phfts: 'phraseto_tsquery',
  wfts: 'websearch_to_tsquery',
}
const IS: Record<string, Keyword> = {
  null: 'IS NULL',
  not_null: 'IS NOT NULL',
  true: 'IS TRUE',
  false: 'IS FALSE',
  unknown: 'IS UNKNOWN',
}

/** A Postgres array literal: every element double-quoted, `"` and `\` escaped. */
export function arrayLiteral(values: readonly string[]): string {
  return '{' + values.map((v) => '"' + v.replace(/\\/g, '\\\\').replace(/"/g, '\\"') + '"').join(',') + '}'
}

/**
 * A filter value: a parameter, through a data representation's text parser when the
 * field has one (PostgREST's pgFmtUnknownLiteralForField).
 */
function valueOf(value: string, parse: QualifiedName | undefined): Sql {
  return parse === undefined ? param(value) : sql`${qualified(parse.schema, parse.name)}(${param(value)})`
}

/** The elements of `in.(...)`: one array parameter, each element parsed when the field has a parser. */
function listOf(values: readonly string[], parse: QualifiedName | undefined): Sql {
  const list = values.length === 1 && values[0] === '' ? '{}' : arrayLiteral(values)
  return parse === undefined
    ? param(list)
    : sql`(SELECT ${qualified(parse.schema, parse.name)}(unnest(${param(list)}::text[])))`
}

function renderOperation(expr: Sql, op: Operation, parse?: QualifiedName): Sql {
  switch (op.kind) {
    case 'simple':
      return sql`${expr} ${raw(SIMPLE[op.op])} ${valueOf(op.value, parse)}`
    case 'quant': {
      const like = op.op === 'like' || op.op === 'ilike'
      // As PostgREST: (i)like patterns are never parsed.
      const value = like ? param(op.value.replace(/\*/g, '%')) : valueOf(op.value, parse)
      const rhs = op.quantifier === null ? value : sql`${raw(op.quantifier === 'any' ? 'ANY' : 'ALL')}(${value})`
      return sql`${expr} ${raw(QUANT[op.op])} ${rhs}`
    }
    case 'in':
      // `in.()` matches nothing (= ANY('{}')); elements travel as one array parameter.
      return sql`${expr} = ANY(${listOf(op.values, parse)})`
    case 'is':
      return sql`${expr} ${raw(IS[op.value])}`
    case 'isdistinct':
      return sql`${expr} IS DISTINCT FROM ${valueOf(op.value, parse)}`
    case 'fts': {
      const args = op.language === null ? param(op.value) : sql`${param(op.language)}, ${param(op.value)}`
      return sql`${expr} @@ ${raw(FTS[op.op])}(${args})`
    }
  }
}

function renderOpExpr(expr: Sql, e: OpExpr, parse?: QualifiedName): Sql {
  const body = renderOperation(expr, e.operation, parse)
  return e.negated ? sql`NOT ${body}` : body
}

type CountHook = (child: ReadNode, notNull: boolean) => Sql

export function renderCondition(q: Qualifier, c: Condition, countHook?: CountHook): Sql {
  switch (c.kind) {
    case 'filter':
      return renderOpExpr(renderField(q, c.field), c.opExpr, c.field.transform)
    case 'null-embed':
      if (countHook) return countHook(c.child, c.notNull)
      return sql`${ident(c.aggAlias)} ${raw(c.notNull ? 'IS DISTINCT FROM NULL' : 'IS NOT DISTINCT FROM NULL')}`
    case 'logic': {
      const inner = join(
        c.children.map((x) => renderCondition(q, x, countHook)),
        sql` ${raw(c.op === 'and' ? 'AND' : 'OR')} `,
      )
      return c.negated ? sql`NOT (${inner})` : sql`(${inner})`
    }
  }
}

function renderJoinCondition(j: JoinCondition): Sql {
  return sql`${column(j.left[0], j.left[1])} = ${column(j.right[0], j.right[1])}`
}

function renderOrderTerm(q: Qualifier, o: PlannedOrder): Sql {
  const expr =
    o.kind === 'field' ? renderField(q, o.field) : sql`${ident(o.aggAlias)}.${ident(o.field.name)}${jsonPath(o.field)}`
  const dir = o.direction === null ? empty : sql` ${raw(o.direction === 'asc' ? 'ASC' : 'DESC')}`
  const nulls = o.nulls === null ? empty : sql` ${raw(o.nulls === 'first' ? 'NULLS FIRST' : 'NULLS LAST')}`
  return sql`${expr}${dir}${nulls}`
}

function renderOrder(q: Qualifier, order: readonly PlannedOrder[]): Sql {
  return order.length === 0 ? empty : sql` ORDER BY ${join(order.map((o) => renderOrderTerm(q, o)))}`
}

function renderRange(r: { offset: number; limit: number | null }): Sql {
  const limit = r.limit === null ? empty : sql` LIMIT ${param(r.limit)}`
  const offset = r.offset === 0 ? empty : sql` OFFSET ${param(r.offset)}`
  return sql`${limit}${offset}`
}

// -- the tree ---------------------------------------------------------------------------

function fromClause(n: ReadNode): Sql {
  const c = n.computed
  // Cast to the row type: the parent may be a CTE (RPC, writes) whose rows are anonymous records.
  const table =
    c === null
      ? qualified(n.from.schema, n.from.name)
      : sql`${qualified(c.function.schema, c.function.name)}(${ident(c.parent)}::${qualified(c.table.schema, c.table.name)})`
  const aliased = n.alias === null ? table : sql`${table} AS ${ident(n.alias)}`
  return n.junction === null ? aliased : sql`${aliased}, ${qualified(n.junction.schema, n.junction.name)}`
}

/**
 * An embed whose select lists are empty all the way down (`rel()`): its parent renders no
 * column for it (a spread child is rendered from its spread's selects before this is asked).
 */
function selectsNoColumn(n: ReadNode): boolean {
  return n.select.length === 0 && n.children.every(selectsNoColumn)
}

function childSelects(c: ReadNode): Sql[] {
  const agg = ident(c.aggAlias)
  if (c.spread !== null) return c.spread.selects.map((s) => renderSpreadSelect(c.aggAlias, s))
  if (selectsNoColumn(c)) return []
  const key = ident(c.relAlias ?? c.relName)
  return c.relationship !== null && isToOne(c.relationship)
    ? [sql`row_to_json(${agg}.*)::jsonb AS ${key}`]
    : [sql`COALESCE( ${agg}.${agg}, '[]') AS ${key}`]
}

/**
 * GROUP BY when the node aggregates (its own columns or those hoisted into its spreads):
 * every other selected column, embed and spread column (PostgREST's groupF).
 */
function groupBy(q: Qualifier, n: ReadNode): Sql {
  if (!aggregates(n.select, n.children)) return empty
  const terms: Sql[] = []
  for (const s of n.select) {
    if (s.aggregate != null) continue
    terms.push(s.alias !== null ? ident(s.alias) : renderField(q, s.field))
  }
  for (const c of n.children) {
    if (c.spread !== null) {
      for (const s of c.spread.selects)
        if (s.aggregate === null) terms.push(spreadColumn(c.aggAlias, s.alias ?? s.name))
    } else if (!selectsNoColumn(c)) {
      terms.push(ident(c.relAlias ?? c.relName))
    }
  }
  return terms.length === 0 ? empty : sql` GROUP BY ${join(terms)}`
}

function childJoin(c: ReadNode): Sql {
  const agg = ident(c.aggAlias)
  const kind = raw(c.joinType === 'inner' ? 'INNER' : 'LEFT')
  const sub = renderNode(c)
  const toOne = c.relationship !== null && isToOne(c.relationship)
  if (toOne) return sql` ${kind} JOIN LATERAL ( ${sub} ) AS ${agg} ON TRUE`
  const on = c.joinType === 'inner' ? sql`${agg} IS NOT NULL` : sql`TRUE`
  if (c.spread !== null && c.spread.kind === 'to-many') {
    const orderQ: Qualifier = { kind: 'alias', name: c.aggAlias }
    const order = c.spread.order
    const cols = c.spread.selects.map(
      (s) =>
        sql`COALESCE(json_agg(${spreadColumn(c.aggAlias, s.name)}${renderOrder(orderQ, order)}),'[]')::jsonb AS ${ident(s.alias ?? s.name)}`,
    )
    const selects = join([sql`json_agg(${agg})::jsonb AS ${agg}`, ...cols])
    return sql` ${kind} JOIN LATERAL ( SELECT ${selects} FROM ( ${sub} ) AS ${agg} ) AS ${agg} ON ${on}`
  }
  return sql` ${kind} JOIN LATERAL ( SELECT json_agg(${agg})::jsonb AS ${agg} FROM ( ${sub} ) AS ${agg} ) AS ${agg} ON ${on}`
}

/**
 * One node as a SELECT (the root, or an embed's lateral subquery). `from` replaces the
 * root's FROM item (`"pgrst_source" AS "<alias>"` for write representations and RPC
 * results).
 */
export function renderNode(n: ReadNode, range: { offset: number; limit: number | null } = n.range, from?: Sql): Sql {
  const q = qualifierOf(n)
  const own =
    n.select.length === 0 && n.children.length === 0 ? [column(q, '*')] : n.select.map((s) => renderSelectColumn(q, s))
  const extra =
    n.spread !== null && n.spread.kind === 'to-many'
      ? n.spread.orderSelects.map((s) => renderSelectColumn(s.from ?? q, s.column))
      : []
  const selects = [...own, ...extra, ...n.children.flatMap(childSelects)]
  const joins = join(n.children.map(childJoin), empty)
  const conds = [...n.where.map((c) => renderCondition(q, c)), ...n.joinConditions.map(renderJoinCondition)]
  const where = conds.length === 0 ? empty : sql` WHERE ${join(conds, sql` AND `)}`
  return sql`SELECT ${join(selects)} FROM ${from ?? fromClause(n)}${joins}${where}${groupBy(q, n)}${renderOrder(q, n.order)}${renderRange(range)}`
}

/**
 * The count query of a node: its filters and join conditions, `EXISTS` for `!inner`
 * embeds and for `rel=not.is.null` (NOT EXISTS for `rel=is.null`); no limit.
 */
function renderCountNode(n: ReadNode): Sql {
  const q = qualifierOf(n)
  const hook: CountHook = (child, notNull) =>
    notNull ? sql`EXISTS (${renderCountNode(child)})` : sql`NOT EXISTS (${renderCountNode(child)})`
  const conds = [
    ...n.where.map((c) => renderCondition(q, c, hook)),
    ...n.joinConditions.map(renderJoinCondition),
    ...n.children.filter((c) => c.joinType === 'inner').map((c) => sql`EXISTS (${renderCountNode(c)})`),
  ]
  const where = conds.length === 0 ? empty : sql` WHERE ${join(conds, sql` AND `)}`
  return sql`SELECT 1 FROM ${fromClause(n)}${where}`
}

/** `application/geo+json` (PostgREST's asGeoJsonF): every row through PostGIS' ST_AsGeoJSON. */
const geoJsonBody: Sql = sql`json_build_object('type', 'FeatureCollection', 'features', coalesce(json_agg(ST_AsGeoJSON(_postgrest_t)::json), '[]'))::text`

// -- the statement --------------------------------------------------------------------------

/**
 * The body of a media type handler of the database (PostgREST's customFuncF): the function
 * over the scalar column, or over the rows (as `target`'s row type when it has one); sent
 * as bytes when the media type is over bytea, else as the type's output text (`format('%s')`
 * calls the output function, as PostgREST reads the value: an xml keeps no leading blanks,
 * where a `::text` cast would keep them).
 */
export function customBody(media: MediaHandler & { kind: 'custom' }, scalarColumn?: string): Sql {
  const fn = qualified(media.function.schema, media.function.name)
  if (scalarColumn !== undefined) {
    // The one value of a scalar function, through the domain; an aggregate, as the
    // statement also counts the rows.
    const value = sql`${fn}(_postgrest_t.${ident(scalarColumn)})`
    return media.bytes ? sql`string_agg((${value})::bytea, ''::bytea)` : sql`string_agg(${outputText(value)}, '')`
  }
  const arg =
    media.target === null ? sql`_postgrest_t` : sql`_postgrest_t::${qualified(media.target.schema, media.target.name)}`
  return media.bytes ? sql`(${fn}(${arg}))::bytea` : outputText(sql`${fn}(${arg})`)
}

/** A value's output text, null kept (Postgres merges the repeated aggregate into one). */
function outputText(value: Sql): Sql {
  return sql`CASE WHEN (${value}) IS NULL THEN NULL ELSE pg_catalog.format('%s', ${value}) END`
}

/**
 * The body expression over `_postgrest_t`: the rows as JSON, CSV (its header line from the
 * first row of `headerFrom`: the source of a read, the representation of a write or call),
 * GeoJSON or a media type handler's output.
 */
export function renderRowsBody(media: MediaHandler, headerFrom: 'pgrst_source' | 'pgrst_repr'): Sql {
  switch (media.kind) {
    case 'json':
      return media.stripNulls
        ? sql`coalesce(json_strip_nulls(json_agg(_postgrest_t)), '[]')::text`
        : sql`coalesce(json_agg(_postgrest_t), '[]')::text`
    case 'singular':
      return media.stripNulls
        ? sql`coalesce(json_strip_nulls(json_agg(_postgrest_t)->0), 'null')::text`
        : sql`coalesce(json_agg(_postgrest_t)->0, 'null')::text`
    case 'csv':
      return sql`(SELECT coalesce(string_agg(a.k, ','), '') FROM (SELECT json_object_keys(r)::text AS k FROM (SELECT row_to_json(hh) AS r FROM ${headerFrom === 'pgrst_source' ? sql`pgrst_source` : sql`pgrst_repr`} AS hh LIMIT 1) s) a) || E'\\n' || coalesce(string_agg(substring(_postgrest_t::text, 2, length(_postgrest_t::text) - 2), E'\\n'), '')`
    case 'geojson':
      return geoJsonBody
    case 'custom':
      return customBody(media)
  }
}

function renderBody(plan: ReadPlan): Sql {
  return plan.headersOnly ? sql`''::text` : renderRowsBody(plan.media, 'pgrst_source')
}

export interface ReadStatements {
  /** `name` is set by the executor's caller to prepare it once per connection. */
  main: Statement & { name?: string }
  /** EXPLAIN of the count query (Prefer: count=planned, or estimated over max_rows). */
  planned: Statement | null
}

/**
 * The main statement of a read: one row with total_result_set, page_total, body (text),
 * response_headers, response_status and, with an implicit limit, `cut`.
 */
export function renderRead(plan: ReadPlan): ReadStatements {
  const root = plan.tree
  const source = renderNode(root, root.range)
  const wantsCountQuery = (plan.count === 'exact' || plan.count === 'estimated') && plan.ranged
  const countLimit =
    plan.count === 'estimated' && plan.maxRows !== null ? sql` LIMIT ${param(plan.maxRows + 1)}` : empty
  const ctes = wantsCountQuery
    ? sql`WITH pgrst_source AS ( ${source} ), pgrst_source_count AS ( ${renderCountNode(root)}${countLimit} )`
    : sql`WITH pgrst_source AS ( ${source} )`
  let total: Sql
  if (wantsCountQuery) total = sql`(SELECT pg_catalog.count(*) FROM pgrst_source_count)`
  else if (plan.count !== null) total = sql`pg_catalog.count(_postgrest_t)`
  else total = sql`null::bigint`
  const main = sql`${ctes} SELECT ${total} AS total_result_set, pg_catalog.count(_postgrest_t) AS page_total, ${renderBody(plan)} AS body, nullif(current_setting('response.headers', true), '') AS response_headers, nullif(current_setting('response.status', true), '') AS response_status FROM ( SELECT * FROM pgrst_source ) _postgrest_t`
  // As PostgREST: the count query's EXPLAIN runs for planned and for every estimated count.
  const needsPlanned = plan.count === 'planned' || plan.count === 'estimated'
  return {
    main: render(main),
    planned: needsPlanned ? render(sql`EXPLAIN (FORMAT JSON) ${renderCountNode(root)}`) : null,
  }
}

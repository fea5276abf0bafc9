// CallPlan -> SQL (PostgREST's callPlanToQuery, docs/rest-protocol.md §8.6): the function called in
// FROM with named arguments (a JSON body through json_to_record with the parameters' own
// types, query/form values cast to them, or the single unnamed parameter), its rows as
// `pgrst_source`, then the read tree over them (filters, order, range, embeds) and one row
// with page_total and the body Postgres builds. Pure.
import { ALL_ROWS } from '../api-request/range.js'
import { callColumns } from '../plan/rebase.js'
import type { CallPlan } from '../plan/types.js'
import type { RoutineParam } from '../schema-cache/types.js'
import { arrayLiteral, customBody, renderNode, renderRowsBody } from './read.js'
import { ident, join, param, qualified, render, sql, typeName, type Sql, type Statement } from './sql.js'

/** A parameter's type for a cast or a column definition: `"pg_catalog"."int4"`. */
function paramType(p: RoutineParam): Sql {
  return p.typeRef !== undefined ? qualified(p.typeRef.schema, p.typeRef.name) : typeName(p.type)
}

function named(p: RoutineParam, value: Sql): Sql {
  return p.variadic ? sql`VARIADIC ${ident(p.name)} := ${value}` : sql`${ident(p.name)} := ${value}`
}

/** The FROM list that calls the function as `pgrst_call`. */
function callFrom(plan: CallPlan): Sql {
  const r = plan.routine
  const fn = qualified(r.schema, r.name)
  const scalar = plan.shape === 'scalar' || plan.shape === 'setof-scalar'
  // A bare `record` has no columns FROM could name without a definition list: it is called in
  // a select list, as PostgREST calls every scalar (`(SELECT f() pgrst_scalar) pgrst_call`).
  const called = (call: Sql): Sql =>
    scalar && r.returnType === 'record'
      ? sql`(SELECT ${call} AS ${ident(plan.scalarColumn)}) AS pgrst_call`
      : scalar
        ? sql`${call} AS pgrst_call(${ident(plan.scalarColumn)})`
        : sql`${call} AS pgrst_call`
  const a = plan.args
  switch (a.kind) {
    case 'none':
      return called(sql`${fn}()`)
    case 'single': {
      const p = a.param
      const v = Buffer.isBuffer(a.value)
        ? sql`${param(a.value)}::bytea`
        : sql`CAST(${param(a.value)} AS ${paramType(p)})`
      return called(sql`${fn}(${v})`)
    }
    case 'text': {
      // A variadic parameter's values travel as one array literal.
      const value = (v: string | readonly string[]): Sql => param(typeof v === 'string' ? v : arrayLiteral(v))
      return called(
        sql`${fn}(${join(a.values.map((x) => named(x.param, sql`CAST(${value(x.value)} AS ${paramType(x.param)})`)))})`,
      )
    }
    case 'json': {
      const defs = join(a.params.map((p) => sql`${ident(p.name)} ${paramType(p)}`))
      const call = called(sql`${fn}(${join(a.params.map((p) => named(p, sql`pgrst_body.${ident(p.name)}`)))})`)
      // An array body (JSON or CSV) calls the function with its first row, as PostgREST.
      return a.array === true
        ? sql`(SELECT * FROM json_to_recordset(${param(a.json)}::json) AS pgrst_rows(${defs}) LIMIT 1) AS pgrst_body, LATERAL ${call}`
        : sql`json_to_record(${param(a.json)}::json) AS pgrst_body(${defs}), LATERAL ${call}`
    }
  }
}

function renderBody(plan: CallPlan): Sql {
  if (plan.headersOnly || plan.shape === 'void') return sql`''::text`
  if (plan.media.kind === 'geojson') return renderRowsBody(plan.media, 'pgrst_repr')
  if (plan.media.kind === 'custom')
    return plan.shape === 'scalar' ? customBody(plan.media, plan.scalarColumn) : customBody(plan.media)
  const col = sql`_postgrest_t.${ident(plan.scalarColumn)}`
  switch (plan.shape) {
    case 'scalar':
    case 'setof-scalar':
      return plan.shape === 'scalar' || plan.singular
        ? sql`coalesce((json_agg(${col})->0)::text, 'null')`
        : sql`coalesce(json_agg(${col}), '[]')::text`
    case 'composite':
      // One row: its object, as the singular media type's body is.
      return renderRowsBody(plan.media.kind === 'csv' ? plan.media : { ...plan.media, kind: 'singular' }, 'pgrst_repr')
    case 'setof-composite':
      return renderRowsBody(plan.media, 'pgrst_repr')
  }
}

/** What the call hands to its read: a row's columns the read needs (as PostgREST), or all. */
function callSelect(plan: CallPlan): Sql {
  const cols = plan.shape === 'composite' || plan.shape === 'setof-composite' ? callColumns(plan.tree) : null
  return cols === null ? sql`pgrst_call.*` : join(cols.map((c) => sql`pgrst_call.${ident(c)}`))
}

/** The statement of an RPC call. */
export function renderCall(plan: CallPlan): Statement {
  const from = sql`pgrst_source AS ${ident(plan.alias)}`
  const source =
    plan.shape === 'void'
      ? sql`SELECT 1 FROM ${callFrom(plan)}`
      : sql`SELECT ${callSelect(plan)} FROM ${callFrom(plan)}`
  const repr = plan.shape === 'void' ? sql`SELECT * FROM pgrst_source` : renderNode(plan.tree, plan.tree.range, from)
  let total: Sql = sql`null::bigint`
  if (plan.countRows) {
    total = plan.ranged
      ? sql`(SELECT pg_catalog.count(*) FROM ( ${renderNode({ ...plan.tree, order: [] }, ALL_ROWS, from)} ) pgrst_c)`
      : sql`pg_catalog.count(_postgrest_t)`
  }
  const text = sql`WITH pgrst_source AS ( ${source} ), pgrst_repr AS ( ${repr} ) SELECT ${total} AS total_result_set, pg_catalog.count(_postgrest_t) AS page_total, ${renderBody(plan)} AS body, nullif(pg_catalog.current_setting('response.headers', true), '') AS response_headers, nullif(pg_catalog.current_setting('response.status', true), '') AS response_status FROM ( SELECT * FROM pgrst_repr ) _postgrest_t`
  return render(text)
}

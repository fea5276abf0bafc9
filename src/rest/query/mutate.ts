// MutatePlan -> SQL (PostgREST's mutatePlanToQuery, docs/rest-protocol.md §8.4-8.5): INSERT (with
// ON CONFLICT, PUT's key check, the inserted-rows counter), UPDATE, DELETE as a
// data-modifying CTE, then one row with page_total, the body (Postgres builds the JSON)
// and the response.* settings. The body is one JSON parameter read with
// json_populate_record[set] over the table's own row type. Pure.
import { ALL_ROWS } from '../api-request/range.js'
import type {
  BodyParsers,
  ColumnDefault,
  InsertSpec,
  MutatePlan,
  Qualifier,
  ReturnPreference,
  UpdateSpec,
} from '../plan/types.js'
import { renderCondition, renderNode, renderRowsBody } from './read.js'
import {
  catalogExpression,
  empty,
  ident,
  join,
  param,
  qualified,
  render,
  sql,
  type Sql,
  type Statement,
} from './sql.js'

/** The counter PostgREST keeps in a transaction setting: +1 per candidate row, -1 per conflict update. */
const COUNT_UP = sql`pg_catalog.set_config('pgrst.inserted', (coalesce(nullif(pg_catalog.current_setting('pgrst.inserted', true), '')::int, 0) + 1)::text, true) <> '0'`
const COUNT_DOWN = sql`pg_catalog.set_config('pgrst.inserted', (coalesce(nullif(pg_catalog.current_setting('pgrst.inserted', true), '')::int, 0) - 1)::text, true) <> '-1'`

/** What a write returns: the columns its representation reads, its key (headers-only), or a constant. */
function returnedColumns(plan: MutatePlan, returning: ReturnPreference): Sql {
  const t = qualified(plan.table.schema, plan.table.name)
  // Matches PostgREST: minimal returns a constant, so Postgres applies no SELECT policy to the new rows.
  const cols = returning === 'minimal' ? [] : returning === 'headers-only' ? plan.table.pk : plan.returnColumns
  if (cols === null) return sql`${t}.*`
  return cols.length === 0 ? sql`1` : join(cols.map((c) => sql`${t}.${ident(c)}`))
}

/** A body column: `pgrst_body."c"`, or its json value through a data representation's parser. */
function bodyColumn(c: string, parsers: BodyParsers): Sql {
  const fn = parsers.find(([name]) => name === c)?.[1]
  return fn === undefined ? sql`pgrst_body.${ident(c)}` : sql`${qualified(fn.schema, fn.name)}(pgrst_rep.${ident(c)})`
}

function bodyColumns(cols: readonly string[], parsers: BodyParsers): Sql {
  return cols.length === 0 ? empty : join(cols.map((c) => bodyColumn(c, parsers)))
}

/**
 * The body's rows as `pgrst_body` (the table's row type, json_populate_record[set]). With
 * data representations, as PostgREST's json_to_recordset typed `json` for those columns:
 * each element's parsed columns are read as json (`pgrst_rep`); with them or with keys
 * `columns=` leaves out, `pgrst_body` reads only the other written columns, so no other key
 * is parsed.
 */
function bodyRows(rowType: Sql, json: Sql, isArray: boolean, spec: InsertSpec | UpdateSpec, jsonb = false): Sql {
  const parsers = spec.parsers
  if (parsers.length === 0 && !spec.extraKeys) {
    const fn = jsonb
      ? isArray
        ? sql`jsonb_populate_recordset`
        : sql`jsonb_populate_record`
      : isArray
        ? sql`json_populate_recordset`
        : sql`json_populate_record`
    return sql`LATERAL ${fn}(${rowType}, ${json}) AS pgrst_body`
  }
  const elems = isArray
    ? sql`LATERAL json_array_elements(${json}::json) AS pgrst_elem(v)`
    : sql`LATERAL (SELECT ${json} AS v) AS pgrst_elem`
  const names = parsers.map(([c]) => c)
  const plain = spec.payload.keys.filter((c) => !names.includes(c))
  const kept = sql`(SELECT coalesce(json_object_agg(pgrst_kv.key, pgrst_kv.value), '{}') FROM json_each(pgrst_elem.v::json) AS pgrst_kv WHERE pgrst_kv.key = ANY(${param(plain)}::text[]))`
  const body = sql`${elems}, LATERAL json_populate_record(${rowType}, ${kept}) AS pgrst_body`
  if (names.length === 0) return body
  const defs = join(names.map((c) => sql`${ident(c)} json`))
  return sql`${body}, LATERAL json_to_record(pgrst_elem.v::json) AS pgrst_rep(${defs})`
}

function conflictClause(spec: InsertSpec): Sql {
  const setColumns = spec.payload.keys
  const oc = spec.onConflict
  if (oc === null) return empty
  const target = join(oc.columns.map((c) => ident(c)))
  if (oc.action === 'ignore' || setColumns.length === 0) return sql` ON CONFLICT (${target}) DO NOTHING`
  const set = join(setColumns.map((c) => sql`${ident(c)} = EXCLUDED.${ident(c)}`))
  return spec.countInserts
    ? sql` ON CONFLICT (${target}) DO UPDATE SET ${set} WHERE ${COUNT_DOWN}`
    : sql` ON CONFLICT (${target}) DO UPDATE SET ${set}`
}

/** One INSERT over rows produced by `rows` (a FROM list ending in `pgrst_body`). */
function insertStatement(plan: MutatePlan, spec: InsertSpec, rows: Sql, returning: ReturnPreference): Sql {
  const columns = spec.payload.keys
  const t = qualified(plan.table.schema, plan.table.name)
  const conds: Sql[] = []
  if (spec.countInserts) conds.push(COUNT_UP)
  for (const [col, value] of spec.putKey ?? []) conds.push(sql`pgrst_body.${ident(col)} = ${param(value)}`)
  const where = conds.length === 0 ? empty : sql` WHERE ${join(conds, sql` AND `)}`
  const target = columns.length === 0 ? t : sql`${t} (${join(columns.map((c) => ident(c)))})`
  // DO UPDATE sets every payload column: with missing=default, one the row lacks gets the
  // DEFAULT that EXCLUDED holds for it (as PostgREST, which inserts DEFAULT there).
  return sql`INSERT INTO ${target} SELECT ${bodyColumns(columns, spec.parsers)} FROM ${rows}${where}${conflictClause(spec)} RETURNING ${returnedColumns(plan, returning)}`
}

/** `jsonb_build_object('col', <its default>, ...)`: evaluated where it stands, once per row. */
function defaultsObject(defaults: readonly ColumnDefault[]): Sql {
  return sql`jsonb_build_object(${join(defaults.map((d) => sql`${param(d.column)}::text, ${catalogExpression(d.expression)}`))})`
}

function renderInsert(plan: MutatePlan, spec: InsertSpec, returning: ReturnPreference): Sql {
  const rowType = sql`NULL::${qualified(plan.table.schema, plan.table.name)}`
  const isArray = spec.payload.isArray
  let rows: Sql
  if (spec.defaults === null || spec.defaults.length === 0) {
    rows = sql`pgrst_payload, ${bodyRows(rowType, sql`pgrst_payload.json_data`, isArray, spec)}`
  } else if (isArray) {
    // Matches PostgREST's missing=default: each element over the defaults (its own keys win).
    rows = sql`pgrst_payload, LATERAL (SELECT jsonb_agg(${defaultsObject(spec.defaults)} || pgrst_elem) AS val FROM jsonb_array_elements(pgrst_payload.json_data::jsonb) AS pgrst_elem) AS pgrst_json_defs, ${bodyRows(rowType, sql`pgrst_json_defs.val`, true, spec, true)}`
  } else {
    rows = sql`pgrst_payload, LATERAL (SELECT ${defaultsObject(spec.defaults)} || pgrst_payload.json_data::jsonb AS val) AS pgrst_json_defs, ${bodyRows(rowType, sql`pgrst_json_defs.val`, false, spec, true)}`
  }
  return sql`pgrst_source AS ( ${insertStatement(plan, spec, rows, returning)} )`
}

function whereClause(plan: MutatePlan, spec: { where: UpdateSpec['where'] }): Sql {
  const q: Qualifier = { kind: 'table', schema: plan.table.schema, name: plan.table.name }
  const conds = spec.where.map((c) => renderCondition(q, c))
  return conds.length === 0 ? empty : sql` WHERE ${join(conds, sql` AND `)}`
}

function renderUpdate(plan: MutatePlan, spec: UpdateSpec, returning: ReturnPreference): Sql {
  const t = qualified(plan.table.schema, plan.table.name)
  if (spec.set.length === 0) {
    // Matches PostgREST: an empty body updates nothing (`WHERE false`).
    return sql`pgrst_source AS ( SELECT ${returnedColumns(plan, returning)} FROM ${t} WHERE false )`
  }
  const set = join(
    spec.set.map((s) =>
      s.value === 'default'
        ? sql`${ident(s.column)} = DEFAULT`
        : sql`${ident(s.column)} = ${bodyColumn(s.column, spec.parsers)}`,
    ),
  )
  const from = sql`pgrst_payload, ${bodyRows(sql`NULL::${t}`, sql`pgrst_payload.json_data`, spec.payload.isArray, spec)}`
  return sql`pgrst_source AS ( UPDATE ${t} SET ${set} FROM ${from}${whereClause(plan, spec)} RETURNING ${returnedColumns(plan, returning)} )`
}

function renderDelete(
  plan: MutatePlan,
  spec: MutatePlan['spec'] & { kind: 'delete' },
  returning: ReturnPreference,
): Sql {
  const t = qualified(plan.table.schema, plan.table.name)
  return sql`pgrst_source AS ( DELETE FROM ${t}${whereClause(plan, spec)} RETURNING ${returnedColumns(plan, returning)} )`
}

/**
 * The statement of a write. `returning` may differ from the plan's: the engine retries a
 * representation refused by the SELECT policy as minimal (docs/service.md §7).
 */
export function renderMutate(plan: MutatePlan, returning: ReturnPreference = plan.returning): Statement {
  const spec = plan.spec
  const payload =
    spec.kind === 'delete' ? empty : sql`pgrst_payload AS ( SELECT ${param(spec.payload.json)}::json AS json_data ), `
  let source: Sql
  switch (spec.kind) {
    case 'insert':
      source = renderInsert(plan, spec, returning)
      break
    case 'update':
      source = renderUpdate(plan, spec, returning)
      break
    case 'delete':
      source = renderDelete(plan, spec, returning)
      break
  }
  let ctes = sql`WITH ${payload}${source}`
  let rows = sql`SELECT * FROM pgrst_source`
  let body: Sql
  if (returning === 'representation') {
    const from = sql`pgrst_source AS ${ident(plan.alias)}`
    ctes = sql`${ctes}, pgrst_repr AS ( ${renderNode(plan.tree, ALL_ROWS, from)} )`
    rows = sql`SELECT * FROM pgrst_repr`
    body = renderRowsBody(plan.media, 'pgrst_repr')
  } else if (returning === 'headers-only') {
    body = sql`coalesce(json_agg(_postgrest_t), '[]')::text`
  } else {
    body = sql`''::text`
  }
  const total = plan.count !== null ? sql`pg_catalog.count(_postgrest_t)` : sql`null::bigint`
  const inserted =
    spec.kind === 'insert' && spec.countInserts
      ? sql`nullif(pg_catalog.current_setting('pgrst.inserted', true), '')::int`
      : sql`null::int`
  return render(
    sql`${ctes} SELECT ${total} AS total_result_set, pg_catalog.count(_postgrest_t) AS page_total, ${body} AS body, nullif(pg_catalog.current_setting('response.headers', true), '') AS response_headers, nullif(pg_catalog.current_setting('response.status', true), '') AS response_status, ${inserted} AS response_inserted FROM ( ${rows} ) _postgrest_t`,
  )
}

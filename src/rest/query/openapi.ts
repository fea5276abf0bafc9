// The privilege look-up behind the OpenAPI root (docs/rest-protocol.md §5.4, follow-privileges):
// which of the schema's relations and functions the request's role may use, run inside
// the request's transaction after SET ROLE. Static text; the OIDs are parameters. Pure.
import { param, render, sql, type Statement } from './sql.js'

/**
 * One row: `tables` = JSON array of [oid, select, insert, update, delete] and `routines` =
 * JSON array of [oid, execute], for the current role; `usage` = USAGE on the schema;
 * `schema_description` its COMMENT (the document's title and description, as PostgREST's).
 */
export function renderOpenApiPrivileges(
  tableOids: readonly number[],
  routineOids: readonly number[],
  schema: string,
): Statement {
  return render(sql`SELECT
 (SELECT coalesce(json_agg(json_build_array(o, pg_catalog.has_any_column_privilege(o, 'SELECT'), pg_catalog.has_any_column_privilege(o, 'INSERT'), pg_catalog.has_any_column_privilege(o, 'UPDATE'), pg_catalog.has_table_privilege(o, 'DELETE'))), '[]')::text FROM unnest(${param('{' + tableOids.join(',') + '}')}::oid[]) AS o) AS tables,
 (SELECT coalesce(json_agg(json_build_array(o, pg_catalog.has_function_privilege(o, 'EXECUTE'))), '[]')::text FROM unnest(${param('{' + routineOids.join(',') + '}')}::oid[]) AS o) AS routines,
 pg_catalog.has_schema_privilege(${param(schema)}, 'USAGE') AS usage,
 (SELECT pg_catalog.obj_description(n.oid, 'pg_namespace') FROM pg_catalog.pg_namespace n WHERE n.nspname = ${param(schema)}) AS schema_description`)
}

// Reads what the TypeScript generator needs from a database's catalog: the relations,
// columns, functions and types of the chosen schemas, as postgres-meta's introspection
// reports them (supabase/postgres-meta src/lib/sql/*.sql.ts), and the relationships the
// REST engine's schema cache infers (foreign keys, also through views, as PostgREST does).
// Static SQL, schemas bound as a parameter; nothing here renders TypeScript.
import { loadSchemaCache, type Relationship } from '../rest/index.js'

/** Runs one query; rows are plain objects. */
export type CatalogQuery = (text: string, values: unknown[]) => Promise<Array<Record<string, unknown>>>

export interface CatalogRelation {
  readonly id: number
  readonly schema: string
  readonly name: string
  readonly kind: 'table' | 'foreign-table' | 'view' | 'materialized-view'
  /** A view that takes INSERT and UPDATE (information_schema.views' rule). */
  readonly updatable: boolean
}

export interface CatalogColumn {
  readonly relationId: number
  readonly name: string
  /** `typname` of the column's type, or of a domain's base type. */
  readonly format: string
  readonly nullable: boolean
  readonly identity: boolean
  readonly identityAlways: boolean
  readonly hasDefault: boolean
  readonly updatable: boolean
}

export interface CatalogArg {
  readonly mode: 'in' | 'out' | 'inout' | 'variadic' | 'table'
  /** '' when unnamed. */
  readonly name: string
  readonly typeId: number
  readonly hasDefault: boolean
}

export interface CatalogFunction {
  readonly schema: string
  readonly name: string
  readonly args: readonly CatalogArg[]
  /** pg_get_function_arguments (computed fields are matched on it). */
  readonly argumentTypes: string
  /** pg_get_function_result (orders overloads). */
  readonly returnType: string
  readonly returnTypeId: number
  readonly returnRelationId: number | null
  readonly returnsSet: boolean
  /** The ROWS estimate of a set-returning function, null otherwise. */
  readonly rows: number | null
}

export interface CatalogType {
  readonly id: number
  readonly name: string
  readonly schema: string
  /** format_type of the type (a row type's qualified name when outside the search path). */
  readonly format: string
  readonly enums: readonly string[]
  readonly attributes: ReadonlyArray<{ readonly name: string; readonly typeId: number }>
  /** The relation of a row type (table, view, composite type), null otherwise. */
  readonly relationId: number | null
}

/** A foreign key seen from the side that holds it (postgres-meta's relationship). */
export interface CatalogRelationship {
  readonly foreignKeyName: string
  readonly schema: string
  readonly relation: string
  readonly columns: readonly string[]
  readonly referencedSchema: string
  readonly referencedRelation: string
  readonly referencedColumns: readonly string[]
  readonly isOneToOne: boolean
}

export interface Catalog {
  /** The chosen schemas that exist and the caller may use, sorted. */
  readonly schemas: readonly string[]
  readonly relations: readonly CatalogRelation[]
  readonly columns: readonly CatalogColumn[]
  readonly functions: readonly CatalogFunction[]
  readonly types: readonly CatalogType[]
  readonly relationships: readonly CatalogRelationship[]
}

const SCHEMAS_SQL = `
SELECT n.nspname AS name
FROM pg_catalog.pg_namespace n
WHERE n.nspname = ANY ($1::text[])
  AND (pg_catalog.pg_has_role(n.nspowner, 'USAGE') OR pg_catalog.has_schema_privilege(n.oid, 'CREATE, USAGE'))`

const RELATIONS_SQL = `
SELECT c.oid::int8 AS id, n.nspname AS schema, c.relname AS name, c.relkind::text AS kind,
       (c.relkind = 'v' AND (pg_catalog.pg_relation_is_updatable(c.oid, false) & 20) = 20) AS updatable
FROM pg_catalog.pg_class c
JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r', 'p', 'f', 'v', 'm') AND n.nspname = ANY ($1::text[])`

const COLUMNS_SQL = `
SELECT a.attrelid::int8 AS relation_id, a.attname AS name,
       COALESCE(bt.typname, t.typname)::text AS format,
       NOT (a.attnotnull OR (t.typtype = 'd' AND t.typnotnull)) AS nullable,
       a.attidentity IN ('a', 'd') AS identity, a.attidentity = 'a' AS identity_always,
       a.atthasdef AS has_default,
       (c.relkind IN ('r', 'p') OR (c.relkind IN ('v', 'f') AND pg_catalog.pg_column_is_updatable(c.oid, a.attnum, false))) AS updatable
FROM pg_catalog.pg_attribute a
JOIN pg_catalog.pg_class c ON c.oid = a.attrelid
JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
JOIN pg_catalog.pg_type t ON t.oid = a.atttypid
LEFT JOIN pg_catalog.pg_type bt ON t.typtype = 'd' AND bt.oid = t.typbasetype
WHERE a.attnum > 0 AND NOT a.attisdropped AND c.relkind IN ('r', 'p', 'f', 'v', 'm')
  AND n.nspname = ANY ($1::text[])
  AND (pg_catalog.pg_has_role(c.relowner, 'USAGE')
       OR pg_catalog.has_column_privilege(c.oid, a.attnum, 'SELECT, INSERT, UPDATE, REFERENCES'))`

// Arguments as postgres-meta lists them: every argument (OUT and TABLE ones too) with its
// mode and name, and the default flags of the IN arguments laid over the same positions.
const FUNCTIONS_SQL = `
SELECT n.nspname AS schema, p.proname AS name,
       COALESCE(p.proargmodes::text[], ARRAY[]::text[]) AS modes,
       COALESCE(p.proargnames, ARRAY[]::text[]) AS names,
       ARRAY(SELECT x::int8 FROM unnest(COALESCE(p.proallargtypes, p.proargtypes::oid[])) WITH ORDINALITY AS u(x, o) ORDER BY o) AS type_ids,
       p.pronargs AS nargs, p.pronargdefaults AS ndefaults,
       pg_catalog.pg_get_function_arguments(p.oid) AS argument_types,
       pg_catalog.pg_get_function_result(p.oid) AS return_type,
       p.prorettype::int8 AS return_type_id, NULLIF(rt.typrelid, 0)::int8 AS return_relation_id,
       p.proretset AS returns_set, CASE WHEN p.proretset THEN NULLIF(p.prorows, 0) END AS rows
FROM pg_catalog.pg_proc p
JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
JOIN pg_catalog.pg_type rt ON rt.oid = p.prorettype
WHERE p.prokind = 'f' AND n.nspname = ANY ($1::text[])
  AND rt.typname NOT IN ('trigger', 'event_trigger')
ORDER BY p.oid`

const TYPES_SQL = `
SELECT t.oid::int8 AS id, t.typname AS name, n.nspname AS schema, pg_catalog.format_type(t.oid, NULL) AS format,
       COALESCE((SELECT array_agg(e.enumlabel::text ORDER BY e.enumsortorder) FROM pg_catalog.pg_enum e WHERE e.enumtypid = t.oid), ARRAY[]::text[]) AS enums,
       COALESCE((SELECT json_agg(json_build_object('name', a.attname, 'typeId', a.atttypid::int8) ORDER BY a.attnum)
                 FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_class rc ON rc.oid = a.attrelid
                 WHERE a.attrelid = t.typrelid AND rc.relkind = 'c' AND a.attnum > 0 AND NOT a.attisdropped), '[]') AS attributes,
       NULLIF(t.typrelid, 0)::int8 AS relation_id
FROM pg_catalog.pg_type t
JOIN pg_catalog.pg_namespace n ON n.oid = t.typnamespace
LEFT JOIN pg_catalog.pg_class c ON c.oid = t.typrelid
WHERE t.typrelid = 0 OR c.relkind IN ('c', 'r', 'v', 'm', 'p')
ORDER BY t.oid`

const KINDS: Record<string, CatalogRelation['kind']> = {
  r: 'table',
  p: 'table',
  f: 'foreign-table',
  v: 'view',
  m: 'materialized-view',
}
const MODES: Record<string, CatalogArg['mode']> = { i: 'in', o: 'out', b: 'inout', v: 'variadic', t: 'table' }

const num = (v: unknown): number => Number(v)
const numOrNull = (v: unknown): number | null => (v === null || v === undefined ? null : Number(v))
const strs = (v: unknown): string[] => (Array.isArray(v) ? v.map(String) : [])

function toFunction(r: Record<string, unknown>): CatalogFunction {
  const typeIds = (r.type_ids as unknown[]).map(Number)
  const modes = strs(r.modes)
  const names = strs(r.names)
  const nargs = num(r.nargs)
  const firstDefault = nargs - num(r.ndefaults)
  const args = typeIds.map((typeId, i): CatalogArg => ({
    mode: MODES[modes[i] ?? 'i'] ?? 'in',
    name: names[i] ?? '',
    typeId,
    hasDefault: i < nargs && i >= firstDefault,
  }))
  return {
    schema: String(r.schema),
    name: String(r.name),
    args,
    argumentTypes: String(r.argument_types),
    returnType: String(r.return_type),
    returnTypeId: num(r.return_type_id),
    returnRelationId: numOrNull(r.return_relation_id),
    returnsSet: r.returns_set === true,
    rows: numOrNull(r.rows),
  }
}

/** The relationships of the REST engine's schema cache, each foreign key once, from its holder. */
function toRelationships(byOrigin: ReadonlyMap<string, readonly Relationship[]>): CatalogRelationship[] {
  const out: CatalogRelationship[] = []
  for (const rel of [...byOrigin.values()].flat()) {
    const c = rel.cardinality
    if (c.kind !== 'm2o' && !(c.kind === 'o2o' && !c.isParent)) continue
    out.push({
      foreignKeyName: c.constraint,
      schema: rel.table.schema,
      relation: rel.table.name,
      columns: c.columns.map(([col]) => col),
      referencedSchema: rel.foreignTable.schema,
      referencedRelation: rel.foreignTable.name,
      referencedColumns: c.columns.map(([, fcol]) => fcol),
      isOneToOne: c.kind === 'o2o',
    })
  }
  return out
}

/**
 * Reads the catalog of `schemas`. Function argument lists print type names as the
 * connection's search path sees them, so the caller runs this where the search path is
 * Postgres' default (`"$user", public`), as postgres-meta does.
 */
export async function readCatalog(query: CatalogQuery, schemas: readonly string[]): Promise<Catalog> {
  const list = [...schemas]
  const visible = new Set((await query(SCHEMAS_SQL, [list])).map((r) => String(r.name)))
  const chosen = list.filter((s) => visible.has(s))
  const relations = (await query(RELATIONS_SQL, [chosen])).map((r): CatalogRelation => ({
    id: num(r.id),
    schema: String(r.schema),
    name: String(r.name),
    kind: KINDS[String(r.kind)] ?? 'table',
    updatable: r.updatable === true,
  }))
  const columns = (await query(COLUMNS_SQL, [chosen])).map((r): CatalogColumn => ({
    relationId: num(r.relation_id),
    name: String(r.name),
    format: String(r.format),
    nullable: r.nullable === true,
    identity: r.identity === true,
    identityAlways: r.identity_always === true,
    hasDefault: r.has_default === true,
    updatable: r.updatable === true,
  }))
  const functions = (await query(FUNCTIONS_SQL, [chosen])).map(toFunction)
  const types = (await query(TYPES_SQL, [])).map((r): CatalogType => ({
    id: num(r.id),
    name: String(r.name),
    schema: String(r.schema),
    format: String(r.format),
    enums: strs(r.enums),
    attributes: (r.attributes as Array<{ name: string; typeId: number }>).map((a) => ({
      name: String(a.name),
      typeId: Number(a.typeId),
    })),
    relationId: numOrNull(r.relation_id),
  }))
  const cache = await loadSchemaCache(query, chosen, 0, new Set())
  return {
    schemas: [...chosen].sort(byName),
    relations,
    columns,
    functions,
    types,
    relationships: toRelationships(cache.relationships),
  }
}

/** postgres-meta orders every list with String#localeCompare. */
export const byName = (a: string, b: string): number => a.localeCompare(b)

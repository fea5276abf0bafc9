// Catalog queries of the schema cache: static SQL text whose only inputs are bind
// parameters ($1 = the exposed schemas as text[]). Read by load.ts, which sends them all
// in one transaction and one round trip through the executor and turns the rows into a
// SchemaCache.

/**
 * The database's schema version (platform migration 0160): changes when a transaction
 * that ran DDL commits. Read with the catalog (the version the cache is of) and in every
 * request's transaction (has it changed since?). Text: compared, never computed with.
 */
export const SCHEMA_VERSION_SQL = `
SELECT (s.version + CASE WHEN e.is_called THEN e.last_value ELSE 0 END)::text AS version
FROM platform.schema_version s CROSS JOIN platform.schema_version_extra e`

/** Tables, views, materialized views, foreign and partitioned tables (no partitions). */
export const RELATIONS_SQL = `
SELECT c.oid AS oid, n.nspname AS schema, c.relname AS name, c.relkind::text AS kind,
       -- A table is always insertable, updatable and deletable (what the function answers
       -- for one, without opening the relation).
       CASE WHEN c.relkind IN ('r', 'p') THEN 28 ELSE pg_catalog.pg_relation_is_updatable(c.oid, true) END AS mask,
       pg_catalog.obj_description(c.oid, 'pg_class') AS description
FROM pg_catalog.pg_class c
JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r', 'v', 'm', 'f', 'p') AND NOT c.relispartition AND n.nspname = ANY ($1::text[])
ORDER BY n.nspname, c.relname`

export const COLUMNS_SQL = `
SELECT a.attrelid AS rel, a.attname AS name, a.attnum AS num,
       pg_catalog.format_type(a.atttypid, a.atttypmod) AS type, a.atttypid AS type_oid,
       -- A domain over a domain: its base type at the end of the chain (PostgREST's base
       -- types); the chain is walked only for such columns.
       CASE WHEN bt.typtype = 'd' THEN (
         WITH RECURSIVE chain(oid) AS (
           SELECT bt.typbasetype
           UNION ALL
           SELECT ct.typbasetype FROM chain JOIN pg_catalog.pg_type ct ON ct.oid = chain.oid AND ct.typtype = 'd'
         )
         SELECT ft.typname FROM chain JOIN pg_catalog.pg_type ft ON ft.oid = chain.oid AND ft.typtype <> 'd' LIMIT 1)
       ELSE COALESCE(bt.typname, t.typname) END::text AS base_type,
       -- An enum's labels (of a domain's base type too), for the OpenAPI document.
       CASE WHEN COALESCE(bt.typtype, t.typtype) = 'e' THEN ARRAY(
         SELECT e.enumlabel::text FROM pg_catalog.pg_enum e WHERE e.enumtypid = COALESCE(bt.oid, t.oid) ORDER BY e.enumsortorder)
       END AS enum_values,
       NOT (a.attnotnull OR (t.typtype = 'd' AND t.typnotnull)) AS nullable,
       pg_catalog.pg_get_expr(d.adbin, d.adrelid) AS default_expr,
       CASE
         WHEN t.typtype = 'd' AND d.adbin IS NULL THEN pg_catalog.pg_get_expr(t.typdefaultbin, 0)
         WHEN a.attidentity = 'd' THEN (
           SELECT pg_catalog.format('nextval(%L::regclass)', pg_catalog.format('%I.%I', sn.nspname, s.relname))
           FROM pg_catalog.pg_depend dep
           JOIN pg_catalog.pg_class s ON s.oid = dep.objid AND s.relkind = 'S'
           JOIN pg_catalog.pg_namespace sn ON sn.oid = s.relnamespace
           WHERE dep.classid = 'pg_catalog.pg_class'::pg_catalog.regclass AND dep.refobjid = a.attrelid
             AND dep.refobjsubid = a.attnum AND dep.deptype = 'i'
           LIMIT 1)
         WHEN a.attgenerated <> '' THEN NULL
         ELSE pg_catalog.pg_get_expr(d.adbin, d.adrelid)
       END AS insert_default,
       a.attgenerated <> '' AS generated,
       a.attidentity <> '' AS identity,
       pg_catalog.col_description(a.attrelid, a.attnum) AS description
FROM pg_catalog.pg_attribute a
JOIN pg_catalog.pg_class c ON c.oid = a.attrelid
JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
JOIN pg_catalog.pg_type t ON t.oid = a.atttypid
LEFT JOIN pg_catalog.pg_type bt ON t.typtype = 'd' AND bt.oid = t.typbasetype
LEFT JOIN pg_catalog.pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
WHERE a.attnum > 0 AND NOT a.attisdropped
  AND c.relkind IN ('r', 'v', 'm', 'f', 'p') AND NOT c.relispartition AND n.nspname = ANY ($1::text[])
ORDER BY a.attrelid, a.attnum`

/**
 * Primary keys, unique and foreign keys of user relations in any schema (views may sit
 * on tables outside the exposed schemas), with column names in key order.
 */
export const CONSTRAINTS_SQL = `
SELECT con.conname AS name, con.contype::text AS type, con.conrelid AS rel, con.confrelid AS frel,
       ARRAY(SELECT a.attname::text FROM unnest(con.conkey) WITH ORDINALITY AS k(num, ord)
             JOIN pg_catalog.pg_attribute a ON a.attrelid = con.conrelid AND a.attnum = k.num ORDER BY k.ord) AS cols,
       ARRAY(SELECT a.attname::text FROM unnest(con.confkey) WITH ORDINALITY AS k(num, ord)
             JOIN pg_catalog.pg_attribute a ON a.attrelid = con.confrelid AND a.attnum = k.num ORDER BY k.ord) AS fcols
FROM pg_catalog.pg_constraint con
JOIN pg_catalog.pg_namespace n ON n.oid = con.connamespace
WHERE con.contype IN ('p', 'u', 'f') AND con.conrelid <> 0
  AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg\\_toast%'
ORDER BY con.conrelid, con.conname`

/** The stored rule of each view: its target list says which base column each view column is. */
export const VIEWS_SQL = `
SELECT c.oid AS rel, r.ev_action::text AS action
FROM pg_catalog.pg_rewrite r
JOIN pg_catalog.pg_class c ON c.oid = r.ev_class
JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN ('v', 'm') AND r.rulename = '_RETURN'
  AND n.nspname NOT IN ('pg_catalog', 'information_schema')`

/**
 * Column names by (relation, attnum) of every relation a view of VIEWS_SQL depends on
 * (its rule's pg_depend entries: all relations its query reads), so that the base column
 * each view column stands for can be named whatever schema the base relation is in.
 */
export const ATTNAMES_SQL = `
SELECT a.attrelid AS rel, a.attnum AS num, a.attname AS name
FROM pg_catalog.pg_attribute a
WHERE a.attnum > 0 AND NOT a.attisdropped AND a.attrelid IN (
  SELECT d.refobjid
  FROM pg_catalog.pg_depend d
  JOIN pg_catalog.pg_rewrite r ON r.oid = d.objid
  JOIN pg_catalog.pg_class c ON c.oid = r.ev_class
  JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
  WHERE d.classid = 'pg_catalog.pg_rewrite'::pg_catalog.regclass
    AND d.refclassid = 'pg_catalog.pg_class'::pg_catalog.regclass
    AND c.relkind IN ('v', 'm') AND r.rulename = '_RETURN'
    AND n.nspname NOT IN ('pg_catalog', 'information_schema'))`

/**
 * Computed relationships (PostgREST's allComputedRels): functions of one argument that is a
 * row of a relation and returning rows of a relation, both relations in the exposed
 * schemas; single_row when the function is not SETOF or declares ROWS 1.
 */
export const COMPUTED_RELS_SQL = `
SELECT fn.nspname AS schema, p.proname AS name,
       arg_ns.nspname AS table_schema, arg_rel.relname AS table_name,
       ret_ns.nspname AS ftable_schema, ret_rel.relname AS ftable_name,
       (NOT p.proretset OR p.prorows = 1) AS single_row
FROM pg_catalog.pg_proc p
JOIN pg_catalog.pg_namespace fn ON fn.oid = p.pronamespace
JOIN pg_catalog.pg_class arg_rel ON arg_rel.reltype = p.proargtypes[0] AND arg_rel.relkind IN ('v', 'r', 'm', 'f', 'p')
JOIN pg_catalog.pg_namespace arg_ns ON arg_ns.oid = arg_rel.relnamespace
JOIN pg_catalog.pg_class ret_rel ON ret_rel.reltype = p.prorettype AND ret_rel.relkind IN ('v', 'r', 'm', 'f', 'p')
JOIN pg_catalog.pg_namespace ret_ns ON ret_ns.oid = ret_rel.relnamespace
WHERE p.pronargs = 1 AND p.prokind = 'f'
  AND arg_ns.nspname = ANY ($1::text[]) AND ret_ns.nspname = ANY ($1::text[])
ORDER BY fn.nspname, p.proname, p.oid`

/** Functions of the exposed schemas (RPC, OpenAPI). */
export const ROUTINES_SQL = `
SELECT p.oid AS oid, n.nspname AS schema, p.proname AS name,
       pg_catalog.obj_description(p.oid, 'pg_proc') AS description,
       p.provolatile::text AS volatility, p.proretset AS returns_set,
       pg_catalog.format_type(p.prorettype, NULL) AS return_type,
       COALESCE(bt.typtype, rt.typtype)::text AS return_typtype, COALESCE(bt.typrelid, rt.typrelid) AS return_relid,
       p.pronargdefaults AS nargdefaults,
       COALESCE(p.proargnames, ARRAY[]::text[])::text[] AS arg_names,
       ARRAY(SELECT pg_catalog.format_type(x, NULL) FROM unnest(COALESCE(p.proallargtypes, p.proargtypes::oid[])) WITH ORDINALITY AS u(x, o) ORDER BY o) AS arg_types,
       ARRAY(SELECT tn.nspname::text FROM unnest(COALESCE(p.proallargtypes, p.proargtypes::oid[])) WITH ORDINALITY AS u(x, o)
             JOIN pg_catalog.pg_type tt ON tt.oid = u.x JOIN pg_catalog.pg_namespace tn ON tn.oid = tt.typnamespace ORDER BY o) AS arg_type_schemas,
       ARRAY(SELECT tt.typname::text FROM unnest(COALESCE(p.proallargtypes, p.proargtypes::oid[])) WITH ORDINALITY AS u(x, o)
             JOIN pg_catalog.pg_type tt ON tt.oid = u.x ORDER BY o) AS arg_type_names,
       COALESCE(p.proargmodes::text[], ARRAY[]::text[]) AS arg_modes,
       COALESCE(p.proconfig, ARRAY[]::text[]) AS config
FROM pg_catalog.pg_proc p
JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
JOIN pg_catalog.pg_type rt ON rt.oid = p.prorettype
-- A domain returns what its base type is (PostgREST's base_types): a domain over a composite is a row.
LEFT JOIN pg_catalog.pg_type bt ON rt.typtype = 'd' AND bt.oid = rt.typbasetype
WHERE p.prokind = 'f' AND n.nspname = ANY ($1::text[])
ORDER BY n.nspname, p.proname, p.oid`

/**
 * Data representations (PostgREST's dataRepresentations, docs "Domain Representations"):
 * the implicit casts WITH FUNCTION the caller may execute from a domain to json or text,
 * or from json or text to a domain. A few rows of pg_cast; none in most databases.
 */
export const REPRESENTATIONS_SQL = `
SELECT c.castsource AS source, c.casttarget AS target, s.typtype = 'd' AS from_domain,
       fn.nspname AS fn_schema, p.proname AS fn_name
FROM pg_catalog.pg_cast c
JOIN pg_catalog.pg_type s ON s.oid = c.castsource
JOIN pg_catalog.pg_type t ON t.oid = c.casttarget
JOIN pg_catalog.pg_proc p ON p.oid = c.castfunc
JOIN pg_catalog.pg_namespace fn ON fn.oid = p.pronamespace
WHERE c.castcontext = 'i' AND c.castmethod = 'f'
  AND pg_catalog.has_function_privilege(c.castfunc, 'execute')
  AND ((s.typtype = 'd' AND c.casttarget IN ('pg_catalog.json'::pg_catalog.regtype, 'pg_catalog.text'::pg_catalog.regtype))
    OR (t.typtype = 'd' AND c.castsource IN ('pg_catalog.json'::pg_catalog.regtype, 'pg_catalog.text'::pg_catalog.regtype)))`

/**
 * Media type handlers (PostgREST's mediaHandlers, docs "Media Type Handlers"): domains
 * named like a media type (`text/html`, `*\/*`); aggregates of the exposed schemas returning
 * one over rows of a relation (or anyelement), and functions returning one (not SETOF).
 * `*\/*` answers as application/octet-stream.
 */
export const MEDIA_HANDLERS_SQL = `
WITH media_types AS (
  SELECT t.oid, lower(t.typname) AS typname, t.typnamespace,
         CASE t.typname WHEN '*/*' THEN 'application/octet-stream' ELSE t.typname::text END AS resolved,
         t.typbasetype = 'pg_catalog.bytea'::pg_catalog.regtype AS bytes
  FROM pg_catalog.pg_type t
  WHERE t.typbasetype <> 0 AND (t.typname ~* '^[A-Za-z0-9.-]+/[A-Za-z0-9.+-]+$' OR t.typname = '*/*')
)
SELECT pn.nspname AS handler_schema, p.proname AS handler_name,
       an.nspname AS target_schema, a.typname::text AS target_name, a.typname = 'anyelement' AS any_target,
       m.typname AS media_type, m.resolved, m.bytes
FROM media_types m
JOIN pg_catalog.pg_proc p ON p.prorettype = m.oid
JOIN pg_catalog.pg_namespace pn ON pn.oid = p.pronamespace
JOIN pg_catalog.pg_aggregate g ON g.aggfnoid = p.oid
JOIN pg_catalog.pg_type a ON a.oid = p.proargtypes[0]
JOIN pg_catalog.pg_namespace an ON an.oid = a.typnamespace
WHERE pn.nspname = ANY ($1::text[]) AND p.pronargs = 1
  AND (a.typname = 'anyelement' OR EXISTS (SELECT 1 FROM pg_catalog.pg_class c WHERE c.reltype = a.oid AND c.relkind IN ('v', 'r', 'm', 'f', 'p')))
UNION
SELECT tn.nspname, m.typname, pn.nspname, p.proname::text, false, m.typname, m.resolved, m.bytes
FROM media_types m
JOIN pg_catalog.pg_proc p ON p.prorettype = m.oid
JOIN pg_catalog.pg_namespace pn ON pn.oid = p.pronamespace
JOIN pg_catalog.pg_namespace tn ON tn.oid = m.typnamespace
WHERE pn.nspname = ANY ($1::text[]) AND NOT p.proretset AND p.prokind = 'f'`

/** The time zone names `Prefer: timezone=` may use (PostgREST's dbTimezones). */
export const TIMEZONES_SQL = 'SELECT name FROM pg_catalog.pg_timezone_names'

/**
 * The settings of the roles the engine's login is a direct member of (its three request
 * roles): `ALTER ROLE ... SET` for all databases and `ALTER ROLE ... IN DATABASE` for this one
 * (which wins, as it does for a login). As PostgREST's queryRoleSettings
 * (src/PostgREST/Config/Database.hs), only settings the login may set: those pg_settings lists
 * with context `user`, or that the login was granted SET on (GRANT SET ON PARAMETER).
 * PostgREST reads pg_roles.rolconfig (the settings for all databases) only.
 */
export const ROLE_SETTINGS_SQL = `
SELECT DISTINCT ON (r.rolname, kv.name) r.rolname AS role, kv.name AS name, kv.value AS value
FROM pg_catalog.pg_auth_members m
JOIN pg_catalog.pg_roles r ON r.oid = m.roleid
JOIN pg_catalog.pg_db_role_setting s ON s.setrole = m.roleid
  AND s.setdatabase IN (0, (SELECT d.oid FROM pg_catalog.pg_database d WHERE d.datname = pg_catalog.current_database()))
CROSS JOIN LATERAL pg_catalog.unnest(s.setconfig) AS c(setting)
CROSS JOIN LATERAL (SELECT pg_catalog.substr(c.setting, 1, pg_catalog.strpos(c.setting, '=') - 1) AS name,
                           pg_catalog.substr(c.setting, pg_catalog.strpos(c.setting, '=') + 1) AS value) AS kv
JOIN pg_catalog.pg_settings ps ON ps.name = kv.name
  AND (ps.context = 'user' OR pg_catalog.has_parameter_privilege(CURRENT_USER, ps.name, 'SET'))
WHERE m.member = (SELECT u.oid FROM pg_catalog.pg_roles u WHERE u.rolname = CURRENT_USER)
ORDER BY r.rolname, kv.name, s.setdatabase DESC`

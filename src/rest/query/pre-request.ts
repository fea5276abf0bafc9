// The settings statement that opens every request transaction (docs/rest-protocol.md §6.2): role,
// request.jwt.claims, request.method/path/headers/cookies, statement_timeout, timezone,
// search_path, app.settings.* — all transaction-local and all parameters — plus the caller
// role's visibility of the target relation. The request.* names are those PostgREST 12 and
// later set (txVarQuery in src/PostgREST/Query/PreQuery.hs): no legacy per-claim
// request.jwt.claim.<name> (db-use-legacy-gucs, removed in PostgREST 12).
import type { Statement } from './sql.js'

/** Prepared once per connection under this name (the text never changes). */
const PRE_REQUEST_NAME = 'gatehouse_rest_pre_v3'

const PRE_REQUEST_TEXT = `SELECT pg_catalog.set_config('search_path', $1, true) AS search_path,
 pg_catalog.set_config('role', $2, true) AS role,
 pg_catalog.set_config('request.jwt.claims', $3, true) AS claims,
 pg_catalog.set_config('request.method', $4, true) AS method,
 pg_catalog.set_config('request.path', $5, true) AS path,
 pg_catalog.set_config('request.headers', $6, true) AS headers,
 pg_catalog.set_config('request.cookies', $7, true) AS cookies,
 pg_catalog.set_config('statement_timeout', $8, true) AS statement_timeout,
 CASE WHEN $9::text IS NULL THEN NULL ELSE pg_catalog.set_config('timezone', $9::text, true) END AS timezone,
 (SELECT pg_catalog.count(pg_catalog.set_config('app.settings.' || s.key, s.value, true)) FROM pg_catalog.json_each_text($12::json) AS s) AS app_settings,
 CASE WHEN $10::oid IS NULL THEN true ELSE COALESCE(pg_catalog.has_any_column_privilege($11::name, $10::oid, 'SELECT, INSERT, UPDATE, REFERENCES') OR pg_catalog.has_table_privilege($11::name, $10::oid, 'DELETE, TRUNCATE, TRIGGER'), false) END AS visible`

interface RequestSettings {
  /** Schemas of search_path, first the request's. */
  searchPath: readonly string[]
  role: string
  /** The verified claims with `role` set to the effective role. */
  claims: Record<string, unknown>
  method: string
  path: string
  headers: Readonly<Record<string, string>>
  cookies: Readonly<Record<string, string>>
  statementTimeoutMs: number
  timezone: string | null
  /** Relation whose visibility to `role` is checked (any privilege); null = no check. */
  relationOid: number | null
  /** PostgREST's app.settings.*: `app.settings.<name>` for the transaction. */
  appSettings?: Readonly<Record<string, string>>
}

/**
 * `"a", "b"` for search_path (each name quoted), a schema named twice kept twice as PostgREST
 * sets it (the request's schema, then db-extra-search-path: `"public", "public"`), so what
 * `current_setting('search_path')` and an EXPLAIN's settings show is the same.
 */
function searchPathValue(schemas: readonly string[]): string {
  return schemas.map((s) => '"' + s.replace(/"/g, '""') + '"').join(', ')
}

/** `"schema"."function"` of a `schema.function` name (the tenant schema allows identifier characters only). */
function quotedFunction(name: string): string {
  return name
    .split('.')
    .map((p) => '"' + p.replace(/"/g, '""') + '"')
    .join('.')
}

/**
 * PostgREST's db-pre-request: `SELECT schema.function()` as a statement of its own after the
 * settings (in the settings' statement Postgres would check its privileges as the login, before
 * the role is set).
 */
export function renderPreRequestCall(fn: string): Statement {
  return { text: `SELECT ${quotedFunction(fn)}() IS NULL AS pre_request`, values: [] }
}

export function renderPreRequest(s: RequestSettings): Statement & { name: string } {
  return {
    name: PRE_REQUEST_NAME,
    text: PRE_REQUEST_TEXT,
    values: [
      searchPathValue(s.searchPath),
      s.role,
      JSON.stringify(s.claims),
      s.method,
      s.path,
      JSON.stringify(s.headers),
      JSON.stringify(s.cookies),
      String(s.statementTimeoutMs),
      s.timezone,
      s.relationOid,
      s.role,
      JSON.stringify(s.appSettings ?? {}),
    ],
  }
}

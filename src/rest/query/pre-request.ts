// The settings statement that opens every request transaction (docs/rest-protocol.md §6.2): role,
// request.jwt.claims, request.method/path/headers/cookies, statement_timeout, timezone,
// search_path, app.settings.*, the role's own settings (ALTER ROLE ... SET), a called
// function's hoisted settings — all transaction-local
// and all parameters — plus the caller role's visibility of the target relation. The request.*
// names are those PostgREST 12 and later set (txVarQuery in src/PostgREST/Query/PreQuery.hs):
// no legacy per-claim request.jwt.claim.<name> (db-use-legacy-gucs, removed in PostgREST 12).
import type { Statement } from './sql.js'
import { bareRecord } from '../../shared/index.js'

/** Prepared once per connection under this name (the text never changes). */
const PRE_REQUEST_NAME = 'gatehouse_rest_pre_v5'

// The role's own settings come before the role, as PostgREST sets them (so that a GRANT SET ON
// PARAMETER to the engine's login is enough for a setting the role may not set itself).
const PRE_REQUEST_TEXT = `SELECT pg_catalog.set_config('search_path', $1, true) AS search_path,
 pg_catalog.set_config('statement_timeout', $8, true) AS statement_timeout,
 (SELECT pg_catalog.count(pg_catalog.set_config(r.key, r.value, true)) FROM pg_catalog.json_each_text($14::json) AS r) AS role_settings,
 pg_catalog.set_config('role', $2, true) AS role,
 pg_catalog.set_config('request.jwt.claims', $3, true) AS claims,
 pg_catalog.set_config('request.method', $4, true) AS method,
 pg_catalog.set_config('request.path', $5, true) AS path,
 pg_catalog.set_config('request.headers', $6, true) AS headers,
 pg_catalog.set_config('request.cookies', $7, true) AS cookies,
 CASE WHEN $9::text IS NULL THEN NULL ELSE pg_catalog.set_config('timezone', $9::text, true) END AS timezone,
 (SELECT pg_catalog.count(pg_catalog.set_config(f.key, f.value, true)) FROM pg_catalog.json_each_text($13::json) AS f) AS function_settings,
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
  /** A called function's `SET name = value` clauses (PostgREST hoists some, see settingsWithinCap). */
  functionSettings?: ReadonlyArray<readonly [string, string]>
  /** The role's own settings (`ALTER ROLE ... SET`, from the schema cache; see settingsWithinCap). */
  roleSettings?: ReadonlyArray<readonly [string, string]>
}

/** PostgREST's default db-hoisted-tx-settings: the function settings set for the whole transaction. */
const HOISTED: ReadonlySet<string> = new Set([
  'statement_timeout',
  'plan_filter.statement_cost_limit',
  'default_transaction_isolation',
])

const TIME_UNITS_MS: Readonly<Record<string, number>> = {
  us: 0.001,
  ms: 1,
  s: 1000,
  min: 60_000,
  h: 3_600_000,
  d: 86_400_000,
}

/** A statement_timeout value in milliseconds (Postgres' units; no unit: ms); null when unreadable. */
function timeoutMs(value: string): number | null {
  const m = /^\s*(\d+(?:\.\d+)?)\s*(us|ms|s|min|h|d)?\s*$/.exec(value)
  return m === null ? null : Number(m[1]) * TIME_UNITS_MS[m[2] ?? 'ms']!
}

/**
 * Whether a statement_timeout may be set under the engine's (`capMs`, 0: none): the engine's
 * rest.statement_timeout_ms stays the upper bound (databases share the pools), so only a
 * shorter one of at least 1 ms (below, Postgres may round it to 0, which is no timeout at all).
 */
function timeoutWithinCap(value: string, capMs: number): boolean {
  if (capMs <= 0) return true
  const ms = timeoutMs(value)
  return ms !== null && ms >= 1 && ms <= capMs
}

/**
 * Settings as the transaction takes them, a statement_timeout only within the engine's
 * (timeoutWithinCap): the role's own (roleSettingsSql of PostgREST 12's txVarQuery), and those
 * of a called function PostgREST sets for the whole transaction (funcSettings, from its
 * db-hoisted-tx-settings: statement_timeout, plan_filter.statement_cost_limit,
 * default_transaction_isolation), so that a function's `SET statement_timeout` bounds the
 * statement that calls it. The function's are set after the role's: they win.
 */
function settingsWithinCap(settings: ReadonlyArray<readonly [string, string]>, capMs: number): Record<string, string> {
  const out = bareRecord<string>()
  for (const [name, value] of settings) {
    if (name === 'statement_timeout' && !timeoutWithinCap(value, capMs)) continue
    out[name] = value
  }
  return out
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
  const hoisted = (s.functionSettings ?? []).filter(([name]) => HOISTED.has(name))
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
      JSON.stringify(settingsWithinCap(hoisted, s.statementTimeoutMs)),
      JSON.stringify(settingsWithinCap(s.roleSettings ?? [], s.statementTimeoutMs)),
    ],
  }
}

/** The isolation levels a request's transaction begins with (READ COMMITTED unless a setting says otherwise). */
export type IsolationLevel = 'read committed' | 'repeatable read' | 'serializable'

function isolationLevel(value: string): IsolationLevel {
  const v = value.trim().toLowerCase()
  return v === 'repeatable read' || v === 'serializable' ? v : 'read committed'
}

/**
 * The isolation level of a request's transaction as PostgREST picks it (planIsoLvl,
 * src/PostgREST/MainTx.hs; toIsolationLevel, src/PostgREST/Config/Database.hs): a called
 * function's `SET default_transaction_isolation`, else the role's (`ALTER ROLE ... SET`), else
 * READ COMMITTED; other values (`read uncommitted`) are READ COMMITTED.
 */
export function transactionIsolation(
  roleIsolation: string | null | undefined,
  functionSettings?: ReadonlyArray<readonly [string, string]>,
): IsolationLevel {
  const fn = functionSettings?.find(([name]) => name === 'default_transaction_isolation')
  const value = fn?.[1] ?? roleIsolation ?? null
  return value === null ? 'read committed' : isolationLevel(value)
}

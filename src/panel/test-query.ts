// The panel's test query: one statement run in the tenant database, inside a transaction
// with SET LOCAL ROLE to the request role, the REST engine's search_path and
// request.jwt.claims as a real call has them, a statement timeout and a row cap, and ALWAYS
// rolled back. One statement only (extended protocol), transaction control refused, and the
// session is DISCARDed before the connection goes back to the pool.
// It logs in as the chosen role's test-query login (`<request role>_probe`, provisioning
// makes it: NOINHERIT, a member of that one role, the REST engine login's password), so
// nothing inside the SQL (SET ROLE, set_config('role', ...), RESET ROLE) can reach another
// request role: Postgres refuses a role the login is not a member of.
import pg from 'pg'
import { DEFAULT_EXTRA_SEARCH_PATH, tenantIssuer, type Tenant, type RoleKind } from '../tenants/index.js'
import { leadingKeyword, quoteIdent, ROLE_KINDS, roleClaim, type PoolLike } from '../shared/index.js'
import type { Privilege } from '../gateway/index.js'
import { ValidationError } from './errors.js'

/**
 * `as` of a test query: the role claim of a caller (anon, authenticated, service_role);
 * `svc`, the kind name, is accepted for service_role too.
 */
export type TestQueryAs = 'anon' | 'authenticated' | 'service_role' | 'svc'

const AS_KINDS: ReadonlyMap<string, RoleKind> = new Map<string, RoleKind>([
  ...ROLE_KINDS.map((k) => [roleClaim(k), k] as const),
  ['svc', 'svc'],
])

/** The request role kind a test query runs as. */
export function kindOfAs(as: TestQueryAs): RoleKind {
  return AS_KINDS.get(as)!
}

export interface TestQueryRequest {
  sql: string
  as: TestQueryAs
  user_id?: string
}

export interface TestQueryResult {
  /** SELECT, INSERT, UPDATE ... as Postgres reports it. */
  command: string | null
  /** Rows the statement returned or affected (Postgres' count, before the cap). */
  row_count: number | null
  rows: Array<Record<string, unknown>>
  fields: Array<{ name: string; type_oid: number }>
  /** More rows than the cap existed; only the first `max_rows` are returned. */
  truncated: boolean
  max_rows: number
  /** Always true: nothing a test query does is kept. */
  rolled_back: true
  role: { as: TestQueryAs; name: string }
}

const MAX_SQL = 100_000
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i

// Statements that would end or escape the transaction, or leave state in the session.
const REFUSED_KEYWORDS = new Set([
  'BEGIN',
  'START',
  'COMMIT',
  'END',
  'ROLLBACK',
  'ABORT',
  'SAVEPOINT',
  'RELEASE',
  'PREPARE',
  'DEALLOCATE',
  'DISCARD',
  'SET',
  'RESET',
])

/** What the statement needs, for refusals (like an HTTP method's needs), and its label. */
export function statementNeeds(keyword: string): { needs: Privilege[]; action: string; method: string } {
  switch (keyword) {
    case 'INSERT':
      return { needs: ['INSERT', 'SELECT', 'UPDATE'], action: 'an INSERT statement', method: 'POST' }
    case 'UPDATE':
      return { needs: ['UPDATE', 'SELECT'], action: 'an UPDATE statement', method: 'PATCH' }
    case 'DELETE':
      return { needs: ['DELETE', 'SELECT'], action: 'a DELETE statement', method: 'DELETE' }
    case 'SELECT':
    case 'TABLE':
    case 'VALUES':
    case 'WITH':
      return { needs: ['SELECT'], action: `a ${keyword} statement`, method: 'GET' }
    default:
      return { needs: [], action: 'the statement', method: 'POST' }
  }
}

/** Validates the body; throws ValidationError (400) naming the problem. */
export function parseTestQuery(body: unknown): TestQueryRequest {
  if (typeof body !== 'object' || body === null || Array.isArray(body))
    throw new ValidationError('send a JSON object {sql, as, user_id?}')
  const b = body as Record<string, unknown>
  for (const k of Object.keys(b)) {
    if (k !== 'sql' && k !== 'as' && k !== 'user_id')
      throw new ValidationError(`unknown field ${JSON.stringify(k)} (expected sql, as, user_id)`)
  }
  if (typeof b.sql !== 'string' || b.sql.trim() === '') throw new ValidationError('sql must be a non-empty string')
  if (b.sql.length > MAX_SQL) throw new ValidationError(`sql is longer than ${MAX_SQL} characters`)
  if (b.sql.includes('\u0000')) throw new ValidationError('sql must not contain NUL characters')
  if (typeof b.as !== 'string' || !AS_KINDS.has(b.as))
    throw new ValidationError(`as must be one of ${ROLE_KINDS.map((k) => `"${roleClaim(k)}"`).join(', ')} (or "svc")`)
  const out: TestQueryRequest = { sql: b.sql, as: b.as as TestQueryAs }
  if (b.user_id !== undefined && b.user_id !== null) {
    if (kindOfAs(out.as) !== 'auth') throw new ValidationError('user_id applies only to as = "authenticated"')
    if (typeof b.user_id !== 'string' || !UUID.test(b.user_id))
      throw new ValidationError('user_id must be a user id (a UUID)')
    out.user_id = b.user_id.toLowerCase()
  }
  const kw = leadingKeyword(b.sql)
  if (kw === '') throw new ValidationError('sql holds no statement')
  if (REFUSED_KEYWORDS.has(kw)) {
    throw new ValidationError(
      `${kw} is not allowed in a test query: it runs one statement inside a transaction that is always rolled back`,
    )
  }
  return out
}

/** The claims a real call of this kind carries to the REST engine (the gateway's re-signed token). */
function claimsFor(tenant: Tenant, req: TestQueryRequest, publicUrl: string): Record<string, unknown> {
  const kind = kindOfAs(req.as)
  const claims: Record<string, unknown> = { role: tenant.roles[kind] }
  if (kind === 'auth') {
    claims.iss = tenantIssuer(tenant, publicUrl)
    claims.aud = tenant.jwt.aud
    if (req.user_id !== undefined) claims.sub = req.user_id
    claims.is_anonymous = false
  }
  return claims
}

// ---- a query that stops after `rows` rows ---------------------------------------------------
// pg's Query with `rows` fetches every row in batches; this one asks for one batch only and
// then syncs, so a huge result never reaches Node. It also syncs after an error (the
// extended protocol without a pipelined Sync waits for one).

interface Connection {
  sync(): void
}
type PgQueryCtor = new (
  config: Record<string, unknown>,
  values?: unknown,
  callback?: (err: Error | undefined, res: unknown) => void,
) => {
  handlePortalSuspended(c: Connection): void
  handleCommandComplete(msg: unknown, c: Connection): void
  handleEmptyQuery(c: Connection): void
  handleError(err: Error, c: Connection): void
}

const BaseQuery = (pg as unknown as { Query: PgQueryCtor }).Query

class CappedQuery extends BaseQuery {
  synced = false
  suspended = false
  override handlePortalSuspended(c: Connection): void {
    this.suspended = true
    this.synced = true
    c.sync()
  }

  override handleCommandComplete(msg: unknown, c: Connection): void {
    this.synced = true
    super.handleCommandComplete(msg, c)
  }

  override handleEmptyQuery(c: Connection): void {
    this.synced = true
    super.handleEmptyQuery(c)
  }

  override handleError(err: Error, c: Connection): void {
    if (!this.synced) {
      this.synced = true
      c.sync()
    }
    super.handleError(err, c)
  }
}

interface RawResult {
  command: string | null
  rowCount: number | null
  rows: Array<Record<string, unknown>>
  fields: Array<{ name: string; dataTypeID: number }>
}

/** Thrown by runCapped when the result passed `maxBytes` (the connection is closed). */
export class ResultTooLarge extends Error {
  constructor(readonly maxBytes: number) {
    super(`result larger than ${maxBytes} bytes`)
  }
}

/** The socket pg reads from (pg.Client keeps it as connection.stream). */
function socketOf(client: pg.PoolClient): (NodeJS.EventEmitter & { destroy(): void }) | null {
  const stream = (client as unknown as { connection?: { stream?: unknown } }).connection?.stream
  return stream !== null && typeof stream === 'object' && typeof (stream as { on?: unknown }).on === 'function'
    ? (stream as NodeJS.EventEmitter & { destroy(): void })
    : null
}

// Rows are capped in count, not in size: one row may hold a value of up to 1 GB. The bytes
// Postgres sends are counted as they arrive, and past `maxBytes` the connection is closed
// before pg has gathered more, so a huge result never fills the panel's memory.
function runCapped(
  client: pg.PoolClient,
  sql: string,
  maxRows: number,
  maxBytes: number,
): Promise<{ result: RawResult; suspended: boolean }> {
  return new Promise((resolve, reject) => {
    const socket = socketOf(client)
    let received = 0
    let cut = false
    const count = (chunk: Buffer): void => {
      received += chunk.length
      if (received > maxBytes && !cut) {
        cut = true
        socket?.destroy()
      }
    }
    socket?.on('data', count)
    const q = new CappedQuery({ text: sql, rows: maxRows + 1, queryMode: 'extended' }, undefined, (err, res) => {
      socket?.off('data', count)
      if (cut) {
        reject(new ResultTooLarge(maxBytes))
        return
      }
      if (err) {
        reject(err)
        return
      }
      const r = (Array.isArray(res) ? res[res.length - 1] : res) as RawResult
      resolve({ result: r, suspended: q.suspended })
    })
    client.query(q as unknown as pg.QueryConfig)
  })
}

/** The login a test query of this kind runs as: the request role's `_probe` login. */
export function testQueryLogin(tenant: Tenant, kind: RoleKind): string {
  return `${tenant.roles[kind]}_probe`
}

/** The REST engine's connection URL with the test-query login of `kind` (same password). */
export function testQueryUrl(engineUrl: string, tenant: Tenant, kind: RoleKind): string {
  const u = new URL(engineUrl)
  u.username = encodeURIComponent(testQueryLogin(tenant, kind))
  return u.toString()
}

/** `"a", "b"`: the search_path of a REST request (the exposed schemas, then rest.extra_search_path). */
function searchPathOf(tenant: Tenant): string {
  const extra = tenant.rest.extra_search_path ?? DEFAULT_EXTRA_SEARCH_PATH
  return [...new Set([...tenant.rest.schemas, ...extra])].map(quoteIdent).join(', ')
}

interface RunTestQueryOptions {
  pool: PoolLike
  tenant: Tenant
  request: TestQueryRequest
  publicUrl: string
  timeoutMs: number
  maxRows: number
  /** Bytes of result read from Postgres at most (ResultTooLarge past it). */
  maxBytes: number
}

/** Runs the statement and rolls back. Postgres errors are thrown as they come (the route maps them). */
export async function runTestQuery(o: RunTestQueryOptions): Promise<TestQueryResult> {
  const kind = kindOfAs(o.request.as)
  const role = o.tenant.roles[kind]
  const method = statementNeeds(leadingKeyword(o.request.sql)).method
  const client = await o.pool.connect()
  let broken: Error | undefined
  try {
    await client.query('BEGIN')
    await client.query(`SET LOCAL ROLE ${quoteIdent(role)}`)
    await client.query(
      `SELECT pg_catalog.set_config('statement_timeout', $1, true), pg_catalog.set_config('request.jwt.claims', $2, true),
              pg_catalog.set_config('request.method', $3, true), pg_catalog.set_config('request.path', '/', true),
              pg_catalog.set_config('request.headers', '{}', true), pg_catalog.set_config('request.cookies', '{}', true),
              pg_catalog.set_config('search_path', $4, true)`,
      [
        String(o.timeoutMs),
        JSON.stringify(claimsFor(o.tenant, o.request, o.publicUrl)),
        method,
        searchPathOf(o.tenant),
      ],
    )
    const { result, suspended } = await runCapped(client, o.request.sql, o.maxRows, o.maxBytes)
    const rows = result.rows ?? []
    return {
      command: result.command ?? null,
      row_count: suspended ? null : (result.rowCount ?? null),
      rows: rows.slice(0, o.maxRows),
      fields: (result.fields ?? []).map((f) => ({ name: f.name, type_oid: f.dataTypeID })),
      truncated: suspended || rows.length > o.maxRows,
      max_rows: o.maxRows,
      rolled_back: true,
      role: { as: o.request.as, name: role },
    }
  } catch (err) {
    if (!isServerError(err)) broken = err as Error
    throw err
  } finally {
    try {
      await client.query('ROLLBACK')
      await client.query('DISCARD ALL')
    } catch (e) {
      broken = broken ?? (e as Error)
    }
    client.release(broken ?? undefined)
  }
}

/** A Postgres ErrorResponse (the connection is still usable). */
export function isServerError(
  err: unknown,
): err is Error & { code: string; detail?: string; hint?: string; position?: string } {
  const e = err as { code?: unknown; severity?: unknown }
  return (
    typeof e === 'object' &&
    e !== null &&
    typeof e.code === 'string' &&
    /^[0-9A-Z]{5}$/.test(e.code) &&
    typeof e.severity === 'string'
  )
}

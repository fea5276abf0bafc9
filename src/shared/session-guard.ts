// Puts a tenant-database connection's session back after code of the database's owner may
// have run in it (docs/security.md "The tenant boundary"). Triggers of the owner on auth
// tables, and the owner's code a foreign key to an auth table reaches, run inside the engine's
// statements: a plain SET or set_config(..., false) there outlives the function, and
// PREPARE/DEALLOCATE outlive the transaction. Migration 0320 makes each statement that can run
// such code send the notice GH427 first. After that statement, before any other on the
// connection, the guard runs RESET ALL and compares the session's prepared statements with
// those the driver holds; when they differ it deallocates them all and the driver prepares
// its own again. Deferred triggers fire at COMMIT, so a transaction that got the notice is
// guarded once more when it ends. Connections without the notice run nothing more.
import pg from 'pg'
import { forgetPreparedStatements } from './prepared-row.js'

/** The SQLSTATE of migration 0320's notice. */
const OWNER_CODE_NOTICE = 'GH427'

const GUARD =
  'RESET ALL; SELECT pg_catalog.count(*) FILTER (WHERE p.from_sql)::int AS sql, pg_catalog.count(*)::int AS n ' +
  'FROM pg_catalog.pg_prepared_statements p'

/** The parts of pg's Client (pg/lib/client.js) the guard drives: its queue of queries. */
interface QueueingClient {
  _queryQueue: unknown[]
  _activeQuery: unknown
  connection: pg.Connection & {
    parsedStatements: Record<string, string>
    submittedNamedStatements?: Record<string, string>
  }
}

/** Statements the driver holds as prepared on the connection. */
function driverStatements(c: QueueingClient['connection']): number {
  return new Set([...Object.keys(c.parsedStatements), ...Object.keys(c.submittedNamedStatements ?? {})]).size
}

/** Installs the guard on a client (before its first query). */
export function guardSession(client: pg.Client): void {
  const q = client as unknown as QueueingClient
  const con = q.connection
  let dirty = false
  let inTransaction = false
  let guard: pg.Query | null = null
  const runFirst = (query: pg.Query): void => {
    q._queryQueue.unshift(query)
  }
  const check = (expected: number) => (err: Error | undefined, results: unknown) => {
    guard = null
    if (err) {
      // The session could not be put back: it must not serve another statement.
      con.stream.destroy(err)
      return
    }
    const last = (Array.isArray(results) ? results[1] : results) as pg.QueryResult | undefined
    const row = last?.rows[0] as { sql: number; n: number } | undefined
    if (row === undefined || row.sql !== 0 || row.n !== expected) {
      forgetPreparedStatements(client)
      runFirst(new pg.Query('DEALLOCATE ALL'))
    }
  }
  con.on('notice', (msg: { code?: string }) => {
    if (msg.code !== OWNER_CODE_NOTICE) return
    dirty = true
    inTransaction = true
  })
  // Before pg's own handler, which starts the next query of its queue.
  con.prependListener('readyForQuery', (msg: { status?: string }) => {
    if (guard !== null && q._activeQuery === guard) return
    if (msg.status === 'E') return // only ROLLBACK runs next
    const ended = msg.status === 'I' && inTransaction
    if (!dirty && !ended) return
    dirty = false
    if (msg.status === 'I') inTransaction = false
    guard = new pg.Query(GUARD, undefined, check(driverStatements(con)))
    runFirst(guard)
  })
}

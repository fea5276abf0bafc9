// The only module of the REST engine that touches pg (with batch.ts, its wire-level
// helper): the engine's per-tenant pools (the shared ones, with PostgREST's errors), the
// per-request transaction, catalog queries and the LISTEN connection for schema reloads.
// It knows connections, not HTTP; it throws pg errors as they are, plus PGRST000 (cannot
// connect) and PGRST003 (pool exhausted).
import pg from 'pg'
import { perTenantCap, TenantPools, TenantPoolsClosedError, type PooledConnection } from '../shared/index.js'
import { DbConnectionError, PoolTimeoutError } from './errors.js'
import { ReconnectBackoff } from './reconnect.js'
import type { Statement } from './query/sql.js'
import { preparedCount, recover, runBatch, type BatchStatement } from './batch.js'

export interface PoolSettings {
  /** Connections for all tenants together. */
  budget: number
  /** Connections one tenant may hold (capped so that others always keep a share). */
  perTenant: number
  /** Idle connections (and then empty pools) are closed after this long. */
  idleMs: number
  /** How long a request waits for a connection before PGRST003. */
  acquireTimeoutMs: number
  connectTimeoutMs: number
  /** Most tenant pools kept (the least recently used idle one is closed for a new tenant). */
  maxTenants?: number
  /** First wait before reconnecting to a database that refused, ms (doubles up to reconnectBackoffMaxMs). Default 1000. */
  reconnectBackoffMs?: number
  /** Longest wait between reconnects, ms. Default 32 000. */
  reconnectBackoffMaxMs?: number
}

export interface PoolLogger {
  warn (obj: object, msg?: string): void
}

export { perTenantCap }

/**
 * A connection that prepared more named statements than this is closed on release (and
 * replaced on demand), so per-connection statement caches stay bounded.
 */
export const MAX_PREPARED_PER_CONNECTION = 256

/**
 * The engine's pools: the shared per-tenant pools (budget, per-tenant cap, fair shares,
 * idle eviction) with PostgREST's errors: PGRST003 for a wait that timed out, PGRST000
 * for a connection that cannot be made. `onPoolClosed` hears of pools closed when idle.
 */
export function createEnginePools (s: PoolSettings, logger?: PoolLogger, onPoolClosed?: (key: string) => void): TenantPools {
  const pools = new TenantPools({
    ...s,
    applicationName: 'gatehouse-rest',
    timeoutError: () => new PoolTimeoutError(),
    connectError: (err) => err instanceof TenantPoolsClosedError
      ? new DbConnectionError({ internal: 'engine is closing' })
      : new DbConnectionError({ cause: err, internal: (err as Error)?.message }),
    logger: logger && { warn: (obj, msg) => logger.warn(obj, `rest: ${msg ?? ''}`) },
    onPoolClosed
  })
  backoffs.set(pools, new ReconnectBackoff({ initialMs: s.reconnectBackoffMs ?? 1_000, maxMs: s.reconnectBackoffMaxMs ?? 32_000 }))
  return pools
}

/** The reconnect backoff of each engine's pools (by database URL). */
const backoffs = new WeakMap<TenantPools, ReconnectBackoff>()

/** A connection from the pools, unless `url` is backing off after a failed connect (then 503 at once). */
async function acquire (pools: TenantPools, key: string, url: string): Promise<PooledConnection> {
  const backoff = backoffs.get(pools)
  if (backoff === undefined) return pools.acquire(key, url)
  backoff.check(url)
  let conn: PooledConnection
  try {
    conn = await pools.acquire(key, url)
  } catch (err) {
    if (err instanceof DbConnectionError && err.internal !== 'engine is closing') backoff.failed(url)
    else backoff.succeeded(url)
    throw err
  }
  backoff.succeeded(url)
  return conn
}

export type DbRow = Record<string, unknown>

/** One request's transaction: settings statement, main statement, optional follow-ups. */
export interface Transaction {
  readOnly: boolean
  /** The settings statement (set_config ...). Given a name, it is prepared once per connection. */
  pre: Statement & { name?: string }
  /** Runs after `pre`; throwing rolls back before the main statement (e.g. PGRST205). */
  afterPre?: (row: DbRow) => void
  /** The main statement; a name prepares it once per connection (cached read plans). */
  main: Statement & { name?: string }
  /** Statements after the main one (e.g. EXPLAIN for Prefer: count=planned). */
  after?: ReadonlyArray<Statement & { name?: string }>
  /** Inspects the results before COMMIT; throwing rolls back (e.g. PGRST116). */
  check?: (main: DbRow, after: DbRow[][]) => void
  /** Roll back instead of committing (Prefer: tx=rollback, test switch). */
  rollback?: boolean
}

export interface TransactionResult {
  pre: DbRow
  /** The main statement's first row ({} when none). */
  main: DbRow
  /** All rows of the main statement. */
  mainRows: DbRow[]
  after: DbRow[][]
}

const BEGIN_RO: BatchStatement = { name: 'gatehouse_begin_ro', text: 'BEGIN ISOLATION LEVEL READ COMMITTED READ ONLY', values: [] }
const BEGIN_RW: BatchStatement = { name: 'gatehouse_begin_rw', text: 'BEGIN ISOLATION LEVEL READ COMMITTED READ WRITE', values: [] }
const COMMIT: BatchStatement = { name: 'gatehouse_commit', text: 'COMMIT', values: [] }
const ROLLBACK: BatchStatement = { name: 'gatehouse_rollback', text: 'ROLLBACK', values: [] }

/**
 * Runs one transaction on a connection of the pool `key`; nothing of it stays when any
 * step fails. Each round trip is one batch of statements (batch.ts). A read-only
 * transaction is one round trip: BEGIN, settings, main statement, follow-ups and COMMIT
 * (its checks decide only what the caller gets: committing or rolling back a read-only
 * transaction changes nothing). A writing one is two: BEGIN with the settings (whose
 * visibility check must pass before anything is written), then the main statement with
 * COMMIT, or three when its result is checked before COMMIT.
 */
export async function executeTransaction (pools: TenantPools, key: string, url: string, tx: Transaction): Promise<TransactionResult> {
  const conn = await acquire(pools, key, url)
  const client = conn.client
  const end = tx.rollback ? ROLLBACK : COMMIT
  const after = tx.after ?? []
  let parsed: readonly string[] = []
  let completed: DbRow[][] = []
  let batchFailed = false
  const failed = (names: readonly string[], rows: DbRow[][]): void => { batchFailed = true; parsed = names; completed = rows }
  try {
    let result: TransactionResult
    if (tx.readOnly) {
      let r: DbRow[][]
      try {
        r = await runBatch(client, [BEGIN_RO, tx.pre, tx.main, ...after, end], failed)
      } catch (err) {
        // The settings' visibility check speaks first, as if nothing had run after it.
        if (completed.length >= 2) tx.afterPre?.(completed[1]![0] ?? {})
        throw err
      }
      const pre = r[1]![0] ?? {}
      tx.afterPre?.(pre)
      const mainRows = r[2]!
      const afterRows = after.map((_, i) => r[3 + i]!)
      const main = mainRows[0] ?? {}
      tx.check?.(main, afterRows)
      result = { pre, main, mainRows, after: afterRows }
    } else {
      const pre = (await runBatch(client, [BEGIN_RW, tx.pre], failed))[1]![0] ?? {}
      tx.afterPre?.(pre)
      // Nothing to decide between the main statement and COMMIT: send them together.
      const last = tx.check === undefined ? [end] : []
      const r = await runBatch(client, [tx.main, ...after, ...last], failed)
      const mainRows = r[0]!
      const afterRows = after.map((_, i) => r[1 + i]!)
      const main = mainRows[0] ?? {}
      if (last.length === 0) {
        tx.check?.(main, afterRows)
        await runBatch(client, [end], failed)
      }
      result = { pre, main, mainRows, after: afterRows }
    }
    pools.release(conn, client.getTransactionStatus() !== 'I' || preparedCount(client) > MAX_PREPARED_PER_CONNECTION)
    return result
  } catch (err) {
    let broken = conn.broken
    const known = isPgError(err) || isStatusError(err)
    // Roll back what is open (after a failed batch, or a step our checks refused while the
    // transaction was open) and drop the statements a failed batch may have left prepared.
    if (!broken && known && (batchFailed || client.getTransactionStatus() !== 'I')) {
      try { await recover(client, parsed) } catch { broken = true }
    }
    // A socket-level failure (no SQLSTATE) leaves the connection unusable.
    pools.release(conn, broken || !known || client.getTransactionStatus() !== 'I')
    if (known) throw err
    throw new DbConnectionError({ cause: err, internal: (err as Error)?.message })
  }
}

function isPgError (err: unknown): boolean {
  return err instanceof Error && typeof (err as { severity?: unknown }).severity === 'string'
}

/** Errors our own checks throw (they carry an HTTP status). */
function isStatusError (err: unknown): boolean {
  return err instanceof Error && 'status' in err
}

/** Runs one read-only catalog query on a pooled connection (schema cache loads). */
export async function executeCatalogQueries<T> (pools: TenantPools, key: string, url: string,
  fn: (query: (text: string, values: unknown[]) => Promise<DbRow[]>) => Promise<T>): Promise<T> {
  const conn = await acquire(pools, key, url)
  let broken = false
  try {
    await conn.client.query(BEGIN_RO.text)
    const out = await fn(async (text, values) => (await conn.client.query(text, values)).rows)
    await conn.client.query('COMMIT')
    return out
  } catch (err) {
    await conn.client.query('ROLLBACK').catch(() => { broken = true })
    if (!isPgError(err)) broken = true
    throw err
  } finally {
    pools.release(conn, broken)
  }
}

/** PostgREST's channel: `NOTIFY pgrst, 'reload schema'` (sent by the DDL event trigger). */
export const RELOAD_CHANNEL = 'pgrst'

/**
 * A dedicated LISTEN connection (outside the budget: one per active tenant). Calls
 * `onNotify(payload)` for each notification on the pgrst channel and `onLost()` once when the
 * connection ends. Returns a function that closes it. Not tried while the database backs off;
 * its own failure neither starts nor extends a back-off: a LISTEN refused (too many connections, with
 * the pool's connections still open) must not fail the tenant's requests, and a database
 * that is really down is found by the pool's connects.
 */
export async function listen (url: string, onNotify: (payload: string) => void,
  onLost: () => void, connectTimeoutMs: number, pools?: TenantPools): Promise<() => Promise<void>> {
  // While the database is backing off, no LISTEN connection is tried either (nor does one
  // take the probe after the wait: the pool's connect probes, and ends the back-off).
  const backoff = pools === undefined ? undefined : backoffs.get(pools)
  if (backoff?.backingOff(url) === true) throw new DbConnectionError({ internal: 'backing off reconnects' })
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: connectTimeoutMs, application_name: 'gatehouse-rest-listen' })
  let closing = false
  let lost = false
  const lose = (): void => { if (!lost && !closing) { lost = true; onLost() } }
  client.on('error', lose)
  client.on('end', lose)
  client.on('notification', (msg) => { if (msg.channel === RELOAD_CHANNEL) onNotify(msg.payload ?? '') })
  try {
    await client.connect()
    await client.query('LISTEN pgrst')
  } catch (err) {
    closing = true
    await client.end().catch(() => {})
    throw err
  }
  backoff?.succeeded(url)
  return async () => {
    closing = true
    await client.end().catch(() => {})
  }
}

// The only module of the REST engine that touches pg (with batch.ts, its wire-level
// helper): the engine's per-tenant pools (the shared ones, with PostgREST's errors), the
// per-request transaction and the catalog queries. Schema changes reach the engine on the
// pool's own connections: every request's transaction reads the database's schema version
// first (platform.schema_version; a changed one is reported, and the caller may have the
// transaction given up to run it again with a fresh cache), and each connection LISTENs on
// the pgrst channel (its first transaction says LISTEN), so NOTIFY pgrst is heard with no
// connection of its own. It knows connections, not HTTP; it throws pg errors as they are,
// plus PGRST000 (cannot connect) and PGRST003 (pool exhausted).
import pg from 'pg'
import { perTenantCap, TenantPools, TenantPoolsClosedError, type PooledConnection } from '../shared/index.js'
import { DbConnectionError, PoolTimeoutError } from './errors.js'
import { SCHEMA_VERSION_SQL, type CatalogStatement } from './schema-cache/index.js'
import { ReconnectBackoff } from './reconnect.js'
import type { Statement } from './query/sql.js'
import { preparedCount, recover, runBatch, type BatchResult, type BatchStatement } from './batch.js'

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
  /** The back-off's clock, ms (tests drive a long outage with it). Default Date.now. */
  now?: () => number
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

/** What the engine's pools tell their owner, by tenant key. */
export interface EngineEvents {
  /** The tenant's pool was closed (idle, or evicted for another tenant). */
  poolClosed?: (key: string) => void
  /** A notification on the pgrst channel arrived on one of the tenant's connections. */
  notification?: (key: string, payload: string) => void
  /**
   * A transaction read a schema version other than the one its plan was made with (null:
   * the version could not be read: the table is gone or not readable).
   */
  schemaVersion?: (key: string, version: string | null) => void
}

/**
 * The engine's pools: the shared per-tenant pools (budget, per-tenant cap, fair shares,
 * idle eviction) with PostgREST's errors: PGRST003 for a wait that timed out, PGRST000
 * for a connection that cannot be made. `events` hears of closed pools, notifications and
 * changed schema versions.
 */
export function createEnginePools (s: PoolSettings, logger?: PoolLogger, events: EngineEvents = {}): TenantPools {
  const pools = new TenantPools({
    ...s,
    applicationName: 'gatehouse-rest',
    timeoutError: () => new PoolTimeoutError(),
    connectError: (err) => err instanceof TenantPoolsClosedError
      ? new DbConnectionError({ internal: 'engine is closing' })
      : new DbConnectionError({ cause: err, internal: (err as Error)?.message }),
    logger: logger && { warn: (obj, msg) => logger.warn(obj, `rest: ${msg ?? ''}`) },
    onPoolClosed: events.poolClosed
  })
  backoffs.set(pools, new ReconnectBackoff({
    initialMs: s.reconnectBackoffMs ?? 1_000,
    maxMs: s.reconnectBackoffMaxMs ?? 32_000,
    ...(s.now !== undefined ? { now: s.now } : {}),
    // One connect per backing-off URL at most every second: service resumes within a
    // second of the database coming back, whatever the wait had grown to.
    probe: (url) => pools.probe(url)
  }))
  eventsOf.set(pools, events)
  return pools
}

/** The events of each engine's pools. */
const eventsOf = new WeakMap<TenantPools, EngineEvents>()

/** PostgREST's channel: `NOTIFY pgrst, 'reload schema'` (sent by the DDL event trigger, or by a user). */
export const RELOAD_CHANNEL = 'pgrst'

/** Connections whose LISTEN pgrst was committed. */
const listening = new WeakSet<pg.Client>()
/** Connections whose notifications are passed on. */
const wired = new WeakSet<pg.Client>()

const LISTEN: BatchStatement = { text: `LISTEN ${RELOAD_CHANNEL}`, values: [] }

/**
 * The statements a connection's transaction starts with after BEGIN: LISTEN pgrst until one
 * of its transactions committed it (when the owner hears notifications). Passes the
 * connection's notifications on from its first use.
 */
function listenOn (pools: TenantPools, conn: PooledConnection): BatchStatement[] {
  const notify = eventsOf.get(pools)?.notification
  if (notify === undefined) return []
  const client = conn.client
  if (!wired.has(client)) {
    wired.add(client)
    const key = conn.key
    client.on('notification', (msg) => { if (msg.channel === RELOAD_CHANNEL) notify(key, msg.payload ?? '') })
  }
  return listening.has(client) ? [] : [LISTEN]
}

/**
 * Reads the schema version in a request's transaction (the catalog's query, prepared once
 * per connection). Text: only compared.
 */
const SCHEMA_VERSION: BatchStatement = { name: 'gatehouse_schema_version', text: SCHEMA_VERSION_SQL, values: [], textResult: true }

/** Thrown by executeTransaction (nothing of the transaction kept) when the schema changed since the plan was made. */
export class SchemaChangedError extends Error {
  constructor (readonly version: string | null) {
    super('the schema changed since the request was planned')
    this.name = 'SchemaChangedError'
  }
}

/** The reconnect backoff of each engine's pools (by database URL). */
const backoffs = new WeakMap<TenantPools, ReconnectBackoff>()

/** The engine's reconnect back-off (its probes stop on close; tests wait for them). */
export function reconnectBackoffOf (pools: TenantPools): ReconnectBackoff | undefined {
  return backoffs.get(pools)
}

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
  /** PostgREST's db-pre-request call, right after `pre`. */
  preRequest?: Statement
  /** The main statement; a name prepares it once per connection (cached read plans). */
  main: Statement & { name?: string }
  /** Statements after the main one (e.g. EXPLAIN for Prefer: count=planned). */
  after?: ReadonlyArray<Statement & { name?: string }>
  /** Inspects the results before COMMIT; throwing rolls back (e.g. PGRST116). */
  check?: (main: DbRow, after: DbRow[][]) => void
  /** Roll back instead of committing (Prefer: tx=rollback, test switch). */
  rollback?: boolean
  /**
   * The schema version of the cache the plan was made with. The transaction reads the
   * database's first; when it differs, it is reported (EngineEvents.schemaVersion) and,
   * when `strict`, the transaction is given up (rolled back before anything is written)
   * with a SchemaChangedError, for the caller to plan and run the request again.
   */
  schemaVersion?: { expected: string, strict: boolean }
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
 * transaction is one round trip: BEGIN, the schema version, settings, main statement,
 * follow-ups and COMMIT (its checks decide only what the caller gets: committing or
 * rolling back a read-only transaction changes nothing). A writing one is two: BEGIN with
 * the schema version and the settings (whose checks must pass before anything is
 * written), then the main statement with COMMIT, or three when its result is checked
 * before COMMIT.
 */
export async function executeTransaction (pools: TenantPools, key: string, url: string, tx: Transaction): Promise<TransactionResult> {
  const conn = await acquire(pools, key, url)
  const client = conn.client
  const end = tx.rollback ? ROLLBACK : COMMIT
  const after = tx.after ?? []
  const preRequest = tx.preRequest === undefined ? [] : [tx.preRequest]
  const listen = listenOn(pools, conn)
  const sv = tx.schemaVersion
  // BEGIN, LISTEN (a connection's first transaction), the schema version: then `pre` at `at`.
  const head = [tx.readOnly ? BEGIN_RO : BEGIN_RW, ...listen, ...(sv === undefined ? [] : [SCHEMA_VERSION])]
  const at = head.length
  let parsed: readonly string[] = []
  let completed: BatchResult = []
  let batchFailed = false
  const failed = (names: readonly string[], rows: BatchResult): void => { batchFailed = true; parsed = names; completed = rows }
  /** After the batch that read it (or failed trying): throws when the schema changed and the caller asked for that. */
  const checkVersion = (rows: BatchResult): void => {
    if (sv === undefined) return
    // Failed at the version's own statement: it cannot be read (null), which is a change too.
    const read = rows.length >= at ? String(rows[at - 1]![0]?.version ?? '') : batchFailed && rows.length === at - 1 ? null : undefined
    if (read === undefined || read === sv.expected) return
    eventsOf.get(pools)?.schemaVersion?.(key, read)
    if (sv.strict) throw new SchemaChangedError(read)
  }
  try {
    let result: TransactionResult
    if (tx.readOnly) {
      let r: BatchResult
      try {
        r = await runBatch(client, [...head, tx.pre, ...preRequest, tx.main, ...after, end], failed)
      } catch (err) {
        checkVersion(completed)
        // The settings' visibility check speaks first, as if nothing had run after it.
        if (completed.length > at) tx.afterPre?.(completed[at]![0] ?? {})
        throw err
      }
      checkVersion(r)
      const pre = r[at]![0] ?? {}
      tx.afterPre?.(pre)
      const mainRows = r[at + 1 + preRequest.length]!
      const afterRows = after.map((_, i) => r[at + 2 + preRequest.length + i]!)
      const main = mainRows[0] ?? {}
      tx.check?.(main, afterRows)
      result = { pre, main, mainRows, after: afterRows }
    } else {
      let first: BatchResult
      try {
        first = await runBatch(client, [...head, tx.pre, ...preRequest], failed)
      } catch (err) {
        checkVersion(completed)
        throw err
      }
      checkVersion(first)
      const pre = first[at]![0] ?? {}
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
    if (listen.length > 0 && end === COMMIT) listening.add(client)
    pools.release(conn, client.getTransactionStatus() !== 'I' || preparedCount(client) > MAX_PREPARED_PER_CONNECTION)
    return result
  } catch (err) {
    let broken = conn.broken
    const known = isPgError(err) || isStatusError(err) || err instanceof SchemaChangedError
    // Roll back what is open (after a failed batch, or a step our checks refused while the
    // transaction was open) and drop the statements a failed batch may have left prepared.
    if (!broken && known && (batchFailed || client.getTransactionStatus() !== 'I')) {
      try { await recover(client, parsed) } catch { broken = true }
    } else if (!batchFailed && listen.length > 0 && end === COMMIT && client.getTransactionStatus() === 'I') {
      listening.add(client) // a read-only transaction refused by our checks after it committed
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

/**
 * The database's schema version now (one round trip on a pooled connection, no
 * transaction of its own); null when it cannot be read.
 */
export async function readSchemaVersion (pools: TenantPools, key: string, url: string): Promise<string | null> {
  const conn = await acquire(pools, key, url)
  const client = conn.client
  const listen = listenOn(pools, conn)
  let parsed: readonly string[] = []
  try {
    const r = await runBatch(client, [...listen, SCHEMA_VERSION], (names) => { parsed = names })
    if (listen.length > 0) listening.add(client)
    pools.release(conn, client.getTransactionStatus() !== 'I')
    return String(r[listen.length]![0]?.version ?? '')
  } catch (err) {
    let broken = conn.broken || !isPgError(err)
    if (!broken) {
      try { await recover(client, parsed) } catch { broken = true }
    }
    pools.release(conn, broken || client.getTransactionStatus() !== 'I')
    if (isPgError(err)) return null
    throw err
  }
}

const BEGIN_CATALOG: BatchStatement = { name: 'gatehouse_begin_catalog', text: 'BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY', values: [] }

/**
 * Runs catalog statements (schema cache loads) in one read-only transaction with one
 * snapshot, in one round trip, on a pooled connection; resolves with each one's rows.
 */
export async function executeCatalogQueries (pools: TenantPools, key: string, url: string,
  statements: readonly CatalogStatement[]): Promise<DbRow[][]> {
  const conn = await acquire(pools, key, url)
  const client = conn.client
  const listen = listenOn(pools, conn)
  let parsed: readonly string[] = []
  let batchFailed = false
  try {
    const r = await runBatch(client, [BEGIN_CATALOG, ...listen, ...statements, COMMIT], (names) => { batchFailed = true; parsed = names })
    if (listen.length > 0) listening.add(client)
    pools.release(conn, client.getTransactionStatus() !== 'I')
    return r.slice(1 + listen.length, 1 + listen.length + statements.length)
  } catch (err) {
    let broken = conn.broken || !isPgError(err)
    if (!broken && (batchFailed || client.getTransactionStatus() !== 'I')) {
      try { await recover(client, parsed) } catch { broken = true }
    }
    pools.release(conn, broken || client.getTransactionStatus() !== 'I')
    throw err
  }
}

/** The cluster of a database URL (host and port): what its databases share, such as pg_timezone_names. */
export function clusterOf (url: string): string {
  try {
    const u = new URL(url)
    return `${u.searchParams.get('host') ?? u.hostname}:${u.searchParams.get('port') ?? (u.port || '5432')}`
  } catch {
    return url
  }
}

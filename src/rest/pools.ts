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
import {
  ClusterDownError,
  isClusterFailure,
  perTenantCap,
  TenantPools,
  TenantPoolsClosedError,
  type PooledConnection,
  type TenantPoolsOptions,
} from '../shared/index.js'
import { DbConnectionError, PoolTimeoutError } from './errors.js'
import { SCHEMA_VERSION_SQL, type CatalogStatement } from './schema-cache/index.js'
import { ReconnectBackoff, loggedConnectFailure } from './reconnect.js'
import type { Statement } from './query/sql.js'
import type { IsolationLevel } from './query/pre-request.js'
import {
  fixed,
  preparedCount,
  createBatchClient,
  isLostStatement,
  recover,
  runBatch,
  SESSION_END,
  sessionIntact,
  type BatchResult,
  type BatchStatement,
} from './batch.js'

/** The shared pools' settings the engine passes on, with its reconnect back-off's. */
type PoolSettings = Pick<
  TenantPoolsOptions,
  'budget' | 'clusterShare' | 'perTenant' | 'idleMs' | 'acquireTimeoutMs' | 'connectTimeoutMs' | 'maxTenants' | 'now'
> & {
  /** First wait before reconnecting to a database that refused, ms (doubles up to reconnectBackoffMaxMs). Default 1000. */
  reconnectBackoffMs?: number
  /** Longest wait between reconnects, ms. Default 32 000. */
  reconnectBackoffMaxMs?: number
}

interface PoolLogger {
  warn(obj: object, msg?: string): void
}

export { perTenantCap }

/**
 * A connection that prepared more named statements than this is closed on release (and
 * replaced on demand), so per-connection statement caches stay bounded.
 */
const MAX_PREPARED_PER_CONNECTION = 256

/** What the engine's pools tell their owner, by tenant key. */
interface EngineEvents {
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

/** PostgREST's channel: `NOTIFY pgrst, 'reload schema'` (sent by the DDL event trigger, or by a user). */
const RELOAD_CHANNEL = 'pgrst'

const LISTEN = fixed(`LISTEN ${RELOAD_CHANNEL}`)

/**
 * Reads the schema version in a request's transaction (the catalog's query, prepared once
 * per connection). Text: only compared.
 */
const SCHEMA_VERSION: BatchStatement = {
  name: 'gatehouse_schema_version',
  text: SCHEMA_VERSION_SQL,
  values: [],
  textResult: true,
}

/** Thrown by EnginePools.transaction (nothing of the transaction kept) when the schema changed since the plan was made. */
export class SchemaChangedError extends Error {
  constructor(readonly version: string | null) {
    super('the schema changed since the request was planned')
    this.name = 'SchemaChangedError'
  }
}

export type DbRow = Record<string, unknown>

/** One request's transaction: settings statement, main statement, optional follow-ups. */
interface Transaction {
  readOnly: boolean
  /** The isolation level it begins with (PostgREST's: the role's or a called function's); READ COMMITTED when absent. */
  isolation?: IsolationLevel
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
  schemaVersion?: { expected: string; strict: boolean }
}

export interface TransactionResult {
  pre: DbRow
  /** The main statement's first row ({} when none). */
  main: DbRow
  /** All rows of the main statement. */
  mainRows: DbRow[]
  after: DbRow[][]
}

const begin = (level: IsolationLevel, readOnly: boolean): BatchStatement =>
  fixed(`BEGIN ISOLATION LEVEL ${level.toUpperCase()} ${readOnly ? 'READ ONLY' : 'READ WRITE'}`)

const BEGIN_CATALOG = begin('repeatable read', true)
const COMMIT = fixed('COMMIT')
const ROLLBACK = fixed('ROLLBACK')

function isPgError(err: unknown): boolean {
  return err instanceof Error && typeof (err as { severity?: unknown }).severity === 'string'
}

/** Errors our own checks throw (they carry an HTTP status). */
function isStatusError(err: unknown): boolean {
  return err instanceof Error && 'status' in err
}

/**
 * The engine's pools: the shared per-tenant pools (budget, per-tenant cap, fair shares,
 * idle eviction) with PostgREST's errors: PGRST003 for a wait that timed out, PGRST000
 * for a connection that cannot be made, and a reconnect back-off per database URL.
 * `events` hears of closed pools, notifications and changed schema versions.
 */
export class EnginePools {
  readonly shared: TenantPools
  /** The reconnect back-off (by database URL); its probes stop on close, tests wait for them. */
  readonly backoff: ReconnectBackoff
  readonly #events: EngineEvents
  /** Connections whose LISTEN pgrst was committed. */
  readonly #listening = new WeakSet<pg.Client>()
  /** Connections whose notifications are passed on. */
  readonly #wired = new WeakSet<pg.Client>()
  /** Connections that read the catalogs (closed after their next transaction). */
  readonly #catalogRead = new WeakSet<pg.Client>()

  constructor(s: PoolSettings, logger?: PoolLogger, events: EngineEvents = {}) {
    this.#events = events
    const pools = (this.shared = new TenantPools({
      ...s,
      applicationName: 'gatehouse-rest',
      // batch.ts writes a transaction's statements at once (pg's pipeline mode).
      createClient: createBatchClient,
      timeoutError: () => new PoolTimeoutError(),
      connectError: (err) =>
        err instanceof TenantPoolsClosedError
          ? new DbConnectionError({ internal: 'engine is closing' })
          : loggedConnectFailure(
              new DbConnectionError({
                cause: err,
                internal: (err as Error)?.message,
                // The cluster is probed every second: the client may try again in one.
                ...(err instanceof ClusterDownError ? { headers: { 'retry-after': '1' } } : {}),
              }),
            ),
      logger: logger && { warn: (obj, msg) => logger.warn(obj, `rest: ${msg ?? ''}`) },
      onPoolClosed: events.poolClosed,
    }))
    this.backoff = new ReconnectBackoff({
      initialMs: s.reconnectBackoffMs ?? 1_000,
      maxMs: s.reconnectBackoffMaxMs ?? 32_000,
      ...(s.now !== undefined ? { now: s.now } : {}),
      // One connect per backing-off URL at most every second: service resumes within a
      // second of the database coming back, whatever the wait had grown to.
      probe: (url) => pools.probe(url),
    })
  }

  async close(): Promise<void> {
    this.backoff.close()
    await this.shared.close()
  }

  /**
   * A connection from the pools, unless `url` is backing off after a failed connect, or its
   * cluster is known down (then 503 at once). An unreachable cluster is the shared pools'
   * to probe (once for all its databases); the back-off here is for one database's refusals.
   */
  async acquire(key: string, url: string): Promise<PooledConnection> {
    this.backoff.check(url)
    let conn: PooledConnection
    try {
      conn = await this.shared.acquire(key, url)
    } catch (err) {
      if (!(err instanceof DbConnectionError) || err.internal === 'engine is closing') this.backoff.succeeded(url)
      else if (!isClusterFailure(err.cause)) this.backoff.failed(url)
      throw err
    }
    this.backoff.succeeded(url)
    return conn
  }

  /**
   * The statements a connection's transaction starts with after BEGIN: LISTEN pgrst until one
   * of its transactions committed it (when the owner hears notifications). Passes the
   * connection's notifications on from its first use.
   */
  listenOn(conn: PooledConnection): BatchStatement[] {
    const notify = this.#events.notification
    if (notify === undefined) return []
    const client = conn.client
    if (!this.#wired.has(client)) {
      this.#wired.add(client)
      const key = conn.key
      client.on('notification', (msg) => {
        if (msg.channel === RELOAD_CHANNEL) notify(key, msg.payload ?? '')
      })
    }
    return this.#listening.has(client) ? [] : [LISTEN]
  }

  /** Its LISTEN pgrst was committed. */
  listening(client: pg.Client): void {
    this.#listening.add(client)
  }

  /** A transaction of `key` read the schema version `version` (see EngineEvents.schemaVersion). */
  schemaVersionRead(key: string, version: string | null): void {
    this.#events.schemaVersion?.(key, version)
  }

  /**
   * Runs one transaction on a connection of the pool `key`; nothing of it stays when any
   * step fails (see PooledTransaction).
   */
  async transaction(key: string, url: string, tx: Transaction): Promise<TransactionResult> {
    const conn = await this.acquire(key, url)
    return new PooledTransaction(this, conn, tx).run()
  }

  /**
   * After a failure (a pg error is `recoverable`): rolls back what is open and puts the
   * session back; the connection goes back broken when that fails.
   */
  async #recoverAndRelease(conn: PooledConnection, err: unknown, batchFailed: boolean): Promise<void> {
    let broken = conn.broken || !isPgError(err) || isLostStatement(err)
    if (!broken && (batchFailed || conn.client.getTransactionStatus() !== 'I')) {
      try {
        await recover(conn.client)
      } catch {
        broken = true
      }
    }
    this.shared.release(conn, broken || conn.client.getTransactionStatus() !== 'I')
  }

  /**
   * The database's schema version now (one round trip on a pooled connection, no
   * transaction of its own); null when it cannot be read.
   */
  async readSchemaVersion(key: string, url: string): Promise<string | null> {
    const conn = await this.acquire(key, url)
    const listen = this.listenOn(conn)
    try {
      const r = await runBatch(conn.client, [...listen, SCHEMA_VERSION])
      if (listen.length > 0) this.listening(conn.client)
      this.shared.release(conn, conn.client.getTransactionStatus() !== 'I')
      return String(r[listen.length]![0]?.version ?? '')
    } catch (err) {
      await this.#recoverAndRelease(conn, err, true)
      if (isPgError(err)) return null
      throw err
    }
  }

  /**
   * Runs catalog statements (schema cache loads) in one read-only transaction with one
   * snapshot, in one round trip, on a pooled connection; resolves with each one's rows. The
   * connection serves one more transaction (a tenant's first request still takes one
   * connection) and is then closed: reading the catalogs fills its backend's caches with what
   * no request needs (about twice the private memory of a backend that served requests only),
   * and a tenant's warm connection is what each tenant costs Postgres (docs/operating.md
   * "Sizing for many tenants").
   */
  async catalogQueries(key: string, url: string, statements: readonly CatalogStatement[]): Promise<DbRow[][]> {
    const conn = await this.acquire(key, url)
    const listen = this.listenOn(conn)
    let batchFailed = false
    try {
      const r = await runBatch(conn.client, [BEGIN_CATALOG, ...listen, ...statements, COMMIT], () => {
        batchFailed = true
      })
      if (listen.length > 0) this.listening(conn.client)
      this.#catalogRead.add(conn.client)
      this.shared.release(conn, conn.client.getTransactionStatus() !== 'I')
      return r.slice(1 + listen.length, 1 + listen.length + statements.length)
    } catch (err) {
      await this.#recoverAndRelease(conn, err, batchFailed)
      throw err
    }
  }

  /** The connection read the catalogs (catalogQueries): its next transaction is its last. */
  readCatalog(client: pg.Client): boolean {
    return this.#catalogRead.has(client)
  }
}

/**
 * One transaction on one pooled connection. Each round trip is one batch of statements
 * (batch.ts). A read-only transaction is one round trip: BEGIN, the schema version,
 * settings, main statement, follow-ups and COMMIT (its checks decide only what the caller
 * gets: committing or rolling back a read-only transaction changes nothing). A writing one
 * is two: BEGIN with the schema version and the settings (whose checks must pass before
 * anything is written), then the main statement with COMMIT, or three when its result is
 * checked before COMMIT. The last round trip ends with SESSION_END (batch.ts): a connection
 * whose session a function of the owner changed is not reused.
 */
class PooledTransaction {
  readonly #pools: EnginePools
  readonly #conn: PooledConnection
  readonly #client: pg.Client
  readonly #tx: Transaction
  readonly #end: BatchStatement
  readonly #after: ReadonlyArray<Statement & { name?: string }>
  readonly #preRequest: Statement[]
  readonly #listen: BatchStatement[]
  /** BEGIN, LISTEN (a connection's first transaction), the schema version: then `pre` at `#at`. */
  readonly #head: BatchStatement[]
  readonly #at: number
  /** Of the batch that failed: the statements it prepared, the results before the failure. */
  #completed: BatchResult = []
  #batchFailed = false
  /** Whether the last batch's SESSION_END found the session as the engine left it. */
  #intact: boolean | undefined = undefined

  constructor(pools: EnginePools, conn: PooledConnection, tx: Transaction) {
    this.#pools = pools
    this.#conn = conn
    this.#client = conn.client
    this.#tx = tx
    this.#end = tx.rollback ? ROLLBACK : COMMIT
    this.#after = tx.after ?? []
    this.#preRequest = tx.preRequest === undefined ? [] : [tx.preRequest]
    this.#listen = pools.listenOn(conn)
    this.#head = [
      begin(tx.isolation ?? 'read committed', tx.readOnly),
      ...this.#listen,
      ...(tx.schemaVersion === undefined ? [] : [SCHEMA_VERSION]),
    ]
    this.#at = this.#head.length
  }

  async run(): Promise<TransactionResult> {
    try {
      const result = this.#tx.readOnly ? await this.#readOnly() : await this.#writing()
      if (this.#listen.length > 0 && this.#end === COMMIT) this.#pools.listening(this.#client)
      this.#pools.shared.release(
        this.#conn,
        this.#client.getTransactionStatus() !== 'I' ||
          preparedCount(this.#client) > MAX_PREPARED_PER_CONNECTION ||
          this.#intact !== true ||
          this.#pools.readCatalog(this.#client),
      )
      return result
    } catch (err) {
      return this.#failed(err)
    }
  }

  #batch(statements: readonly BatchStatement[]): Promise<BatchResult> {
    return runBatch(this.#client, statements, (rows) => {
      this.#batchFailed = true
      this.#completed = rows
    })
  }

  /** The transaction's last batch: ends with SESSION_END, whose answer decides #intact. */
  async #lastBatch(statements: readonly BatchStatement[]): Promise<BatchResult> {
    const r = await this.#batch([...statements, ...SESSION_END])
    this.#intact = sessionIntact(this.#client, r[r.length - 1])
    return r
  }

  /** After the batch that read it (or failed trying): throws when the schema changed and the caller asked for that. */
  #checkVersion(rows: BatchResult): void {
    const sv = this.#tx.schemaVersion
    if (sv === undefined) return
    const at = this.#at
    // Failed at the version's own statement: it cannot be read (null), which is a change too.
    const read =
      rows.length >= at
        ? String(rows[at - 1]![0]?.version ?? '')
        : this.#batchFailed && rows.length === at - 1
          ? null
          : undefined
    if (read === undefined || read === sv.expected) return
    this.#pools.schemaVersionRead(this.#conn.key, read)
    if (sv.strict) throw new SchemaChangedError(read)
  }

  async #readOnly(): Promise<TransactionResult> {
    const [tx, at, preRequest, after] = [this.#tx, this.#at, this.#preRequest, this.#after] as const
    let r: BatchResult
    try {
      r = await this.#lastBatch([...this.#head, tx.pre, ...preRequest, tx.main, ...after, this.#end])
    } catch (err) {
      this.#checkVersion(this.#completed)
      // The settings' visibility check speaks first, as if nothing had run after it.
      if (this.#completed.length > at) tx.afterPre?.(this.#completed[at]![0] ?? {})
      throw err
    }
    this.#checkVersion(r)
    const pre = r[at]![0] ?? {}
    tx.afterPre?.(pre)
    const mainRows = r[at + 1 + preRequest.length]!
    const afterRows = after.map((_, i) => r[at + 2 + preRequest.length + i]!)
    const main = mainRows[0] ?? {}
    tx.check?.(main, afterRows)
    return { pre, main, mainRows, after: afterRows }
  }

  async #writing(): Promise<TransactionResult> {
    const tx = this.#tx
    let first: BatchResult
    try {
      first = await this.#batch([...this.#head, tx.pre, ...this.#preRequest])
    } catch (err) {
      this.#checkVersion(this.#completed)
      throw err
    }
    this.#checkVersion(first)
    const pre = first[this.#at]![0] ?? {}
    tx.afterPre?.(pre)
    // Nothing to decide between the main statement and COMMIT: send them together.
    const last = tx.check === undefined ? [this.#end] : []
    const statements = [tx.main, ...this.#after, ...last]
    const r = last.length === 0 ? await this.#batch(statements) : await this.#lastBatch(statements)
    const mainRows = r[0]!
    const afterRows = this.#after.map((_, i) => r[1 + i]!)
    const main = mainRows[0] ?? {}
    if (last.length === 0) {
      tx.check?.(main, afterRows)
      await this.#lastBatch([this.#end])
    }
    return { pre, main, mainRows, after: afterRows }
  }

  async #failed(err: unknown): Promise<never> {
    const client = this.#client
    let broken = this.#conn.broken || this.#intact === false || isLostStatement(err)
    const known = isPgError(err) || isStatusError(err) || err instanceof SchemaChangedError
    // Roll back what is open (after a failed batch, or a step our checks refused while the
    // transaction was open) and put the session back.
    if (!broken && known && (this.#batchFailed || client.getTransactionStatus() !== 'I')) {
      try {
        await recover(client)
      } catch {
        broken = true
      }
    } else if (
      !this.#batchFailed &&
      this.#listen.length > 0 &&
      this.#end === COMMIT &&
      client.getTransactionStatus() === 'I'
    ) {
      this.#pools.listening(client) // a read-only transaction refused by our checks after it committed
    }
    // A socket-level failure (no SQLSTATE) leaves the connection unusable.
    this.#pools.shared.release(this.#conn, broken || !known || client.getTransactionStatus() !== 'I')
    if (known) throw err
    throw new DbConnectionError({ cause: err, internal: (err as Error)?.message })
  }
}

/** The cluster of a database URL (host and port): what its databases share, such as pg_timezone_names. */
export function clusterOf(url: string): string {
  try {
    const u = new URL(url)
    return `${u.searchParams.get('host') ?? u.hostname}:${u.searchParams.get('port') ?? (u.port || '5432')}`
  } catch {
    return url
  }
}

// The only module of the REST engine that touches pg: per-tenant connection pools under
// one process-wide budget (no tenant can take it all; idle connections and pools are
// closed), the per-request transaction, catalog queries and the LISTEN connection for
// schema reloads. It knows connections, not HTTP; it throws pg errors as they are,
// plus PGRST000 (cannot connect) and PGRST003 (pool exhausted).
import pg from 'pg'
import { DbConnectionError, PoolTimeoutError } from './errors.js'
import type { Statement } from './query/sql.js'

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
}

export interface PoolLogger {
  warn (obj: object, msg?: string): void
  debug? (obj: object, msg?: string): void
}

interface Conn {
  client: pg.Client
  pool: TenantPool
  idleSince: number
  broken: boolean
  /** Names of the statements prepared on this connection. */
  prepared: Set<string>
}

/**
 * A connection that prepared more named statements than this is closed on release (and
 * replaced on demand), so per-connection statement caches stay bounded.
 */
export const MAX_PREPARED_PER_CONNECTION = 256

interface TenantPool {
  key: string
  url: string
  idle: Conn[]
  open: number
  lastUsed: number
}

interface Waiter {
  pool: TenantPool
  resolve (c: Conn): void
  reject (e: Error): void
  timer: NodeJS.Timeout
}

/** The effective per-tenant cap: never the whole budget when the budget can be shared. */
export function perTenantCap (s: Pick<PoolSettings, 'budget' | 'perTenant'>): number {
  const share = s.budget > 1 ? Math.max(1, Math.ceil(s.budget / 2)) : 1
  return Math.max(1, Math.min(s.perTenant, share))
}

/**
 * Connection pools of all tenants with one budget. Connections are plain pg.Clients;
 * a tenant below its cap may take a free budget slot or close another tenant's idle
 * connection; otherwise the request waits (FIFO) until acquireTimeoutMs.
 */
export class PoolManager {
  readonly #s: PoolSettings
  readonly #cap: number
  readonly #pools = new Map<string, TenantPool>()
  #waiters: Waiter[] = []
  #open = 0
  #closed = false
  readonly #sweeper: NodeJS.Timeout
  readonly #log?: PoolLogger
  /** Called with a pool key when its last connection closed after idling. */
  onPoolIdle: ((key: string) => void) | null = null

  constructor (settings: PoolSettings, logger?: PoolLogger) {
    this.#s = settings
    this.#cap = perTenantCap(settings)
    this.#log = logger
    this.#sweeper = setInterval(() => this.#sweep(), Math.max(250, Math.min(settings.idleMs / 2, 5_000)))
    this.#sweeper.unref()
  }

  /** Open connections across all tenants (for tests and metrics). */
  get openConnections (): number { return this.#open }
  get perTenantCap (): number { return this.#cap }
  stats (key: string): { open: number, idle: number } | null {
    const p = this.#pools.get(key)
    return p ? { open: p.open, idle: p.idle.length } : null
  }

  #poolFor (key: string, url: string): TenantPool {
    let p = this.#pools.get(key)
    if (p && p.url !== url) {
      // The tenant's connection string changed: retire the old pool's idle connections.
      for (const c of p.idle.splice(0)) this.#close(c)
      p.url = url
    }
    if (!p) {
      p = { key, url, idle: [], open: 0, lastUsed: Date.now() }
      this.#pools.set(key, p)
    }
    return p
  }

  /** A connection of the tenant `key` (pool identity) at `url`. Release it with release(). */
  async acquire (key: string, url: string): Promise<Conn> {
    if (this.#closed) throw new DbConnectionError({ internal: 'engine is closing' })
    const pool = this.#poolFor(key, url)
    pool.lastUsed = Date.now()
    const idle = pool.idle.pop()
    if (idle) return idle
    if (pool.open < this.#cap && this.#makeRoom()) return this.#connect(pool)
    return new Promise<Conn>((resolve, reject) => {
      const w: Waiter = {
        pool,
        resolve,
        reject,
        timer: setTimeout(() => {
          this.#waiters = this.#waiters.filter((x) => x !== w)
          reject(new PoolTimeoutError())
        }, this.#s.acquireTimeoutMs)
      }
      this.#waiters.push(w)
    })
  }

  /** Frees a budget slot if needed by closing the longest-idle connection of any tenant. */
  #makeRoom (): boolean {
    if (this.#open < this.#s.budget) return true
    let victim: Conn | null = null
    for (const p of this.#pools.values()) {
      const c = p.idle[0]
      if (c && (!victim || c.idleSince < victim.idleSince)) victim = c
    }
    if (!victim) return false
    victim.pool.idle.shift()
    this.#close(victim)
    return this.#open < this.#s.budget
  }

  async #connect (pool: TenantPool): Promise<Conn> {
    this.#open++
    pool.open++
    const client = new pg.Client({
      connectionString: pool.url,
      connectionTimeoutMillis: this.#s.connectTimeoutMs,
      application_name: 'gatehouse-rest'
    })
    const conn: Conn = { client, pool, idleSince: Date.now(), broken: false, prepared: new Set() }
    client.on('error', () => {
      conn.broken = true
      const i = pool.idle.indexOf(conn)
      if (i >= 0) { pool.idle.splice(i, 1); this.#close(conn) }
    })
    try {
      await client.connect()
      return conn
    } catch (err) {
      this.#open--
      pool.open--
      client.end().catch(() => {})
      this.#dispatch()
      this.#log?.warn({ err: (err as Error).message, pool: pool.key }, 'rest: cannot connect to the tenant database')
      throw new DbConnectionError({ cause: err, internal: (err as Error).message })
    }
  }

  #close (conn: Conn): void {
    this.#open--
    conn.pool.open--
    conn.client.end().catch(() => {})
  }

  /** Returns a connection; a broken one (or one that failed ROLLBACK) is closed. */
  release (conn: Conn, broken = false): void {
    if (broken || conn.broken || this.#closed) {
      this.#close(conn)
      this.#dispatch()
      return
    }
    conn.idleSince = Date.now()
    conn.pool.lastUsed = conn.idleSince
    const i = this.#waiters.findIndex((w) => w.pool === conn.pool)
    if (i >= 0) {
      const [w] = this.#waiters.splice(i, 1)
      clearTimeout(w.timer)
      w.resolve(conn)
      return
    }
    if (this.#waiters.length > 0 && this.#open >= this.#s.budget) {
      // Another tenant waits for budget: give the slot back rather than keep it idle here.
      this.#close(conn)
      this.#dispatch()
      return
    }
    conn.pool.idle.push(conn)
  }

  /** Serves waiters that can now get a connection (idle, free budget, or an evictable idle). */
  #dispatch (): void {
    for (const w of [...this.#waiters]) {
      const idle = w.pool.idle.pop()
      if (idle) {
        this.#waiters = this.#waiters.filter((x) => x !== w)
        clearTimeout(w.timer)
        w.resolve(idle)
        continue
      }
      if (w.pool.open < this.#cap && this.#makeRoom()) {
        this.#waiters = this.#waiters.filter((x) => x !== w)
        clearTimeout(w.timer)
        this.#connect(w.pool).then(w.resolve, w.reject)
      }
    }
  }

  #sweep (): void {
    const now = Date.now()
    for (const p of [...this.#pools.values()]) {
      while (p.idle.length && now - p.idle[0].idleSince >= this.#s.idleMs) this.#close(p.idle.shift() as Conn)
      if (p.open === 0 && now - p.lastUsed >= this.#s.idleMs && !this.#waiters.some((w) => w.pool === p)) {
        this.#pools.delete(p.key)
        this.onPoolIdle?.(p.key)
      }
    }
    this.#dispatch()
  }

  /** Closes every pool (idle now, busy ones on release). Idempotent. */
  async close (): Promise<void> {
    if (this.#closed) return
    this.#closed = true
    clearInterval(this.#sweeper)
    for (const w of this.#waiters.splice(0)) { clearTimeout(w.timer); w.reject(new DbConnectionError({ internal: 'engine closed' })) }
    const ends: Array<Promise<void>> = []
    for (const p of this.#pools.values()) {
      for (const c of p.idle.splice(0)) { this.#open--; p.open--; ends.push(c.client.end().catch(() => {})) }
    }
    this.#pools.clear()
    await Promise.all(ends)
  }
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
  main: DbRow
  after: DbRow[][]
}

const BEGIN_RO = 'BEGIN ISOLATION LEVEL READ COMMITTED READ ONLY'
const BEGIN_RW = 'BEGIN ISOLATION LEVEL READ COMMITTED READ WRITE'

function toQuery (conn: Conn, s: Statement & { name?: string }): pg.QueryConfig {
  if (!s.name) return { text: s.text, values: s.values as unknown[] }
  conn.prepared.add(s.name)
  return { name: s.name, text: s.text, values: s.values as unknown[] }
}

/** Runs one transaction on a connection of the pool `key`; rolls back on any error. */
export async function executeTransaction (pools: PoolManager, key: string, url: string, tx: Transaction): Promise<TransactionResult> {
  const conn = await pools.acquire(key, url)
  const client = conn.client
  let begun = false
  try {
    await client.query(tx.readOnly ? BEGIN_RO : BEGIN_RW)
    begun = true
    const pre = (await client.query(toQuery(conn, tx.pre))).rows[0] ?? {}
    tx.afterPre?.(pre)
    const main = (await client.query(toQuery(conn, tx.main))).rows[0] ?? {}
    const after: DbRow[][] = []
    for (const s of tx.after ?? []) after.push((await client.query(toQuery(conn, s))).rows)
    tx.check?.(main, after)
    await client.query(tx.rollback ? 'ROLLBACK' : 'COMMIT')
    begun = false
    pools.release(conn, conn.prepared.size > MAX_PREPARED_PER_CONNECTION)
    return { pre, main, after }
  } catch (err) {
    let broken = conn.broken
    if (begun) {
      try { await client.query('ROLLBACK') } catch { broken = true }
    }
    const known = isPgError(err) || isStatusError(err)
    // A socket-level failure (no SQLSTATE) leaves the connection unusable.
    pools.release(conn, broken || !known)
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
export async function executeCatalogQueries<T> (pools: PoolManager, key: string, url: string,
  fn: (query: (text: string, values: unknown[]) => Promise<DbRow[]>) => Promise<T>): Promise<T> {
  const conn = await pools.acquire(key, url)
  let broken = false
  try {
    await conn.client.query(BEGIN_RO)
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
 * connection ends. Returns a function that closes it.
 */
export async function listen (url: string, onNotify: (payload: string) => void,
  onLost: () => void, connectTimeoutMs: number): Promise<() => Promise<void>> {
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
  return async () => {
    closing = true
    await client.end().catch(() => {})
  }
}

// Per-tenant Postgres connections under one process-wide budget, used by every part that
// talks to tenant databases (REST engine, auth engine, gateway catalog, panel).
//
// - budget: connections for all tenants together; perTenant: what one tenant may hold
//   (never the whole budget when it can be shared, see perTenantCap()).
// - Fair shares: when connections are scarce, a connection that comes free goes to the
//   waiting tenant that holds the fewest (its own tenant's next request only when that
//   tenant holds no more than the others that wait), among those the one served least
//   recently, so a few busy tenants cannot starve the rest, and under overload (more
//   tenants waiting than can be served before their waits time out) every tenant gets a
//   turn before any gets a second. Within one tenant, requests are served in arrival order.
// - Idle connections close after idleMs, then the tenant's empty pool; at most maxTenants
//   pools are kept (the least recently used pool without busy connections is closed).
//   Within the budget a tenant's connection stays open between its requests, however many
//   tenants share the budget (PgBouncer's server_idle_timeout, Supavisor's pools per tenant).
// - clusterShare: the budget is that share of the connections the cluster takes from
//   non-superusers (max_connections - superuser_reserved_connections), read on the first
//   connection (docs/operating.md "Sizing for many tenants").
// - A wait longer than acquireTimeoutMs, and a failed connect, throw the caller's errors.
// - snapshot() reports per-tenant in-use / idle / waiting for metrics.
// - A cluster (host:port) known unreachable refuses its tenants at once, and connects being
//   opened to one cluster are bounded (cluster-health.ts, docs/operating.md "Clusters").
//
// Connections are plain pg.Clients. acquire()/release() hand them out; pool(key, url)
// gives a pg.Pool-like facade (query, connect -> client with release) for code written
// against pg.Pool.
import pg from 'pg'
import { ClusterHealth } from './cluster-health.js'

export interface TenantPoolsOptions {
  /** Connections for all tenants together (with clusterShare: until the cluster's size is known). */
  budget: number
  /**
   * Size the budget from the cluster instead: this share (0..1] of its max_connections less
   * superuser_reserved_connections, read once on the first connection opened.
   */
  clusterShare?: number
  /** Connections one tenant may hold (capped so that others always keep a share). */
  perTenant: number
  /** Idle connections (and then empty pools) are closed after this long. */
  idleMs: number
  /** How long an acquire waits for a connection before `timeoutError()`. */
  acquireTimeoutMs: number
  /** Connection timeout of new connections. */
  connectTimeoutMs: number
  /** Most tenant pools kept (default: unbounded apart from idle eviction). */
  maxTenants?: number
  /** application_name of the connections. */
  applicationName: string
  /** Further pg.Client settings (statement_timeout, query_timeout, ...). */
  clientConfig?: Omit<pg.ClientConfig, 'connectionString' | 'connectionTimeoutMillis' | 'application_name'>
  /** Idle connections do not keep the process alive (scripts, CLI, panel). */
  allowExitOnIdle?: boolean
  /**
   * Makes a connection's client (default: a plain pg.Client): the auth engine's puts each session
   * back after owner code (session-guard.ts), REST's pipelines its statements (rest/batch.ts).
   */
  createClient?: (config: pg.ClientConfig) => pg.Client
  /** Whether a healthy client given back may serve again (default: yes); false closes it. */
  reusable?: (client: pg.Client) => boolean
  /** The error of a wait that timed out (default: a TenantPoolTimeoutError). */
  timeoutError?: (key: string) => Error
  /** The error of a connect that failed, or of an acquire on closed pools (default: the error itself). */
  connectError?: (err: unknown, key: string) => Error
  logger?: TenantPoolsLogger
  /** Called with a tenant's key when its pool was closed (idle, or evicted for another tenant). */
  onPoolClosed?: (key: string) => void
  /** The clock of waits and idle times (tests inject one; default Date.now). */
  now?: () => number
}

interface TenantPoolsLogger {
  warn(obj: object, msg?: string): void
}

/** Thrown when a wait for a connection exceeds acquireTimeoutMs (unless the owner maps it). */
export class TenantPoolTimeoutError extends Error {
  readonly code = 'pool_timeout'
  constructor(readonly key: string) {
    super('timed out acquiring a connection from the pool')
    this.name = 'TenantPoolTimeoutError'
  }
}

/** Thrown by acquire() once the pools are closed (unless the owner maps it). */
export class TenantPoolsClosedError extends Error {
  readonly code = 'pools_closed'
  constructor() {
    super('connection pools are closed')
    this.name = 'TenantPoolsClosedError'
  }
}

/** A connection handed out by acquire(); give it back with release(). */
export interface PooledConnection {
  readonly client: pg.Client
  readonly key: string
  /** Set when the connection reported an error; release() then closes it. */
  readonly broken: boolean
}

interface Conn extends PooledConnection {
  pool: TenantPool
  url: string
  idleSince: number
  broken: boolean
}

interface Waiter {
  pool: TenantPool
  since: number
  resolve(c: Conn): void
  reject(e: Error): void
  timer: NodeJS.Timeout
}

interface TenantPool {
  key: string
  url: string
  idle: Conn[]
  /** Connections open or opening. */
  open: number
  waiters: Waiter[]
  lastUsed: number
  /** Order of the last hand-out of a connection to this tenant (0: never). */
  servedAt: number
}

/** One tenant's numbers in a snapshot. */
interface TenantPoolStats {
  key: string
  /** Connections open or opening. */
  open: number
  /** Connections handed out (or being opened for a request). */
  inUse: number
  idle: number
  /** Requests waiting for a connection. */
  waiting: number
}

export interface TenantPoolsSnapshot {
  budget: number
  perTenantCap: number
  open: number
  waiting: number
  tenants: TenantPoolStats[]
}

/** The effective per-tenant cap: never the whole budget when the budget can be shared. */
export function perTenantCap(s: { budget: number; perTenant: number }): number {
  const share = s.budget > 1 ? Math.max(1, Math.ceil(s.budget / 2)) : 1
  return Math.max(1, Math.min(s.perTenant, share))
}

/** The budget of a cluster-sized pool until its first connection has read the cluster's size. */
const PROVISIONAL_BUDGET = 40

/** The budget options of a configured `pool_budget`: the number itself, or for 0 `share` of the cluster. */
export function budgetOptions(configured: number, share: number): Pick<TenantPoolsOptions, 'budget' | 'clusterShare'> {
  return configured > 0 ? { budget: configured } : { budget: PROVISIONAL_BUDGET, clusterShare: share }
}

/** What the fair-share rule compares of a waiting tenant. */
export interface FairShareCandidate {
  /** Connections the tenant holds. */
  open: number
  /** When its oldest waiting request started waiting. */
  since: number
  /** When (in any increasing order) the tenant was last handed a connection; 0 or absent: never. */
  servedAt?: number
}

/**
 * The fair-share order: the tenant holding the fewest connections first; among equals,
 * the one served least recently (a tenant whose requests timed out before a turn comes
 * before one served a moment ago); then the one whose oldest request has waited longest.
 * Returns the index of the winner, -1 for an empty list.
 */
export function fairest(candidates: readonly FairShareCandidate[]): number {
  let best = -1
  for (let i = 0; i < candidates.length; i++) {
    const c = candidates[i]
    const b = best < 0 ? undefined : candidates[best]
    if (b === undefined || c.open < b.open) {
      best = i
      continue
    }
    if (c.open !== b.open) continue
    const cs = c.servedAt ?? 0
    const bs = b.servedAt ?? 0
    if (cs < bs || (cs === bs && c.since < b.since)) best = i
  }
  return best
}

/** pg.Client's socket ref/unref (not in its type declarations). */
function refOf(client: pg.Client): { ref(): void; unref(): void } {
  return client as unknown as { ref(): void; unref(): void }
}

/** The part of pg.Pool that code written against a pool uses. */
export type PoolLike = Pick<pg.Pool, 'query' | 'connect'>

export class TenantPools {
  readonly #s: TenantPoolsOptions
  readonly #now: () => number
  #budget: number
  #cap: number
  /** The budget still waits for the cluster's size (clusterShare). */
  #sizing: boolean
  /** Insertion order is recency: a used pool moves to the end. */
  readonly #pools = new Map<string, TenantPool>()
  /** Pools with waiting requests. */
  readonly #waiting = new Set<TenantPool>()
  #open = 0
  /** Connections closed whose backend may still hold its server slot (see #close). */
  #closing = 0
  #closed = false
  /** Increases with every hand-out (TenantPool.servedAt). */
  #served = 0
  readonly #sweeper: NodeJS.Timeout
  readonly #facades = new Map<string, { url: string; facade: PoolLike }>()
  /** Which clusters are down, and the connects being opened to each (docs/operating.md). */
  readonly #clusters: ClusterHealth

  constructor(options: TenantPoolsOptions) {
    this.#s = options
    this.#now = options.now ?? Date.now
    this.#clusters = new ClusterHealth({
      // Connects being opened to one cluster (host:port) at most: a quarter of the budget, as sized.
      maxConnects: () => Math.max(1, Math.ceil(this.#budget / 4)),
      probe: (url) => this.probe(url),
      now: this.#now,
    })
    this.#budget = options.budget
    this.#cap = perTenantCap(options)
    this.#sizing = options.clusterShare !== undefined
    this.#sweeper = setInterval(() => this.#sweep(), Math.max(250, Math.min(options.idleMs / 2, 5_000)))
    this.#sweeper.unref()
  }

  /** Open connections across all tenants. */
  get openConnections(): number {
    return this.#open
  }
  get perTenantCap(): number {
    return this.#cap
  }
  get budget(): number {
    return this.#budget
  }

  /** One tenant's connections (open, idle), null when it has no pool. */
  stats(key: string): { open: number; idle: number; waiting: number } | null {
    const p = this.#pools.get(key)
    return p ? { open: p.open, idle: p.idle.length, waiting: p.waiters.length } : null
  }

  /** Every tenant's numbers (for metrics). */
  snapshot(): TenantPoolsSnapshot {
    const tenants: TenantPoolStats[] = []
    let waiting = 0
    for (const p of this.#pools.values()) {
      waiting += p.waiters.length
      tenants.push({
        key: p.key,
        open: p.open,
        inUse: p.open - p.idle.length,
        idle: p.idle.length,
        waiting: p.waiters.length,
      })
    }
    return { budget: this.#budget, perTenantCap: this.#cap, open: this.#open, waiting, tenants }
  }

  /** A connection of the tenant `key` at `url`. Give it back with release(). */
  async acquire(key: string, url: string): Promise<PooledConnection> {
    if (this.#closed) throw this.#connectError(new TenantPoolsClosedError(), key)
    const down = this.#clusters.refusal(url)
    if (down !== null) throw this.#connectError(down, key)
    const pool = this.#poolFor(key, url)
    pool.lastUsed = this.#now()
    if (pool.waiters.length === 0) {
      const idle = pool.idle.pop()
      if (idle !== undefined) {
        pool.servedAt = ++this.#served
        return this.#handOut(idle)
      }
      if (pool.open < this.#cap && this.#clusters.canConnect(url) && this.#makeRoom()) {
        pool.servedAt = ++this.#served
        return this.#connect(pool)
      }
    }
    return new Promise<Conn>((resolve, reject) => {
      const w: Waiter = {
        pool,
        since: this.#now(),
        resolve,
        reject,
        timer: setTimeout(() => {
          this.#dropWaiter(w)
          reject(this.#s.timeoutError?.(key) ?? new TenantPoolTimeoutError(key))
        }, this.#s.acquireTimeoutMs),
      }
      pool.waiters.push(w)
      this.#waiting.add(pool)
    })
  }

  /**
   * Gives a connection back. A broken one (or `broken` true: failed ROLLBACK, too many
   * prepared statements, ..., or one the `reusable` option refuses) is closed. A healthy one goes, in this order, to the waiting
   * tenant holding the fewest connections (its own tenant when that one holds no more than
   * any other that waits), else back to the idle list.
   */
  release(connection: PooledConnection, broken = false): void {
    const conn = connection as Conn
    const pool = conn.pool
    if (
      broken ||
      conn.broken ||
      this.#s.reusable?.(conn.client) === false ||
      this.#closed ||
      conn.url !== pool.url ||
      this.#pools.get(pool.key) !== pool
    ) {
      void this.#close(conn)
      this.#dispatch()
      return
    }
    conn.idleSince = this.#now()
    pool.lastUsed = conn.idleSince
    const other = this.#fairestWaiting(pool)
    if (pool.waiters.length > 0 && (other === null || pool.open - 1 <= other.open)) {
      const w = pool.waiters.shift() as Waiter
      this.#settled(w)
      pool.servedAt = ++this.#served
      w.resolve(conn)
      return
    }
    if (other !== null) {
      // Another tenant holding fewer connections waits: this one's slot becomes theirs.
      void this.#close(conn)
      this.#dispatch()
      return
    }
    if (this.#s.allowExitOnIdle === true) refOf(conn.client).unref()
    pool.idle.push(conn)
  }

  /** A pg.Pool-like view of one tenant's pool (query, connect -> client.release). */
  pool(key: string, url: string): PoolLike {
    const known = this.#facades.get(key)
    if (known !== undefined && known.url === url) return known.facade
    const query = async (...args: unknown[]): Promise<unknown> => {
      const conn = await this.acquire(key, url)
      try {
        const out = await (conn.client.query as (...a: unknown[]) => Promise<unknown>)(...args)
        this.release(conn)
        return out
      } catch (err) {
        // A failure without SQLSTATE (socket, timeout) leaves the connection unusable.
        this.release(conn, typeof (err as { severity?: unknown })?.severity !== 'string')
        throw err
      }
    }
    const connect = async (): Promise<pg.PoolClient> => {
      const conn = await this.acquire(key, url)
      let released = false
      const client = conn.client as pg.Client & { release?: (err?: Error | boolean) => void }
      client.release = (err?: Error | boolean) => {
        if (released) throw new Error('release called on a client already released to the pool')
        released = true
        this.release(conn, err !== undefined && err !== false)
      }
      return client as unknown as pg.PoolClient
    }
    const facade = { query, connect } as unknown as PoolLike
    if (this.#facades.size >= 10_000) this.#facades.clear()
    this.#facades.set(key, { url, facade })
    return facade
  }

  /** Resolves once no probe of a down cluster is running (tests). */
  clusterProbesSettled(): Promise<void> {
    return this.#clusters.probesSettled()
  }

  /** Closes every pool (idle connections now, busy ones on release); waiters fail. Idempotent. */
  async close(): Promise<void> {
    if (this.#closed) return
    this.#closed = true
    clearInterval(this.#sweeper)
    this.#clusters.close()
    const ends: Array<Promise<void>> = []
    for (const p of this.#pools.values()) {
      for (const w of p.waiters.splice(0)) {
        clearTimeout(w.timer)
        w.reject(this.#connectError(new TenantPoolsClosedError(), p.key))
      }
      for (const c of p.idle.splice(0)) ends.push(this.#close(c))
    }
    this.#waiting.clear()
    this.#pools.clear()
    this.#facades.clear()
    await Promise.all(ends)
  }

  #connectError(err: unknown, key: string): Error {
    if (this.#s.connectError !== undefined) return this.#s.connectError(err, key)
    return err instanceof Error ? err : new Error(String(err))
  }

  #poolFor(key: string, url: string): TenantPool {
    let p = this.#pools.get(key)
    if (p !== undefined) {
      if (p.url !== url) {
        // The tenant's connection string changed: retire the old URL's idle connections
        // (busy ones close on release).
        for (const c of p.idle.splice(0)) void this.#close(c)
        p.url = url
      }
      // Most recently used last.
      this.#pools.delete(key)
      this.#pools.set(key, p)
      return p
    }
    const max = this.#s.maxTenants
    if (max !== undefined && this.#pools.size >= max) this.#evictTenant()
    p = { key, url, idle: [], open: 0, waiters: [], lastUsed: this.#now(), servedAt: 0 }
    this.#pools.set(key, p)
    return p
  }

  /** Closes the least recently used pool that has no busy connection and no waiter. */
  #evictTenant(): void {
    for (const p of this.#pools.values()) {
      if (p.waiters.length === 0 && p.open === p.idle.length) {
        this.#dropPool(p)
        return
      }
    }
  }

  #dropPool(p: TenantPool): void {
    for (const c of p.idle.splice(0)) void this.#close(c)
    this.#pools.delete(p.key)
    this.#s.onPoolClosed?.(p.key)
  }

  /** Frees a budget slot if needed by closing the longest-idle connection of any tenant. */
  #makeRoom(): boolean {
    if (this.#open + this.#closing < this.#budget) return true
    let victim: Conn | undefined
    for (const p of this.#pools.values()) {
      const c = p.idle[0]
      if (c !== undefined && (victim === undefined || c.idleSince < victim.idleSince)) victim = c
    }
    if (victim === undefined) return false
    victim.pool.idle.shift()
    void this.#close(victim)
    return this.#open + this.#closing < this.#budget
  }

  /** The waiting tenant (other than `except`) that would get a freed slot: below its cap, fewest held. */
  #fairestWaiting(except?: TenantPool): TenantPool | null {
    if (this.#waiting.size === 0) return null
    const eligible: TenantPool[] = []
    for (const p of this.#waiting)
      if (p !== except && p.open < this.#cap && this.#clusters.canConnect(p.url)) eligible.push(p)
    const i = fairest(
      eligible.map((p) => ({ open: p.open, since: (p.waiters[0] as Waiter).since, servedAt: p.servedAt })),
    )
    return i < 0 ? null : (eligible[i] as TenantPool)
  }

  #handOut(conn: Conn): Conn {
    if (this.#s.allowExitOnIdle === true) refOf(conn.client).ref()
    return conn
  }

  /**
   * Opens one connection to `url` outside the pools (no budget, no tenant slot) and closes
   * it: resolves when the database accepts connections again, rejects with the connect
   * error otherwise. The reconnect back-off's background probe.
   */
  async probe(url: string): Promise<void> {
    const client = new pg.Client({
      ...this.#s.clientConfig,
      connectionString: url,
      connectionTimeoutMillis: this.#s.connectTimeoutMs,
      application_name: this.#s.applicationName,
    })
    client.on('error', () => {})
    try {
      await client.connect()
    } finally {
      await client.end().catch(() => {})
    }
  }

  async #connect(pool: TenantPool): Promise<Conn> {
    this.#open++
    pool.open++
    this.#clusters.connecting(pool.url)
    const config: pg.ClientConfig = {
      ...this.#s.clientConfig,
      connectionString: pool.url,
      connectionTimeoutMillis: this.#s.connectTimeoutMs,
      application_name: this.#s.applicationName,
    }
    const client = this.#s.createClient?.(config) ?? new pg.Client(config)
    const conn: Conn = { client, key: pool.key, pool, url: pool.url, idleSince: this.#now(), broken: false }
    client.on('error', () => {
      conn.broken = true
      const i = pool.idle.indexOf(conn)
      if (i >= 0) {
        pool.idle.splice(i, 1)
        void this.#close(conn)
        this.#dispatch()
      }
    })
    try {
      await client.connect()
      this.#clusters.connected(pool.url)
      if (this.#sizing) await this.#sizeFromCluster(client)
      if (this.#waiting.size > 0) this.#dispatch()
      return conn
    } catch (err) {
      this.#open--
      pool.open--
      client.end().catch(() => {})
      this.#s.logger?.warn({ err: (err as Error).message, pool: pool.key }, 'cannot connect to the tenant database')
      if (this.#clusters.connected(pool.url, err)) this.#refuseWaiters()
      this.#dispatch()
      throw this.#connectError(err, pool.key)
    }
  }

  /** Sets the budget to clusterShare of what the cluster of `client` accepts (once; kept as is when unreadable). */
  async #sizeFromCluster(client: pg.Client): Promise<void> {
    this.#sizing = false
    let usable: number
    try {
      const r = await client.query<{ usable: number }>(
        `SELECT current_setting('max_connections')::int - current_setting('superuser_reserved_connections')::int AS usable`,
      )
      usable = r.rows[0]?.usable ?? 0
    } catch (err) {
      this.#s.logger?.warn({ err: (err as Error).message }, 'cannot read max_connections: the pool budget stays')
      return
    }
    this.#budget = Math.max(1, Math.floor(usable * (this.#s.clusterShare ?? 1)))
    this.#cap = perTenantCap({ budget: this.#budget, perTenant: this.#s.perTenant })
  }

  /**
   * Closes a connection. Its server slot is free only once the backend has exited (Postgres
   * closes the socket last): until then, at most connectTimeoutMs, it still counts against
   * the budget, so a budget sized to the cluster never meets "too many clients".
   */
  async #close(conn: Conn): Promise<void> {
    this.#open--
    conn.pool.open--
    this.#closing++
    let timer: NodeJS.Timeout | undefined
    const bound = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, this.#s.connectTimeoutMs)
      timer.unref()
    })
    await Promise.race([conn.client.end().catch(() => {}), bound])
    clearTimeout(timer)
    this.#closing--
    this.#dispatch()
  }

  /** The cluster of `url` went down: its tenants' waiting requests are refused now, not at their timeout. */
  #refuseWaiters(): void {
    for (const p of [...this.#waiting]) {
      const down = this.#clusters.refusal(p.url)
      if (down === null) continue
      this.#waiting.delete(p)
      for (const w of p.waiters.splice(0)) {
        clearTimeout(w.timer)
        w.reject(this.#connectError(down, p.key))
      }
    }
  }

  #settled(w: Waiter): void {
    clearTimeout(w.timer)
    if (w.pool.waiters.length === 0) this.#waiting.delete(w.pool)
  }

  #dropWaiter(w: Waiter): void {
    const i = w.pool.waiters.indexOf(w)
    if (i >= 0) w.pool.waiters.splice(i, 1)
    if (w.pool.waiters.length === 0) this.#waiting.delete(w.pool)
  }

  /** Serves waiters that can get a connection now (idle ones, free budget, an evictable idle). */
  #dispatch(): void {
    if (this.#closed) return
    for (const p of [...this.#waiting]) {
      while (p.waiters.length > 0 && p.idle.length > 0) {
        const w = p.waiters.shift() as Waiter
        this.#settled(w)
        p.servedAt = ++this.#served
        w.resolve(this.#handOut(p.idle.pop() as Conn))
      }
    }
    for (;;) {
      const p = this.#fairestWaiting()
      if (p === null || !this.#makeRoom()) return
      const w = p.waiters.shift() as Waiter
      this.#settled(w)
      p.servedAt = ++this.#served
      this.#connect(p).then(w.resolve, w.reject)
    }
  }

  #sweep(): void {
    const now = this.#now()
    for (const p of [...this.#pools.values()]) {
      while (p.idle.length > 0 && now - (p.idle[0] as Conn).idleSince >= this.#s.idleMs)
        void this.#close(p.idle.shift() as Conn)
      if (p.open === 0 && p.waiters.length === 0 && now - p.lastUsed >= this.#s.idleMs) this.#dropPool(p)
    }
    this.#dispatch()
  }
}

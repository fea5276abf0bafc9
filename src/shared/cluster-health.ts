// What the tenant pools know of each Postgres cluster (host:port) their tenants live on
// (docs/operating.md, "Tenant databases"). Tenants are spread over many clusters; when one
// is out of reach, its outage is its own:
//
// - a connect that fails for a reason of the cluster (refused, reset, timed out, the server
//   shutting down or starting up) marks the cluster down: every request of every tenant on
//   it is refused at once (a ClusterDownError), not just the tenant whose connect failed,
//   and no request waits out a connect timeout again;
// - while it is down, one background probe (a connect, no query) runs at most every
//   probeIntervalMs, from a timer and from a request that finds the last probe older than
//   that (by the injected clock), so service resumes within a second of it coming back;
// - connects being opened to one cluster are bounded (maxConnects), so a cluster that
//   swallows connects (a host gone: its connects hang until the timeout) cannot take the
//   budget slots the other clusters' tenants wait for.
//
// A failure of one database (a wrong password, a missing database, a login over its
// connection limit) is not the cluster's: it is left to the caller.

/** The cluster a connection URL names: host:port (first host, default port 5432). */
export function clusterOf(url: string): string {
  try {
    const u = new URL(url)
    const host = u.hostname !== '' ? u.hostname : (u.searchParams.get('host') ?? 'localhost')
    return `${host}:${u.port !== '' ? u.port : '5432'}`
  } catch {
    return url
  }
}

/** Refused at once: the cluster of the tenant database is known to be unreachable. */
export class ClusterDownError extends Error {
  /** SQLSTATE 08001 (sqlclient_unable_to_establish_sqlconnection), as a client would say. */
  readonly code = '08001'
  constructor(readonly cluster: string) {
    super(`the database cluster ${cluster} is unreachable (a connect failed; probing it)`)
    this.name = 'ClusterDownError'
  }
}

const SOCKET_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'EHOSTDOWN',
  'ENETUNREACH',
  'EPIPE',
  'ENOTFOUND',
  'EAI_AGAIN',
])

/** A connect error that says the cluster (not one database or login of it) cannot be reached. */
export function isClusterFailure(err: unknown): boolean {
  if (typeof err !== 'object' || err === null) return false
  if (err instanceof ClusterDownError) return true
  const { code, message, severity, errors } = err as {
    code?: unknown
    message?: unknown
    severity?: unknown
    errors?: unknown
  }
  // Postgres answered: only connection exceptions and shutdown/startup are the cluster's.
  if (typeof severity === 'string')
    return typeof code === 'string' && (code.startsWith('08') || /^57P0[123]$/.test(code))
  if (typeof code === 'string' && SOCKET_CODES.has(code)) return true
  if (
    typeof message === 'string' &&
    /^(Connection terminated|timeout expired|Connection ended unexpectedly)/.test(message)
  )
    return true
  // AggregateError of a dual-stack connect (every address refused).
  return Array.isArray(errors) && errors.length > 0 && errors.every(isClusterFailure)
}

interface ClusterHealthOptions {
  /** Connects being opened to one cluster at most (asked each time: it follows a budget sized later). */
  maxConnects: () => number
  /** Resolves when `url` accepts a connection (a connect, no budget). */
  probe: (url: string) => Promise<void>
  /** Least time between two probes of one cluster, ms (default 1000). */
  probeIntervalMs?: number
  now?: () => number
}

interface ClusterState {
  /** The URL to probe with (the last that failed). */
  url: string
  down: boolean
  /** Connects being opened. */
  pending: number
  probedAt: number
  /** Probes running: a new one starts each interval even while an older one hangs (a host that swallows connects). */
  probes: Set<Promise<void>>
  timer: NodeJS.Timeout | null
}

export class ClusterHealth {
  readonly #s: Required<ClusterHealthOptions>
  readonly #states = new Map<string, ClusterState>()

  constructor(opts: ClusterHealthOptions) {
    this.#s = { probeIntervalMs: 1_000, now: Date.now, ...opts }
  }

  /** The refusal for `url` when its cluster is down (a probe is started when one is due), else null. */
  refusal(url: string): ClusterDownError | null {
    const key = clusterOf(url)
    const st = this.#states.get(key)
    if (st === undefined || !st.down) return null
    this.#maybeProbe(st)
    return new ClusterDownError(key)
  }

  /** Whether a new connection to `url` may be opened now (its cluster up, below maxConnects). */
  canConnect(url: string): boolean {
    const st = this.#states.get(clusterOf(url))
    return st === undefined || (!st.down && st.pending < this.#s.maxConnects())
  }

  /** A connect to `url` starts. */
  connecting(url: string): void {
    const key = clusterOf(url)
    let st = this.#states.get(key)
    if (st === undefined) {
      st = { url, down: false, pending: 0, probedAt: 0, probes: new Set(), timer: null }
      this.#states.set(key, st)
    }
    st.pending++
  }

  /** A connect to `url` ended (failed with `err`). True when this failure marked its cluster down. */
  connected(url: string, err?: unknown): boolean {
    const key = clusterOf(url)
    const st = this.#states.get(key)
    if (st === undefined) return false
    st.pending = Math.max(0, st.pending - 1)
    if (err === undefined || !isClusterFailure(err)) {
      if (err === undefined) this.#up(key, st)
      else this.#forget(key, st)
      return false
    }
    st.url = url
    if (st.down) return false
    st.down = true
    // The failed connect was a probe of its own: the first background one is an interval away.
    st.probedAt = this.#s.now()
    this.#schedule(st)
    return true
  }

  /** Whether the cluster of `url` is known down (tests, metrics). */
  isDown(url: string): boolean {
    return this.#states.get(clusterOf(url))?.down === true
  }

  /** Resolves once no probe is running (tests). */
  async probesSettled(): Promise<void> {
    for (const st of [...this.#states.values()]) await Promise.all([...st.probes])
  }

  /** Stops every probe timer. */
  close(): void {
    for (const st of this.#states.values()) if (st.timer !== null) clearTimeout(st.timer)
    this.#states.clear()
  }

  #up(key: string, st: ClusterState): void {
    st.down = false
    if (st.timer !== null) clearTimeout(st.timer)
    st.timer = null
    this.#forget(key, st)
  }

  /** Nothing to remember of an up cluster without pending connects. */
  #forget(key: string, st: ClusterState): void {
    if (!st.down && st.pending === 0 && this.#states.get(key) === st) this.#states.delete(key)
  }

  #schedule(st: ClusterState): void {
    st.timer = setTimeout(() => {
      st.timer = null
      if (!st.down) return
      this.#maybeProbe(st)
      this.#schedule(st)
    }, this.#s.probeIntervalMs)
    st.timer.unref()
  }

  /** Starts a probe unless the last started less than an interval ago. */
  #maybeProbe(st: ClusterState): void {
    const now = this.#s.now()
    if (now - st.probedAt < this.#s.probeIntervalMs) return
    st.probedAt = now
    const probe: Promise<void> = this.#s.probe(st.url).then(
      () => this.#probed(st, probe, undefined),
      (err: unknown) => this.#probed(st, probe, err),
    )
    st.probes.add(probe)
  }

  /** A probe that got an answer of the server (even a refusal of that one login) ends the outage. */
  #probed(st: ClusterState, probe: Promise<void>, err: unknown): void {
    st.probes.delete(probe)
    if (!st.down || isClusterFailure(err)) return
    const key = clusterOf(st.url)
    if (this.#states.get(key) === st) this.#up(key, st)
  }
}

// Reconnects to a tenant database back off: after a connection to a database URL fails,
// requests for it fail fast (503 PGRST000 with Retry-After) for a while instead of each
// trying again; then one request probes while the others keep failing fast; the wait
// doubles up to a cap while the database stays unreachable (PostgREST retries on the same
// schedule: 1, 2, 4 ... 32 s) and is forgotten at the first success.
//
// Beyond PostgREST: while a URL backs off, one cheap background probe (a connect, no
// query) runs at most every second (PROBE_INTERVAL_MS), so a database that is back is served again
// within a second however long the wait had grown (docs/edge.md). A probe starts from a
// timer, and also from a request that finds the last probe older than the interval (by the
// injected clock: tests drive a long outage without waiting for it).
import type { GatehouseError } from '../shared/index.js'
import { DbConnectionError } from './errors.js'

/**
 * The refusals made while a URL backs off: the outage was logged once, by the connect that
 * failed (and each probe that fails again), so these are not logged one by one.
 */
const backoffRefusals = new WeakSet<GatehouseError>()

/**
 * A refusal for a connect that failed: the pool logged that failure already (`cannot connect
 * to the tenant database`), so the request's error is not logged a second time.
 */
export function loggedConnectFailure<E extends GatehouseError>(err: E): E {
  backoffRefusals.add(err)
  return err
}

/** `err` is a fail-fast refusal of a database known to be unreachable, or a connect failure logged already. */
export function isBackoffRefusal(err: unknown): boolean {
  return typeof err === 'object' && err !== null && backoffRefusals.has(err as GatehouseError)
}

interface ReconnectBackoffOptions {
  /** First wait after a failure, ms. */
  initialMs: number
  /** Longest wait, ms. */
  maxMs: number
  now?: () => number
  /** Resolves when `url` accepts a connection again. */
  probe: (url: string) => Promise<void>
}

/** Least time between two probes of one URL, ms. */
const PROBE_INTERVAL_MS = 1_000

interface State {
  until: number
  delayMs: number
  /** A request is trying the URL (the first after the wait). */
  probing: boolean
  /** The background probe: its last start (clock ms), whether one is running, its timer. */
  probedAt: number
  probe: Promise<void> | null
  timer: NodeJS.Timeout | null
}

export class ReconnectBackoff {
  readonly #s: Required<ReconnectBackoffOptions>
  readonly #states = new Map<string, State>()

  constructor(opts: ReconnectBackoffOptions) {
    this.#s = { now: Date.now, ...opts }
  }

  /**
   * Throws 503 PGRST000 while `url` is backing off; otherwise lets the caller try (the
   * first caller after a wait is the probe: the others keep failing until it is done).
   */
  check(url: string): void {
    const st = this.#states.get(url)
    if (st === undefined) return
    const now = this.#s.now()
    if (now >= st.until && !st.probing) {
      st.probing = true
      return
    }
    this.#maybeProbe(url, st)
    // A client is told to retry within the probe interval (a second), not the whole wait.
    throw loggedConnectFailure(
      new DbConnectionError({ internal: 'backing off reconnects for 1 s', headers: { 'retry-after': '1' } }),
    )
  }

  /** A connection to `url` failed: wait before the next try (doubling up to maxMs). */
  failed(url: string): void {
    const st = this.#states.get(url)
    const delayMs = st === undefined ? this.#s.initialMs : Math.min(st.delayMs * 2, this.#s.maxMs)
    const now = this.#s.now()
    if (st === undefined) {
      // The failed connect was a probe of its own: the first background one is an interval away.
      const fresh: State = { until: now + delayMs, delayMs, probing: false, probedAt: now, probe: null, timer: null }
      this.#states.set(url, fresh)
      this.#schedule(url, fresh)
      return
    }
    st.until = now + delayMs
    st.delayMs = delayMs
    st.probing = false
  }

  /** A connection to `url` worked: no more waiting. */
  succeeded(url: string): void {
    if (this.#states.size === 0) return
    const st = this.#states.get(url)
    if (st === undefined) return
    if (st.timer !== null) clearTimeout(st.timer)
    this.#states.delete(url)
  }

  /** Whether `url` is backing off now (tests, metrics). */
  backingOff(url: string): boolean {
    return this.#states.has(url)
  }

  /** Resolves once no background probe is running (tests). */
  async probesSettled(): Promise<void> {
    for (const st of [...this.#states.values()]) if (st.probe !== null) await st.probe
  }

  /** Stops every background probe timer (the engine closes). */
  close(): void {
    for (const st of this.#states.values()) if (st.timer !== null) clearTimeout(st.timer)
    this.#states.clear()
  }

  #schedule(url: string, st: State): void {
    st.timer = setTimeout(() => {
      st.timer = null
      if (this.#states.get(url) !== st) return
      this.#maybeProbe(url, st)
      if (this.#states.get(url) === st) this.#schedule(url, st)
    }, PROBE_INTERVAL_MS)
    st.timer.unref()
  }

  /** Starts a probe of `url` unless one runs or the last started less than an interval ago. */
  #maybeProbe(url: string, st: State): void {
    const now = this.#s.now()
    if (st.probe !== null || now - st.probedAt < PROBE_INTERVAL_MS) return
    st.probedAt = now
    st.probe = this.#s.probe(url).then(
      () => {
        st.probe = null
        if (this.#states.get(url) === st) this.succeeded(url)
      },
      () => {
        st.probe = null
      },
    )
  }
}

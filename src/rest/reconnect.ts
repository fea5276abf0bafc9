// Reconnects to a tenant database back off: after a connection to a database URL fails,
// requests for it fail fast (503 PGRST000 with Retry-After) for a while instead of each
// trying again; then one request probes while the others keep failing fast; the wait
// doubles up to a cap while the database stays unreachable (PostgREST retries on the same
// schedule: 1, 2, 4 ... 32 s) and is forgotten at the first success.
import { DbConnectionError } from './errors.js'

export interface ReconnectBackoffOptions {
  /** First wait after a failure, ms. */
  initialMs: number
  /** Longest wait, ms. */
  maxMs: number
  now?: () => number
}

interface State { until: number, delayMs: number, probing: boolean }

export class ReconnectBackoff {
  readonly #s: Required<ReconnectBackoffOptions>
  readonly #states = new Map<string, State>()

  constructor (opts: ReconnectBackoffOptions) {
    this.#s = { now: Date.now, ...opts }
  }

  /**
   * Throws 503 PGRST000 while `url` is backing off; otherwise lets the caller try (the
   * first caller after a wait is the probe: the others keep failing until it is done).
   */
  check (url: string): void {
    const st = this.#states.get(url)
    if (st === undefined) return
    const now = this.#s.now()
    if (now >= st.until && !st.probing) { st.probing = true; return }
    const seconds = Math.max(1, Math.ceil((Math.max(st.until, now + 1) - now) / 1000))
    throw new DbConnectionError({ internal: `backing off reconnects for ${seconds} s`, headers: { 'retry-after': String(seconds) } })
  }

  /** A connection to `url` failed: wait before the next try (doubling up to maxMs). */
  failed (url: string): void {
    const st = this.#states.get(url)
    const delayMs = st === undefined ? this.#s.initialMs : Math.min(st.delayMs * 2, this.#s.maxMs)
    this.#states.set(url, { until: this.#s.now() + delayMs, delayMs, probing: false })
  }

  /** A connection to `url` worked: no more waiting. */
  succeeded (url: string): void {
    if (this.#states.size !== 0) this.#states.delete(url)
  }

  /** Whether `url` is backing off now (tests, metrics). */
  backingOff (url: string): boolean { return this.#states.has(url) }
}

// Whether a repeated event is worth a log line at its level: the first of a key in a window is,
// the others in that window are not (they go to debug), so an outage (a database unreachable, an
// engine down or hung) is logged once per window rather than once per request. Keys come from
// requests, so the map is bounded: beyond `maxKeys` the oldest key goes.

export class LogThrottle {
  readonly #last = new Map<string, number>()
  readonly #windowMs: number
  readonly #now: () => number
  readonly #maxKeys: number

  constructor(o: { windowMs: number; now: () => number; maxKeys?: number }) {
    this.#windowMs = o.windowMs
    this.#now = o.now
    this.#maxKeys = o.maxKeys ?? 10_000
  }

  /** True for the first event of `key` in a window (which starts the window), false for the rest of it. */
  first(key: string): boolean {
    const now = this.#now()
    const last = this.#last.get(key)
    if (last !== undefined && now - last < this.#windowMs) return false
    if (last === undefined && this.#last.size >= this.#maxKeys) this.#last.delete(this.#last.keys().next().value!)
    this.#last.set(key, now)
    return true
  }
}

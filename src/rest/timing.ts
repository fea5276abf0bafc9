// The Server-Timing header of a request (PostgREST's server-timing-enabled,
// src/PostgREST/Response/Performance.hs): milliseconds spent verifying the token, parsing,
// planning, in the transaction and shaping the response, in that order, one decimal;
// stages a request did not go through are left out.

export type Stage = 'jwt' | 'parse' | 'plan' | 'transaction' | 'response'

const ORDER: readonly Stage[] = ['jwt', 'parse', 'plan', 'transaction', 'response']

/** Stage durations of one request; does nothing when off (the common case costs one branch). */
export class StageTimer {
  readonly #on: boolean
  readonly #spent = new Map<Stage, number>()
  #last: number

  constructor (on: boolean) {
    this.#on = on
    this.#last = on ? performance.now() : 0
  }

  /** Ends `stage` now: the time since the previous mark is added to it. */
  mark (stage: Stage): void {
    if (!this.#on) return
    const now = performance.now()
    this.#spent.set(stage, (this.#spent.get(stage) ?? 0) + now - this.#last)
    this.#last = now
  }

  /** Forgets a stage (a plan that runs no SQL is not reported as planned). */
  drop (stage: Stage): void {
    this.#spent.delete(stage)
  }

  /** `jwt;dur=0.4, parse;dur=0.5, ...`, or null when off. */
  header (): string | null {
    if (!this.#on) return null
    return ORDER.filter((s) => this.#spent.has(s)).map((s) => `${s};dur=${(this.#spent.get(s) as number).toFixed(1)}`).join(', ')
  }
}

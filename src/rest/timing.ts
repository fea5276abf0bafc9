// The stage timings of one request through the pipeline (handler.ts), as PostgREST's App.hs
// times each stage (withTiming): verifying the token, parsing, planning, the transaction and
// shaping the response. The Server-Timing header (PostgREST's server-timing-enabled,
// src/PostgREST/Response/Performance.hs) is these timings in that order, milliseconds with
// one decimal; stages a request did not go through are left out.

type Stage = 'jwt' | 'parse' | 'plan' | 'transaction' | 'response'

const ORDER: readonly Stage[] = ['jwt', 'parse', 'plan', 'transaction', 'response']

/** Milliseconds spent per stage of one request. */
export class StageTimings {
  readonly #spent = new Map<Stage, number>()

  /** Runs `stage` and adds the time it took, also when it throws. */
  async time<T>(stage: Stage, run: () => Promise<T>): Promise<T> {
    const start = performance.now()
    try {
      return await run()
    } finally {
      this.add(stage, performance.now() - start)
    }
  }

  /** As time(), for a stage that does not wait. */
  timeSync<T>(stage: Stage, run: () => T): T {
    const start = performance.now()
    try {
      return run()
    } finally {
      this.add(stage, performance.now() - start)
    }
  }

  add(stage: Stage, ms: number): void {
    this.#spent.set(stage, (this.#spent.get(stage) ?? 0) + ms)
  }

  /** Forgets a stage (a plan that runs no SQL is not reported as planned). */
  drop(stage: Stage): void {
    this.#spent.delete(stage)
  }

  /** The Server-Timing header's value: `jwt;dur=0.4, parse;dur=0.5, ...`. */
  serverTiming(): string {
    return ORDER.filter((s) => this.#spent.has(s))
      .map((s) => `${s};dur=${(this.#spent.get(s) as number).toFixed(1)}`)
      .join(', ')
  }
}

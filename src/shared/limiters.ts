// The one way our parts keep request-rate counters (rate-limiter-flexible): fixed-window
// limiters, one per (name, points, window), so a tenant's new setting starts fresh counters. In
// Redis when the part has one (every process and replica then shares them), with a memory
// limiter as insurance while Redis fails (rather than letting requests through unlimited or
// failing them); in memory otherwise. Used by the auth engine's GoTrue buckets, the gateway's
// /rest/v1 limits and the panel's app-session exchange.
import type { Redis } from 'ioredis'
import { RateLimiterMemory, RateLimiterRedis, RateLimiterRes, type RateLimiterAbstract } from 'rate-limiter-flexible'

/** The outcome of counting one request: `over` when the window's quota was already spent. */
export interface LimitCount {
  over: boolean
  remainingPoints: number
  msBeforeNext: number
}

export class LimiterCache {
  readonly #prefix: string
  readonly #redis: () => Redis | null
  readonly #limiters = new Map<string, RateLimiterAbstract>()

  /** `redis`: the client counters live in (asked on first use of a limiter), or none. */
  constructor(opts: { keyPrefix: string; redis?: () => Redis | null }) {
    this.#prefix = opts.keyPrefix
    this.#redis = opts.redis ?? (() => null)
  }

  /** The limiter of `points` requests per `duration` seconds under `name`. */
  limiter(name: string, points: number, duration: number): RateLimiterAbstract {
    const id = name === '' ? `${points}:${duration}` : `${name}:${points}:${duration}`
    let l = this.#limiters.get(id)
    if (l === undefined) {
      const keyPrefix = `${this.#prefix}:${id}`
      const memory = new RateLimiterMemory({ keyPrefix, points, duration })
      const redis = this.#redis()
      l =
        redis !== null
          ? new RateLimiterRedis({ storeClient: redis, keyPrefix, points, duration, insuranceLimiter: memory })
          : memory
      this.#limiters.set(id, l)
    }
    return l
  }

  /** Counts one request of `key` against the limiter; never throws for a spent quota. */
  async count(name: string, points: number, duration: number, key: string): Promise<LimitCount> {
    try {
      const r = await this.limiter(name, points, duration).consume(key)
      return { over: false, remainingPoints: r.remainingPoints, msBeforeNext: r.msBeforeNext }
    } catch (res) {
      if (res instanceof RateLimiterRes) return { over: true, remainingPoints: 0, msBeforeNext: res.msBeforeNext }
      throw res
    }
  }
}

/** Seconds until a refused client may try again (at least 1). */
export const retryAfterSeconds = (c: LimitCount): number => Math.max(1, Math.ceil(c.msBeforeNext / 1000))

// The app-session exchange is a sign-in (it creates a session row in the tenant database on
// every call), so it is limited like one: the tenant's `auth.rate_limits.sign_in_sign_up`
// bucket (GoTrue's default: 30 per 5 minutes), counted per database and panel user in the
// panel process's memory. Over it: 429 over_request_rate_limit with Retry-After.
import { RateLimiterMemory, RateLimiterRes } from 'rate-limiter-flexible'
import { DEFAULT_RATE_LIMITS, type Tenant } from '../tenants/index.js'
import { ExchangeRateLimitError } from './errors.js'

/** The exchange's counters of one panel process: one limiter per (points, window), so a tenant's new setting starts fresh counters. */
export class ExchangeLimiter {
  readonly #limiters = new Map<string, RateLimiterMemory>()

  /** Takes one exchange of (tenant, panel user); throws ExchangeRateLimitError when none is left. */
  async consume(tenant: Tenant, panelUserId: string): Promise<void> {
    const own = tenant.auth.rate_limits
    const set = own !== undefined && Object.hasOwn(own, 'sign_in_sign_up') ? own.sign_in_sign_up : undefined
    const b = { ...DEFAULT_RATE_LIMITS.sign_in_sign_up, ...(set ?? {}) }
    const points = b.capacity
    const duration = Math.max(1, Math.ceil((b.capacity / b.rate) * b.interval_seconds))
    try {
      await this.#limiter(points, duration).consume(JSON.stringify([tenant.database, panelUserId]))
    } catch (res) {
      if (res instanceof RateLimiterRes) {
        const seconds = Math.max(1, Math.ceil(res.msBeforeNext / 1000))
        throw new ExchangeRateLimitError(points, duration, { headers: { 'retry-after': String(seconds) } })
      }
      throw res
    }
  }

  #limiter(points: number, duration: number): RateLimiterMemory {
    const id = `${points}:${duration}`
    let l = this.#limiters.get(id)
    if (l === undefined) {
      l = new RateLimiterMemory({ keyPrefix: `panel-exchange:${id}`, points, duration })
      this.#limiters.set(id, l)
    }
    return l
  }
}

// The app-session exchange is a sign-in (it creates a session row in the tenant database on
// every call), so it is limited like one: the tenant's `auth.rate_limits.sign_in_sign_up`
// bucket (GoTrue's default: 30 per 5 minutes), counted per database and panel user in the
// panel process's memory. Over it: 429 over_request_rate_limit with Retry-After.
import { LimiterCache, retryAfterSeconds } from '../shared/index.js'
import { bucketWindow, DEFAULT_RATE_LIMITS, type Tenant } from '../tenants/index.js'
import { ExchangeRateLimitError } from './errors.js'

/** The exchange's counters of one panel process. */
export class ExchangeLimiter {
  readonly #limiters = new LimiterCache({ keyPrefix: 'panel-exchange' })

  /** Takes one exchange of (tenant, panel user); throws ExchangeRateLimitError when none is left. */
  async consume(tenant: Tenant, panelUserId: string): Promise<void> {
    const own = tenant.auth.rate_limits
    const set = own !== undefined && Object.hasOwn(own, 'sign_in_sign_up') ? own.sign_in_sign_up : undefined
    const { points, duration } = bucketWindow({ ...DEFAULT_RATE_LIMITS.sign_in_sign_up, ...(set ?? {}) })
    const c = await this.#limiters.count('', points, duration, JSON.stringify([tenant.database, panelUserId]))
    if (c.over)
      throw new ExchangeRateLimitError(points, duration, { headers: { 'retry-after': String(retryAfterSeconds(c)) } })
  }
}

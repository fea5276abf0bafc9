// Request-rate limits of /rest/v1, as Kong's rate-limiting plugin offers them: set per
// database in the tenant's `rest.rate_limits` (tenant file, panel rest-settings), off unless
// set; per database, per client address and per API key, requests per second and per minute
// (fixed windows, as Kong counts). Every limit that applies counts the request; over any of
// them: 429 over_request_rate_limit with Retry-After. Counters live in Redis when the
// process has one (redis.url), so every gateway replica shares them, else in memory; a
// Redis that fails falls back to memory (rate-limiter-flexible's insurance limiter). Answers
// carry the IETF RateLimit-Policy and RateLimit fields (draft-ietf-httpapi-ratelimit-headers:
// `"<name>";q=<quota>;w=<window s>` and `"<name>";r=<remaining>;t=<s to reset>`).
import { createHash } from 'node:crypto'
import type { Redis } from 'ioredis'
import { LimiterCache } from '../shared/index.js'
import { connectRedis, type RestRateLimits } from '../tenants/index.js'

const PERIODS = { second: 1, minute: 60 } as const
const SCOPES = ['database', 'client', 'key'] as const

/** Who is asking, as the limits count them. */
interface RateSubject {
  database: string
  client: string
  /** The API key as sent (hashed before it is used as a counter key). */
  apikey: string
}

interface RateVerdict {
  /** RateLimit-Policy and RateLimit field values. */
  headers: Record<string, string>
  /** Set when a limit is exceeded: seconds to wait, and the limit (`client-minute` ...) that refused. */
  refused: { retryAfter: number; policy: string; quota: number; window: number } | null
}

export interface RestRateLimiter {
  /** Counts the request against every limit `limits` sets; null when none is set. */
  check(limits: RestRateLimits | undefined, who: RateSubject): Promise<RateVerdict | null>
  close(): void
}

export function createRestRateLimiter(opts: { redisUrl?: string; keyPrefix: string }): RestRateLimiter {
  let redis: Redis | null = null
  // Connected on first use: a gateway whose tenants set no limits never opens it.
  const store = (): Redis | null => {
    if (opts.redisUrl === undefined) return null
    if (redis === null) {
      redis = connectRedis(opts.redisUrl, { maxRetriesPerRequest: 1, lazyConnect: false })
      redis.on('error', () => {})
    }
    return redis
  }
  const limiters = new LimiterCache({ keyPrefix: `${opts.keyPrefix}rest-rl`, redis: store })

  return {
    async check(limits, who) {
      if (limits === undefined) return null
      const policies: string[] = []
      const states: string[] = []
      let refused: RateVerdict['refused'] = null
      for (const scope of SCOPES) {
        const windows = limits[scope]
        if (windows === undefined) continue
        for (const period of ['second', 'minute'] as const) {
          const quota = windows[period]
          if (quota === undefined) continue
          const window = PERIODS[period]
          const name = `${scope}-${period}`
          const res = await limiters.count('', quota, window, `${who.database}:${scope}:${subjectOf(scope, who)}`)
          const reset = Math.max(1, Math.ceil(res.msBeforeNext / 1000))
          policies.push(`"${name}";q=${quota};w=${window}`)
          states.push(`"${name}";r=${Math.max(0, res.remainingPoints)};t=${reset}`)
          if (res.over && (refused === null || reset > refused.retryAfter))
            refused = { retryAfter: reset, policy: name, quota, window }
        }
      }
      if (policies.length === 0) return null
      return { headers: { 'ratelimit-policy': policies.join(', '), ratelimit: states.join(', ') }, refused }
    },
    close() {
      if (redis !== null) redis.disconnect()
    },
  }
}

/** The counter key of a scope: the client address, a hash of the API key, or the database. */
function subjectOf(scope: (typeof SCOPES)[number], who: RateSubject): string {
  if (scope === 'client') return who.client
  if (scope === 'key') return createHash('sha256').update(who.apikey).digest('base64url').slice(0, 22)
  return '*'
}

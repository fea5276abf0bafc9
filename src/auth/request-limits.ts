// Request rate limits of the features in routes/factors.ts and anonymous sign-in: GoTrue's
// token buckets per tenant, limit class and client IP (tollbooth: `rate` requests per period
// refilled continuously, `burst` at most). This is the hook those routes call; the engine's
// shared limiter (Redis-backed when configured) replaces the in-process buckets below.
import type { FastifyRequest } from 'fastify'
import { LRUCache } from 'lru-cache'
import { overRequestRateLimit } from './errors.js'
import type { TenantContext } from './types.js'

/** The limit classes these features use (GoTrue's limiter names). */
export type FeatureLimit = 'anonymous_sign_ins' | 'mfa_challenge' | 'mfa_verify'

interface Rate { perSecond: number, burst: number }

/** GoTrue's shapes: anonymous N/hour with burst N; MFA N/minute with burst 30. */
function rateOf (ctx: TenantContext, kind: FeatureLimit): Rate | null {
  const a = ctx.tenant.auth
  switch (kind) {
    case 'anonymous_sign_ins':
      return a.anonymous_rate_per_hour > 0 ? { perSecond: a.anonymous_rate_per_hour / 3600, burst: a.anonymous_rate_per_hour } : null
    case 'mfa_challenge':
    case 'mfa_verify':
      return a.mfa_rate_per_minute > 0 ? { perSecond: a.mfa_rate_per_minute / 60, burst: 30 } : null
  }
}

interface Bucket { tokens: number, at: number }
const buckets = new LRUCache<string, Bucket>({ max: 100_000, ttl: 2 * 3600 * 1000 })

/** Takes one request from the bucket of (tenant, kind, IP); 429 over_request_rate_limit when empty. */
export async function limitFeatureRequest (ctx: TenantContext, req: FastifyRequest, kind: FeatureLimit): Promise<void> {
  const rate = rateOf(ctx, kind)
  if (!rate) return
  const key = JSON.stringify([ctx.tenant.database, kind, req.ip])
  const now = ctx.now().getTime() / 1000
  const b = buckets.get(key) ?? { tokens: rate.burst, at: now }
  const tokens = Math.min(rate.burst, b.tokens + Math.max(0, now - b.at) * rate.perSecond)
  if (tokens < 1) {
    buckets.set(key, { tokens, at: now })
    throw overRequestRateLimit()
  }
  buckets.set(key, { tokens: tokens - 1, at: now })
}

// Request rate limits of the features in routes/factors.ts and anonymous sign-in, with
// GoTrue's shapes: anonymous sign-ins N per hour with a burst of N
// (RATE_LIMIT_ANONYMOUS_USERS), MFA challenges and verifies N per minute with a burst of 30
// (MFA_RATE_LIMIT_CHALLENGE_AND_VERIFY), passkey sign-ins begun 30 per 5 minutes
// (RATE_LIMIT_PASSKEY); 0 switches a class off. Counted per tenant, class
// and client IP by the engine's shared limiter (rate-limits.ts: Redis when configured).
import type { FastifyRequest } from 'fastify'
import type { RateLimitBucket } from '../tenants/index.js'
import { clientIp } from './rate-limits.js'
import type { TenantContext } from './types.js'

/** The limit classes these features use (GoTrue's limiter names). */
export type FeatureLimit = 'anonymous_sign_ins' | 'mfa_challenge' | 'mfa_verify' | 'passkey_authentication'

/** GoTrue's RATE_LIMIT_PASSKEY: passkey sign-in ceremonies begun, 30 per 5 minutes and client IP. */
const PASSKEY_AUTHENTICATION: RateLimitBucket = { capacity: 30, rate: 30, interval_seconds: 300 }

function bucketOf(ctx: TenantContext, kind: FeatureLimit): RateLimitBucket | null {
  const a = ctx.tenant.auth
  switch (kind) {
    case 'anonymous_sign_ins':
      return a.anonymous_rate_per_hour > 0
        ? { capacity: a.anonymous_rate_per_hour, rate: a.anonymous_rate_per_hour, interval_seconds: 3600 }
        : null
    case 'mfa_challenge':
    case 'mfa_verify':
      return a.mfa_rate_per_minute > 0 ? { capacity: 30, rate: a.mfa_rate_per_minute, interval_seconds: 60 } : null
    case 'passkey_authentication':
      return PASSKEY_AUTHENTICATION
  }
}

/** Takes one request from the bucket of (tenant, kind, IP); 429 over_request_rate_limit when empty. */
export async function limitFeatureRequest(ctx: TenantContext, req: FastifyRequest, kind: FeatureLimit): Promise<void> {
  const bucket = bucketOf(ctx, kind)
  if (!bucket) return
  await ctx.rateLimits.consume(ctx, kind, bucket, clientIp(req))
}

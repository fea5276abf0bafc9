// Per-IP request limits of the auth engine, GoTrue's classes with its defaults, set per
// tenant in `auth.rate_limits` (tenant file, panel auth-settings):
//
//   sign_in_sign_up     POST /signup with email or phone; POST /token password, pkce, id_token
//   token_refresh       POST /token grant_type=refresh_token
//   verify              GET and POST /verify
//   otp                 POST /otp, /magiclink, /recover, /resend; PUT /user
//
// Within a class each endpoint counts on its own (as GoTrue has one limiter per endpoint):
// /signup apart from the /token sign-ins, and each endpoint of the otp class apart.
//
// plus the classes of request-limits.ts (anonymous sign-ins, MFA challenge and verify),
// whose settings are the tenant's anonymous_rate_per_hour and mfa_rate_per_minute.
//
// A bucket is counted per database and client IP (the socket address, or X-Forwarded-For
// from the engine's trusted proxies: auth.trusted_proxies). Counters live in Redis when the
// process has one (redis.url), so every engine process and replica shares them, else in
// memory; a Redis that fails falls back to memory rather than letting requests through
// unlimited or failing them. Over the limit: 429 over_request_rate_limit with Retry-After.
// Mails sent per tenant are limited separately (mail/rate-limit.ts, in the tenant database).
import type { FastifyRequest } from 'fastify'
import type { Redis } from 'ioredis'
import { LimiterCache } from '../shared/index.js'
import {
  bucketWindow,
  connectRedis,
  DEFAULT_RATE_LIMITS,
  type RateLimitBucket,
  type RateLimitBucketName,
  type Tenant,
} from '../tenants/index.js'
import type { Config } from '../config/index.js'
import { overRequestRateLimit } from './errors.js'

export type { RateLimitBucketName } from '../tenants/index.js'

/** One tenant's setting of a bucket; tenants stored before rate limits existed get GoTrue's defaults. */
function bucketSettings(ctx: { readonly tenant: Tenant }, name: RateLimitBucketName): RateLimitBucket {
  const own = ctx.tenant.auth.rate_limits
  const set = own && Object.hasOwn(own, name) ? own[name] : undefined
  return { ...DEFAULT_RATE_LIMITS[name], ...(set ?? {}) }
}

/** The counters of one engine process (shared/limiters.ts; a bucket as fixed windows: bucketWindow). */
export class RateLimits {
  readonly #redis: Redis | null
  readonly #ownsRedis: boolean
  readonly #limiters: LimiterCache

  constructor(opts: { config: Pick<Config, 'redis'>; redis?: Redis | null }) {
    const url = opts.redis === undefined ? opts.config.redis.url : undefined
    this.#ownsRedis = !!url
    // A command waits for the connection (at start) but fails after one reconnect attempt:
    // while Redis is away the memory insurance limiter answers instead.
    this.#redis = url
      ? connectRedis(url, { maxRetriesPerRequest: 1, lazyConnect: false }).on('error', () => {})
      : (opts.redis ?? null)
    this.#limiters = new LimiterCache({ keyPrefix: `${opts.config.redis.key_prefix}auth-rl`, redis: () => this.#redis })
  }

  /** Where counters are kept: `redis` or `memory`. */
  get store(): 'redis' | 'memory' {
    return this.#redis ? 'redis' : 'memory'
  }

  /**
   * Takes a token of the bucket `name` (of the given size and refill) for (database, ip);
   * throws 429 over_request_rate_limit when there is none.
   */
  async consume(ctx: { readonly tenant: Tenant }, name: string, bucket: RateLimitBucket, ip: string): Promise<void> {
    const { points, duration } = bucketWindow(bucket)
    const c = await this.#limiters.count(name, points, duration, `${ctx.tenant.database}:${ip}`)
    if (c.over) throw overRequestRateLimit(Math.ceil(c.msBeforeNext / 1000))
  }

  async close(): Promise<void> {
    if (this.#ownsRedis && this.#redis) this.#redis.disconnect()
  }
}

/** The client IP of a request as the engine trusts it (see auth.trusted_proxies). */
export function clientIp(req: FastifyRequest): string {
  return req.ip || req.socket.remoteAddress || 'unknown'
}

/**
 * Takes a token of a bucket of auth.rate_limits for this request's tenant and client IP (429
 * when empty). `endpoint` gives an endpoint its own counter with the class's setting, as
 * GoTrue gives /otp, /magiclink, /recover, /resend, PUT /user and /signup each a limiter of
 * their own with the OTP rate.
 */
export async function limitRequest(
  req: FastifyRequest,
  ctx: { readonly tenant: Tenant; readonly rateLimits: RateLimits },
  name: RateLimitBucketName,
  endpoint?: string,
): Promise<void> {
  await ctx.rateLimits.consume(ctx, endpoint ? `${name}/${endpoint}` : name, bucketSettings(ctx, name), clientIp(req))
}

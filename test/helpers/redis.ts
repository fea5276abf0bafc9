// A Redis connection per test file with its own key prefix, cleaned up on teardown.
import { randomBytes } from 'node:crypto'
import { Redis } from 'ioredis'

export function redisUrl(): string {
  const url = process.env.REDIS_URL
  if (!url) throw new Error('REDIS_URL is not set: run the tests through `npm test` (scripts/with-services.mjs)')
  return url
}

interface Teardown {
  teardown(fn: () => unknown): void
}

function testKeyPrefix(): string {
  return `test:${randomBytes(4).toString('hex')}:`
}

/** A plain client (no ioredis keyPrefix) plus a unique prefix; keys under it are deleted on teardown. */
export function createTestRedis(t: Teardown): { redis: Redis; prefix: string; url: string } {
  const prefix = testKeyPrefix()
  const redis = new Redis(redisUrl(), { lazyConnect: false, maxRetriesPerRequest: 2 })
  t.teardown(async () => {
    const keys = await redis.keys(prefix + '*')
    if (keys.length) await redis.del(...keys)
    redis.disconnect()
  })
  return { redis, prefix, url: redisUrl() }
}

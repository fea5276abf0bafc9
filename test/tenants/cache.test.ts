import t from 'tap'
import {
  createRedisStore,
  createTenantCache,
  tenantCacheOptions,
  parseTenantFile,
  toTenant,
  type Tenant,
  type TenantStore,
  type RedisTenantStore,
} from '../../src/tenants/index.js'
import { createTestRedis } from '../helpers/redis.js'
import { loadConfig } from '../../src/config/index.js'
import { tenantFile, eventually, spawnRedis } from '../helpers/tenant-fixtures.js'

const tenant = (db: string, over: Record<string, unknown> = {}) =>
  toTenant(parseTenantFile(tenantFile(db, over), `${db}.yaml`, {}))

/** Counts the look-ups that reach a real store. */
function counted(store: TenantStore): TenantStore & { calls: string[] } {
  const calls: string[] = []
  return Object.assign(Object.create(store) as TenantStore, {
    calls,
    kind: store.kind,
    get: (db: string) => {
      calls.push(db)
      return store.get(db)
    },
    onChange: store.onChange.bind(store),
  })
}

function clock() {
  let now = 1_000_000
  return {
    now: () => now,
    advance(ms: number) {
      now += ms
    },
  }
}

function redisStore(t: { teardown(fn: () => unknown): void }, url: string, prefix: string): RedisTenantStore {
  const s = createRedisStore({ url, prefix })
  t.teardown(() => s.close())
  return s
}

/** Writes a record straight into Redis WITHOUT publishing (a missed invalidation). */
async function writeSilently(redis: import('ioredis').Redis, prefix: string, t: Tenant) {
  await redis.hset(`${prefix}tenant:${t.database}`, 'record', JSON.stringify(t))
  await redis.sadd(`${prefix}tenants`, t.database)
}

t.test('hits are served from the cache; concurrent misses are one look-up', async (t) => {
  const { prefix, url } = createTestRedis(t)
  const store = redisStore(t, url, prefix)
  await store.putAll([tenant('acme')])
  const s = counted(store)
  const cache = createTenantCache(s, {})
  t.teardown(() => cache.close())

  const all = await Promise.all(Array.from({ length: 20 }, () => cache.get('acme')))
  t.ok(all.every((x) => x?.database === 'acme'))
  t.same(s.calls, ['acme'], 'twenty concurrent gets, one store look-up')
  t.equal((await cache.get('acme'))?.organization, 'org_acme')
  t.same(s.calls, ['acme'], 'the next get is a hit')
  t.throws(
    () => {
      ;(all[0] as Tenant).organization = 'x'
    },
    TypeError,
    'cached tenants are frozen',
  )
})

t.test('invalid names never reach the store', async (t) => {
  const { prefix, url } = createTestRedis(t)
  const s = counted(redisStore(t, url, prefix))
  const cache = createTenantCache(s, {})
  t.teardown(() => cache.close())
  for (const bad of ['', 'Acme', '../acme', 'acme/rest', '*', 'a'.repeat(64), '1abc', 'acme%00', 'tenant:acme']) {
    t.equal(await cache.get(bad), null, JSON.stringify(bad))
  }
  t.same(s.calls, [])
})

t.test('unknown databases are remembered for negativeTtlMs', async (t) => {
  const { redis, prefix, url } = createTestRedis(t)
  const s = counted(redisStore(t, url, prefix))
  const c = clock()
  const cache = createTenantCache(s, { negativeTtlMs: 5000, now: c.now })
  t.teardown(() => cache.close())

  t.equal(await cache.get('ghost'), null)
  await writeSilently(redis, prefix, tenant('ghost'))
  c.advance(4_000)
  t.equal(await cache.get('ghost'), null, 'still remembered as unknown')
  t.same(s.calls, ['ghost'])
  c.advance(1_001)
  t.equal((await cache.get('ghost'))?.database, 'ghost', 'looked up again after the negative TTL')
  t.same(s.calls, ['ghost', 'ghost'])
})

t.test('negativeTtlMs 0: unknown databases are not remembered', async (t) => {
  const { prefix, url } = createTestRedis(t)
  const s = counted(redisStore(t, url, prefix))
  const cache = createTenantCache(s, { negativeTtlMs: 0 })
  t.teardown(() => cache.close())
  t.equal(await cache.get('ghost'), null)
  t.equal(await cache.get('ghost'), null)
  t.same(s.calls, ['ghost', 'ghost'])
})

t.test('cached(): what get() would answer when it is at hand, undefined when get() must ask', async (t) => {
  const { redis, prefix, url } = createTestRedis(t)
  const s = counted(redisStore(t, url, prefix))
  await s.putAll([tenant('acme')])
  const c = clock()
  const cache = createTenantCache(s, { ttlMs: 60_000, negativeTtlMs: 5000, now: c.now, reinvalidateMs: 0 })
  t.teardown(() => cache.close())

  t.equal(cache.cached?.('acme'), undefined, 'never looked up: get() must ask')
  const pending = cache.get('acme')
  t.equal(cache.cached?.('acme'), undefined, 'while the store is asked')
  const got = await pending
  t.equal(cache.cached?.('acme'), got, 'the record get() gave, the same object')
  t.same(s.calls, ['acme'], 'cached() never asks the store')
  c.advance(60_001)
  t.equal(cache.cached?.('acme'), undefined, 'past the TTL: get() must ask again')

  t.equal(await cache.get('ghost'), null)
  t.equal(cache.cached?.('ghost'), null, 'an unknown database, remembered')
  c.advance(5_001)
  t.equal(cache.cached?.('ghost'), undefined, 'after the negative TTL')

  await cache.get('acme')
  await writeSilently(redis, prefix, tenant('acme', { organization: 'org_next' }))
  cache.invalidate('acme')
  t.equal(cache.cached?.('acme'), undefined, 'invalidated: get() reads the store again')
  t.equal((await cache.get('acme'))?.organization, 'org_next')
  t.equal(cache.cached?.('acme')?.organization, 'org_next')
  t.equal(cache.cached?.('__proto__'), undefined, 'a prototype name is never an entry')
})

t.test('TTL backstop: a missed invalidation heals after ttlMs', async (t) => {
  const { redis, prefix, url } = createTestRedis(t)
  const store = redisStore(t, url, prefix)
  await store.putAll([tenant('acme')])
  const c = clock()
  const cache = createTenantCache(store, { ttlMs: 60_000, now: c.now })
  t.teardown(() => cache.close())

  t.equal((await cache.get('acme'))?.organization, 'org_acme')
  await writeSilently(redis, prefix, tenant('acme', { organization: 'org_silent' }))
  c.advance(59_000)
  t.equal((await cache.get('acme'))?.organization, 'org_acme', 'within the TTL: cached')
  c.advance(1_001)
  t.equal((await cache.get('acme'))?.organization, 'org_silent', 'after the TTL: re-read')
})

t.test('invalidation through pub/sub reaches a cache in another "process"', async (t) => {
  const { prefix, url } = createTestRedis(t)
  // Two stores = two connections each, as two gateway processes would have.
  const storeA = redisStore(t, url, prefix)
  const storeB = redisStore(t, url, prefix)
  const cacheA = createTenantCache(storeA, { ttlMs: 3_600_000, negativeTtlMs: 3_600_000 })
  const cacheB = createTenantCache(storeB, { ttlMs: 3_600_000, negativeTtlMs: 3_600_000 })
  t.teardown(() => {
    cacheA.close()
    cacheB.close()
  })
  await storeA.subscribed()
  await storeB.subscribed()

  await storeA.putAll([tenant('acme')])
  t.equal((await cacheA.get('acme'))?.organization, 'org_acme')
  t.equal((await cacheB.get('acme'))?.organization, 'org_acme')
  t.equal(await cacheB.get('beta'), null, 'beta unknown (and cached as unknown for an hour)')

  // 1. A change written through A is seen by B without waiting for any TTL.
  await storeA.putAll([tenant('acme', { organization: 'org_v2' }), tenant('beta')])
  t.ok(await eventually(async () => (await cacheB.get('acme'))?.organization === 'org_v2'), 'B sees the new record')
  t.equal((await cacheB.get('beta'))?.database, 'beta', 'a negative entry is dropped too')
  t.equal((await cacheA.get('acme'))?.organization, 'org_v2', 'A sees it at once')

  // 2. A delete through B is seen by A.
  await storeB.delete('acme')
  t.ok(await eventually(async () => (await cacheA.get('acme')) === null), 'A forgets the deleted tenant')
})

t.test('an invalidation during a look-up: the caller gets its answer, the cache does not keep it', async (t) => {
  const { prefix, url } = createTestRedis(t)
  const store = redisStore(t, url, prefix)
  await store.putAll([tenant('acme')])
  // Holding a look-up open at a chosen moment needs a gate around the real store.
  let release: () => void = () => {}
  let gated = true
  const calls: string[] = []
  const gate: TenantStore = Object.assign(Object.create(store) as TenantStore, {
    kind: store.kind,
    get: async (db: string) => {
      calls.push(db)
      const result = await store.get(db)
      if (gated)
        await new Promise<void>((resolve) => {
          release = resolve
        })
      return result
    },
    onChange: store.onChange.bind(store),
  })
  // Options from the process config's tenants section.
  const config = loadConfig({ env: { GATEHOUSE_TENANTS_REINVALIDATE_MS: '0' } })
  const opts = tenantCacheOptions(config.tenants)
  t.same(opts, { ttlMs: 60_000, negativeTtlMs: 5_000, max: 10_000, reinvalidateMs: 0 })
  const cache = createTenantCache(gate, opts)
  t.teardown(() => cache.close())

  const pending = cache.get('acme')
  await eventually(() => calls.length === 1)
  cache.invalidate('acme')
  gated = false
  release()
  t.equal((await pending)?.database, 'acme', 'the caller still gets an answer')
  await cache.get('acme')
  t.same(calls, ['acme', 'acme'], 'the answer read before the invalidation was not cached')
})

t.test('the delayed second invalidation drops a copy a lagging read put back', async (t) => {
  const { prefix, url } = createTestRedis(t)
  const writer = redisStore(t, url, prefix)
  const reader = redisStore(t, url, prefix)
  await writer.putAll([tenant('acme')])
  const v1 = await reader.get('acme')

  // A read that lags behind the write (a replica, or a reload started just before the
  // change) is a fault one Redis cannot produce on demand: this wrapper answers the old
  // record while `lagging` is set. Everything else is the real Redis store.
  let lagging = false
  const laggy: TenantStore = Object.assign(Object.create(reader) as TenantStore, {
    kind: reader.kind,
    get: async (db: string) => (lagging ? v1 : reader.get(db)),
    onChange: reader.onChange.bind(reader),
  })
  // Two caches on the same store, one with the second invalidation and one without: the
  // moment the first drops its stale copy, the second still has its own (no sleep needed).
  const withSecond = createTenantCache(laggy, { ttlMs: 3_600_000, reinvalidateMs: 150 })
  const without = createTenantCache(laggy, { ttlMs: 3_600_000, reinvalidateMs: 0 })
  t.teardown(() => {
    withSecond.close()
    without.close()
  })
  await reader.subscribed()
  for (const cache of [withSecond, without]) await cache.get('acme')
  let resolveFirst: () => void
  const firstInvalidation = new Promise<void>((resolve) => {
    resolveFirst = resolve
  })
  const off = reader.onChange(() => {
    lagging = true
    resolveFirst()
  }) // after the caches' own listeners
  // 1. The write publishes; both caches drop acme (first invalidation).
  await writer.putAll([tenant('acme', { organization: 'org_new' })])
  await firstInvalidation
  off()
  // 2. A request right then reads the old record back into each cache.
  for (const cache of [withSecond, without]) {
    t.equal((await cache.get('acme'))?.organization, 'org_acme', 'the lagging read cached the old record')
  }
  lagging = false

  t.ok(
    await eventually(async () => (await withSecond.get('acme'))?.organization === 'org_new', 1000),
    'the second invalidation ~150 ms later drops the stale copy',
  )
  t.equal((await without.get('acme'))?.organization, 'org_acme', 'without it, the stale copy stays (until the TTL)')
})

t.test('Redis outage: a warm cache keeps serving; unknown databases fail clearly; recovery', async (t) => {
  const server = await spawnRedis(t)
  const store = createRedisStore({ url: server.url, prefix: 'gh:' })
  t.teardown(() => store.close())
  // Written before the cache exists, so no invalidation of it can arrive mid-test.
  await store.putAll([tenant('acme')])
  const warnings: unknown[] = []
  const c = clock()
  const cache = createTenantCache(store, {
    ttlMs: 60_000,
    now: c.now,
    logger: {
      warn: (o) => {
        warnings.push(o)
      },
    },
  })
  t.teardown(() => cache.close())
  await store.subscribed()
  t.equal((await cache.get('acme'))?.database, 'acme', 'warm')
  t.equal(await cache.get('ghost'), null, 'ghost is cached as unknown')

  // 1. Kill Redis (SIGKILL: an outage, not a clean shutdown).
  await server.stop()
  t.equal((await cache.get('acme'))?.database, 'acme', 'served from the cache')
  c.advance(61_000)
  t.equal((await cache.get('acme'))?.database, 'acme', 'served stale after its TTL while the store is down')
  t.equal((await cache.get('acme'))?.database, 'acme', 'and again')
  t.equal(warnings.length, 1, 'the outage is logged once')
  await t.rejects(cache.get('beta'), {
    code: 'tenant_store_unavailable',
    status: 503,
    message: /unreachable and database "beta" is not cached/,
  })
  await t.rejects(
    cache.get('ghost'),
    { code: 'tenant_store_unavailable' },
    'an expired unknown entry is not served as "not found" during the outage',
  )
  t.equal(warnings.length, 1, 'still logged once')

  // 2. Redis comes back empty (no persistence): the store lost what was applied, which is
  // not "no such tenant": the last good record keeps serving, others still fail clearly.
  await server.start()
  await eventually(async () => (await store.list().catch(() => null)) !== null, 3000)
  c.advance(61_000)
  t.equal((await cache.get('acme'))?.database, 'acme', 'the last good record serves while the store is empty')
  await t.rejects(
    cache.get('beta'),
    { code: 'tenant_store_unavailable' },
    'a database never resolved is not "not found" either',
  )
  t.equal(cache.health().state, 'empty')

  // 3. The tenants are applied again: look-ups read the store again.
  await store.putAll([tenant('acme', { organization: 'org_new' })])
  await eventually(async () => (await cache.get('acme'))?.organization === 'org_new', 3000)
  t.equal(await cache.get('beta'), null, 'an unknown database is "not found" again')
  t.equal(cache.health().state, 'ok')
})

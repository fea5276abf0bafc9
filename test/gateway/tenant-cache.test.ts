// The gateway over the real tenant store: two gateway instances (each with its own Redis
// store and per-process cache, as two processes would have) see a key rotation published
// through Redis; and during a Redis outage a warm cache keeps serving while an uncached
// database fails with a clear 503.
import t from 'tap'
import { createRedisStore, createTenantCache, type RedisTenantStore } from '../../src/tenants/index.js'
import { createTestRedis } from '../helpers/redis.js'
import { spawnRedis } from '../helpers/tenant-fixtures.js'
import { makeTenant, startUpstream, startGateway, request } from '../helpers/gateway.js'
import { until } from '../helpers/eventually.js'

interface Teardown {
  teardown(fn: () => unknown): void
}

function store(t: Teardown, url: string, prefix: string): RedisTenantStore {
  const s = createRedisStore({ url, prefix, connectTimeoutMs: 500, commandTimeoutMs: 500 })
  t.teardown(() => s.close())
  return s
}

t.test('a key rotation published through Redis reaches both gateway instances', async (t) => {
  const { url, prefix } = createTestRedis(t)
  const up = await startUpstream(t)
  const v1 = makeTenant('acme', { auth: up.url, rest: up.url })
  const v2 = makeTenant('acme', { auth: up.url, rest: up.url })

  const cli = store(t, url, prefix) // `tenants apply` in another process
  await cli.putAll([v1.tenant])

  const gws = []
  for (let i = 0; i < 2; i++) {
    const s = store(t, url, prefix)
    await s.subscribed()
    const cache = createTenantCache(s, { ttlMs: 3_600_000, reinvalidateMs: 50 })
    t.teardown(() => cache.close())
    gws.push(await startGateway(t, { tenants: cache }))
  }

  for (const gw of gws) {
    const r = await request(`${gw.url}/acme/rest/v1/todos`, { headers: { apikey: v1.file.keys.public } })
    t.equal(r.status, 200, 'the first key works on both (and both caches are warm)')
  }

  await cli.putAll([v2.tenant])
  for (const [i, gw] of gws.entries()) {
    await until(
      async () =>
        (await request(`${gw.url}/acme/rest/v1/todos`, { headers: { apikey: v2.file.keys.public } })).status === 200,
      `gateway ${i} accepts the new key`,
    )
    const old = await request(`${gw.url}/acme/rest/v1/todos`, { headers: { apikey: v1.file.keys.public } })
    t.equal(old.status, 401, `gateway ${i}: the old key is refused`)
    t.equal(old.json().code, 'invalid_api_key')
  }

  await cli.delete('acme')
  for (const [i, gw] of gws.entries()) {
    await until(
      async () =>
        (await request(`${gw.url}/acme/rest/v1/todos`, { headers: { apikey: v2.file.keys.public } })).status === 404,
      `gateway ${i} forgets the deleted tenant`,
    )
  }
  t.pass('deletion reached both')
})

t.test('Redis outage: a warm cache keeps serving, an uncached database gets a clear 503', async (t) => {
  const redis = await spawnRedis(t)
  const up = await startUpstream(t)
  const acme = makeTenant('acme', { auth: up.url, rest: up.url })
  const beta = makeTenant('beta', { auth: up.url, rest: up.url })
  const s = store(t, redis.url, 'gw-outage:')
  await s.putAll([acme.tenant, beta.tenant])
  let now = 1_000_000
  const cache = createTenantCache(s, { ttlMs: 60_000, now: () => now })
  t.teardown(() => cache.close())
  const gw = await startGateway(t, { tenants: cache })
  const get = (db: string, key: string) => request(`${gw.url}/${db}/rest/v1/todos`, { headers: { apikey: key } })

  t.equal((await get('acme', acme.file.keys.public)).status, 200, 'warm')

  await redis.stop()
  let r = await get('acme', acme.file.keys.public)
  t.equal(r.status, 200, 'the cached tenant is served while Redis is down')
  now += 120_000 // past the TTL backstop: the refresh fails, the stale copy keeps serving
  r = await get('acme', acme.file.keys.public)
  t.equal(r.status, 200, 'and still after its TTL, since the refresh failed')
  r = await get('acme', 'pk_wrong_key_000000000')
  t.equal(r.json().code, 'invalid_api_key', 'keys are still checked against it')

  r = await get('beta', beta.file.keys.public)
  t.equal(r.status, 503, 'a database never cached cannot be resolved: 503, not 404')
  t.equal(r.json().message, 'unexpected failure', 'the body hides the cause')
  t.match(r.json().details, /request id/)
  t.notMatch(r.body, /redis|sock/i)

  // Redis comes back empty (no persistence in tests): apply the tenants again.
  await redis.start()
  await until(async () => {
    try {
      await s.putAll([acme.tenant, beta.tenant])
      return true
    } catch {
      return false
    }
  }, 'Redis accepts writes again')
  await until(async () => (await get('beta', beta.file.keys.public)).status === 200, 'beta resolves once Redis is back')
  t.pass('recovered')
})

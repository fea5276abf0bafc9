import t from 'tap'
import { setFlagsFromString } from 'node:v8'
import { runInNewContext } from 'node:vm'
import { createRedisStore, createTenantStore, parseTenantFile, toTenant, ALL_TENANTS } from '../../src/tenants/index.js'
import { loadConfig } from '../../src/config/index.js'
import { createTestRedis } from '../helpers/redis.js'
import { tenantFile, eventually, spawnRedis } from '../helpers/tenant-fixtures.js'

const tenant = (db: string, over: Record<string, unknown> = {}) =>
  toTenant(parseTenantFile(tenantFile(db, over), `${db}.yaml`, {}))

t.test('put, get, list, delete; the layout of the keys', async (t) => {
  const { redis, prefix, url } = createTestRedis(t)
  const store = createRedisStore({ url, prefix })
  t.teardown(() => store.close())

  t.same(await store.list(), [])
  t.equal(await store.get('acme'), null)
  await store.putAll([tenant('acme'), tenant('beta')])
  t.same(await store.list(), ['acme', 'beta'])
  t.same(await store.get('acme'), tenant('acme'))

  // A hash per tenant, a set of all, hashed keys only.
  t.same((await redis.smembers(`${prefix}tenants`)).sort(), ['acme', 'beta'])
  const hash = await redis.hgetall(`${prefix}tenant:acme`)
  t.same(Object.keys(hash).sort(), ['record', 'updated_at', 'version'])
  t.equal(hash.version, '1')
  t.notOk(hash.record?.includes('pk_test_acme'), 'no plaintext public key in Redis')
  t.notOk(hash.record?.includes('sk_test_acme'), 'no plaintext secret key in Redis')
  t.match(JSON.parse(hash.record ?? '{}').keys.secret, /^sha256:[0-9a-f]{64}$/)

  await store.putAll([tenant('acme', { organization: 'org_moved' })])
  t.equal((await store.get('acme'))?.organization, 'org_moved')
  t.match(await store.meta('acme'), { version: 2, updated_at: /^\d{4}-\d\d-\d\dT/ })

  t.equal(await store.delete('acme'), true)
  t.equal(await store.delete('acme'), false)
  t.equal(await store.get('acme'), null)
  t.same(await store.list(), ['beta'])
  t.equal(await redis.exists(`${prefix}tenant:acme`), 0)
})

t.test('a call that is done leaves nothing behind in the store', async (t) => {
  // Each call waits for its answer or for the connection to close. A promise that every call
  // raced against kept each answer (the record's JSON, about 3 KB here) until the next close:
  // 5,000 reads then held 16 MB. Without it the heap moves by a few MB at most (compiled code).
  const { prefix, url } = createTestRedis(t)
  const store = createRedisStore({ url, prefix })
  t.teardown(() => store.close())
  await store.putAll([tenant('acme')])
  setFlagsFromString('--expose-gc')
  const gc = runInNewContext('gc') as () => void
  const heap = (): number => {
    gc()
    return process.memoryUsage().heapUsed
  }
  for (let i = 0; i < 2000; i++) await store.get('acme')
  const before = heap()
  for (let i = 0; i < 20_000; i++) await store.get('acme')
  const grown = heap() - before
  t.ok(grown < 16 * 1024 * 1024, `the heap grew by ${Math.round(grown / 1024)} KB over 20,000 reads`)
})

t.test('plaintext keys are refused, nothing written', async (t) => {
  const { redis, prefix, url } = createTestRedis(t)
  const store = createRedisStore({ url, prefix })
  t.teardown(() => store.close())
  const plain = { ...tenant('bad'), keys: { public: 'pk_plaintext_key_123', secret: 'sk_plaintext_key_123' } }
  await t.rejects(store.putAll([tenant('good'), plain]), {
    code: 'tenant_store_config',
    message: /keys of bad are not hashed/,
  })
  t.same(await redis.keys(`${prefix}*`), [])
})

t.test('a malformed record is a clear error, not a crash', async (t) => {
  const { redis, prefix, url } = createTestRedis(t)
  const store = createRedisStore({ url, prefix })
  t.teardown(() => store.close())
  await redis.hset(`${prefix}tenant:junk`, 'record', '{not json')
  await t.rejects(store.get('junk'), { code: 'tenant_store_backend', message: /record of junk in redis is not JSON/ })
  await redis.hset(`${prefix}tenant:other`, 'record', JSON.stringify({ database: 'acme' }))
  await t.rejects(store.get('other'), { message: /record of other in redis is malformed/ })
  // A signing key without its public JWK (written by hand, not by toTenant) would verify nothing.
  const noPublic = tenant('keyed')
  noPublic.jwt.signing_keys = [{ kid: 'k1', alg: 'ES256', private_key: '{}' } as never]
  await redis.hset(`${prefix}tenant:keyed`, 'record', JSON.stringify(noPublic))
  await t.rejects(store.get('keyed'), { message: /record of keyed in redis is malformed; re-apply its tenant file/ })
})

t.test('changes are published to every store sharing the prefix, and only those', async (t) => {
  const { prefix, url } = createTestRedis(t)
  const a = createRedisStore({ url, prefix })
  const b = createRedisStore({ url, prefix })
  const other = createRedisStore({ url, prefix: prefix + 'other:' })
  t.teardown(async () => {
    await a.close()
    await b.close()
    await other.close()
  })
  const seenB: string[] = []
  const seenOther: string[] = []
  b.onChange((db) => seenB.push(db))
  other.onChange((db) => seenOther.push(db))
  await b.subscribed()
  await other.subscribed()

  await a.putAll([tenant('acme'), tenant('beta')])
  await a.delete('acme')
  t.ok(await eventually(() => seenB.length === 3), 'b saw three changes')
  t.same(seenB, ['acme', 'beta', 'acme'])
  t.same(seenOther, [], 'another prefix hears nothing')
})

t.test('createTenantStore: redis source from the config', async (t) => {
  const { prefix, url } = createTestRedis(t)
  const config = loadConfig({
    env: { GATEHOUSE_TENANTS_SOURCE: 'redis', GATEHOUSE_REDIS_URL: url, GATEHOUSE_REDIS_KEY_PREFIX: prefix },
  })
  const store = createTenantStore(config)
  t.teardown(() => store.close())
  t.equal(store.kind, 'redis')
  await store.putAll([tenant('acme')])
  t.equal((await store.get('acme'))?.database, 'acme')
  t.throws(() => createTenantStore(loadConfig({ env: { GATEHOUSE_TENANTS_SOURCE: 'redis' } })), {
    message: /redis\.url is not set/,
  })
})

t.test('Redis down: commands fail fast with a clear error; back up: work again, subscribers resync', async (t) => {
  const server = await spawnRedis(t)
  const warned: string[] = []
  const logger = {
    warn: (o: unknown) => {
      warned.push(String((o as { role?: unknown }).role))
    },
    info: () => {},
  }
  const store = createRedisStore({ url: server.url, prefix: 'x:', logger })
  const watcher = createRedisStore({ url: server.url, prefix: 'x:' })
  t.teardown(async () => {
    await store.close()
    await watcher.close()
  })
  const seen: string[] = []
  watcher.onChange((db) => seen.push(db))
  await watcher.subscribed()
  await store.putAll([tenant('acme')])
  t.ok(await eventually(() => seen.includes('acme')))

  await server.stop()
  t.ok(await eventually(() => warned.includes('commands'), 3000), 'the store noticed the outage (its warning)')
  // Fails at once: from the known-down connection, or from the refused reconnect; a command
  // that queued for the connection would end "no connection after <connectTimeout> ms".
  const err = await store.get('acme').then(
    () => null,
    (e: unknown) => e as { code?: string; message?: string },
  )
  t.equal(err?.code, 'tenant_store_backend')
  t.match(err?.message, /^tenant store unreachable: redis at .*redis\.sock/)
  t.notMatch(err?.message, /no connection after/, 'fails at once instead of queueing')

  await server.start()
  t.ok(
    await eventually(async () => (await store.get('acme').catch(() => 'down')) !== 'down', 3000),
    'commands work again',
  )
  t.ok(await eventually(() => seen.includes(ALL_TENANTS), 3000), 'the subscriber announced a resync after reconnecting')
  seen.length = 0
  await store.putAll([tenant('beta')])
  t.ok(await eventually(() => seen.includes('beta')), 'and hears changes again')
})

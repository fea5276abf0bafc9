// Redis restarts without persistence (a real redis-server of this test, killed and started
// again empty): the gateway keeps serving the tenants it had resolved from their last good
// records, says so in its log and metrics, answers a database it never resolved with 503 +
// Retry-After (not 404), and goes back to the store once `gatehouse tenants apply` (the
// real CLI) restores the records. A tenant deleted while the store is healthy is gone.
import t from 'tap'
import { execFile } from 'node:child_process'
import { pino } from 'pino'
import {
  createRedisStore,
  createTenantCache,
  parseTenantFile,
  toTenant,
  type RedisTenantStore,
} from '../../src/tenants/index.js'
import { spawnRedis, tenantFile, writeTenantDir } from '../helpers/tenant-fixtures.js'
import { startUpstream, startGateway, request } from '../helpers/gateway.js'
import { until } from '../helpers/eventually.js'

interface Teardown {
  teardown(fn: () => unknown): void
}

function cli(args: string[], env: Record<string, string>): Promise<{ code: number; stdout: string; stderr: string }> {
  const clean = Object.fromEntries(
    Object.entries(process.env).filter(([k]) => !k.startsWith('GATEHOUSE_') && k !== 'REDIS_URL'),
  )
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      ['--import', 'tsx', 'src/cli.ts', ...args],
      { env: { ...clean, ...env }, timeout: 30_000 },
      (err, stdout, stderr) =>
        resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stdout, stderr }),
    )
  })
}

function store(t: Teardown, url: string, prefix: string): RedisTenantStore {
  const s = createRedisStore({ url, prefix, connectTimeoutMs: 500, commandTimeoutMs: 500 })
  t.teardown(() => s.close())
  return s
}

function metric(text: string, line: string): number | null {
  for (const l of text.split('\n')) if (l.startsWith(line + ' ')) return Number(l.slice(line.length + 1))
  return null
}

t.test('Redis comes back empty: last good records keep serving until tenants apply', async (t) => {
  const redis = await spawnRedis(t)
  const up = await startUpstream(t)
  const files: Record<string, Record<string, unknown>> = {}
  for (const db of ['acme', 'beta', 'gone'])
    files[`${db}.yaml`] = tenantFile(db, { upstreams: { auth: `${up.url}/${db}`, rest: `${up.url}/${db}` } })
  const dir = writeTenantDir(t, files)
  const key = (db: string) => `pk_test_${db}_0123456789`
  const prefix = 'gw-lost:'
  const env = { GATEHOUSE_TENANTS_SOURCE: 'redis', GATEHOUSE_REDIS_URL: redis.url, GATEHOUSE_REDIS_KEY_PREFIX: prefix }

  const applied = await cli(['tenants', 'apply', dir], env)
  t.equal(applied.code, 0, applied.stderr)

  const lines: Array<{ level: string; msg: string }> = []
  const logger = {
    warn: (_o: unknown, msg?: string) => {
      lines.push({ level: 'warn', msg: msg ?? '' })
    },
    error: (_o: unknown, msg?: string) => {
      lines.push({ level: 'error', msg: msg ?? '' })
    },
    info: (_o: unknown, msg?: string) => {
      lines.push({ level: 'info', msg: msg ?? '' })
    },
  }
  const s = createRedisStore({ url: redis.url, prefix, connectTimeoutMs: 500, commandTimeoutMs: 500, logger })
  t.teardown(() => s.close())
  await s.subscribed()
  let now = 1_000_000
  const cache = createTenantCache(s, { ttlMs: 60_000, reinvalidateMs: 0, now: () => now, logger })
  t.teardown(() => cache.close())
  const gw = await startGateway(t, { tenants: cache })
  const get = (db: string) => request(`${gw.url}/${db}/rest/v1/todos`, { headers: { apikey: key(db) } })
  const metrics = async () => (await request(`${gw.adminUrl}/metrics`)).body

  t.equal((await get('acme')).status, 200, 'acme resolved (warm)')
  t.equal((await get('gone')).status, 200, 'gone resolved (warm)')

  // Deleted while the store is healthy: really gone, the last good record is dropped.
  const admin = store(t, redis.url, prefix)
  t.ok(await admin.delete('gone'))
  await until(async () => (await get('gone')).status === 404, 'the deleted tenant answers 404')
  t.equal(metric(await metrics(), 'gatehouse_tenant_store_state{state="ok"}'), 1, 'store state ok')

  // Redis restarts without persistence.
  await redis.stop()
  await redis.start()
  // The subscriber reconnects and drops every cached tenant (it may have missed messages).
  await until(
    async () =>
      await admin.list().then(
        () => true,
        () => false,
      ),
    'Redis answers again',
  )
  now += 120_000 // and past the TTL backstop

  let r = await get('acme')
  t.equal(r.status, 200, 'acme is served from its last good record, not 404')
  t.equal(up.last().url, '/acme/todos?limit=1000', 'and proxied to its upstream')
  r = await request(`${gw.url}/acme/rest/v1/todos`, { headers: { apikey: 'pk_test_wrong_0123456789' } })
  t.equal(r.json().code, 'invalid_api_key', 'keys are still checked against the last good record')

  r = await get('beta')
  t.equal(r.status, 503, 'a database this process never resolved: 503, not 404')
  t.equal(r.json().code, 'tenant_store_unavailable')
  t.ok(Number(r.headers['retry-after']) > 0, `Retry-After: ${String(r.headers['retry-after'])}`)
  r = await get('gone')
  t.equal(r.status, 503, 'nor is a deleted tenant served: its last good record was dropped')

  const lost = lines.filter((l) => /lost its tenants/.test(l.msg))
  t.equal(lost.length, 1, 'one log line for the episode')
  t.equal(lost[0]?.level, 'error')
  let m = await metrics()
  t.equal(metric(m, 'gatehouse_tenant_store_state{state="empty"}'), 1, 'the metric says the store is empty')
  t.equal(metric(m, 'gatehouse_tenant_store_state{state="ok"}'), 0)
  t.ok(
    (metric(m, 'gatehouse_tenant_store_last_good_served_total') ?? 0) >= 1,
    'look-ups served from last good records are counted',
  )

  // Still serving a while later (the store is asked again, still empty).
  now += 10_000
  t.equal((await get('acme')).status, 200, 'still served')

  // The operator applies the tenant files again.
  const again = await cli(['tenants', 'apply', dir], env)
  t.equal(again.code, 0, again.stderr)
  await until(async () => (await get('beta')).status === 200, 'beta resolves again')
  t.equal((await get('acme')).status, 200)
  m = await metrics()
  t.equal(metric(m, 'gatehouse_tenant_store_state{state="ok"}'), 1, 'back to ok')
  t.equal(metric(m, 'gatehouse_tenant_store_state{state="empty"}'), 0)
  t.ok(
    lines.some((l) => /answering again/.test(l.msg)),
    'the recovery is logged',
  )
})

t.test('a process that never saw the store filled treats misses as unknown databases', async (t) => {
  const redis = await spawnRedis(t)
  const s = store(t, redis.url, 'fresh:')
  const cache = createTenantCache(s, {})
  t.teardown(() => cache.close())
  t.equal(await cache.get('nobody'), null, 'an empty store before any apply: not found')
  await s.putAll([toTenant(parseTenantFile(tenantFile('acme'), 'acme.yaml', {}))])
  t.equal((await cache.get('acme'))?.database, 'acme')
  t.equal(await cache.get('nobody2'), null, 'after an apply, an unknown database is still not found')
  t.equal(cache.health().state, 'ok')
})

t.test('Redis down: 503 tenant_store_unavailable carries Retry-After and a hint, logged once', async (t) => {
  const redis = await spawnRedis(t)
  const s = store(t, redis.url, 'down:')
  const lines: Array<{ level: number; msg: string }> = []
  const logger = pino({ level: 'debug' }, { write: (l: string) => void lines.push(JSON.parse(l)) })
  const cache = createTenantCache(s, { logger })
  t.teardown(() => cache.close())
  const gw = await startGateway(t, { tenants: cache, logger })
  await redis.stop()
  for (let i = 0; i < 10; i++) {
    const r = await request(`${gw.url}/acme/rest/v1/todos`, { headers: { apikey: 'pk_x' } })
    t.equal(r.status, 503)
    t.equal(r.json().code, 'tenant_store_unavailable')
    t.match(r.json().hint, /tenant store/, 'the hint says what is away')
    t.equal(r.headers['retry-after'], '5')
  }
  t.equal(cache.health().state, 'unreachable')
  const loud = lines.filter((l) => l.level >= 40)
  t.ok(
    loud.length >= 1 && loud.length <= 3,
    `10 refused requests: ${loud.length} warning or error lines (${loud.map((l) => l.msg).join('; ')})`,
  )
})

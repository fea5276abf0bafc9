// Connections: per-tenant pools under one process budget. A tenant cannot take the
// whole budget, others keep being served, an exhausted pool answers 504 PGRST003, an
// unreachable database 503 PGRST000, idle connections of one tenant make room for
// another, and idle pools are closed. Requests are held deterministically on an
// advisory lock the test owns (no sleeps).
import t from 'tap'
import pg from 'pg'
import { buildRestEngine, restEngineOf } from '../../../src/rest/index.js'
import { perTenantCap } from '../../../src/rest/pools.js'
import { signHS256 } from '../../../src/shared/index.js'
import type { Tenant } from '../../../src/tenants/index.js'
import { createTestTenant, withClient, type TestTenant } from '../../helpers/tenants.js'
import { TEST_CONFIG, eventually } from '../../helpers/rest-fixture.js'

const WAITER = `
CREATE FUNCTION wait_for_test() RETURNS int LANGUAGE sql STABLE AS 'SELECT 1 FROM (SELECT pg_advisory_xact_lock_shared(4242)) s';
CREATE VIEW waiter AS SELECT wait_for_test() AS x;
CREATE TABLE plain (id int); INSERT INTO plain VALUES (1);
SELECT platform.grant('SELECT', 'waiter', 'anon');
SELECT platform.grant('SELECT', 'plain', 'anon');
`

t.test('per-tenant cap', async (t) => {
  t.equal(perTenantCap({ budget: 40, perTenant: 10 }), 10)
  t.equal(perTenantCap({ budget: 10, perTenant: 10 }), 5, 'never the whole budget')
  t.equal(perTenantCap({ budget: 1, perTenant: 10 }), 1)
})

t.test('budget, caps, exhaustion, eviction', async (t) => {
  const tenants: TestTenant[] = []
  for (let i = 0; i < 3; i++) {
    const tt = await createTestTenant(t)
    await withClient(tt.ownerUrl, (c) => c.query(WAITER))
    tenants.push(tt)
  }
  const map = new Map<string, Tenant>(tenants.map((x) => [x.database, x.tenant]))
  const app = buildRestEngine({
    config: { rest: { ...TEST_CONFIG.rest, pool_budget: 4, pool_per_tenant: 3 } },
    tenants: { get: async (db) => map.get(db) ?? null },
    poolAcquireTimeoutMs: 300,
  })
  t.teardown(() => app.close())
  const engine = restEngineOf(app)
  t.equal(engine.perTenantCap(), 2, 'budget 4: a tenant gets at most 2')
  const get = (tt: TestTenant, path: string) => app.inject({ method: 'GET', url: `/${tt.database}${path}` })
  const [a, b, c] = tenants

  // Warm the schema caches first (their loads use a connection too).
  for (const tt of tenants) t.equal((await get(tt, '/plain')).statusCode, 200)

  // The test holds lock 4242 on every tenant database: the waiter view blocks.
  const lockers: pg.Client[] = []
  for (const tt of tenants) {
    const cl = new pg.Client({ connectionString: tt.ownerUrl })
    await cl.connect()
    await cl.query('SELECT pg_advisory_lock(4242)')
    lockers.push(cl)
  }
  const release = async (): Promise<void> => {
    for (const cl of lockers.splice(0)) await cl.end()
  }
  t.teardown(release)

  const blockedA = [get(a, '/waiter'), get(a, '/waiter')]
  await eventually(async () => {
    if (engine.poolStats(a.database)?.open !== 2) throw new Error('not yet')
  })
  const third = await get(a, '/waiter')
  t.equal(third.statusCode, 504, 'tenant A is at its cap: the third request times out')
  t.same(JSON.parse(third.body), {
    code: 'PGRST003',
    message: 'Timed out acquiring connection from connection pool.',
    details: null,
    hint: null,
  })

  const other = await get(b, '/plain')
  t.equal(other.statusCode, 200, 'tenant B is served while A holds its cap')

  const blockedB = [get(b, '/waiter'), get(b, '/waiter')]
  await eventually(async () => {
    if (engine.poolStats(b.database)?.open !== 2) throw new Error('not yet')
  })
  t.equal(engine.openConnections(), 4, "B took the budget's last slot (C's idle connection was closed for it)")
  t.equal(engine.poolStats(c.database)?.open ?? 0, 0)
  const starved = await get(c, '/plain')
  t.same(
    [starved.statusCode, JSON.parse(starved.body).code],
    [504, 'PGRST003'],
    'the whole budget is busy: C waits, then 504',
  )

  await release()
  for (const r of [...blockedA, ...blockedB]) t.equal((await r).statusCode, 200)
  t.equal(engine.openConnections(), 4, 'four idle connections kept')
  const evicting = await get(c, '/plain')
  t.equal(evicting.statusCode, 200, "another tenant's idle connection is closed to make room")
  t.ok(engine.openConnections() <= 4, 'never above the budget')
})

t.test('unreachable database: 503 PGRST002 / PGRST000 with Retry-After; idle pools are closed', async (t) => {
  const tt = await createTestTenant(t)
  await withClient(tt.ownerUrl, (c) => c.query(WAITER))
  const down = new URL(tt.file.engines?.rest as string)
  down.port = '1'
  const broken: Tenant = { ...tt.tenant, database: 'broken_db', engines: { rest: down.toString() } }
  const map = new Map<string, Tenant>([
    [tt.database, tt.tenant],
    ['broken_db', broken],
  ])
  const app = buildRestEngine({
    config: { rest: { ...TEST_CONFIG.rest, pool_idle_ms: 1000 } },
    tenants: { get: async (db) => map.get(db) ?? null },
    connectTimeoutMs: 2_000,
  })
  t.teardown(() => app.close())
  const r = await app.inject({ method: 'GET', url: '/broken_db/plain' })
  t.equal(r.statusCode, 503)
  t.equal(JSON.parse(r.body).code, 'PGRST002', 'the schema cache cannot be loaded')
  t.equal(r.headers['retry-after'], '1')
  const noEngine: Tenant = { ...tt.tenant, database: 'no_engine', engines: {} }
  map.set('no_engine', noEngine)
  const ne = await app.inject({ method: 'GET', url: '/no_engine/plain' })
  t.same([ne.statusCode, JSON.parse(ne.body).code], [503, 'engine_not_configured'])

  // A tenant whose cache is loaded, then its database becomes unreachable.
  const token = await signHS256(
    { role: tt.tenant.roles.anon },
    { secret: tt.file.jwt.upstream_secret, expiresInSeconds: 60 },
  )
  const get = () =>
    app.inject({ method: 'GET', url: `/${tt.database}/plain`, headers: { authorization: `Bearer ${token}` } })
  t.equal((await get()).statusCode, 200)
  map.set(tt.database, { ...tt.tenant, engines: { rest: down.toString() } })
  const gone = await get()
  t.equal(gone.statusCode, 503)
  t.same(JSON.parse(gone.body), { code: 'PGRST000', message: 'Database connection error.', details: null, hint: null })
  t.ok(
    Number(gone.headers['retry-after']) >= 1,
    'Retry-After: the reconnect back-off of that address, which already failed above',
  )
  map.set(tt.database, tt.tenant)
  t.equal((await get()).statusCode, 200, 'back when the database is')

  const engine = restEngineOf(app)
  t.ok(engine.poolStats(tt.database))
  await eventually(async () => {
    if (engine.poolStats(tt.database) !== null) throw new Error('pool still open')
  }, 10_000)
  t.equal(engine.openConnections(), 0, 'the idle pool was closed')
  t.equal((await get()).statusCode, 200, 'and reopened on the next request')
})

t.test(
  "cached reads are prepared once per connection; the catalogs' connection and one with too many are replaced",
  async (t) => {
    const tt = await createTestTenant(t)
    await withClient(tt.ownerUrl, (c) =>
      c.query(
        WAITER + "CREATE VIEW pid AS SELECT pg_backend_pid() AS pid; SELECT platform.grant('SELECT', 'pid', 'anon');",
      ),
    )
    const map = new Map<string, Tenant>([[tt.database, tt.tenant]])
    const app = buildRestEngine({
      config: { rest: { ...TEST_CONFIG.rest, pool_budget: 2, pool_per_tenant: 1 } },
      tenants: { get: async (db) => map.get(db) ?? null },
    })
    t.teardown(() => app.close())
    const get = async (path: string) => {
      const r = await app.inject({ method: 'GET', url: `/${tt.database}${path}` })
      t.equal(r.statusCode, 200, path)
      return JSON.parse(r.body)
    }
    const cold = (await get('/pid'))[0].pid
    const first = (await get('/pid'))[0].pid
    t.not(first, cold, 'the connection that read the catalogs served the first request, then was closed')
    t.equal((await get('/pid'))[0].pid, first, 'one connection (the cap is 1)')
    for (let i = 0; i < 260; i++) await get(`/plain?select=c${i}:id`)
    const later = (await get('/pid'))[0].pid
    t.not(later, first, 'replaced after preparing more than 256 statements')
  },
)

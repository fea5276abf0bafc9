// How schema changes reach the REST engine without a connection of their own per tenant:
// every request's transaction reads the database's schema version (moved by the DDL event
// trigger when a transaction that ran DDL commits), and the pool's connections LISTEN on
// the pgrst channel for NOTIFY pgrst sent by hand. Real Postgres, real engine.
import t from 'tap'
import { randomBytes } from 'node:crypto'
import { copyFileSync, mkdtempSync, rmSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import pg from 'pg'
import { toTenant, type Tenant } from '../../src/tenants/index.js'
import { dropTenant, listMigrations, migrateDatabase, provisionTenant } from '../../src/platform/index.js'
import { SCHEMA_VERSION_SQL } from '../../src/rest/schema-cache/index.js'
import { buildRestEngine, restEngineOf } from '../../src/rest/index.js'
import { adminQuery, adminUrl } from '../helpers/db.js'
import { createRestFixture, TEST_CONFIG, type RestFixture } from '../helpers/rest-fixture.js'
import { createTestTenant, withClient, type TestTenant } from '../helpers/tenants.js'
import { tcpRelay } from '../helpers/tcp-relay.js'
import { quoteIdent, signHS256, withDatabase } from '../../src/shared/index.js'
import { eventually } from '../helpers/eventually.js'

async function post(fx: RestFixture, path: string, body: unknown): Promise<{ status: number; json: any }> {
  const res = await fx.app.inject({
    method: 'POST',
    url: `/${fx.database}${path}`,
    headers: {
      authorization: `Bearer ${await fx.token('svc')}`,
      'content-type': 'application/json',
      prefer: 'return=representation',
    },
    payload: JSON.stringify(body),
  })
  return { status: res.statusCode, json: JSON.parse(res.body || 'null') }
}

/** The last value of `fn` once `done` holds for it (or the last one seen when it never does, for the assertion to show). */
async function until<T>(fn: () => Promise<T>, done: (v: T) => boolean, timeoutMs = 5_000): Promise<T> {
  let last: T | undefined
  await eventually(async () => done((last = await fn())), timeoutMs).catch(() => {})
  return last as T
}

t.test('serving many tenants: one pool connection each, no LISTEN connection of its own', async (t) => {
  const tenants: TestTenant[] = []
  for (let i = 0; i < 4; i++) {
    const tt = await createTestTenant(t)
    await withClient(tt.ownerUrl, (c) =>
      c.query(
        "CREATE TABLE things (id int PRIMARY KEY); INSERT INTO things VALUES (1); SELECT platform.grant('SELECT', 'things', 'anon')",
      ),
    )
    tenants.push(tt)
  }
  const byName = new Map(tenants.map((tt) => [tt.database, tt.tenant]))
  const app = buildRestEngine({
    config: { rest: { ...TEST_CONFIG.rest, pool_budget: 20 } },
    tenants: { get: async (db) => byName.get(db) ?? null },
  })
  t.teardown(() => app.close())
  for (const tt of tenants) {
    const token = await signHS256(
      { role: tt.tenant.roles.anon },
      { secret: tt.file.jwt.upstream_secret, expiresInSeconds: 60 },
    )
    // Twice: the connection that read the catalogs serves the first request only.
    for (let k = 0; k < 2; k++) {
      const res = await app.inject({ url: `/${tt.database}/things`, headers: { authorization: `Bearer ${token}` } })
      t.same([res.statusCode, JSON.parse(res.body)], [200, [{ id: 1 }]], `${tt.database} served`)
    }
  }
  const names = tenants.map((tt) => tt.database).sort()
  const engine = restEngineOf(app)
  const expected = names.map((db) => ({
    datname: db,
    application_name: 'gatehouse-rest',
    n: engine.poolStats(db)?.open,
  }))
  // The catalog connection's backend exits a moment after the engine closed it: wait for it.
  const rows = await until(
    async () =>
      (
        await adminQuery<{ datname: string; application_name: string; n: number }>(
          `SELECT datname, application_name, count(*)::int AS n FROM pg_stat_activity
      WHERE datname = ANY ($1) AND application_name LIKE 'gatehouse-rest%' GROUP BY 1, 2 ORDER BY 1, 2`,
          [names],
        )
      ).rows,
    (r) => JSON.stringify(r) === JSON.stringify(expected),
  )
  t.same(rows, expected, 'each tenant database has exactly its pool connections open, nothing else')
  t.equal(engine.openConnections(), names.length, 'one connection per tenant')
})

t.test(
  "a tenant's first request: one connection, the schema cache in one round trip, the request in one more",
  async (t) => {
    const tt = await createTestTenant(t)
    await withClient(tt.ownerUrl, (c) =>
      c.query(`CREATE TABLE things (id int PRIMARY KEY, name text); INSERT INTO things VALUES (1, 'a');
    CREATE TABLE parts (id int PRIMARY KEY, thing_id int REFERENCES things (id)); CREATE VIEW thing_names AS SELECT id, name FROM things;
    SELECT platform.grant('SELECT', 'things', 'anon'); SELECT platform.grant('SELECT', 'parts', 'anon')`),
    )
    const counter = await tcpRelay(t, new URL(tt.tenant.engines!.rest!))
    // What logging in takes (startup and authentication messages), measured on a connection of our own.
    const own = new pg.Client({ connectionString: counter.url })
    await own.connect()
    const login = counter.chunks()
    await own.end()
    const before = { connections: counter.connections(), chunks: counter.chunks() }
    const tenant: Tenant = { ...tt.tenant, engines: { ...tt.tenant.engines!, rest: counter.url } }
    const app = buildRestEngine({
      config: TEST_CONFIG,
      tenants: { get: async (db) => (db === tt.database ? tenant : null) },
    })
    t.teardown(() => app.close())
    const token = await signHS256(
      { role: tt.tenant.roles.anon },
      { secret: tt.file.jwt.upstream_secret, expiresInSeconds: 60 },
    )
    const res = await app.inject({
      url: `/${tt.database}/things?select=id,name,parts(id)`,
      headers: { authorization: `Bearer ${token}` },
    })
    t.same([res.statusCode, JSON.parse(res.body)], [200, [{ id: 1, name: 'a', parts: [] }]])
    t.equal(counter.connections() - before.connections, 1, 'one connection')
    t.equal(counter.chunks() - before.chunks - login, 2, 'log-in, then two round trips: the catalog, the request')
  },
)

t.test('DDL by the owner is seen by the very next request', async (t) => {
  const fx = await createRestFixture(t)
  t.equal((await fx.get('/authors?select=id')).status, 200, 'the schema cache is loaded')

  // A new column: a write naming it is checked against the cache (PGRST204 when stale).
  await fx.ownerSql('ALTER TABLE authors ADD COLUMN nickname text')
  const w = await post(fx, '/authors', { id: 10, name: 'Iain Banks', nickname: 'Culture' })
  t.same(
    [w.status, w.json],
    [201, [{ id: 10, name: 'Iain Banks', country: null, profile: null, born: null, nickname: 'Culture' }]],
  )

  // A new table with its grant.
  await fx.ownerSql(
    "CREATE TABLE planets (id int PRIMARY KEY, name text); INSERT INTO planets VALUES (1, 'Gethen'); SELECT platform.grant('SELECT', 'planets', 'anon')",
  )
  const p = await fx.get('/planets')
  t.same([p.status, p.json()], [200, [{ id: 1, name: 'Gethen' }]])

  // A relationship made by a new foreign key: embedding needs it in the cache.
  await fx.ownerSql(
    'ALTER TABLE authors ADD COLUMN planet_id int REFERENCES planets (id); UPDATE authors SET planet_id = 1 WHERE id = 1',
  )
  const e = await fx.get('/authors?select=id,planets(name)&id=eq.1')
  t.same([e.status, e.json()], [200, [{ id: 1, planets: { name: 'Gethen' } }]])
})

t.test('a request planned with the old cache is planned and run again with the new one', async (t) => {
  const fx = await createRestFixture(t, {
    sql: "CREATE TABLE gadgets (id int PRIMARY KEY, name text); INSERT INTO gadgets VALUES (1, 'old'); SELECT platform.grant('SELECT', 'gadgets', 'anon')",
  })
  t.same((await fx.get('/gadgets')).json(), [{ id: 1, name: 'old' }])
  // Same name, a new relation: the plan from the old cache still finds `gadgets`, but its
  // transaction reads a newer schema version and the request runs again on the new cache.
  await fx.ownerSql(`DROP TABLE gadgets;
    CREATE TABLE gadgets (id int PRIMARY KEY, label text NOT NULL); INSERT INTO gadgets VALUES (2, 'new');
    SELECT platform.grant('SELECT', 'gadgets', 'anon')`)
  const r = await fx.get('/gadgets')
  t.same([r.status, r.json()], [200, [{ id: 2, label: 'new' }]])
})

t.test("NOTIFY pgrst, 'reload schema' sent by hand still reloads", async (t) => {
  const fx = await createRestFixture(t)
  t.equal((await fx.get('/authors?select=id')).status, 200, 'the schema cache is loaded')
  // A change the event trigger does not see (event triggers do not fire for a superuser's
  // session in replica mode): only a NOTIFY can tell the engine.
  await adminQuery(
    'SET session_replication_role = replica; ALTER TABLE public.authors ADD COLUMN motto text; RESET session_replication_role',
    [],
    fx.database,
  )
  const stale = await post(fx, '/authors', { id: 11, name: 'Jo Walton', motto: 'among others' })
  t.equal(stale.status, 400, 'the change is not seen yet')
  t.equal(stale.json.code, 'PGRST204')
  await fx.ownerSql("NOTIFY pgrst, 'reload schema'")
  const w = await until(
    () => post(fx, '/authors', { id: 11, name: 'Jo Walton', motto: 'among others' }),
    (r) => r.status === 201,
  )
  t.same([w.status, w.json?.[0]?.motto], [201, 'among others'], 'reloaded after the NOTIFY')
})

t.test('a database whose schema version cannot be read is still served, and reloads on NOTIFY', async (t) => {
  const fx = await createRestFixture(t)
  t.equal((await fx.get('/authors?select=id')).status, 200)
  // As for a database not migrated to the schema version yet.
  await adminQuery(`REVOKE SELECT ON platform.schema_version FROM ${quoteIdent(fx.t.roles.rest)}`, [], fx.database)
  const r = await fx.get('/authors?select=id&order=id&limit=2')
  t.same([r.status, r.json()], [200, [{ id: 1 }, { id: 2 }]], 'served')
  t.equal((await fx.get('/authors?select=id&limit=1')).status, 200, 'and again')
  await fx.ownerSql('ALTER TABLE authors ADD COLUMN motto text')
  const w = await until(
    () => post(fx, '/authors', { id: 12, name: 'Ada Palmer', motto: 'too like the lightning' }),
    (res) => res.status === 201,
  )
  t.same(
    [w.status, w.json?.[0]?.motto],
    [201, 'too like the lightning'],
    'DDL is seen through the NOTIFY the pool connections hear',
  )
})

t.test(
  'a tenant database made before the schema version gets it from `tenants migrate`, served throughout',
  async (t) => {
    // Provisioned with the migrations as they were before the schema version.
    const dir = mkdtempSync(path.join(os.tmpdir(), 'gatehouse-mig-'))
    t.teardown(() => rmSync(dir, { recursive: true, force: true }))
    for (const m of listMigrations())
      if (m.name !== 'schema_version') copyFileSync(m.file, path.join(dir, path.basename(m.file)))
    const database = `tenant_${randomBytes(5).toString('hex')}`
    const { file, ownerUrl, roles } = await provisionTenant({
      adminUrl: adminUrl(),
      database,
      organization: 'org_test',
      migrationsDir: dir,
    })
    t.teardown(() => dropTenant({ adminUrl: adminUrl(), database, roles: Object.values(roles) }).catch(() => {}))
    const tenant = toTenant(file)
    await withClient(ownerUrl, (c) =>
      c.query(
        "CREATE TABLE things (id int PRIMARY KEY); INSERT INTO things VALUES (1); SELECT platform.grant('SELECT', 'things', 'svc')",
      ),
    )
    const app = buildRestEngine({
      config: TEST_CONFIG,
      tenants: { get: async (db) => (db === database ? tenant : null) },
    })
    t.teardown(() => app.close())
    const token = await signHS256(
      { role: tenant.roles.svc },
      { secret: file.jwt.upstream_secret, expiresInSeconds: 60 },
    )
    const write = async (body: unknown): Promise<number> =>
      (
        await app.inject({
          method: 'POST',
          url: `/${database}/things`,
          headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
          payload: JSON.stringify(body),
        })
      ).statusCode
    t.equal(await write({ id: 2 }), 201, 'served without the schema version')

    const r = await migrateDatabase(withDatabase(adminUrl(), database))
    t.same(r.applied, ['0160_schema_version.sql'], 'migrate adds it')
    t.equal(await write({ id: 3 }), 201, 'served while and after it is added')
    await withClient(ownerUrl, (c) => c.query('ALTER TABLE things ADD COLUMN label text'))
    const status = await until(
      () => write({ id: 4, label: 'new' }),
      (s) => s === 201,
    )
    t.equal(status, 201, 'DDL after the migration is seen')
    const version = await withClient(
      file.engines!.rest!,
      async (c) => (await c.query(SCHEMA_VERSION_SQL)).rows[0].version as string,
    )
    t.ok(BigInt(version) > 0n, 'the version moved with the DDL')
  },
)

// Tenant life cycle: create refusals (bad name, taken name, unreachable cluster), a create
// that fails half way leaves nothing behind, drop removes everything and is idempotent,
// migrations are recorded and re-running them is a no-op, ensureTenant re-creates a file's
// database (development stack), the cluster roles survive a race.
import t from 'tap'
import pg from 'pg'
import { cpSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import {
  provisionTenant,
  dropTenant,
  ensureTenant,
  migrateDatabase,
  migrateAll,
  listMigrations,
  ensureClusterRoles,
  tenantRoleNames,
  newTenantId,
  MIGRATIONS_DIR,
  allTenantRoleNames,
  tenantIdOf,
  connectAdmin,
} from '../../src/platform/index.js'
import { withDatabase } from '../../src/shared/index.js'
import { eventually } from '../helpers/tenant-fixtures.js'
import { createTestTenant, rejection, withClient } from '../helpers/tenants.js'
import { adminQuery, adminUrl, createTestDatabase, randomName } from '../helpers/db.js'

async function databaseExists(name: string): Promise<boolean> {
  return (await adminQuery('SELECT 1 FROM pg_database WHERE datname = $1', [name])).rowCount === 1
}
async function existingRoles(names: string[]): Promise<string[]> {
  return (
    await adminQuery<{ rolname: string }>('SELECT rolname FROM pg_roles WHERE rolname = ANY ($1) ORDER BY 1', [names])
  ).rows.map((r) => r.rolname)
}

t.test('create refusals', async (t) => {
  for (const bad of ['Acme', '1db', 'a b', 'postgres', 'template1', 'x'.repeat(64), 'a;drop']) {
    const err = await rejection(provisionTenant({ adminUrl: adminUrl(), database: bad, organization: 'o' }))
    t.match(err, { code: 'database_name_invalid' }, `refuses ${JSON.stringify(bad)}`)
  }
  const taken = await createTestTenant(t)
  const err = await rejection(provisionTenant({ adminUrl: adminUrl(), database: taken.database, organization: 'o' }))
  t.match(err, { code: 'database_exists', status: 409 }, 'a taken name is refused')
  t.ok(
    await withClient(taken.ownerUrl, async (c) => (await c.query("SELECT platform.role('anon') AS r")).rows[0].r),
    'the existing tenant is intact',
  )
  const down = await rejection(
    provisionTenant({
      adminUrl: 'postgres://postgres:postgres@127.0.0.1:1/postgres',
      database: randomName('tenant'),
      organization: 'o',
    }),
  )
  t.match(down, { code: 'cluster_unreachable', status: 503 }, 'an unreachable cluster is a clear refusal')
  t.notMatch(down.message, /postgres:postgres/, 'without the password')
  const opts = await rejection(
    provisionTenant({
      adminUrl: adminUrl(),
      database: randomName('tenant'),
      organization: 'o',
      auth: { password_min_length: 2 },
    }),
  )
  t.match(
    opts,
    { code: 'tenant_options_invalid' },
    'options that make an invalid tenant file are refused before anything is created',
  )
})

t.test('a create that fails half way leaves nothing behind', async (t) => {
  await t.test('role name collision', async (t) => {
    const id = newTenantId()
    const names = tenantRoleNames(id)
    const database = randomName('tenant')
    await adminQuery(`CREATE ROLE "${names.svc}" NOLOGIN`)
    t.teardown(() => adminQuery(`DROP ROLE IF EXISTS "${names.svc}"`))
    const err = await rejection(provisionTenant({ adminUrl: adminUrl(), database, organization: 'o', id }))
    t.match(err, { code: 'tenant_role_exists' })
    t.equal(await databaseExists(database), false, 'the database created before the roles is gone')
    t.same(
      await existingRoles(Object.values(names)),
      [names.svc],
      'no tenant role is left, the colliding one is untouched',
    )
  })

  await t.test('a migration that fails', async (t) => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'gatehouse-mig-'))
    t.teardown(() => rmSync(dir, { recursive: true, force: true }))
    cpSync(MIGRATIONS_DIR, dir, { recursive: true })
    writeFileSync(path.join(dir, '9999_broken.sql'), 'CREATE TABLE public.half (x int);\nSELECT 1/0;\n')
    const id = newTenantId()
    const database = randomName('tenant')
    const err = await rejection(
      provisionTenant({ adminUrl: adminUrl(), database, organization: 'o', id, migrationsDir: dir }),
    )
    t.match(err, { code: 'provisioning_failed', status: 500 })
    t.match(err.message, /at migrations: migration 9999_broken\.sql failed.*division by zero/)
    t.equal(await databaseExists(database), false, 'no database')
    t.same(await existingRoles(Object.values(tenantRoleNames(id))), [], 'no role')
  })
})

t.test('drop removes database and roles, and is idempotent', async (t) => {
  const a = await provisionTenant({ adminUrl: adminUrl(), database: randomName('tenant'), organization: 'o' })
  const b = await createTestTenant(t)
  // The six roles of provisioning, and the hook role and three test-query logins of the migrations.
  const names = allTenantRoleNames(tenantIdOf(a.roles.anon)!)
  t.equal(names.length, 10)
  // B's owner grants to one of A's roles: a dependency in another database that would
  // make a plain DROP ROLE fail.
  await withClient(b.ownerUrl, async (c) => {
    await c.query('CREATE TABLE public.shared (x int)')
    await c.query(`GRANT SELECT ON public.shared TO "${a.roles.anon}"`)
  })
  t.same(await existingRoles(names), [...names].sort(), 'ten roles exist')
  const res = await dropTenant({ adminUrl: adminUrl(), database: a.file.database, roles: a.file.roles })
  t.equal(res.databaseDropped, true)
  t.same(res.rolesDropped.sort(), [...names].sort())
  t.equal(await databaseExists(a.file.database), false, 'database gone')
  t.same(await existingRoles(names), [], 'roles gone')
  const again = await dropTenant({ adminUrl: adminUrl(), database: a.file.database, roles: a.file.roles })
  t.same(again, { databaseDropped: false, rolesDropped: [] }, 'a second drop is a no-op')
  const grants = await adminQuery(
    "SELECT count(*)::int AS n FROM information_schema.role_table_grants WHERE table_name = 'shared'",
    [],
    b.database,
  )
  t.ok(grants.rows[0].n >= 1, 'B keeps its table and its own grants')

  // Roles found through the database alone (no names given), and shared roles never touched.
  const c = await provisionTenant({ adminUrl: adminUrl(), database: randomName('tenant'), organization: 'o' })
  const res2 = await dropTenant({
    adminUrl: adminUrl(),
    database: c.file.database,
    roles: ['anon', 'authenticated', 'postgres'],
  })
  t.equal(res2.rolesDropped.length, 10, 'the ten roles come from platform.roles')
  t.same(
    await existingRoles(['anon', 'authenticated', 'supabase_auth_admin']),
    ['anon', 'authenticated', 'supabase_auth_admin'],
    'cluster roles stay',
  )
})

t.test('migrations', async (t) => {
  const a = await createTestTenant(t)
  const url = withDatabase(adminUrl(), a.database)
  const files = listMigrations()
  t.ok(files.length >= 2, 'at least 0001_platform and 0002_auth')
  t.same(
    files.slice(0, 2).map((m) => [m.version, m.name]),
    [
      [1, 'platform'],
      [2, 'auth'],
    ],
  )
  const recorded = await adminQuery<{ version: number; name: string }>(
    'SELECT version, name FROM platform.schema_migrations ORDER BY version',
    [],
    a.database,
  )
  t.same(
    recorded.rows,
    files.map((m) => ({ version: m.version, name: m.name })),
    'each file recorded once',
  )
  const before = await adminQuery(
    "SELECT md5(string_agg(p.proname || p.prosrc, ',' ORDER BY p.oid)) AS h FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname IN ('auth', 'platform')",
    [],
    a.database,
  )
  const first = await migrateDatabase(url)
  const second = await migrateDatabase(url)
  t.same(first, { applied: [], version: files[files.length - 1].version }, 'migrate on a current database is a no-op')
  t.same(second, first, 'and again')
  const after = await adminQuery(
    "SELECT md5(string_agg(p.proname || p.prosrc, ',' ORDER BY p.oid)) AS h FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname IN ('auth', 'platform')",
    [],
    a.database,
  )
  t.equal(after.rows[0].h, before.rows[0].h, 'nothing was re-created')

  // A new file is applied once, in its own transaction, with the role settings available.
  const dir = mkdtempSync(path.join(os.tmpdir(), 'gatehouse-mig-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  cpSync(MIGRATIONS_DIR, dir, { recursive: true })
  writeFileSync(
    path.join(dir, '9000_extra.sql'),
    "CREATE TABLE platform.extra AS SELECT current_setting('gatehouse.role_anon') AS anon;\n",
  )
  const next = await Promise.all([migrateDatabase(url, { dir }), migrateDatabase(url, { dir })])
  t.same(next.map((r) => r.applied).flat(), ['9000_extra.sql'], 'two concurrent runners apply it once')
  const extra = await adminQuery('SELECT anon FROM platform.extra', [], a.database)
  t.same(extra.rows, [{ anon: a.roles.anon }], "the file read this tenant's role name from the runner")

  const all = await migrateAll(adminUrl())
  const mine = all.find((r) => r.database === a.database)
  t.same(
    mine && { applied: mine.applied, error: mine.error },
    { applied: [], error: undefined },
    'migrateAll finds the tenant database',
  )

  const plain = await createTestDatabase(t)
  const err = await rejection(migrateDatabase(plain.url))
  t.match(err, { code: 'roles_not_registered' }, 'a database that is not a tenant is refused')
  const schemas = await adminQuery(
    "SELECT count(*)::int AS n FROM pg_namespace WHERE nspname = 'platform'",
    [],
    plain.name,
  )
  t.equal(schemas.rows[0].n, 0, 'and left untouched')
  t.notOk(
    all.some((r) => r.database === plain.name),
    'migrateAll skips it',
  )
})

t.test('migrateAll skips a database dropped while it waits on it', async (t) => {
  const b = await provisionTenant({ adminUrl: adminUrl(), database: randomName('tenant'), organization: 'o' })
  t.teardown(() => dropTenant({ adminUrl: adminUrl(), database: b.file.database, roles: b.file.roles }))
  // Another runner holds the database's migration lock, so migrateAll waits inside it...
  const holder = await connectAdmin(withDatabase(adminUrl(), b.file.database))
  holder.on('error', () => {})
  await holder.query('SELECT pg_advisory_lock($1)', [0x6761_7465])
  const running = migrateAll(adminUrl())
  const waiting = await eventually(
    async () =>
      (
        await adminQuery("SELECT 1 FROM pg_stat_activity WHERE datname = $1 AND wait_event = 'advisory'", [
          b.file.database,
        ])
      ).rowCount === 1,
    10_000,
  )
  t.ok(waiting, 'the runner waits on the lock')
  // ...when an operator drops it (WITH (FORCE) ends both sessions before the drop commits).
  await dropTenant({ adminUrl: adminUrl(), database: b.file.database, roles: b.file.roles })
  await holder.end().catch(() => {})
  const all = await running
  t.same(
    all.filter((r) => r.database === b.file.database),
    [],
    'no failure is reported for it',
  )
})

t.test("migrateAll goes on when an owner holds a database's migration lock", async (t) => {
  const blocked = await createTestTenant(t)
  const other = await createTestTenant(t)
  // The database's owner takes the runner's lock in its own session and keeps it.
  const holder = new pg.Client({ connectionString: blocked.ownerUrl })
  holder.on('error', () => {})
  await holder.connect()
  t.teardown(() => holder.end().catch(() => {}))
  await holder.query('SELECT pg_advisory_lock($1)', [0x6761_7465])
  const all = await migrateAll(adminUrl(), { lockWaitMs: 200 })
  const mine = all.find((r) => r.database === blocked.database)
  t.match(
    mine?.error,
    { code: 'migration_lock_busy', message: /another session holds the migration lock/ },
    'that database is reported as failed',
  )
  const next = all.find((r) => r.database === other.database)
  t.same(next && { error: next.error }, { error: undefined }, 'the others are migrated')
  const single = await rejection(migrateDatabase(withDatabase(adminUrl(), blocked.database), { lockWaitMs: 200 }))
  t.match(single, { code: 'migration_lock_busy', status: 409 }, 'one database alone: a clear refusal')
  await holder.query('SELECT pg_advisory_unlock_all()')
  const after = await migrateDatabase(withDatabase(adminUrl(), blocked.database), { lockWaitMs: 200 })
  t.same(after.applied, [], 'once the lock is free the run goes through')
})

t.test('ensureTenant makes an existing tenant file real', async (t) => {
  const made = await provisionTenant({ adminUrl: adminUrl(), database: randomName('tenant'), organization: 'o' })
  t.teardown(() => dropTenant({ adminUrl: adminUrl(), database: made.file.database, roles: made.file.roles }))
  await dropTenant({ adminUrl: adminUrl(), database: made.file.database, roles: made.file.roles })
  const first = await ensureTenant({ adminUrl: adminUrl(), file: made.file })
  t.equal(first.created, true)
  t.ok(first.applied.length >= 2)
  const who = await withClient(
    made.file.engines!.rest!,
    async (c) => (await c.query('SELECT current_user AS u')).rows[0].u,
  )
  t.equal(who, made.roles.rest, "the file's passwords work")
  const second = await ensureTenant({ adminUrl: adminUrl(), file: made.file })
  t.same(second, { created: false, applied: [] }, 'a second run only migrates')
  const other = { ...made.file, roles: { ...made.file.roles, anon: 'someone_else' } }
  t.match(await rejection(ensureTenant({ adminUrl: adminUrl(), file: other })), { code: 'tenant_options_invalid' })
})

t.test('cluster roles: idempotent under a race', async (t) => {
  await Promise.all([1, 2, 3, 4].map(() => ensureClusterRoles(adminUrl())))
  t.same(await existingRoles(['anon', 'authenticated']), ['anon', 'authenticated'])
  const attrs = await adminQuery<{ rolcanlogin: boolean }>(
    "SELECT rolcanlogin FROM pg_roles WHERE rolname IN ('anon', 'authenticated')",
  )
  t.same(
    attrs.rows.map((r) => r.rolcanlogin),
    [false, false],
    'NOLOGIN',
  )
})

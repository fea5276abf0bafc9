// Shared fixture tenants for the tests that only read (not a test file): a fixture is a SQL
// file under test/fixtures/ run as the tenant owner once per run, in a database named
// `fx_<name>_<version>` where the version hashes the fixture's text and the platform
// migrations. The first process of a run provisions it under an advisory lock; the others
// wait on that lock, then find it and reuse it. The tenant file (keys, logins) is kept in
// the database's comment, written last: a database without one is a half-made fixture and
// is made again. Nothing drops a fixture during the run (the services wrapper stops the
// whole cluster at its end); on a cluster given by DATABASE_URL the current version stays
// for the next run and older versions of the same fixture are dropped when a new one is
// made (docs/development.md, "Shared fixtures"). Tests that use one must not write to it.
import { createHash } from 'node:crypto'
import { readFileSync } from 'node:fs'
import pg from 'pg'
import { provisionTenant, dropTenant, listMigrations } from '../../src/platform/index.js'
import { toTenant, validateTenantRecord, type TenantFile } from '../../src/tenants/index.js'
import { adminUrl } from './db.js'
import { withClient, type TestTenant } from './tenants.js'

const FIXTURES = new URL('../fixtures/', import.meta.url)
/** `-- requires: <fixture>` lines put another fixture's SQL before this one's. */
const REQUIRES = /^-- requires: ([a-z0-9-]+)$/gm

/** The fixture's SQL: the fixtures it requires first, then its own text. */
function fixtureSql(name: string): string {
  const own = readFileSync(new URL(`${name}.sql`, FIXTURES), 'utf8')
  const before = [...own.matchAll(REQUIRES)].map((m) => fixtureSql(m[1]))
  return [...before, own].join('\n')
}

/** What a fixture database is made from: its SQL and the migrations provisioning runs. */
function fixtureVersion(sql: string): string {
  const hash = createHash('sha256').update(sql)
  for (const m of listMigrations()) hash.update(m.file).update(readFileSync(m.file))
  return hash.digest('hex').slice(0, 8)
}

interface Stored {
  file: TenantFile
  roles: TestTenant['roles']
}

async function storedFixture(admin: pg.Client, database: string): Promise<Stored | null | undefined> {
  const r = await admin.query<{ note: string | null }>(
    "SELECT shobj_description(oid, 'pg_database') AS note FROM pg_database WHERE datname = $1",
    [database],
  )
  if (r.rowCount === 0) return undefined
  return r.rows[0].note === null ? null : (JSON.parse(r.rows[0].note) as Stored)
}

/** Drops every version of the fixture (older ones, and a half-made one of this version). */
async function dropVersions(admin: pg.Client, prefix: string): Promise<void> {
  const r = await admin.query<{ datname: string }>(
    "SELECT datname FROM pg_database WHERE datname ~ ('^' || $1 || '[0-9a-f]{8}$')",
    [prefix],
  )
  for (const { datname } of r.rows) await dropTenant({ adminUrl: adminUrl(), database: datname })
}

async function makeFixture(admin: pg.Client, database: string, sql: string): Promise<Stored> {
  const { file, ownerUrl, roles } = await provisionTenant({ adminUrl: adminUrl(), database, organization: 'org_test' })
  await withClient(ownerUrl, (c) => c.query(sql))
  const stored: Stored = { file, roles }
  const comment = await admin.query<{ q: string }>(
    "SELECT format('COMMENT ON DATABASE %I IS %L', $1::text, $2::text) AS q",
    [database, JSON.stringify(stored)],
  )
  await admin.query(comment.rows[0].q)
  return stored
}

async function loadOrMake(name: string): Promise<Stored & { database: string }> {
  const sql = fixtureSql(name)
  const prefix = `fx_${name.replaceAll('-', '_')}_`
  const database = prefix + fixtureVersion(sql)
  return withClient(adminUrl(), async (admin) => {
    await admin.query('SELECT pg_advisory_lock(hashtext($1))', [prefix])
    try {
      const found = await storedFixture(admin, database)
      if (found) return { ...found, database }
      await dropVersions(admin, prefix)
      return { ...(await makeFixture(admin, database, sql)), database }
    } finally {
      await admin.query('SELECT pg_advisory_unlock(hashtext($1))', [prefix])
    }
  })
}

const loaded = new Map<string, ReturnType<typeof loadOrMake>>()

export interface SharedFixtureOptions {
  /** This use's tenant file: its rest.* settings, organization (the database is the same). */
  rest?: Partial<TenantFile['rest']>
  organization?: string
  /** The engines' base URLs, given the fixture's database name. */
  upstreams?: (database: string) => TenantFile['upstreams']
}

/**
 * The shared tenant of test/fixtures/<name>.sql, provisioned once per run and version;
 * `opts` change this process's copy of its tenant file only. Never dropped by the test.
 */
export async function sharedFixtureTenant(name: string, opts: SharedFixtureOptions = {}): Promise<TestTenant> {
  let p = loaded.get(name)
  if (p === undefined) {
    p = loadOrMake(name)
    loaded.set(name, p)
  }
  const { file, roles, database } = await p
  const own = validateTenantRecord(
    {
      ...file,
      organization: opts.organization ?? file.organization,
      rest: { ...file.rest, ...opts.rest },
      upstreams: opts.upstreams?.(database) ?? file.upstreams,
    },
    `fixture ${name}`,
  )
  return { file: own, tenant: toTenant(own), database, ownerUrl: own.postgres, roles }
}

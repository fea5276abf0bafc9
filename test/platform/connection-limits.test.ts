// One database's logins cannot take the connections every database shares (docs/security.md
// "The tenant boundary"): each owner login has a CONNECTION LIMIT (the operator's
// postgres.owner_connection_limit, else sized from max_connections), the engine logins theirs,
// and the engine logins may use the slots reserved_connections keeps. Real Postgres (the test
// cluster runs with reserved_connections), the auth engine for the sign-ups.
import t from 'tap'
import pg from 'pg'
import { chmodSync, mkdtempSync, rmSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { startAuth, email } from '../helpers/auth-harness.js'
import { adminQuery, adminUrl } from '../helpers/db.js'
import { dropTenant, migrateDatabase, provisionTenant } from '../../src/platform/index.js'
import { startEmbeddedPostgres } from '../../src/dev/index.js'
import { withDatabase } from '../../src/shared/index.js'
import { createTestTenant, type TestTenant } from '../helpers/tenants.js'

async function connect(url: string): Promise<pg.Client> {
  const c = new pg.Client({ connectionString: url })
  c.on('error', () => {})
  await c.connect()
  return c
}

async function limitsOf(x: TestTenant): Promise<Record<string, number>> {
  const r = await adminQuery<{ rolname: string; rolconnlimit: number }>(
    'SELECT rolname, rolconnlimit FROM pg_roles WHERE rolname LIKE $1 AND rolcanlogin ORDER BY rolname',
    [`${x.roles.owner.slice(0, -'_owner'.length)}%`],
  )
  return Object.fromEntries(r.rows.map((row) => [row.rolname.replace(/^t_[0-9a-f]{10}_/, ''), row.rolconnlimit]))
}

t.test("an owner at its CONNECTION LIMIT leaves every other database's logins room", async (t) => {
  const h = await startAuth(t, { tenants: [{}, {}] })
  const [a, b] = h.list as [TestTenant, TestTenant]
  const max = Number((await adminQuery<{ max_connections: string }>('SHOW max_connections')).rows[0]!.max_connections)

  t.same(
    await limitsOf(a),
    {
      anon_probe: Math.min(20, Math.floor(max / 10)),
      auth_probe: Math.min(20, Math.floor(max / 10)),
      authn: Math.floor(max / 4),
      owner: Math.min(20, Math.floor(max / 10)),
      rest: Math.floor(max / 4),
      svc_probe: Math.min(20, Math.floor(max / 10)),
    },
    'provisioning sizes the limits from max_connections',
  )
  const reserved = await adminQuery<{ member: string }>(
    `SELECT m.member::regrole::text AS member FROM pg_auth_members m
     WHERE m.roleid = 'pg_use_reserved_connections'::regrole AND m.member::regrole::text = ANY ($1) ORDER BY 1`,
    [[a.roles.rest, a.roles.authn, a.roles.owner]],
  )
  t.same(
    reserved.rows.map((r) => r.member),
    [a.roles.authn, a.roles.rest].sort(),
    'the engine logins, not the owner, may use the reserved slots',
  )

  // The operator's limit, applied to existing databases by a migration run.
  for (const x of [a, b])
    await migrateDatabase(withDatabase(adminUrl(), x.database), { connectionLimits: { owner: 3 } })
  t.equal((await limitsOf(a)).owner, 3)

  const held: pg.Client[] = []
  t.teardown(() => Promise.all(held.map((c) => c.end().catch(() => {}))))
  for (let i = 0; i < 3; i++) held.push(await connect(a.ownerUrl))
  const refused = await connect(a.ownerUrl).then(
    (c) => {
      held.push(c)
      return null
    },
    (err: Error & { code?: string }) => err,
  )
  t.match(refused, { code: '53300', message: /too many connections for role/ }, 'the fourth owner connection')

  const own = await held[0]!.query('ALTER ROLE CURRENT_USER CONNECTION LIMIT -1').catch((err: Error) => err)
  t.match(own, { code: '42501' }, 'the owner cannot lift its own limit')

  const other = await connect(b.ownerUrl)
  t.same((await other.query('SELECT 1 AS one')).rows, [{ one: 1 }], "another database's owner still logs in")
  await other.end()
  for (const x of [b, a]) {
    const up = await h.client(x).signUp({ email: email('limits'), password: 'correct horse battery' })
    t.error(up.error, `${x === a ? 'this' : 'the other'} database's sign-up works`)
  }
})

t.test("owners together cannot take the engines' reserved slots", async (t) => {
  // A cluster of its own, small enough to fill: 10 connections, 1 for superusers, 4 reserved
  // for pg_use_reserved_connections, so owners share 5.
  const dir = mkdtempSync(path.join(os.tmpdir(), 'gatehouse-slots-'))
  chmodSync(dir, 0o700)
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const cluster = await startEmbeddedPostgres({
    dir: path.join(dir, 'pg'),
    port: 0,
    persistent: false,
    password: 'a-generated-one',
    initdbFlags: ['--nosync'],
    settings: { max_connections: '10', superuser_reserved_connections: '1', reserved_connections: '4', fsync: 'off' },
    onLog: () => {},
  })
  t.teardown(() => cluster.stop())
  const made = []
  for (const database of ['slots_a', 'slots_b']) {
    made.push(
      await provisionTenant({
        adminUrl: cluster.url,
        database,
        organization: 'org_test',
        connectionLimits: { owner: 3 },
      }),
    )
    t.teardown(() => dropTenant({ adminUrl: cluster.url, database }).catch(() => {}))
  }
  const [a, b] = made as [(typeof made)[0], (typeof made)[0]]
  const held: pg.Client[] = []
  t.teardown(() => Promise.all(held.map((c) => c.end().catch(() => {}))))
  for (const url of [a.ownerUrl, a.ownerUrl, a.ownerUrl, b.ownerUrl, b.ownerUrl]) held.push(await connect(url))
  const refused = await connect(b.ownerUrl).then(
    (c) => held.push(c) && null,
    (err: Error & { code?: string }) => err,
  )
  t.match(
    refused,
    {
      code: '53300',
      message: /remaining connection slots are reserved for roles with privileges of .*pg_use_reserved_connections/,
    },
    'the other owner, under its own limit, finds the ordinary slots taken',
  )
  for (const url of [a.file.engines!.rest!, a.file.engines!.auth!, b.file.engines!.rest!, b.file.engines!.auth!]) {
    const c = await connect(url)
    held.push(c)
    t.same((await c.query('SELECT 1 AS one')).rows, [{ one: 1 }], `${new URL(url).username} still connects`)
  }
})

t.test("the engine logins' SCRAM verifiers take 16 iterations; the owner's keep Postgres' count", async (t) => {
  const x = await createTestTenant(t)
  const r = await adminQuery<{ rolname: string; head: string }>(
    "SELECT rolname, split_part(rolpassword, ':', 1) AS head FROM pg_authid WHERE rolname = ANY ($1) ORDER BY rolname",
    [[x.roles.rest, x.roles.authn, x.roles.owner]],
  )
  t.same(Object.fromEntries(r.rows.map((row) => [row.rolname, row.head])), {
    [x.roles.rest]: 'SCRAM-SHA-256$16',
    [x.roles.authn]: 'SCRAM-SHA-256$16',
    [x.roles.owner]: 'SCRAM-SHA-256$4096',
  })
  for (const url of [x.file.engines?.rest, x.file.engines?.auth, x.ownerUrl]) {
    const c = await connect(url ?? '')
    t.ok((await c.query('SELECT current_user')).rows[0].current_user, 'logs in with its password')
    await c.end()
  }
})

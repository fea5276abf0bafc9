// One database's logins cannot take the connections every database shares (docs/security.md
// "The tenant boundary"): each owner login has a CONNECTION LIMIT (the operator's
// postgres.owner_connection_limit, else sized from max_connections), the engine logins theirs,
// and the engine logins may use the slots reserved_connections keeps. Real Postgres (the test
// cluster runs with reserved_connections), the auth engine for the sign-ups.
import t from 'tap'
import pg from 'pg'
import { startAuth, email } from '../helpers/auth-harness.js'
import { adminQuery, adminUrl } from '../helpers/db.js'
import { migrateDatabase } from '../../src/platform/index.js'
import { withDatabase } from '../../src/shared/index.js'
import type { TestTenant } from '../helpers/tenants.js'

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

  const other = await connect(b.ownerUrl)
  t.same((await other.query('SELECT 1 AS one')).rows, [{ one: 1 }], "another database's owner still logs in")
  await other.end()
  for (const x of [b, a]) {
    const up = await h.client(x).signUp({ email: email('limits'), password: 'correct horse battery' })
    t.error(up.error, `${x === a ? 'this' : 'the other'} database's sign-up works`)
  }
})

// The auth engine's connections are bounded: a process keeps at most auth.pool_max_tenants
// tenant pools (the least recently used idle one is closed for a new tenant), seen from
// Postgres as the engine's sessions on each tenant database.
import t from 'tap'
import { adminQuery } from '../helpers/db.js'
import type { TestTenant } from '../helpers/tenants.js'
import { startAuth } from '../helpers/auth-harness.js'
import { eventually } from '../helpers/rest-fixture.js'

const sessions = async (x: TestTenant): Promise<number> =>
  Number(
    (
      await adminQuery<{ n: string }>(
        "SELECT count(*) AS n FROM pg_stat_activity WHERE datname = $1 AND application_name = 'gatehouse-auth'",
        [x.database],
      )
    ).rows[0]?.n,
  )

t.test('at most auth.pool_max_tenants tenant pools stay open', async (t) => {
  const h = await startAuth(t, { tenants: [{}, {}, {}], auth: { pool_max_tenants: 2 } })
  const [a, b, c] = h.list as [TestTenant, TestTenant, TestTenant]
  const signUp = async (x: TestTenant): Promise<void> => {
    const { error } = await h
      .client(x)
      .signUp({ email: `u${Math.random().toString(36).slice(2)}@example.com`, password: 'secret123' })
    t.error(error, x.database)
  }
  await signUp(a)
  await signUp(b)
  t.ok((await sessions(a)) > 0, 'a has engine sessions')
  t.ok((await sessions(b)) > 0, 'b has engine sessions')
  await signUp(c)
  await eventually(async () => {
    if ((await sessions(a)) !== 0) throw new Error('a still connected')
  })
  t.equal(await sessions(a), 0, "the least recently used tenant's pool was closed")
  t.ok((await sessions(b)) > 0, 'b keeps its sessions')
  t.ok((await sessions(c)) > 0, 'c has engine sessions')
  await signUp(a)
  t.ok((await sessions(a)) > 0, 'a reconnects on its next request')
})

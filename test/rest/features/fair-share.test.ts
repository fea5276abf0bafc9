// Fair shares of the connection budget, over real HTTP: four tenants keep the whole budget
// busy with slow reads (pg_sleep) and a queue of more behind them; a fifth tenant's read
// is answered at the first connection that comes free, long before the busy tenants'
// queues drain (a released connection goes to the waiting tenant holding the fewest).
import t from 'tap'
import type { AddressInfo } from 'node:net'
import { buildRestEngine, restEngineOf } from '../../../src/rest/index.js'
import type { Tenant } from '../../../src/tenants/index.js'
import { createTestTenant, withClient, type TestTenant } from '../../helpers/tenants.js'
import { TEST_CONFIG, eventually } from '../../helpers/rest-fixture.js'

const SETUP = `
CREATE VIEW slow AS SELECT 1 AS x FROM pg_sleep(0.3);
CREATE TABLE plain (id int); INSERT INTO plain VALUES (1);
SELECT platform.grant('SELECT', 'slow', 'anon');
SELECT platform.grant('SELECT', 'plain', 'anon');
`

const SLOW_PER_TENANT = 12

t.test('four tenants saturate the budget with slow reads; a fifth is still answered', async (t) => {
  const tenants: TestTenant[] = []
  for (let i = 0; i < 5; i++) {
    const tt = await createTestTenant(t)
    await withClient(tt.ownerUrl, (c) => c.query(SETUP))
    tenants.push(tt)
  }
  const map = new Map<string, Tenant>(tenants.map((x) => [x.database, x.tenant]))
  const app = buildRestEngine({
    config: { rest: { ...TEST_CONFIG.rest, pool_budget: 8, pool_per_tenant: 2 } },
    tenants: { get: async (db) => map.get(db) ?? null },
  })
  t.teardown(() => app.close())
  await app.listen({ host: '127.0.0.1', port: 0 })
  const base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`
  const engine = restEngineOf(app)
  const get = (tt: TestTenant, path: string): Promise<Response> => fetch(`${base}/${tt.database}${path}`)

  // Warm every schema cache (a load takes a connection too).
  for (const tt of tenants) t.equal((await get(tt, '/plain')).status, 200)

  const busy = tenants.slice(0, 4)
  const fifth = tenants[4] as TestTenant
  let slowDone = 0
  const slow: Array<Promise<number>> = []
  for (const tt of busy) {
    for (let i = 0; i < SLOW_PER_TENANT; i++) {
      slow.push(
        get(tt, '/slow').then(async (r) => {
          await r.arrayBuffer()
          slowDone++
          return r.status
        }),
      )
    }
  }
  // Every connection of the budget is busy and each busy tenant has requests queued.
  await eventually(async () => {
    const s = engine.poolSnapshot()
    const queued = busy.every((tt) => (engine.poolStats(tt.database)?.waiting ?? 0) > 0)
    if (s.open !== 8 || !queued) throw new Error('not saturated yet')
  })

  const r = await get(fifth, '/plain')
  const doneAtFifth = slowDone
  t.equal(r.status, 200, 'the fifth tenant is answered')
  t.same(await r.json(), [{ id: 1 }])
  const total = busy.length * SLOW_PER_TENANT
  t.ok(
    doneAtFifth < total / 2,
    `answered while the busy tenants still had most of their reads to run (${doneAtFifth} of ${total} done)`,
  )

  const statuses = await Promise.all(slow)
  t.same(
    statuses,
    statuses.map(() => 200),
    'every slow read succeeds too',
  )
  t.ok(engine.openConnections() <= 8, 'never above the budget')
})

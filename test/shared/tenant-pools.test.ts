// The shared per-tenant pools on a real Postgres: the fair-share order in which freed
// connections go to waiting tenants, acquisition timeouts with the owner's error, the
// bound on kept tenant pools, the pg.Pool-like facade and the pools' gauges. Tenants are keys; they share
// one test database (the pools only see keys and URLs).
import t from 'tap'
import net from 'node:net'
import { Registry } from 'prom-client'
import { registerPoolMetrics } from '../../src/shared/pool-metrics.js'
import pg from 'pg'
import {
  budgetOptions,
  fairest,
  TenantPools,
  type PooledConnection,
  type TenantPoolsOptions,
} from '../../src/shared/tenant-pools.js'
import { createTestDatabase } from '../helpers/db.js'
import { eventually } from '../helpers/eventually.js'

function pools(t: { teardown(fn: () => unknown): void }, opts: Partial<TenantPoolsOptions>): TenantPools {
  const p = new TenantPools({
    budget: 3,
    perTenant: 2,
    idleMs: 60_000,
    acquireTimeoutMs: 10_000,
    connectTimeoutMs: 5_000,
    applicationName: 'gatehouse-test',
    ...opts,
  })
  t.teardown(() => p.close())
  return p
}

/** A promise with a flag telling whether it settled yet. */
function tracked<T>(p: Promise<T>): { promise: Promise<T>; settled: () => boolean } {
  let done = false
  const promise = p.finally(() => {
    done = true
  })
  return { promise, settled: () => done }
}

const pid = async (c: PooledConnection): Promise<number> =>
  (await c.client.query('SELECT pg_backend_pid() AS pid')).rows[0].pid

t.test('fairest: fewest connections first, then the longest wait', async (t) => {
  t.equal(fairest([]), -1)
  t.equal(
    fairest([
      { open: 3, since: 1 },
      { open: 0, since: 9 },
      { open: 1, since: 0 },
    ]),
    1,
  )
  t.equal(
    fairest([
      { open: 2, since: 5 },
      { open: 2, since: 3 },
      { open: 2, since: 4 },
    ]),
    1,
  )
  t.equal(fairest([{ open: 0, since: 7 }]), 0)
})

t.test('fairest: among tenants holding as many, the one served least recently, then the longest wait', async (t) => {
  // b waits longest but was served a moment ago; c was never served.
  t.equal(
    fairest([
      { open: 0, since: 1, servedAt: 5 },
      { open: 0, since: 4 },
      { open: 1, since: 0, servedAt: 0 },
    ]),
    1,
  )
  t.equal(
    fairest([
      { open: 0, since: 3, servedAt: 7 },
      { open: 0, since: 2, servedAt: 6 },
    ]),
    1,
  )
  t.equal(
    fairest([
      { open: 0, since: 3, servedAt: 6 },
      { open: 0, since: 2, servedAt: 6 },
    ]),
    1,
    'equal: the longest wait',
  )
})

t.test(
  'a freed connection goes to a tenant not served yet before one served a moment ago, even one waiting longer',
  async (t) => {
    const db = await createTestDatabase(t)
    let clock = 1_000_000 // the pools' clock: a's wait starts before c's
    const p = pools(t, { budget: 1, perTenant: 1, now: () => clock })
    const a1 = await p.acquire('a', db.url)
    const b1 = tracked(p.acquire('b', db.url))
    p.release(a1)
    const b = await b1.promise
    // a asks again (its turn was just now), then c, never served, asks.
    const a2 = tracked(p.acquire('a', db.url))
    clock += 20
    const c1 = tracked(p.acquire('c', db.url))
    const waits = p
      .snapshot()
      .tenants.filter((x) => x.waiting > 0)
      .map((x) => x.key)
    t.same(waits.sort(), ['a', 'c'], 'a and c wait')
    p.release(b)
    const c = await c1.promise
    t.notOk(a2.settled(), 'a, served before and waiting longer, waits on')
    p.release(c)
    p.release(await a2.promise)
    t.equal(p.openConnections, 1, 'never above the budget')
  },
)

t.test('a freed connection goes to the waiting tenant holding the fewest', async (t) => {
  const db = await createTestDatabase(t)
  const p = pools(t, { budget: 3, perTenant: 2 })
  t.equal(p.perTenantCap, 2)
  const a1 = await p.acquire('a', db.url)
  const a2 = await p.acquire('a', db.url)
  const b1 = await p.acquire('b', db.url)
  t.equal(p.openConnections, 3, 'the budget is taken')

  // Queued in this order: a (at its cap), b, c (no budget left).
  const a3 = tracked(p.acquire('a', db.url))
  const b2 = tracked(p.acquire('b', db.url))
  const c1 = tracked(p.acquire('c', db.url))
  t.same(
    p.snapshot().tenants.map((x) => [x.key, x.inUse, x.waiting]),
    [
      ['a', 2, 1],
      ['b', 1, 1],
      ['c', 0, 1],
    ],
  )

  // a frees one: c holds none, b one, a one after this release -> c.
  const a2pid = await pid(a2)
  p.release(a2)
  const c = await c1.promise
  t.not(await pid(c), a2pid, "c got a new connection of its own (a's was closed for it)")
  t.notOk(a3.settled(), 'a waits on')
  t.notOk(b2.settled(), 'b waits on')

  // b frees its only one: b then holds none, a and c one each -> b's own request reuses it.
  const b1pid = await pid(b1)
  p.release(b1)
  const b = await b2.promise
  t.equal(await pid(b), b1pid, 'b reuses its connection')
  t.notOk(a3.settled(), 'a still waits')

  // a frees its other one while only a waits.
  p.release(a1)
  await a3.promise
  t.equal(p.openConnections, 3, 'never above the budget')
  t.same(
    p
      .snapshot()
      .tenants.map((x) => [x.key, x.inUse, x.waiting])
      .sort(),
    [
      ['a', 1, 0],
      ['b', 1, 0],
      ['c', 1, 0],
    ],
  )
})

t.test("a tenant at its cap waits for its own connections; a wait times out with the owner's error", async (t) => {
  const db = await createTestDatabase(t)
  class Exhausted extends Error {}
  const p = pools(t, { budget: 4, perTenant: 1, acquireTimeoutMs: 200, timeoutError: (key) => new Exhausted(key) })
  const a1 = await p.acquire('a', db.url)
  const err = await p.acquire('a', db.url).catch((e: unknown) => e)
  t.ok(err instanceof Exhausted, "the owner's timeout error")
  t.equal((err as Error).message, 'a')
  t.equal(p.stats('a')?.waiting, 0, 'the timed-out request no longer waits')
  const b1 = await p.acquire('b', db.url)
  t.ok(b1, 'another tenant is served meanwhile')
  p.release(a1)
  p.release(b1)
  t.same(p.stats('a'), { open: 1, idle: 1, waiting: 0 })
})

t.test("connect failures use the owner's error and free the slot", async (t) => {
  const db = await createTestDatabase(t)
  const down = new URL(db.url)
  down.port = '1'
  const p = pools(t, {
    budget: 1,
    perTenant: 1,
    connectError: (err, key) => new Error(`down: ${key}: ${(err as Error).message !== ''}`),
  })
  const err = await p.acquire('x', down.toString()).catch((e: unknown) => e)
  t.equal((err as Error).message, 'down: x: true')
  t.equal(p.openConnections, 0)
  const ok = await p.acquire('y', db.url)
  t.ok(ok, 'the budget slot is free again')
  p.release(ok)
})

t.test('at most maxTenants pools: the least recently used idle one is closed', async (t) => {
  const db = await createTestDatabase(t)
  const closed: string[] = []
  const p = pools(t, { budget: 10, perTenant: 2, maxTenants: 2, onPoolClosed: (key) => closed.push(key) })
  const a = await p.acquire('a', db.url)
  p.release(await p.acquire('b', db.url))
  // 'a' is busy, so 'b' (idle) makes room for 'c'.
  const c = await p.acquire('c', db.url)
  t.same(closed, ['b'])
  t.equal(p.stats('b'), null)
  t.same(
    p
      .snapshot()
      .tenants.map((x) => x.key)
      .sort(),
    ['a', 'c'],
  )
  p.release(a)
  p.release(c)
  // a was used before c: a goes for d.
  p.release(await p.acquire('d', db.url))
  t.same(closed, ['b', 'a'])
  t.equal(p.openConnections, 2)
})

t.test('the pg.Pool-like facade: query, connect and release', async (t) => {
  const db = await createTestDatabase(t)
  const p = pools(t, { budget: 2, perTenant: 2 })
  const pool = p.pool('a', db.url)
  t.equal(p.pool('a', db.url), pool, 'one facade per tenant and URL')
  const r = await pool.query<{ n: number }>('SELECT $1::int AS n', [7])
  t.same(r.rows, [{ n: 7 }])
  const client = await pool.connect()
  await client.query('BEGIN')
  await client.query('COMMIT')
  client.release()
  t.throws(() => client.release(), /already released/)
  t.same(p.stats('a'), { open: 1, idle: 1, waiting: 0 }, 'one connection, back in the pool')
  const bad = await pool.connect()
  bad.release(new Error('broken'))
  t.same(p.stats('a'), { open: 0, idle: 0, waiting: 0 }, 'a client released with an error is closed')
  await t.rejects(pool.query('SELECT 1/0'), { code: '22012' })
  t.same(p.stats('a'), { open: 1, idle: 1, waiting: 0 }, 'an SQL error keeps the connection')
})

t.test('a client the reusable hook refuses is closed at release, not handed out again', async (t) => {
  const db = await createTestDatabase(t)
  const refused = new Set<pg.Client>()
  const p = pools(t, { reusable: (client) => !refused.has(client) })
  const first = await p.acquire('a', db.url)
  const firstPid = await pid(first)
  p.release(first)
  t.same(p.stats('a'), { open: 1, idle: 1, waiting: 0 }, 'a reusable client goes back to the idle list')
  const again = await p.acquire('a', db.url)
  t.equal(await pid(again), firstPid, 'and serves the next acquire')
  refused.add(again.client)
  p.release(again)
  t.same(p.stats('a'), { open: 0, idle: 0, waiting: 0 }, 'a refused client is closed')
  const next = await p.acquire('a', db.url)
  t.not(await pid(next), firstPid, 'the next acquire gets a new connection')
  p.release(next)
})

t.test('pool metrics: per-tenant gauges from the snapshots of several parts', async (t) => {
  const db = await createTestDatabase(t)
  const rest = pools(t, { budget: 4, perTenant: 1, acquireTimeoutMs: 5_000 })
  const panel = pools(t, { budget: 6, perTenant: 2 })
  const registry = new Registry()
  registerPoolMetrics(registry, { part: 'rest', snapshot: () => rest.snapshot() })
  registerPoolMetrics(registry, {
    part: 'panel',
    snapshot: () => panel.snapshot(),
    tenantOf: (k) => (JSON.parse(k) as string[])[0] as string,
  })
  const a = await rest.acquire('alpha', db.url)
  const waiting = rest.acquire('alpha', db.url)
  rest.release(await rest.acquire('beta', db.url))
  const secret = db.url
  const p1 = await panel.pool(JSON.stringify(['alpha', secret]), secret).connect()
  const text = await registry.metrics()
  t.match(text, 'gatehouse_pool_connections{part="rest",tenant="alpha",state="in_use"} 1')
  t.match(text, 'gatehouse_pool_waiting{part="rest",tenant="alpha"} 1')
  t.match(text, 'gatehouse_pool_connections{part="rest",tenant="beta",state="idle"} 1')
  t.match(text, 'gatehouse_pool_connections{part="panel",tenant="alpha",state="in_use"} 1')
  t.match(text, 'gatehouse_pool_budget{part="rest"} 4')
  t.notMatch(text, new URL(secret).password || 'no-password', 'no connection URL in the labels')
  rest.release(a)
  rest.release(await waiting)
  p1.release()
  t.match(await registry.metrics(), 'gatehouse_pool_waiting{part="rest",tenant="alpha"} 0')
})

/** Backends of one application_name (the pools under test), seen from another connection. */
async function backends(url: string, app: string): Promise<number[]> {
  const c = new pg.Client({ connectionString: url })
  await c.connect()
  try {
    const r = await c.query<{ pid: number }>('SELECT pid FROM pg_stat_activity WHERE application_name = $1', [app])
    return r.rows.map((x) => x.pid)
  } finally {
    await c.end()
  }
}

t.test('clusterShare: the budget is that share of the connections the cluster takes from non-superusers', async (t) => {
  const db = await createTestDatabase(t)
  const p = pools(t, { budget: 3, perTenant: 10, clusterShare: 0.5 })
  t.equal(p.budget, 3, 'the provisional budget until a connection is open')
  const a = await p.acquire('a', db.url)
  const r = await a.client.query<{ max: number; su: number }>(
    `SELECT current_setting('max_connections')::int AS max, current_setting('superuser_reserved_connections')::int AS su`,
  )
  const { max, su } = r.rows[0]!
  t.equal(p.budget, Math.floor((max - su) / 2))
  t.equal(p.perTenantCap, 10, 'the per-tenant cap stays the setting')
  p.release(a)
  t.same(budgetOptions(0, 0.25).clusterShare, 0.25)
  t.same(budgetOptions(12, 0.25), { budget: 12 }, 'a set budget is kept as it is')
})

t.test('connects being opened to one cluster: a quarter of the budget as sized from the cluster', async (t) => {
  const db = await createTestDatabase(t)
  // A host that accepts connects and never answers: each connect to it stays pending.
  const held = new Set<net.Socket>()
  const server = net.createServer((s) => {
    held.add(s)
    s.on('error', () => {})
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => {
    for (const s of held) s.destroy()
    server.close()
  })
  const p = pools(t, { budget: 40, clusterShare: 0.05, perTenant: 2, connectTimeoutMs: 30_000 })
  p.release(await p.acquire('sizer', db.url))
  const bound = Math.ceil(p.budget / 4)
  t.ok(bound < 10, `sized budget ${p.budget}: its quarter is below the provisional budget's (10)`)
  const hanging = new URL(db.url)
  hanging.hostname = '127.0.0.1'
  hanging.port = String((server.address() as net.AddressInfo).port)
  for (let i = 0; i < bound + 3; i++) p.acquire(`held${i}`, hanging.toString()).catch(() => {})
  t.equal(p.snapshot().waiting, 3, 'the tenants past the bound wait instead of connecting')
  await eventually(() => held.size === bound)
  t.equal(held.size, bound, `${bound} connects reached the cluster`)
})

t.test("an idle tenant's connection is closed after idleMs, then its pool", async (t) => {
  const db = await createTestDatabase(t)
  let clock = 1_000_000
  const app = 'gatehouse-test-idle'
  const closed: string[] = []
  const p = pools(t, {
    budget: 10,
    perTenant: 2,
    idleMs: 300,
    applicationName: app,
    now: () => clock,
    onPoolClosed: (key) => closed.push(key),
  })
  p.release(await p.acquire('quiet', db.url))
  p.release(await p.acquire('busy', db.url))
  t.equal((await backends(db.url, app)).length, 2, 'both keep their connection between requests')
  clock += 200
  p.release(await p.acquire('busy', db.url))
  clock += 150
  // quiet was last used 350 ms ago (the clock's), busy 150 ms ago.
  await eventually(() => p.stats('quiet') === null)
  t.same(closed, ['quiet'], "quiet's pool is closed")
  t.same(p.stats('busy'), { open: 1, idle: 1, waiting: 0 }, 'busy keeps its connection')
  await eventually(async () => (await backends(db.url, app)).length === 1)
  t.equal(p.openConnections, 1)
})

t.test('the budget holds when 1,000 tenants want a connection at once', async (t) => {
  const db = await createTestDatabase(t)
  const app = 'gatehouse-test-budget'
  // The last of 2,000 queries through 10 connections waits for about 1,000 connects (a tenant
  // served closes another's idle connection): over 10 s on a loaded machine (a CI rehearsal
  // timed out there). The test is about the bound, not the wait: a wait of up to a minute.
  const p = pools(t, { budget: 10, perTenant: 4, maxTenants: 1000, applicationName: app, acquireTimeoutMs: 60_000 })
  const count = 'SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = $1'
  const seen: number[] = []
  const served = new Map<string, number>()
  await Promise.all(
    Array.from({ length: 1000 }, async (_, i) => {
      const key = `tenant${i}`
      for (let k = 0; k < 2; k++) {
        const r = await p.pool(key, db.url).query<{ n: number }>(count, [app])
        seen.push(r.rows[0]!.n)
        served.set(key, (served.get(key) ?? 0) + 1)
      }
    }),
  )
  t.ok(Math.max(...seen) <= 10, `never more than 10 backends (most seen ${Math.max(...seen)})`)
  t.equal(served.size, 1000, 'every tenant was served')
  t.ok([...served.values()].every((n) => n === 2))
  t.ok(p.openConnections <= 10)
})

t.test('a busy tenant does not starve a quiet one', async (t) => {
  const db = await createTestDatabase(t)
  const p = pools(t, { budget: 4, perTenant: 4 })
  t.equal(p.perTenantCap, 2)
  const busy = await Promise.all([p.acquire('busy', db.url), p.acquire('busy', db.url)])
  const other = await Promise.all([p.acquire('other', db.url), p.acquire('other', db.url)])
  // The budget is taken; busy queues 20 requests (each keeps its connection) before quiet asks once.
  let draining = false
  const backlog = Array.from({ length: 20 }, () =>
    p.acquire('busy', db.url).then((c) => (draining ? p.release(c) : busy.push(c))),
  )
  const quiet = tracked(p.acquire('quiet', db.url))
  p.release(busy.shift() as PooledConnection)
  p.release(busy.shift() as PooledConnection)
  const q = await quiet.promise
  t.equal(p.stats('busy')?.waiting, 19, "quiet is served with busy's first freed connection, not after its backlog")
  p.release(q)
  for (const c of other) p.release(c)
  draining = true
  while (busy.length > 0) p.release(busy.shift() as PooledConnection)
  await Promise.all(backlog)
  t.ok(p.openConnections <= 4)
})

// While a tenant database refuses connections, the REST engine backs off: requests answer
// 503 PGRST000 with Retry-After at once instead of each one trying to connect
// again, one request probes after the wait, and the engine recovers by itself once the
// database is back: a background probe (at most one a second per URL, by the engine's
// injected clock here) finds it back within a second however long the outage was. Real Postgres behind a TCP relay of this test that we can switch to
// refusing (the fault: a database that cannot be reached), counting the connection attempts.
import t from 'tap'
import net from 'node:net'
import type { AddressInfo } from 'node:net'
import { buildRestEngine, restEngineOf } from '../../src/rest/index.js'
import { createRestFixture, TEST_CONFIG } from '../helpers/rest-fixture.js'
import { until } from '../helpers/eventually.js'
import { pino } from 'pino'

interface Relay {
  url(base: string): string
  attempts: number
  down: boolean
  cut(): void
}

async function relayTo(t: { teardown(fn: () => unknown): void }, target: URL): Promise<Relay> {
  const open = new Set<net.Socket>()
  const relay: Relay = {
    attempts: 0,
    down: false,
    url: (base) => {
      const u = new URL(base)
      u.host = `127.0.0.1:${port}`
      return u.toString()
    },
    cut: () => {
      for (const s of open) s.destroy()
      open.clear()
    },
  }
  const server = net.createServer((sock) => {
    relay.attempts++
    if (relay.down) {
      sock.destroy()
      return
    }
    const up = net.connect(Number(target.port || 5432), target.hostname)
    open.add(sock)
    open.add(up)
    sock.on('error', () => up.destroy())
    up.on('error', () => sock.destroy())
    sock.pipe(up).pipe(sock)
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const port = (server.address() as AddressInfo).port
  t.teardown(
    () =>
      new Promise<void>((resolve) => {
        relay.cut()
        server.close(() => resolve())
      }),
  )
  return relay
}

t.test('a database that refuses: 503 at once with Retry-After, few attempts, recovery by itself', async (t) => {
  const fx = await createRestFixture(t)
  const direct = new URL(fx.tenant.engines!.rest!)
  const relay = await relayTo(t, direct)
  const tenant = { ...fx.tenant, engines: { ...fx.tenant.engines, rest: relay.url(fx.tenant.engines!.rest!) } }
  const app = buildRestEngine({
    config: { rest: { ...TEST_CONFIG.rest, reconnect_backoff_ms: 300, reconnect_backoff_max_ms: 1_200 } },
    tenants: { get: async (db) => (db === fx.database ? tenant : null) },
  })
  t.teardown(() => app.close())
  await app.listen({ port: 0, host: '127.0.0.1' })
  const base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}/${fx.database}`
  const get = () => fetch(`${base}/authors?select=id`)

  t.equal((await get()).status, 200, 'served while the database is up')

  // The database goes away: existing connections are cut, new ones refused.
  relay.down = true
  relay.cut()
  const first = await get()
  t.equal(first.status, 503, 'the database is unreachable: 503')
  const before = relay.attempts
  const answers = []
  for (let i = 0; i < 20; i++) answers.push(await get())
  t.ok(
    answers.every((r) => r.status === 503),
    'every request in the wait: 503',
  )
  const bodies = await Promise.all(answers.map(async (r) => (await r.json()) as { code: string }))
  t.ok(
    bodies.every((b) => b.code === 'PGRST000'),
    'PGRST000, as PostgREST',
  )
  t.ok(
    answers.every((r) => Number(r.headers.get('retry-after')) >= 1),
    'with Retry-After',
  )
  t.ok(
    relay.attempts - before <= 2,
    `20 requests during the wait made ${relay.attempts - before} connection attempts, not 20`,
  )

  // Back up: after the wait one request probes and the engine serves again by itself.
  relay.down = false
  await until(async () => (await get()).status === 200, 'the engine serves again without a restart')
  t.pass('recovered without a restart')
})

t.test('an outage is logged once, not once per refused request', async (t) => {
  const fx = await createRestFixture(t)
  const relay = await relayTo(t, new URL(fx.tenant.engines!.rest!))
  const tenant = { ...fx.tenant, engines: { ...fx.tenant.engines, rest: relay.url(fx.tenant.engines!.rest!) } }
  const lines: Array<{ level: number; msg: string }> = []
  const logger = pino({ level: 'debug' }, { write: (s: string) => void lines.push(JSON.parse(s)) })
  const app = buildRestEngine({
    config: { rest: { ...TEST_CONFIG.rest, reconnect_backoff_ms: 60_000, reconnect_backoff_max_ms: 60_000 } },
    tenants: { get: async (db) => (db === fx.database ? tenant : null) },
    logger,
  })
  t.teardown(() => app.close())
  await app.listen({ port: 0, host: '127.0.0.1' })
  const base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}/${fx.database}`
  const get = async () => {
    const r = await fetch(`${base}/authors?select=id`)
    await r.arrayBuffer()
    return r.status
  }
  t.equal(await get(), 200)
  relay.down = true
  relay.cut()
  const statuses: number[] = []
  for (let i = 0; i < 30; i++) statuses.push(await get())
  t.same([...new Set(statuses)], [503], 'every request of the outage: 503')
  const loud = lines.filter((l) => l.level >= 40)
  t.ok(
    loud.length >= 1 && loud.length <= 3,
    `30 refused requests: ${loud.length} warning or error lines (${loud.map((l) => l.msg).join('; ')})`,
  )
  t.ok(
    lines.some((l) => l.level === 20 && l.msg === 'rest: database backing off'),
    'each refusal is still there at debug level',
  )
  t.same(
    loud.map((l) => l.msg),
    loud.map(() => 'rest: cannot connect to the tenant database'),
    'a failed connect is one warning: the request it failed is not logged again as an error (with a stack)',
  )
})

t.test('an engine that starts during an outage (no schema cache yet) logs its failed connects only', async (t) => {
  const fx = await createRestFixture(t)
  const relay = await relayTo(t, new URL(fx.tenant.engines!.rest!))
  relay.down = true
  const tenant = { ...fx.tenant, engines: { ...fx.tenant.engines, rest: relay.url(fx.tenant.engines!.rest!) } }
  const lines: Array<{ level: number; msg: string }> = []
  const logger = pino({ level: 'debug' }, { write: (s: string) => void lines.push(JSON.parse(s)) })
  // The back-off reads this clock: each request comes 2 s after the last, so waits run out and connects are tried again.
  const clock = { ms: Date.now() }
  const app = buildRestEngine({
    config: TEST_CONFIG,
    tenants: { get: async (db) => (db === fx.database ? tenant : null) },
    logger,
    now: () => clock.ms,
  })
  t.teardown(() => app.close())
  await app.listen({ port: 0, host: '127.0.0.1' })
  const base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}/${fx.database}`
  const answers: Array<{ status: number; code: string; retryAfter: string | null }> = []
  for (let i = 0; i < 30; i++) {
    const r = await fetch(`${base}/authors?select=id`)
    answers.push({
      status: r.status,
      code: ((await r.json()) as { code: string }).code,
      retryAfter: r.headers.get('retry-after'),
    })
    clock.ms += 2_000
  }
  t.ok(
    answers.every((a) => a.status === 503 && a.retryAfter !== null && /^PGRST00[02]$/.test(a.code)),
    'every request: 503 PGRST000/PGRST002 with Retry-After',
  )
  const loud = lines.filter((l) => l.level >= 40)
  t.ok(loud.length >= 1, 'the outage is logged')
  t.same(
    loud.map((l) => l.msg),
    loud.map(() => 'rest: cannot connect to the tenant database'),
    `30 refused requests: only the failed connects are logged (${loud.length} lines), not each request and schema cache load`,
  )
  relay.down = false
  await until(async () => (await fetch(`${base}/authors?select=id`)).status === 200, 'served once the database is back')
})

t.test(
  'a 20 s outage (by the injected clock): the first request after the database is back within 1 s succeeds',
  async (t) => {
    const fx = await createRestFixture(t)
    const relay = await relayTo(t, new URL(fx.tenant.engines!.rest!))
    const tenant = { ...fx.tenant, engines: { ...fx.tenant.engines, rest: relay.url(fx.tenant.engines!.rest!) } }
    // The back-off and its probes read this clock: the outage lasts 20 s on it, not on the wall.
    const clock = { ms: Date.now() }
    const app = buildRestEngine({
      config: TEST_CONFIG, // 1 s doubling up to 32 s, as PostgREST
      tenants: { get: async (db) => (db === fx.database ? tenant : null) },
      now: () => clock.ms,
    })
    t.teardown(() => app.close())
    await app.listen({ port: 0, host: '127.0.0.1' })
    const engine = restEngineOf(app)
    const base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}/${fx.database}`
    const get = (table = 'authors') => fetch(`${base}/${table}?select=id`)
    t.equal((await get()).status, 200)

    relay.down = true
    relay.cut()
    const before = relay.attempts
    const during: number[] = []
    for (let ms = 0; ms < 20_000; ms += 250) {
      clock.ms += 250
      const r = await get()
      during.push(r.status)
      await r.arrayBuffer()
      await engine.reconnectProbesSettled()
    }
    t.same([...new Set(during)], [503], 'every request of the outage: 503 at once')
    const attempts = relay.attempts - before
    t.ok(attempts <= 30, `80 requests over 20 s made ${attempts} connection attempts (about one probe a second)`)
    const retry = await get()
    t.equal(retry.status, 503)
    t.equal(
      retry.headers.get('retry-after'),
      '1',
      'clients are told to retry within the probe interval, not the grown wait',
    )

    // Postgres is ready again; a table is created at once.
    relay.down = false
    const readyAt = clock.ms
    await fx.ownerSql(
      "CREATE TABLE after_outage (id int PRIMARY KEY); INSERT INTO after_outage VALUES (7); SELECT platform.grant('SELECT', 'after_outage', 'anon')",
    )
    let status = 0
    while (status !== 200 && clock.ms - readyAt <= 5_000) {
      const r = await get()
      status = r.status
      await r.arrayBuffer()
      if (status !== 200) {
        await engine.reconnectProbesSettled()
        clock.ms += 100
      }
    }
    t.equal(status, 200, 'served again')
    t.ok(
      clock.ms - readyAt <= 1_000,
      `the first request ${clock.ms - readyAt} ms after the database was ready succeeded (goal: 1 s)`,
    )
    const created = await get('after_outage')
    t.equal(created.status, 200, 'the table created as it came back is there')
    t.same(await created.json(), [{ id: 7 }])
  },
)

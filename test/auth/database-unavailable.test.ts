// While the tenant database cannot be reached the auth engine answers 503 with a
// GoTrue-shaped body and Retry-After (GoTrue would say 500 unexpected_failure), and it
// recovers by itself once the database is back. The fault is real: the engine reaches the
// database through a TCP relay on loopback that the test closes (the port then refuses
// connections and every open connection is cut) and opens again on the same port; and
// the engine's connections are killed with pg_terminate_backend.
import t from 'tap'
import { pino } from 'pino'
import net from 'node:net'
import { adminQuery } from '../helpers/db.js'
import { call, email, startAuth } from '../helpers/auth-harness.js'
import { until } from '../helpers/eventually.js'

/** A TCP relay to host:port that can be shut (refusing, open sockets cut) and reopened. */
async function relay(host: string, port: number) {
  const sockets = new Set<net.Socket>()
  const server = net.createServer((client) => {
    const upstream = net.connect(port, host)
    for (const s of [client, upstream]) {
      sockets.add(s)
      s.on('close', () => sockets.delete(s))
      s.on('error', () => {
        client.destroy()
        upstream.destroy()
      })
    }
    client.pipe(upstream).pipe(client)
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const own = (server.address() as net.AddressInfo).port
  return {
    port: own,
    async shut() {
      await new Promise<void>((resolve) => {
        server.close(() => resolve())
        for (const s of sockets) s.destroy()
      })
    },
    async open() {
      await new Promise<void>((resolve) => server.listen(own, '127.0.0.1', resolve))
    },
  }
}

t.test('503 while the database is unreachable, then recovery without help', async (t) => {
  const h = await startAuth(t)
  const x = h.list[0]!
  const direct = new URL(x.tenant.engines!.auth!)
  const r = await relay(direct.hostname, Number(direct.port))
  t.teardown(() => r.shut().catch(() => {}))
  const viaRelay = new URL(direct)
  viaRelay.hostname = '127.0.0.1'
  viaRelay.port = String(r.port)
  h.setTenant(x, { engines: { ...x.tenant.engines, auth: viaRelay.toString() } })

  const who = email('down')
  t.equal((await call(`${h.base(x)}/signup`, { body: { email: who, password: 'password-123' } })).status, 200)
  const signIn = (apiVersion?: string | null) =>
    call(`${h.base(x)}/token?grant_type=password`, { body: { email: who, password: 'password-123' }, apiVersion })
  t.equal((await signIn()).status, 200, 'through the relay')

  await r.shut()
  const down = await signIn()
  t.equal(down.status, 503)
  t.strictSame(down.body, {
    code: 'database_unavailable',
    message: 'The database is not reachable at the moment, please retry shortly',
  })
  t.equal(down.headers.get('retry-after'), '1')
  t.equal(down.headers.get('x-sb-error-code'), 'database_unavailable')
  const legacy = await signIn(null)
  t.equal(legacy.status, 503)
  t.match(legacy.body, { code: 503, error_code: 'database_unavailable', msg: /not reachable/, error_id: String })

  // A mail link answers with the error in the redirect, as GoTrue's verify does.
  const link = await call(
    `${h.base(x)}/verify?type=signup&token=${'a'.repeat(56)}&redirect_to=http://localhost:3000/cb`,
    { apiVersion: null },
  )
  t.equal(link.status, 303)
  const fragment = new URLSearchParams(new URL(link.headers.get('location')!).hash.slice(1))
  t.equal(fragment.get('error'), 'temporarily_unavailable')
  t.equal(fragment.get('error_code'), 'database_unavailable')

  await r.open()
  // The cluster is known down until its background probe (one a second) finds it back
  // (docs/operating.md, "Clusters").
  await until(async () => (await signIn()).status === 200, 'served again once the database is back, nothing restarted')
  t.pass('served again without a restart')
})

t.test('an outage is one warning, not one per refused request', async (t) => {
  const lines: Array<{ level: number; msg: string; err?: { message?: string } }> = []
  const logger = pino({ level: 'debug' }, { write: (l: string) => void lines.push(JSON.parse(l)) })
  const h = await startAuth(t, { logger })
  const x = h.list[0]!
  const direct = new URL(x.tenant.engines!.auth!)
  const r = await relay(direct.hostname, Number(direct.port))
  t.teardown(() => r.shut().catch(() => {}))
  const viaRelay = new URL(direct)
  viaRelay.hostname = '127.0.0.1'
  viaRelay.port = String(r.port)
  h.setTenant(x, { engines: { ...x.tenant.engines, auth: viaRelay.toString() } })
  const who = email('quiet')
  t.equal((await call(`${h.base(x)}/signup`, { body: { email: who, password: 'password-123' } })).status, 200)
  await r.shut()
  const statuses: number[] = []
  for (let i = 0; i < 10; i++)
    statuses.push(
      (await call(`${h.base(x)}/token?grant_type=password`, { body: { email: who, password: 'password-123' } })).status,
    )
  t.same([...new Set(statuses)], [503], 'every request of the outage: 503')
  const warned = lines.filter((l) => l.level >= 40 && l.msg === 'tenant database unreachable')
  t.equal(warned.length, 1, 'one warning for 10 refused requests')
  t.notMatch(
    String(warned[0]?.err?.message),
    /Unexpected failure/,
    `the warning names the connection error, not the 500 it was first wrapped in: ${warned[0]?.err?.message}`,
  )
  t.equal(
    lines.filter((l) => l.msg === 'tenant database unreachable (logged already)').length,
    9,
    'the others at debug',
  )
  // Past the window (the engine's clock), the outage is worth a warning again.
  h.clock.advance(31)
  await call(`${h.base(x)}/token?grant_type=password`, { body: { email: who, password: 'password-123' } })
  t.equal(lines.filter((l) => l.level >= 40 && l.msg === 'tenant database unreachable').length, 2, 'again after 30 s')
})

t.test('connections terminated by the server (pg_terminate_backend)', async (t) => {
  const h = await startAuth(t)
  const x = h.list[0]!
  const who = email('killed')
  t.equal((await call(`${h.base(x)}/signup`, { body: { email: who, password: 'password-123' } })).status, 200)
  const signIn = () =>
    call(`${h.base(x)}/token?grant_type=password`, { body: { email: who, password: 'password-123' } })
  t.equal((await signIn()).status, 200)
  const killed = await adminQuery<{ n: number }>(
    `SELECT count(pg_terminate_backend(pid))::int AS n FROM pg_stat_activity WHERE datname = $1 AND application_name = 'gatehouse-auth'`,
    [x.database],
  )
  t.ok(killed.rows[0]!.n > 0, 'the engine had pooled connections to kill')
  const statuses: number[] = []
  for (let i = 0; i < 5; i++) statuses.push((await signIn()).status)
  t.notOk(statuses.includes(500), `never a 500 (${statuses.join(', ')})`)
  t.equal(statuses.at(-1), 200, 'and back to 200')
})

// The REST engine keeps one LISTEN connection per active tenant, outside its pool budget.
// When Postgres refuses that connection (too many connections: the LISTEN connections of
// many tenants add up), the tenant is still served from its pool, the engine does not try
// again on every request, and it listens again (schema reloads by NOTIFY) once Postgres
// lets it. Real Postgres behind a TCP relay of this test that refuses the LISTEN
// connections only (the fault: recognised by their application_name in the startup packet).
import tap from 'tap'
import net from 'node:net'
import type { AddressInfo } from 'node:net'
import { buildRestEngine } from '../../src/rest/index.js'
import { createRestFixture, TEST_CONFIG } from '../helpers/rest-fixture.js'

interface Relay { url (base: string): string, listenAttempts: number, listenRefused: boolean }

async function relayTo (t: { teardown (fn: () => unknown): void }, target: URL): Promise<Relay> {
  const open = new Set<net.Socket>()
  const relay: Relay = {
    listenAttempts: 0,
    listenRefused: true,
    url: (base) => { const u = new URL(base); u.host = `127.0.0.1:${port}`; return u.toString() }
  }
  const server = net.createServer((sock) => {
    open.add(sock)
    sock.on('error', () => {})
    sock.once('data', (first: Buffer) => {
      if (first.includes('gatehouse-rest-listen')) {
        relay.listenAttempts++
        if (relay.listenRefused) { sock.destroy(); return }
      }
      const up = net.connect(Number(target.port || 5432), target.hostname)
      open.add(up)
      sock.on('error', () => up.destroy())
      up.on('error', () => sock.destroy())
      up.write(first)
      sock.pipe(up).pipe(sock)
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const port = (server.address() as AddressInfo).port
  t.teardown(() => new Promise<void>((resolve) => { for (const s of open) s.destroy(); server.close(() => resolve()) }))
  return relay
}

async function engineFor (t: { teardown (fn: () => unknown): void }, backoffMs: number) {
  const fx = await createRestFixture(t)
  const relay = await relayTo(t, new URL(fx.tenant.engines!.rest!))
  const tenant = { ...fx.tenant, engines: { ...fx.tenant.engines, rest: relay.url(fx.tenant.engines!.rest!) } }
  const app = buildRestEngine({
    config: { rest: { ...TEST_CONFIG.rest, reconnect_backoff_ms: backoffMs, reconnect_backoff_max_ms: backoffMs * 2 } },
    tenants: { get: async (db) => db === fx.database ? tenant : null }
  })
  t.teardown(() => app.close())
  await app.listen({ port: 0, host: '127.0.0.1' })
  return { fx, relay, base: `http://127.0.0.1:${(app.server.address() as AddressInfo).port}/${fx.database}` }
}

tap.test('a refused LISTEN connection: the tenant is still served, and the LISTEN is not tried on every request', async (t) => {
  // A wait far longer than this test: one refused try, then none.
  const { relay, base } = await engineFor(t, 600_000)
  const statuses: number[] = []
  for (let i = 0; i < 30; i++) statuses.push((await fetch(`${base}/authors?select=id`)).status)
  t.same([...new Set(statuses)], [200], 'every request answered 200 while the LISTEN connection is refused')
  t.equal(relay.listenAttempts, 1, '30 requests made one LISTEN attempt')
})

tap.test('once Postgres takes the LISTEN connection again, the engine listens and reloads on NOTIFY', async (t) => {
  const { fx, relay, base } = await engineFor(t, 200)
  t.equal((await fetch(`${base}/authors?select=id`)).status, 200, 'served while the LISTEN connection is refused')
  const refused = relay.listenAttempts
  t.ok(refused >= 1, 'the LISTEN connection was tried and refused')
  relay.listenRefused = false
  // After the wait a request makes the LISTEN connection; then a column added by DDL (no
  // miss, so only the NOTIFY can reload the cache) becomes readable.
  for (let i = 0; i < 200 && relay.listenAttempts === refused; i++) {
    await new Promise((resolve) => setTimeout(resolve, 25))
    t.equal((await fetch(`${base}/authors?select=id`)).status, 200)
  }
  t.ok(relay.listenAttempts > refused, 'a request after the wait made a LISTEN connection')
  await new Promise((resolve) => setTimeout(resolve, 300))
  await fx.ownerSql('ALTER TABLE authors ADD COLUMN nickname text')
  let status = 0
  for (let i = 0; i < 200 && status !== 200; i++) {
    await new Promise((resolve) => setTimeout(resolve, 25))
    status = (await fetch(`${base}/authors?select=id,nickname`)).status
  }
  t.equal(status, 200, 'the new column is served: the engine listens again and reloaded')
})

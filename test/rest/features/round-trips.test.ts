// Round trips to Postgres per request: a read is one (BEGIN, the settings statement, the
// main statement and COMMIT sent together), a plain insert two (the settings first: their
// visibility check must pass before anything is written). Counted by a TCP relay between
// the engine and Postgres: each batch the engine writes arrives as one chunk, and no batch
// is sent before the answer to the previous one came back. Failures in any step leave the
// connection clean for the next request.
import t from 'tap'
import { buildRestEngine } from '../../../src/rest/index.js'
import type { Tenant } from '../../../src/tenants/index.js'
import { createTestTenant, withClient } from '../../helpers/tenants.js'
import { TEST_CONFIG } from '../../helpers/rest-fixture.js'
import { tcpRelay } from '../../helpers/tcp-relay.js'

const SCHEMA = `
CREATE TABLE items (id int PRIMARY KEY, n int NOT NULL);
INSERT INTO items SELECT i, i * 10 FROM generate_series(1, 5) i;
SELECT platform.grant('SELECT, INSERT', 'items', 'anon');
CREATE TABLE hidden (id int);
`

t.test('one round trip per read, two per insert, clean after failures', async (t) => {
  const tt = await createTestTenant(t)
  await withClient(tt.ownerUrl, (c) => c.query(SCHEMA))
  const counter = await tcpRelay(t, new URL(tt.tenant.engines?.rest ?? ''))
  const tenant: Tenant = { ...tt.tenant, engines: { ...tt.tenant.engines!, rest: counter.url } }
  const app = buildRestEngine({
    // One connection: every request below runs on the same one.
    config: { rest: { ...TEST_CONFIG.rest, pool_budget: 2, pool_per_tenant: 1 } },
    tenants: { get: async (db) => (db === tt.database ? tenant : null) },
  })
  t.teardown(() => app.close())
  const req = async (
    method: 'GET' | 'POST',
    path: string,
    o: { headers?: Record<string, string>; body?: unknown } = {},
  ) => {
    const res = await app.inject({
      method,
      url: `/${tt.database}${path}`,
      headers: o.headers,
      payload: o.body === undefined ? undefined : JSON.stringify(o.body),
    })
    return { status: res.statusCode, body: res.body }
  }
  const trips = async <T>(fn: () => Promise<T>): Promise<[T, number]> => {
    counter.reset()
    const out = await fn()
    return [out, counter.chunks()]
  }

  // Warm: the schema cache is loaded and the statements are prepared on the connection.
  t.equal((await req('GET', '/items?id=lte.2&order=id')).status, 200)
  t.equal(
    (await req('POST', '/items', { body: { id: 100, n: 1 }, headers: { 'content-type': 'application/json' } })).status,
    201,
  )

  const [read, readTrips] = await trips(() => req('GET', '/items?id=lte.2&order=id'))
  t.same(
    [read.status, JSON.parse(read.body)],
    [
      200,
      [
        { id: 1, n: 10 },
        { id: 2, n: 20 },
      ],
    ],
  )
  t.equal(readTrips, 1, 'a read is one round trip')

  const [other, otherTrips] = await trips(() => req('GET', '/items?select=n&id=eq.3'))
  t.same([other.status, JSON.parse(other.body)], [200, [{ n: 30 }]])
  t.equal(otherTrips, 1, 'a read of a new shape (parsed on first use) is one round trip too')

  const [insert, insertTrips] = await trips(() =>
    req('POST', '/items', { body: { id: 101, n: 2 }, headers: { 'content-type': 'application/json' } }),
  )
  t.equal(insert.status, 201)
  t.equal(insertTrips, 2, 'an insert is two round trips')

  // A value Postgres refuses: the error as before, then the transaction is rolled back.
  const [bad, badTrips] = await trips(() => req('GET', '/items?id=eq.not-a-number'))
  t.equal(bad.status, 400)
  t.match(JSON.parse(bad.body), { code: '22P02' })
  t.equal(badTrips, 2, 'a failed read: its round trip and the rollback')
  const again = await req('GET', '/items?id=eq.not-a-number')
  t.same(
    [again.status, JSON.parse(again.body).code],
    [400, '22P02'],
    'the same failure again (the statement was not left half-prepared)',
  )

  // A singular read of two rows: refused by the check after the read committed.
  const [single, singleTrips] = await trips(() =>
    req('GET', '/items?id=lte.2', { headers: { accept: 'application/vnd.pgrst.object+json' } }),
  )
  t.equal(single.status, 406)
  t.match(JSON.parse(single.body), { code: 'PGRST116' })
  t.equal(singleTrips, 1, 'a refused singular read is still one round trip')

  // A relation the role cannot see at all: PGRST205 (the visibility check), not 42501.
  const hidden = await req('GET', '/hidden')
  t.same([hidden.status, JSON.parse(hidden.body).code], [404, 'PGRST205'])

  // A failed insert (duplicate key): nothing written, connection clean.
  const dup = await req('POST', '/items', { body: { id: 1, n: 99 }, headers: { 'content-type': 'application/json' } })
  t.same([dup.status, JSON.parse(dup.body).code], [409, '23505'])

  const [after, afterTrips] = await trips(() => req('GET', '/items?order=id'))
  t.equal(after.status, 200)
  t.same(
    JSON.parse(after.body),
    [
      { id: 1, n: 10 },
      { id: 2, n: 20 },
      { id: 3, n: 30 },
      { id: 4, n: 40 },
      { id: 5, n: 50 },
      { id: 100, n: 1 },
      { id: 101, n: 2 },
    ],
    'after the failures the connection serves the next request, nothing half-written',
  )
  t.equal(afterTrips, 1)
  const rows = await withClient(
    tt.ownerUrl,
    async (c) => (await c.query('SELECT count(*)::int AS n FROM items')).rows[0].n as number,
  )
  t.equal(rows, 7)
})

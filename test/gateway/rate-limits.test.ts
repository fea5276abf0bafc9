// Request-rate limits of /rest/v1 (a tenant's rest.rate_limits, docs/edge.md), as Kong's
// rate-limiting plugin has them: off by default; per client address, per API key and per
// database, per second and per minute; over one, 429 over_request_rate_limit with
// Retry-After and the IETF RateLimit / RateLimit-Policy fields, and nothing reaches the
// engine; counters in Redis are shared by gateways and outlive one. Real sockets; other
// clients come from 127.0.0.2.
import t from 'tap'
import type { RestRateLimits } from '../../src/tenants/index.js'
import { createTestRedis } from '../helpers/redis.js'
import {
  lookupOf,
  makeTenant,
  request,
  startGateway,
  startUpstream,
  testConfig,
  type TestTenant,
} from '../helpers/gateway.js'

function limited(up: { url: string }, limits?: RestRateLimits): TestTenant {
  return makeTenant(
    'acme',
    { auth: up.url, rest: up.url },
    limits === undefined ? {} : { rest: { rate_limits: limits } },
  )
}

t.test('no limits set: none applied, no RateLimit fields', async (t) => {
  const up = await startUpstream(t)
  const tt = limited(up)
  const gw = await startGateway(t, { tenants: lookupOf(tt) })
  for (let i = 0; i < 30; i++) {
    const r = await request(`${gw.url}/acme/rest/v1/items`, { headers: { apikey: tt.file.keys.public } })
    t.equal(r.status, 200)
    t.equal(r.headers.ratelimit, undefined)
  }
})

t.test('per client address, per minute: the 4th request of a client is 429; another client is served', async (t) => {
  const up = await startUpstream(t)
  const tt = limited(up, { client: { minute: 3 } })
  const gw = await startGateway(t, { tenants: lookupOf(tt) })
  const get = (from = '127.0.0.1') =>
    request(`${gw.url}/acme/rest/v1/items`, { headers: { apikey: tt.file.keys.public }, localAddress: from })
  for (let left = 2; left >= 0; left--) {
    const r = await get()
    t.equal(r.status, 200)
    t.equal(r.headers['ratelimit-policy'], '"client-minute";q=3;w=60')
    t.match(r.headers.ratelimit, new RegExp(`^"client-minute";r=${left};t=\\d+$`))
  }
  const before = up.received.length
  const over = await get()
  t.equal(over.status, 429)
  t.match(over.json(), { code: 'over_request_rate_limit', message: /allows 3 requests per minute per client address/ })
  t.ok(
    Number(over.headers['retry-after']) >= 1 && Number(over.headers['retry-after']) <= 60,
    `Retry-After ${over.headers['retry-after']}`,
  )
  t.match(over.headers.ratelimit, /^"client-minute";r=0;t=\d+$/)
  t.equal(up.received.length, before, 'the refused request never reached the engine')
  t.equal((await get('127.0.0.2')).status, 200, 'another client address has its own count')
  // Auth is not limited by rest.rate_limits.
  const auth = await request(`${gw.url}/acme/auth/v1/settings`, { headers: { apikey: tt.file.keys.public } })
  t.equal(auth.status, 200)
})

t.test('per API key: the public key runs out, the secret key goes on; a body is never read when refused', async (t) => {
  const up = await startUpstream(t)
  const tt = limited(up, { key: { minute: 2 } })
  const gw = await startGateway(t, { tenants: lookupOf(tt) })
  const post = (apikey: string) =>
    request(`${gw.url}/acme/rest/v1/items`, {
      method: 'POST',
      headers: { apikey, 'content-type': 'application/json' },
      body: '{"a":1}',
    })
  t.same([(await post(tt.file.keys.public)).status, (await post(tt.file.keys.public)).status], [200, 200])
  const over = await post(tt.file.keys.public)
  t.equal(over.status, 429)
  t.equal(over.headers.connection, 'close')
  t.match(over.json().message, /per API key/)
  t.equal((await post(tt.file.keys.secret)).status, 200, 'the other key has its own count')
  const viaQuery = await request(`${gw.url}/acme/rest/v1/items?apikey=${tt.file.keys.public}`)
  t.equal(viaQuery.status, 429, 'the key sent as ?apikey= counts as the same key')
})

t.test('per database, per second: a burst is cut, every limit in the fields', async (t) => {
  const up = await startUpstream(t)
  const tt = limited(up, { database: { second: 5, minute: 1000 } })
  const gw = await startGateway(t, { tenants: lookupOf(tt) })
  const answers = await Promise.all(
    Array.from({ length: 30 }, (_, i) =>
      request(`${gw.url}/acme/rest/v1/items`, {
        headers: { apikey: tt.file.keys.public },
        localAddress: `127.0.0.${1 + (i % 5)}`,
      }),
    ),
  )
  const ok = answers.filter((r) => r.status === 200).length
  t.ok(ok >= 5 && ok <= 15, `${ok} of 30 served (5 per second)`)
  const refused = answers.find((r) => r.status === 429)!
  t.ok(refused, 'the rest refused')
  t.equal(refused.headers['ratelimit-policy'], '"database-second";q=5;w=1, "database-minute";q=1000;w=60')
  t.match(refused.json().message, /5 requests per second in all/)
})

t.test('counters in Redis: shared by two gateways, and they outlive a gateway', async (t) => {
  const up = await startUpstream(t)
  const tt = limited(up, { client: { minute: 2 } })
  const { url, prefix } = createTestRedis(t)
  const config = testConfig({ redis: { url, key_prefix: prefix } })
  const a = await startGateway(t, { tenants: lookupOf(tt), config })
  const b = await startGateway(t, { tenants: lookupOf(tt), config })
  const get = (url: string) => request(`${url}/acme/rest/v1/items`, { headers: { apikey: tt.file.keys.public } })
  t.equal((await get(a.url)).status, 200)
  t.equal((await get(b.url)).status, 200)
  t.equal((await get(a.url)).status, 429, 'the third request, whichever gateway takes it')
  await a.app.close()
  await b.app.close()
  const c = await startGateway(t, { tenants: lookupOf(tt), config })
  t.equal((await get(c.url)).status, 429, 'a new gateway process still counts them')
})

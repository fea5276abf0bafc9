// The upstream sockets are shared by every tenant on an engine, over real sockets: each
// tenant's requests in flight are capped (429 too_many_concurrent_requests + Retry-After,
// others go on; one client's share of them: slow-clients.test.ts), a wait for an upstream socket ends with 503 upstream_busy + Retry-After,
// and an engine's 503 reaches the client with a Retry-After.
import t from 'tap'
import type http from 'node:http'
import net from 'node:net'
import { lookupOf, makeTenant, request, startGateway, startUpstream, testConfig } from '../helpers/gateway.js'
import { eventually } from '../helpers/tenant-fixtures.js'

/** An upstream that holds requests to paths containing `/hold` until released. */
async function holdingUpstream(t: Parameters<typeof startUpstream>[0]) {
  const held: http.ServerResponse[] = []
  let arrived: () => void = () => {}
  const up = await startUpstream(t, (req, res) => {
    if (req.url!.includes('/hold')) {
      held.push(res)
      arrived()
      return
    }
    if (req.url!.includes('/unavailable')) {
      res.writeHead(503, { 'content-type': 'application/json' })
      res.end(
        '{"code":"PGRST000","message":"Database connection error. Retrying the connection.","details":null,"hint":null}',
      )
      return
    }
    res.writeHead(200, { 'content-type': 'application/json' })
    res.end('[]')
  })
  const waitHeld = async (n: number): Promise<void> => {
    while (held.length < n)
      await new Promise<void>((resolve) => {
        arrived = resolve
      })
  }
  const release = (): void => {
    for (const r of held.splice(0)) {
      r.writeHead(200, { 'content-type': 'application/json' })
      r.end('[]')
    }
  }
  t.teardown(release)
  return { up, waitHeld, release, held }
}

t.test('each tenant has at most gateway.tenant_max_inflight requests in flight', async (t) => {
  const { up, waitHeld, release } = await holdingUpstream(t)
  const busy = makeTenant('busy', { auth: up.url, rest: up.url })
  const calm = makeTenant('calm', { auth: up.url, rest: up.url })
  const gw = await startGateway(t, {
    tenants: lookupOf(busy, calm),
    config: testConfig({ gateway: { tenant_max_inflight: 2, client_max_inflight_share: 1 } }),
  })
  const get = (tt: typeof busy, path: string) =>
    request(`${gw.url}/${tt.tenant.database}/rest/v1${path}`, { headers: { apikey: tt.file.keys.public } })

  const slow = [get(busy, '/hold'), get(busy, '/hold')]
  await waitHeld(2)
  let r = await get(busy, '/items')
  t.equal(r.status, 429, 'a third request of the same tenant: 429')
  t.equal(r.json().code, 'too_many_concurrent_requests')
  t.match(r.json().message, /already has 2 requests in progress/)
  t.equal(r.headers['retry-after'], '1')
  r = await request(`${gw.url}/busy/auth/v1/settings`, { headers: { apikey: busy.file.keys.public } })
  t.same(
    r.json(),
    {
      code: 429,
      error_code: 'too_many_concurrent_requests',
      msg: 'This database already has 2 requests in progress; retry shortly',
    },
    "GoTrue's shape under /auth/v1",
  )

  r = await get(calm, '/items')
  t.equal(r.status, 200, 'another tenant is not affected')

  release()
  for (const p of slow) t.equal((await p).status, 200)
  r = await get(busy, '/items')
  t.equal(r.status, 200, 'slots come back when responses end')

  // A client that goes away gives its slot back too.
  const gone = [1, 2].map(() => {
    const ac = new AbortController()
    const p = fetch(`${gw.url}/busy/rest/v1/hold`, {
      headers: { apikey: busy.file.keys.public },
      signal: ac.signal,
    }).catch(() => null)
    return { ac, p }
  })
  await waitHeld(2)
  for (const g of gone) {
    g.ac.abort()
    await g.p
  }
  t.ok(
    await eventually(async () => (await get(busy, '/items')).status === 200, 5_000),
    'abandoned requests released their slots',
  )
})

t.test('a wait for an upstream socket ends after gateway.upstream_queue_timeout_ms: 503 upstream_busy', async (t) => {
  const { up, waitHeld, release } = await holdingUpstream(t)
  const acme = makeTenant('acme', { auth: up.url, rest: up.url })
  const gw = await startGateway(t, {
    tenants: lookupOf(acme),
    config: testConfig({ gateway: { upstream_max_sockets: 1, upstream_queue_timeout_ms: 200 } }),
  })
  const holding = request(`${gw.url}/acme/rest/v1/hold`, { headers: { apikey: acme.file.keys.public } })
  await waitHeld(1)
  const r = await request(`${gw.url}/acme/rest/v1/items`, { headers: { apikey: acme.file.keys.public } })
  t.equal(r.status, 503, 'no socket came free: 503 instead of waiting forever')
  t.equal(r.json().code, 'upstream_busy')
  t.equal(r.headers['retry-after'], '1')
  t.equal(
    up.received.filter((x) => x.url.includes('/items')).length,
    0,
    'the queued request never reached the upstream',
  )
  release()
  t.equal((await holding).status, 200)
  t.equal(
    (await request(`${gw.url}/acme/rest/v1/items`, { headers: { apikey: acme.file.keys.public } })).status,
    200,
    'served again once the socket is free',
  )
})

t.test("an engine's 503 without Retry-After gets one", async (t) => {
  const { up } = await holdingUpstream(t)
  const acme = makeTenant('acme', { auth: up.url, rest: up.url })
  const gw = await startGateway(t, { tenants: lookupOf(acme) })
  const r = await request(`${gw.url}/acme/rest/v1/unavailable`, { headers: { apikey: acme.file.keys.public } })
  t.equal(r.status, 503)
  t.equal(r.json().code, 'PGRST000')
  t.equal(r.headers['retry-after'], '1')
})

t.test('a request arriving while the gateway closes: 503 not_ready in our shape, with Retry-After', async (t) => {
  const { up, waitHeld, release } = await holdingUpstream(t)
  const acme = makeTenant('acme', { auth: up.url, rest: up.url })
  const gw = await startGateway(t, { tenants: lookupOf(acme) })
  // A second request on a connection whose first one is still in flight (so close() does
  // not drop it as idle), sent once the gateway is closing.
  const socket = net.connect(gw.port, '127.0.0.1')
  let raw = ''
  socket.setEncoding('utf8')
  socket.on('data', (c: string) => {
    raw += c
  })
  const ended = new Promise<void>((resolve) => socket.on('close', () => resolve()))
  const req = (path: string) =>
    `GET /acme/rest/v1${path} HTTP/1.1\r\nHost: x\r\napikey: ${acme.file.keys.public}\r\n\r\n`
  // Node's server takes a pipelined request at once (its answer waits behind the first one's).
  const secondTaken = new Promise<void>((resolve) => {
    gw.app.server.on('request', (r: http.IncomingMessage) => {
      if (r.url?.endsWith('/items') === true) resolve()
    })
  })
  socket.write(req('/hold'))
  await waitHeld(1)
  const closing = gw.app.close()
  socket.write(req('/items'))
  await secondTaken
  release()
  await ended
  await closing
  const answers = raw.split(/(?=HTTP\/1\.1 )/)
  t.match(answers[0], /^HTTP\/1\.1 200 /, 'the request in flight finished')
  t.match(answers[1], /^HTTP\/1\.1 503 /, 'the next one: 503')
  t.match(answers[1], /retry-after: 1/i)
  t.match(answers[1], /connection: close/i)
  t.match(answers[1], /"code":"not_ready"/)
})

// Slow clients never hold a database's capacity (docs/edge.md): a request body is read up to
// gateway.buffer_body_bytes before the request takes one of the tenant's in-flight slots,
// so uploads that dawdle hold none; a body slower than the minimum rate is cut with 408 and
// nothing reaches the engine; a slot goes back when the engine's answer is complete, not
// when a slow client has read it, and a client that reads nothing is cut after the send
// timeout; one client holds at most its share of a database's slots. Real sockets; other
// clients come from other loopback addresses (127.0.0.2). Each case runs against both
// entries of the gateway (the node:http fast path and fastify's route).
import t from 'tap'
import http from 'node:http'
import net from 'node:net'
import {
  lookupOf,
  makeTenant,
  request,
  startGateway,
  startUpstream,
  testConfig,
  type Response,
} from '../helpers/gateway.js'
import { eventually } from '../helpers/eventually.js'

const ENTRIES = [
  { name: 'fast path', fastPath: true },
  { name: 'fastify route', fastPath: false },
] as const

/** Opens a POST with a declared length and sends `first` of its body; the socket stays open. */
function startUpload(port: number, path: string, apikey: string, length: number, first: Buffer): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ port, host: '127.0.0.1' })
    socket.on('error', reject)
    socket.write(
      [
        `POST ${path} HTTP/1.1`,
        'Host: x',
        `apikey: ${apikey}`,
        'content-type: application/json',
        'connection: close',
        `content-length: ${length}`,
        '',
        '',
      ].join('\r\n'),
    )
    socket.write(first, () => resolve(socket))
  })
}

/** Everything the socket receives until it closes. */
function answerOf(socket: net.Socket): Promise<string> {
  return new Promise((resolve) => {
    let got = ''
    socket.setEncoding('latin1')
    socket.on('data', (c: string) => {
      got += c
    })
    socket.on('close', () => resolve(got))
  })
}

for (const entry of ENTRIES) {
  t.test(
    `${entry.name}: 150 slow uploads from one client hold no slot; other callers of the database get 200`,
    async (t) => {
      const up = await startUpstream(t)
      const tt = makeTenant('demo', { auth: up.url, rest: up.url })
      const gw = await startGateway(t, {
        tenants: lookupOf(tt),
        fastPath: entry.fastPath,
        // Only the buffering is under test here: no idle or rate cut during the test.
        config: testConfig({
          gateway: { tenant_max_inflight: 100, body_idle_timeout_ms: 120_000, min_body_bytes_per_second: 0 },
        }),
      })
      const key = tt.file.keys.public
      const length = 1_000_000
      const head = Buffer.alloc(70 * 1024, 0x20)
      const uploads = await Promise.all(
        Array.from({ length: 150 }, () => startUpload(gw.port, '/demo/rest/v1/notes', key, length, head)),
      )
      t.teardown(() => {
        for (const s of uploads) s.destroy()
      })
      // Every upload is past 64 KiB (where a slot used to be taken); the same client's and
      // others' requests go on being served, on REST and on auth.
      const statuses: number[] = []
      for (let i = 0; i < 20; i++) {
        const from = i % 2 === 0 ? '127.0.0.1' : '127.0.0.2'
        const rest = await request(`${gw.url}/demo/rest/v1/notes?select=id`, {
          headers: { apikey: key },
          localAddress: from,
        })
        const auth = await request(`${gw.url}/demo/auth/v1/token?grant_type=password`, {
          method: 'POST',
          headers: { apikey: key, 'content-type': 'application/json' },
          body: '{"email":"a@b.test","password":"x"}',
          localAddress: from,
        })
        statuses.push(rest.status, auth.status)
      }
      t.same([...new Set(statuses)], [200], 'every other request was served')
      t.notOk(
        up.received.some((r) => r.url.startsWith('/demo/notes') && r.method === 'POST'),
        'no unfinished upload reached the engine',
      )

      // The uploads were only waiting: one that finishes is proxied whole.
      const done = uploads.pop()!
      const answer = answerOf(done)
      done.write(Buffer.alloc(length - head.length, 0x20))
      t.match(await answer.then((a) => a.slice(0, 20)), /^HTTP\/1\.1 200 /)
      const posted = up.received.filter((r) => r.method === 'POST' && r.url.startsWith('/demo/notes'))
      t.equal(posted.length, 1)
      t.equal(posted[0]!.body.length, length, 'the engine got the whole body')
    },
  )

  t.test(`${entry.name}: a body slower than the minimum rate gets 408 and never reaches the engine`, async (t) => {
    const up = await startUpstream(t)
    const tt = makeTenant('demo', { auth: up.url, rest: up.url })
    const gw = await startGateway(t, {
      tenants: lookupOf(tt),
      fastPath: entry.fastPath,
      config: testConfig({
        gateway: { min_body_bytes_per_second: 1000, body_rate_window_ms: 200, body_idle_timeout_ms: 60_000 },
      }),
    })
    const socket = await startUpload(gw.port, '/demo/rest/v1/notes', tt.file.keys.public, 10_000, Buffer.from('['))
    const answer = answerOf(socket)
    // One byte every 20 ms: never idle, but 50 bytes per second.
    const drip = setInterval(() => {
      if (!socket.destroyed) socket.write(' ')
    }, 20)
    t.teardown(() => {
      clearInterval(drip)
      socket.destroy()
    })
    const got = await answer
    clearInterval(drip)
    t.match(got, /^HTTP\/1\.1 408 /)
    t.match(got, /"code":"request_timeout"/)
    t.match(got, /slower than 1000 bytes per second over 200 ms/)
    t.equal(up.received.length, 0, 'nothing reached the engine')
  })

  t.test(
    `${entry.name}: a client that does not read its answer holds no slot once the engine has answered`,
    async (t) => {
      const size = 16 * 1024 * 1024
      let upstreamDone = false
      const up = await startUpstream(t, (_req, res) => {
        res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': String(size) })
        res.end(Buffer.alloc(size, 0x61), () => {
          upstreamDone = true
        })
      })
      const tt = makeTenant('demo', { auth: up.url, rest: up.url })
      const gw = await startGateway(t, {
        tenants: lookupOf(tt),
        fastPath: entry.fastPath,
        config: testConfig({
          gateway: {
            tenant_max_inflight: 1,
            client_max_inflight_share: 1,
            response_buffer_bytes: 32 * 1024 * 1024,
            send_timeout_ms: 60_000,
          },
        }),
      })
      const key = tt.file.keys.public
      const reader = net.connect({ port: gw.port, host: '127.0.0.1' })
      t.teardown(() => reader.destroy())
      reader.pause()
      reader.write(`GET /demo/rest/v1/big HTTP/1.1\r\nHost: x\r\napikey: ${key}\r\nconnection: close\r\n\r\n`)
      const served = await eventually(async () => {
        if (!upstreamDone) return false
        const r = await request(`${gw.url}/demo/rest/v1/other`, { headers: { apikey: key }, localAddress: '127.0.0.2' })
        return r.status === 200
      })
      t.ok(served, 'another client is served while the first still has not read its answer')
      // The slow reader still gets all of it.
      let bytes = 0
      let text = ''
      await new Promise<void>((resolve) => {
        reader.on('data', (c: Buffer) => {
          bytes += c.length
          if (text.length < 200) text += c.toString('latin1')
        })
        reader.on('close', () => resolve())
        reader.resume()
      })
      t.match(text, /^HTTP\/1\.1 200 /)
      t.ok(bytes > size, 'the whole answer arrived')
    },
  )

  t.test(
    `${entry.name}: a client that takes nothing of a large answer is cut after the send timeout; its slot comes back`,
    async (t) => {
      const size = 32 * 1024 * 1024
      let upstreamClosed = false
      const up = await startUpstream(t, (_req, res) => {
        res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': String(size) })
        res.on('close', () => {
          upstreamClosed = true
        })
        res.end(Buffer.alloc(size, 0x62))
      })
      const tt = makeTenant('demo', { auth: up.url, rest: up.url })
      const gw = await startGateway(t, {
        tenants: lookupOf(tt),
        fastPath: entry.fastPath,
        config: testConfig({
          gateway: {
            tenant_max_inflight: 1,
            client_max_inflight_share: 1,
            response_buffer_bytes: 64 * 1024,
            send_timeout_ms: 200,
          },
        }),
      })
      const key = tt.file.keys.public
      const stalled = net.connect({ port: gw.port, host: '127.0.0.1' })
      t.teardown(() => stalled.destroy())
      stalled.pause()
      stalled.write(`GET /demo/rest/v1/huge HTTP/1.1\r\nHost: x\r\napikey: ${key}\r\n\r\n`)
      const served = await eventually(async () => {
        if (!upstreamClosed) return false
        const r = await request(`${gw.url}/demo/rest/v1/other`, { headers: { apikey: key }, localAddress: '127.0.0.2' })
        return r.status === 200
      })
      t.ok(served, 'the stalled client was cut, the upstream request ended and the slot came back')
      let bytes = 0
      await new Promise<void>((resolve) => {
        stalled.on('data', (c: Buffer) => {
          bytes += c.length
        })
        stalled.on('close', () => resolve())
        stalled.on('error', () => resolve())
        stalled.resume()
      })
      t.ok(bytes < size, 'the stalled client did not get the whole answer')
    },
  )

  t.test(`${entry.name}: one client holds at most its share of a database's slots; others are served`, async (t) => {
    const held: http.ServerResponse[] = []
    const up = await startUpstream(t, (req, res) => {
      if (req.url?.includes('hold=1')) {
        held.push(res)
        return
      }
      res.writeHead(200, { 'content-type': 'application/json' })
      res.end('[]')
    })
    const tt = makeTenant('demo', { auth: up.url, rest: up.url })
    const gw = await startGateway(t, {
      tenants: lookupOf(tt),
      fastPath: entry.fastPath,
      config: testConfig({ gateway: { tenant_max_inflight: 8, client_max_inflight_share: 0.25 } }),
    })
    const pk = { apikey: tt.file.keys.public }
    const waiting: Array<Promise<Response>> = []
    for (let i = 0; i < 2; i++) waiting.push(request(`${gw.url}/demo/rest/v1/notes?hold=1`, { headers: pk }))
    t.ok(await eventually(async () => held.length === 2), 'the engine holds two requests of the first client')

    const third = await request(`${gw.url}/demo/rest/v1/notes`, { headers: pk })
    t.equal(third.status, 429, 'the first client is over its share (2 of 8)')
    t.equal(third.json().code, 'client_too_many_concurrent_requests')
    t.equal(third.headers['retry-after'], '1')
    t.match(third.json().message, /already has 2 requests/)

    const other = await request(`${gw.url}/demo/rest/v1/notes`, { headers: pk, localAddress: '127.0.0.2' })
    t.equal(other.status, 200, 'another client of the same database is served')
    const backend = await request(`${gw.url}/demo/rest/v1/notes`, { headers: { apikey: tt.file.keys.secret } })
    t.equal(backend.status, 200, 'the same address with the secret key is another client')

    for (const res of held.splice(0)) {
      res.writeHead(200, { 'content-type': 'application/json' })
      res.end('[]')
    }
    t.same(
      (await Promise.all(waiting)).map((r) => r.status),
      [200, 200],
    )
    const again = await request(`${gw.url}/demo/rest/v1/notes`, { headers: pk })
    t.equal(again.status, 200, 'its slots came back')
  })
}

// Request bodies at the gateway, over real sockets: bodies over the REST limit (the
// gateway's, or the tenant's own) and over the small auth limit are refused with 413
// payload_too_large naming the limit, declared or chunked, and nothing is written (a real
// REST engine on real Postgres behind it: the table has no new row); a body that stalls is
// cut with 408 and never holds an upstream socket, so one tenant's slow uploads do not
// stall another tenant.
import t from 'tap'
import http from 'node:http'
import net from 'node:net'
import type { AddressInfo } from 'node:net'
import { createWriteFixture } from '../helpers/rest-writes.js'
import {
  lookupOf,
  makeTenant,
  request,
  startGateway,
  startUpstream,
  testConfig,
  type TestTenant,
} from '../helpers/gateway.js'

interface Teardown {
  teardown(fn: () => unknown): void
}

/** A REST engine on real Postgres, listening, behind a gateway. */
async function restStack(tap: Teardown, over: { tenantMaxBody?: number; gateway?: Record<string, unknown> } = {}) {
  const fx = await createWriteFixture(tap)
  await fx.app.listen({ port: 0, host: '127.0.0.1' })
  const engine = `http://127.0.0.1:${(fx.app.server.address() as AddressInfo).port}`
  const tenant = {
    ...fx.tenant,
    upstreams: { ...fx.tenant.upstreams, rest: `${engine}/${fx.database}` },
    rest: { ...fx.tenant.rest, max_body_bytes: over.tenantMaxBody ?? null },
  }
  const tt: TestTenant = { file: fx.t.file, tenant }
  const gw = await startGateway(tap, { tenants: lookupOf(tt), config: testConfig({ gateway: over.gateway ?? {} }) })
  const count = async (): Promise<number> => Number((await fx.ownerSql('SELECT count(*) AS n FROM items'))[0].n)
  return { fx, gw, rest: `${gw.url}/${fx.database}/rest/v1`, key: fx.t.file.keys.public, count }
}

/** A POST whose body goes out in chunks (Transfer-Encoding: chunked); resolves with the answer. */
function chunkedPost(
  url: string,
  headers: Record<string, string>,
  chunks: Buffer[],
): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: string }> {
  return new Promise((resolve, reject) => {
    const u = new URL(url)
    const req = http.request(
      { host: u.hostname, port: u.port, path: u.pathname + u.search, method: 'POST', headers, agent: false },
      (res) => {
        let b = ''
        res.setEncoding('utf8')
        res.on('data', (c: string) => {
          b += c
        })
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: b }))
      },
    )
    // The gateway answers before the whole body is sent and then drops the rest: a write
    // after that may fail, the answer has arrived all the same.
    req.on('error', (err) => {
      if (!req.writableEnded) reject(err)
    })
    const write = (i: number): void => {
      if (i === chunks.length) {
        req.end()
        return
      }
      if (req.destroyed) return
      if (req.write(chunks[i]!)) setImmediate(() => write(i + 1))
      else req.once('drain', () => write(i + 1))
    }
    write(0)
  })
}

/**
 * A client that sends the headers and the first bytes of a body announced longer, then
 * stops. Resolves with the raw answer once the gateway closes the connection.
 */
function stalledUpload(
  port: number,
  path: string,
  headers: Record<string, string>,
  announced: number,
  sent: string,
): { answer: Promise<string>; socket: net.Socket } {
  const socket = net.connect(port, '127.0.0.1')
  const head = [
    `POST ${path} HTTP/1.1`,
    'Host: x',
    `Content-Length: ${announced}`,
    ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`),
    '',
    '',
  ].join('\r\n')
  socket.write(head + sent)
  const answer = new Promise<string>((resolve) => {
    let got = ''
    socket.setEncoding('utf8')
    socket.on('data', (c: string) => {
      got += c
    })
    socket.on('close', () => resolve(got))
    socket.on('error', () => {})
  })
  return { answer, socket }
}

t.test('REST bodies over the limit: 413 naming it, declared or chunked, nothing written', async (t) => {
  const s = await restStack(t)
  const headers = { apikey: s.key, 'content-type': 'application/json' }
  const big = JSON.stringify({ name: 'x'.repeat(8 * 1024 * 1024) })

  const r = await request(`${s.rest}/items`, { method: 'POST', headers, body: big })
  t.equal(r.status, 413, '8 MiB with Content-Length: 413, not 502')
  t.equal(r.json().code, 'payload_too_large')
  t.match(r.json().message, /limit of 1048576 bytes/, 'the message names the limit')
  t.equal(r.headers['x-gatehouse-error-code'], 'payload_too_large')
  t.equal(r.headers.connection, 'close')
  t.equal(await s.count(), 0, 'nothing written')

  const piece = Buffer.from('"' + 'y'.repeat(64 * 1024 - 2) + '"')
  const chunks = [Buffer.from('{"name":'), ...Array.from({ length: 32 }, () => piece), Buffer.from('}')]
  const c = await chunkedPost(`${s.rest}/items`, headers, chunks)
  t.equal(c.status, 413, '2 MiB chunked: 413')
  t.equal(JSON.parse(c.body).code, 'payload_too_large')
  t.equal(await s.count(), 0, 'nothing written')

  // A body within the limit, chunked, is written once.
  const ok = await chunkedPost(`${s.rest}/items`, { ...headers, prefer: 'return=minimal' }, [
    Buffer.from('{"name":'),
    Buffer.from('"small"}'),
  ])
  t.equal(ok.status, 201, ok.body)
  t.equal(await s.count(), 1, 'the small chunked body was written')
})

/**
 * Sends a POST with the whole of `body` (Content-Length declared) over a raw socket, as a
 * client that writes its body before it reads does. Resolves with the bytes of the body the
 * socket took, the first write error (a reset connection) and the answer.
 */
function fullUpload(
  port: number,
  path: string,
  headers: Record<string, string>,
  body: Buffer,
): Promise<{ written: number; error: string | null; answer: string }> {
  return new Promise((resolve) => {
    const socket = net.connect({ port, host: '127.0.0.1', allowHalfOpen: true })
    let written = 0
    let error: string | null = null
    let answer = ''
    const head = [
      `POST ${path} HTTP/1.1`,
      'Host: x',
      `Content-Length: ${body.length}`,
      ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`),
      '',
      '',
    ].join('\r\n')
    socket.setEncoding('utf8')
    socket.on('data', (c: string) => {
      answer += c
    })
    socket.on('error', (err: NodeJS.ErrnoException) => {
      error ??= err.code ?? err.message
    })
    socket.on('close', () => resolve({ written, error, answer }))
    socket.write(head)
    const piece = 64 * 1024
    const pump = (): void => {
      while (written < body.length && !socket.destroyed) {
        const chunk = body.subarray(written, written + piece)
        written += chunk.length
        if (!socket.write(chunk)) {
          socket.once('drain', pump)
          return
        }
      }
      if (written >= body.length) socket.end()
    }
    pump()
  })
}

t.test(
  'a refused body is read and dropped until the client has sent it, so the client reads the 413 instead of a reset',
  async (t) => {
    const s = await restStack(t)
    const port = Number(new URL(s.gw.url).port)
    // Larger than the kernel's socket buffers: most of it is still unsent when the answer comes.
    const big = Buffer.from(JSON.stringify({ name: 'x'.repeat(8 * 1024 * 1024) }))
    const r = await fullUpload(
      port,
      `/${s.fx.database}/rest/v1/items`,
      { apikey: s.key, 'content-type': 'application/json' },
      big,
    )
    t.equal(r.error, null, 'no write of the body failed (the connection was not reset under the client)')
    t.equal(r.written, big.length, 'the whole body was taken')
    t.match(r.answer, /^HTTP\/1\.1 413 /, 'the answer is 413')
    t.match(r.answer, /"code":"payload_too_large"/)
    t.equal(await s.count(), 0, 'nothing written')
  },
)

t.test(
  'Expect: 100-continue: a declared body over the limit gets 413 without 100 Continue; one within it gets 100 Continue and is written',
  async (t) => {
    const s = await restStack(t)
    const port = Number(new URL(s.gw.url).port)
    const path = `/${s.fx.database}/rest/v1/items`
    // As curl sends a large upload: headers first, the body only after 100 Continue.
    const ask = (length: number, body: string | null): Promise<string> =>
      new Promise((resolve) => {
        const socket = net.connect(port, '127.0.0.1')
        let got = ''
        socket.setEncoding('utf8')
        socket.on('data', (c: string) => {
          got += c
          if (body !== null && got.startsWith('HTTP/1.1 100 ')) {
            socket.write(body)
            body = null
          }
        })
        socket.on('error', () => {})
        socket.on('close', () => resolve(got))
        socket.write(
          [
            `POST ${path} HTTP/1.1`,
            'Host: x',
            `apikey: ${s.key}`,
            'content-type: application/json',
            'connection: close',
            'expect: 100-continue',
            `content-length: ${length}`,
            '',
            '',
          ].join('\r\n'),
        )
      })
    const refused = await ask(8 * 1024 * 1024, null)
    t.match(refused, /^HTTP\/1\.1 413 /, 'the first answer is the 413, no 100 Continue before it')
    t.match(refused, /"code":"payload_too_large"/)
    const small = '{"name":"continued"}'
    const ok = await ask(small.length, small)
    t.match(ok, /^HTTP\/1\.1 100 Continue\r\n\r\nHTTP\/1\.1 201 /, 'a body within the limit is asked for, then written')
    t.equal(await s.count(), 1, 'only the small body was written')
  },
)

t.test("a tenant's rest.max_body_bytes is its limit", async (t) => {
  const s = await restStack(t, { tenantMaxBody: 2048 })
  const r = await request(`${s.rest}/items`, {
    method: 'POST',
    headers: { apikey: s.key, 'content-type': 'application/json' },
    body: JSON.stringify({ name: 'z'.repeat(3000) }),
  })
  t.equal(r.status, 413)
  t.match(r.json().message, /limit of 2048 bytes/)
  t.equal(await s.count(), 0)
})

t.test("auth bodies over gateway.auth_max_body_bytes: 413 in GoTrue's shape, nothing reaches the engine", async (t) => {
  const up = await startUpstream(t)
  const tt = makeTenant('acme', { auth: up.url, rest: up.url })
  const gw = await startGateway(t, {
    tenants: lookupOf(tt),
    config: testConfig({ gateway: { auth_max_body_bytes: 4096 } }),
  })
  const body = JSON.stringify({ email: 'a@example.com', password: 'pw-123456', data: { bio: 'b'.repeat(5000) } })
  const headers = { apikey: tt.file.keys.public, 'content-type': 'application/json' }
  let r = await request(`${gw.url}/acme/auth/v1/signup`, { method: 'POST', headers, body })
  t.equal(r.status, 413)
  t.same(r.json(), {
    code: 413,
    error_code: 'payload_too_large',
    msg: 'The request body is larger than the limit of 4096 bytes',
  })
  t.equal(r.headers['x-sb-error-code'], 'payload_too_large')
  r = await request(`${gw.url}/acme/auth/v1/signup`, {
    method: 'POST',
    headers: { ...headers, 'x-supabase-api-version': '2024-01-01' },
    body,
  })
  t.same(
    r.json(),
    { code: 'payload_too_large', message: 'The request body is larger than the limit of 4096 bytes' },
    'the 2024-01-01 shape when asked for',
  )
  t.equal(up.received.length, 0, 'the auth engine saw nothing')

  r = await request(`${gw.url}/acme/auth/v1/signup`, {
    method: 'POST',
    headers,
    body: JSON.stringify({ email: 'a@example.com', password: 'pw-123456' }),
  })
  t.equal(r.status, 200, 'a small body passes')
  t.equal(up.received.length, 1)
})

t.test('a stalled body is cut with 408 and never holds an upstream socket; other tenants go on', async (t) => {
  // One upstream socket per engine origin, shared by both tenants: a proxy that held it
  // while a client dawdles would stall the other tenant.
  const up = await startUpstream(t)
  const slow = makeTenant('slow', { auth: up.url, rest: up.url })
  const other = makeTenant('other', { auth: up.url, rest: up.url })
  const gw = await startGateway(t, {
    tenants: lookupOf(slow, other),
    config: testConfig({
      gateway: { body_idle_timeout_ms: 400, upstream_max_sockets: 1, upstream_queue_timeout_ms: 60_000 },
    }),
  })
  const stalled = [1, 2, 3].map(() =>
    stalledUpload(
      gw.port,
      '/slow/rest/v1/items',
      { apikey: slow.file.keys.public, 'content-type': 'application/json' },
      1000,
      '{"name":',
    ),
  )

  // While they dawdle, the other tenant is answered through the one upstream socket.
  const ac = AbortSignal.timeout(20_000)
  const r = await fetch(`${gw.url}/other/rest/v1/items`, { headers: { apikey: other.file.keys.public }, signal: ac })
  t.equal(r.status, 200, 'the other tenant is answered while three uploads stall')

  for (const s of stalled) {
    const raw = await s.answer
    t.match(raw, /^HTTP\/1\.1 408 /, 'the stalled upload is cut with 408')
    t.match(raw, /"code":"request_timeout"/)
    t.match(raw, /no part of the body arrived for 400 ms/)
    t.match(raw, /connection: close/i)
  }
  t.notOk(
    up.received.some((x) => x.url.startsWith('/slow/')),
    'nothing of the stalled uploads reached the upstream',
  )
})

t.test('a body that keeps dripping is cut once gateway.body_timeout_ms is over', async (t) => {
  const up = await startUpstream(t)
  const tt = makeTenant('acme', { auth: up.url, rest: up.url })
  const gw = await startGateway(t, {
    tenants: lookupOf(tt),
    config: testConfig({ gateway: { body_idle_timeout_ms: 10_000, body_timeout_ms: 300 } }),
  })
  const s = stalledUpload(gw.port, '/acme/rest/v1/items', { apikey: tt.file.keys.public }, 1000, 'a')
  const drip = setInterval(() => {
    if (!s.socket.destroyed) s.socket.write('b')
  }, 50)
  t.teardown(() => clearInterval(drip))
  const raw = await s.answer
  clearInterval(drip)
  t.match(raw, /^HTTP\/1\.1 408 /)
  t.match(raw, /took longer than 300 ms/)
  t.equal(up.received.length, 0)
})

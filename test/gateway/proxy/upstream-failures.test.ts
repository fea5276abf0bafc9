// Upstream failures and streaming, over real sockets. The scripted upstreams here (one
// that destroys the socket, one that never answers, one that dies mid-body) are fakes for
// faults we cannot otherwise cause on demand; a refused connection is real (a closed port).
import t from 'tap'
import http from 'node:http'
import net from 'node:net'
import type { AddressInfo } from 'node:net'
import { createHash, randomBytes } from 'node:crypto'
import { pino } from 'pino'
import { makeTenant, lookupOf, startUpstream, startGateway, request, testConfig } from '../../helpers/gateway.js'

/** A port that was listening and is closed now: connections are refused (a real fault). */
async function closedPort(): Promise<number> {
  const s = net.createServer()
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve))
  const { port } = s.address() as AddressInfo
  await new Promise<void>((resolve) => s.close(() => resolve()))
  return port
}

t.test('503 when the upstream refuses, 502 when it resets, 504 when it is too slow', async (t) => {
  // Fake: accepts, reads the request, destroys the socket (a crashed upstream).
  const reset = await startUpstream(t, (req) => {
    req.socket.destroy()
  })
  // Fake: accepts and never answers (a hung upstream). Held responses are ended on teardown.
  const held: http.ServerResponse[] = []
  const hung = await startUpstream(t, (_req, res) => {
    held.push(res)
  })
  t.teardown(() => {
    for (const r of held) r.destroy()
  })
  const port = await closedPort()

  const refusedT = makeTenant('refused', { auth: `http://127.0.0.1:${port}`, rest: `http://127.0.0.1:${port}` })
  const resetT = makeTenant('reset', { auth: reset.url, rest: reset.url })
  const hungT = makeTenant('hung', { auth: hung.url, rest: hung.url })
  const gw = await startGateway(t, {
    tenants: lookupOf(refusedT, resetT, hungT),
    config: testConfig({ gateway: { upstream_timeout_ms: 300, upstream_connect_timeout_ms: 300 } }),
  })

  // Refused (nothing listens: an engine restarting): 503 with Retry-After, which clients retry.
  const refused = await request(`${gw.url}/refused/rest/v1/todos`, { headers: { apikey: refusedT.file.keys.public } })
  t.equal(refused.status, 503, 'refused: 503')
  t.equal(refused.headers['retry-after'], '1', 'refused: Retry-After 1')
  t.equal(refused.json().code, 'upstream_refused')
  t.equal(refused.headers['x-gatehouse-error-code'], 'upstream_refused')
  t.notMatch(refused.body, /ECONN|socket|127\.0\.0\.1/, 'no internals leak')
  // Reset after the request was sent: 502, no Retry-After (a retry may not be safe).
  const r0 = await request(`${gw.url}/reset/rest/v1/todos`, { headers: { apikey: resetT.file.keys.public } })
  t.equal(r0.status, 502, 'reset: 502')
  t.equal(r0.headers['retry-after'], undefined, 'reset: no Retry-After')
  for (const r of [refused, r0]) {
    const body = r.json()
    t.equal(body.message, 'unexpected failure', 'no cause in the body')
    t.equal(body.request_id, r.headers['x-request-id'], 'the request id is in the body')
    t.match(body.details, r.headers['x-request-id'] as string)
  }
  t.equal(r0.json().code, 'upstream_unavailable')
  t.notMatch(r0.body, /ECONN|socket|127\.0\.0\.1/, 'no internals leak')
  t.equal(r0.headers['x-gatehouse-error-code'], 'upstream_unavailable')
  const r = await request(`${gw.url}/hung/auth/v1/settings`, { headers: { apikey: hungT.file.keys.public } })
  t.equal(r.status, 504, 'a silent upstream: 504')
  t.equal(r.json().code, 'upstream_timeout')
  t.equal(r.json().message, 'unexpected failure')

  const m = await request(`${gw.adminUrl}/metrics`)
  t.match(
    m.body,
    /gatehouse_gateway_upstream_errors_total\{tenant="refused",service="rest",code="upstream_refused"\} 1/,
  )
  t.match(m.body, /gatehouse_gateway_upstream_errors_total\{tenant="hung",service="auth",code="upstream_timeout"\} 1/)
  t.match(m.body, /gatehouse_requests_total\{part="gateway",tenant="hung",status="504"\} 1/)

  const health = await request(`${gw.adminUrl}/healthz`)
  t.equal(health.status, 200, 'the gateway is alive after all that')
})

t.test('an engine that is down is logged once per tenant and engine, not per request', async (t) => {
  const restPort = await closedPort()
  let authPort = await closedPort()
  while (authPort === restPort) authPort = await closedPort()
  const down = makeTenant('down', { auth: `http://127.0.0.1:${authPort}`, rest: `http://127.0.0.1:${restPort}` })
  const lines: Array<{ level: number; msg: string; code?: string }> = []
  const logger = pino({ level: 'debug' }, { write: (l: string) => void lines.push(JSON.parse(l)) })
  let now = 1_000_000
  const gw = await startGateway(t, { tenants: lookupOf(down), logger, now: () => now })
  const get = async (service: string) =>
    (await request(`${gw.url}/down/${service}`, { headers: { apikey: down.file.keys.public } })).status
  for (let i = 0; i < 10; i++) t.equal(await get('rest/v1/todos'), 503)
  t.equal(await get('auth/v1/settings'), 503)
  const failed = () => lines.filter((l) => l.level >= 50 && l.msg === 'upstream request failed').length
  t.equal(failed(), 2, 'one error line for the REST engine and one for the auth engine, for 11 failed requests')
  t.equal(lines.filter((l) => l.msg === 'upstream request failed (logged already)').length, 9, 'the others at debug')
  now += 31_000
  t.equal(await get('rest/v1/todos'), 503)
  t.equal(failed(), 3, 'after 30 s the outage is logged again')
})

t.test('a response cut mid-body is cut for the client too', async (t) => {
  // Fake: sends headers and half the declared body, then dies.
  const dying = await startUpstream(t, (_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': '1000' })
    res.write('[' + '1,'.repeat(100))
    setImmediate(() => res.socket?.destroy())
  })
  const tt = makeTenant('acme', { auth: dying.url, rest: dying.url })
  const gw = await startGateway(t, { tenants: lookupOf(tt) })
  await t.rejects(
    request(`${gw.url}/acme/rest/v1/todos`, { headers: { apikey: tt.file.keys.public } }),
    'the client sees an aborted response, not a complete one',
  )
  const health = await request(`${gw.adminUrl}/healthz`)
  t.equal(health.status, 200)
})

t.test('large bodies: an upload within the limit arrives whole, a download streams', async (t) => {
  const size = 24 * 1024 * 1024
  const payload = randomBytes(size)
  const digest = createHash('sha256').update(payload).digest('hex')
  // Upstream that hashes the upload as it streams and answers with a large download.
  const up = http.createServer((req, res) => {
    const h = createHash('sha256')
    let n = 0
    req.on('data', (c: Buffer) => {
      h.update(c)
      n += c.length
    })
    req.on('end', () => {
      if (req.url?.includes('download')) {
        res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': String(size) })
        let sent = 0
        const chunk = 1024 * 1024
        const write = (): void => {
          while (sent < size) {
            const part = payload.subarray(sent, sent + chunk)
            sent += part.length
            if (!res.write(part)) {
              res.once('drain', write)
              return
            }
          }
          res.end()
        }
        write()
        return
      }
      res.writeHead(200, { 'content-type': 'application/json' })
      res.end(JSON.stringify({ bytes: n, sha256: h.digest('hex') }))
    })
  })
  await new Promise<void>((resolve) => up.listen(0, '127.0.0.1', resolve))
  t.teardown(
    () =>
      new Promise<void>((resolve) => {
        up.closeAllConnections()
        up.close(() => resolve())
      }),
  )
  const base = `http://127.0.0.1:${(up.address() as AddressInfo).port}`
  const tt = makeTenant('acme', { auth: base, rest: base })
  const gw = await startGateway(t, {
    tenants: lookupOf(tt),
    config: testConfig({ gateway: { rest_max_body_bytes: size } }),
  })

  let r = await request(`${gw.url}/acme/rest/v1/blobs`, {
    method: 'POST',
    headers: {
      apikey: tt.file.keys.secret,
      'content-type': 'application/octet-stream',
      'content-length': String(size),
    },
    body: payload,
  })
  t.equal(r.status, 200)
  t.same(r.json(), { bytes: size, sha256: digest }, 'an upload of exactly gateway.rest_max_body_bytes arrives intact')

  // Chunked upload with no content type at all.
  const chunked = await new Promise<{ status: number; body: string }>((resolve, reject) => {
    const req = http.request(
      {
        host: '127.0.0.1',
        port: gw.port,
        path: '/acme/rest/v1/blobs',
        method: 'POST',
        headers: { apikey: tt.file.keys.secret },
      },
      (res) => {
        let b = ''
        res.setEncoding('utf8')
        res.on('data', (c: string) => {
          b += c
        })
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: b }))
      },
    )
    req.on('error', reject)
    for (let i = 0; i < 4; i++) req.write(payload.subarray(i * 1024 * 1024, (i + 1) * 1024 * 1024))
    req.end()
  })
  t.equal(chunked.status, 200)
  t.same(JSON.parse(chunked.body), {
    bytes: 4 * 1024 * 1024,
    sha256: createHash('sha256')
      .update(payload.subarray(0, 4 * 1024 * 1024))
      .digest('hex'),
  })

  // Download: count bytes as they arrive, and see the first bytes before the upstream finished.
  r = await new Promise((resolve, reject) => {
    http
      .get(
        { host: '127.0.0.1', port: gw.port, path: '/acme/rest/v1/download', headers: { apikey: tt.file.keys.secret } },
        (res) => {
          const h = createHash('sha256')
          let n = 0
          res.on('data', (c: Buffer) => {
            h.update(c)
            n += c.length
          })
          res.on('end', () => {
            const body = JSON.stringify({ n, sha: h.digest('hex') })
            resolve({ status: res.statusCode ?? 0, headers: res.headers, body, json: () => JSON.parse(body) })
          })
        },
      )
      .on('error', reject)
  })
  t.equal(r.status, 200)
  t.same(r.json(), { n: size, sha: digest }, 'download arrives intact')
  t.equal(r.headers['content-length'], String(size), 'length passed through (streamed, not re-chunked)')
})

t.test('a body is forwarded whatever the method; a request without one reaches the upstream without one', async (t) => {
  // The proxy ends a body-less upstream request at once instead of piping the empty client
  // request: which requests have a body is read from the client's own headers.
  const up = await startUpstream(t)
  const tt = makeTenant('acme', { auth: up.url, rest: up.url })
  // One upstream socket: whatever the upstream reads arrives on one connection, in order.
  const gw = await startGateway(t, {
    tenants: lookupOf(tt),
    config: testConfig({ gateway: { upstream_max_sockets: 1 } }),
  })
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 })
  t.teardown(() => agent.destroy())
  const key = tt.file.keys.secret
  for (const method of ['GET', 'HEAD', 'DELETE', 'POST', 'PATCH']) {
    // On one kept-alive connection: a request without a body must not hold or poison the next.
    const plain = await request(`${gw.url}/acme/rest/v1/items?id=eq.1`, { method, agent, headers: { apikey: key } })
    t.equal(plain.status, 200, `${method} without a body answered`)
    const got = up.last()
    t.equal(got.method, method)
    t.equal(got.body.length, 0, `${method} without a body: none upstream`)
    t.equal(got.headers['transfer-encoding'], undefined, `${method} without a body: not sent chunked`)
  }
  for (const method of ['GET', 'DELETE', 'POST', 'PATCH']) {
    const payload = JSON.stringify({ method, note: 'x'.repeat(200) })
    const withLength = await request(`${gw.url}/acme/rest/v1/items`, {
      method,
      agent,
      body: payload,
      headers: {
        apikey: key,
        'content-type': 'application/json',
        'content-length': String(Buffer.byteLength(payload)),
      },
    })
    t.equal(withLength.status, 200)
    t.equal(up.last().body.toString(), payload, `${method} with Content-Length: the body arrives`)
    // Chunked (no Content-Length): the gateway must still stream it through, framed (a GET
    // body sent bare would be read by the upstream as the next request on the connection).
    const before = up.received.length
    const chunked = await request(`${gw.url}/acme/rest/v1/items`, {
      method,
      agent,
      body: payload,
      headers: { apikey: key, 'content-type': 'application/json', 'transfer-encoding': 'chunked' },
    })
    if (method === 'DELETE') {
      // A chunked DELETE body could be read as `Content-Length: 0` by a proxy on the way: refused before anything is sent.
      t.equal(chunked.status, 411, 'a chunked DELETE body: 411')
      t.equal(chunked.json().code, 'length_required')
      t.equal(up.received.length, before, 'nothing reached the upstream')
      continue
    }
    t.equal(chunked.status, 200)
    t.equal(up.received.length, before + 1, `${method} chunked: one request upstream, no smuggled second one`)
    t.equal(up.last().body.toString(), payload, `${method} chunked: the body arrives`)
  }
  // The smuggling shape in full: a chunked GET whose body is itself a request.
  const inner = 'GET /acme/secret HTTP/1.1\r\nHost: x\r\n\r\n'
  const before = up.received.length
  const r = await request(`${gw.url}/acme/rest/v1/items`, {
    method: 'GET',
    agent,
    body: inner,
    headers: { apikey: key, 'transfer-encoding': 'chunked' },
  })
  t.equal(r.status, 200)
  // A request smuggled in that body would be the next one the upstream reads on the one
  // socket: a follow-up request comes after it, so once the follow-up is answered everything
  // the upstream read is in its list (no waiting for time to pass).
  const after = await request(`${gw.url}/acme/rest/v1/items?after=1`, { agent, headers: { apikey: key } })
  t.equal(after.status, 200)
  t.same(
    up.received.slice(before).map((x) => x.url),
    ['/acme/items?limit=1000', '/acme/items?after=1&limit=1000'],
    'the body stayed a body: the follow-up came next',
  )
  t.notOk(
    up.received.some((x) => x.url === '/acme/secret'),
    'no request was smuggled to the upstream',
  )
})

t.test('downloads stream; uploads reach the upstream only whole', async (t) => {
  // The upstream answers with a first chunk and holds the rest until the client has seen
  // it (a buffering proxy would deadlock here). An upload is read whole by the gateway
  // first (its limits apply before proxying): the upstream's first chunk is all of it.
  let release: () => void = () => {}
  let firstUploadChunk: (v: string) => void = () => {}
  const sawUpload = new Promise<string>((resolve) => {
    firstUploadChunk = resolve
  })
  const up = http.createServer((req, res) => {
    if (req.method === 'POST') {
      req.once('data', (c: Buffer) => firstUploadChunk(c.toString()))
      req.on('end', () => {
        res.writeHead(200)
        res.end('done')
      })
      req.resume()
      return
    }
    res.writeHead(200, { 'content-type': 'text/plain' })
    res.write('first;')
    release = () => res.end('rest')
  })
  await new Promise<void>((resolve) => up.listen(0, '127.0.0.1', resolve))
  t.teardown(
    () =>
      new Promise<void>((resolve) => {
        up.closeAllConnections()
        up.close(() => resolve())
      }),
  )
  const base = `http://127.0.0.1:${(up.address() as AddressInfo).port}`
  const tt = makeTenant('acme', { auth: base, rest: base })
  const gw = await startGateway(t, { tenants: lookupOf(tt) })

  const body = await new Promise<string>((resolve, reject) => {
    http
      .get(
        { host: '127.0.0.1', port: gw.port, path: '/acme/rest/v1/feed', headers: { apikey: tt.file.keys.public } },
        (res) => {
          let got = ''
          res.setEncoding('utf8')
          res.on('data', (c: string) => {
            got += c
            if (got === 'first;') release()
          })
          res.on('end', () => resolve(got))
        },
      )
      .on('error', reject)
  })
  t.equal(body, 'first;rest', 'the client got the first chunk while the upstream was still holding the rest')

  const upload = http.request({
    host: '127.0.0.1',
    port: gw.port,
    path: '/acme/rest/v1/feed',
    method: 'POST',
    headers: { apikey: tt.file.keys.public, 'content-type': 'text/plain' },
  })
  const answered = new Promise<number>((resolve, reject) => {
    upload.on('response', (res) => {
      res.resume()
      resolve(res.statusCode ?? 0)
    })
    upload.on('error', reject)
  })
  upload.write('chunk-one')
  await new Promise((resolve) => setImmediate(resolve))
  upload.end('chunk-two')
  t.equal(await sawUpload, 'chunk-onechunk-two', 'the upstream got the upload in one piece, once it was complete')
  t.equal(await answered, 200)
})

t.test('the refusal rewriter hook: only upstream errors with a JSON body, bounded', async (t) => {
  const up = await startUpstream(t, (req, res) => {
    if (req.url!.startsWith('/acme/denied')) {
      res.writeHead(403, { 'content-type': 'application/json; charset=utf-8' })
      res.end(
        JSON.stringify({ code: '42501', message: 'permission denied for table denied', details: null, hint: null }),
      )
    } else if (req.url!.startsWith('/acme/hidden') || req.url!.startsWith('/acme/anon-only')) {
      // PostgREST's answer to anon for a missing privilege: 401 with a Bearer challenge.
      res.writeHead(401, { 'content-type': 'application/json; charset=utf-8', 'www-authenticate': 'Bearer' })
      res.end(
        JSON.stringify({
          code: '42501',
          message: `permission denied for table ${req.url!.slice(6).split('?')[0]!}`,
          details: null,
          hint: null,
        }),
      )
    } else if (req.url!.startsWith('/acme/huge')) {
      res.writeHead(400, { 'content-type': 'application/json' })
      res.end(JSON.stringify({ code: 'PGRST100', message: 'x'.repeat(4000) }))
    } else if (req.url!.startsWith('/acme/text')) {
      res.writeHead(500, { 'content-type': 'text/plain' })
      res.end('plain failure')
    } else {
      res.writeHead(200, { 'content-type': 'application/json' })
      res.end('[{"id":1}]')
    }
  })
  const tt = makeTenant('acme', { auth: up.url, rest: up.url })
  const seen: Array<{ status: number; path: string; body: unknown; kind: string }> = []
  const gw = await startGateway(t, {
    tenants: lookupOf(tt),
    config: testConfig({ gateway: { max_error_body_bytes: 1024 } }),
    rewriteError: (ctx) => {
      seen.push({ status: ctx.status, path: ctx.path, body: ctx.body, kind: ctx.caller.kind })
      if (ctx.path === '/hidden')
        return { status: 404, body: { code: 'unknown_table', message: 'no table hidden', details: null, hint: null } }
      if (ctx.path === '/anon-only')
        return { body: { code: 'permission_denied', message: 'sign in', details: null, hint: null } }
      if ((ctx.body as { code?: string }).code === '42501') {
        return {
          status: 403,
          body: {
            code: 'no_table_grant',
            message: 'The role has no grant on table denied',
            details: null,
            hint: 'GRANT SELECT',
          },
          headers: { 'x-gatehouse-error-code': 'no_table_grant' },
        }
      }
      return null
    },
  })
  const h = { apikey: tt.file.keys.public }

  let r = await request(`${gw.url}/acme/rest/v1/denied`, { headers: h })
  t.equal(r.status, 403)
  t.same(r.json(), {
    code: 'no_table_grant',
    message: 'The role has no grant on table denied',
    details: null,
    hint: 'GRANT SELECT',
  })
  t.equal(r.headers['x-gatehouse-error-code'], 'no_table_grant')
  t.equal(r.headers['content-length'], String(Buffer.byteLength(r.body)))
  t.same(seen[0], {
    status: 403,
    path: '/denied',
    body: { code: '42501', message: 'permission denied for table denied', details: null, hint: null },
    kind: 'anon',
  })

  // A 401 rewritten to another status loses its challenge (WWW-Authenticate belongs to 401
  // only); one that stays 401 keeps it.
  r = await request(`${gw.url}/acme/rest/v1/hidden`, { headers: h })
  t.equal(r.status, 404)
  t.equal(r.json().code, 'unknown_table')
  t.equal(r.headers['www-authenticate'], undefined, 'no Bearer challenge on a 404')
  r = await request(`${gw.url}/acme/rest/v1/anon-only`, { headers: h })
  t.equal(r.status, 401)
  t.equal(r.json().code, 'permission_denied')
  t.equal(r.headers['www-authenticate'], 'Bearer', 'the challenge stays on a 401')
  const rewritten = seen.length

  r = await request(`${gw.url}/acme/rest/v1/huge`, { headers: h })
  t.equal(r.status, 400)
  t.equal(r.json().code, 'PGRST100', 'a body over max_error_body_bytes streams through unchanged')
  t.equal(seen.length, rewritten, 'and never reaches the rewriter')

  r = await request(`${gw.url}/acme/rest/v1/text`, { headers: h })
  t.equal(r.status, 500)
  t.equal(r.body, 'plain failure', 'non-JSON errors stream through')
  r = await request(`${gw.url}/acme/rest/v1/ok`, { headers: h })
  t.equal(r.body, '[{"id":1}]', 'success bodies stream through')
  t.equal(seen.length, rewritten, 'neither reaches the rewriter')
})

t.test('keep-alive: upstream sockets are re-used', async (t) => {
  const up = await startUpstream(t)
  const sockets = new Set<unknown>()
  up.server.on('connection', (s) => sockets.add(s))
  const tt = makeTenant('acme', { auth: up.url, rest: up.url })
  const gw = await startGateway(t, {
    tenants: lookupOf(tt),
    config: testConfig({ gateway: { upstream_keepalive_ms: 2000 } }),
  })
  for (let i = 0; i < 10; i++)
    await request(`${gw.url}/acme/rest/v1/todos`, { headers: { apikey: tt.file.keys.public } })
  t.equal(up.received.length, 10)
  t.equal(sockets.size, 1, 'ten sequential requests, one upstream connection')
  t.match(up.last().headers.connection, /keep-alive/i)
})

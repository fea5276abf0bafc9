// The gateway has two entries to its proxy pipeline: the plain node:http fast path ahead
// of fastify, and fastify's catch-all route (the requests the fast path leaves: admin
// paths, encoded paths, bodies whose content type fastify vets). A gateway with the fast
// path off (every request through fastify) must answer every request the same way: the
// same status, headers and body to the client, the same request to the upstream, the same
// completion log line. Each case runs against both over real sockets; a fastify onRequest
// hook shows which entry took it.
import t from 'tap'
import http from 'node:http'
import net from 'node:net'
import { Writable } from 'node:stream'
import type { AddressInfo } from 'node:net'
import { buildGateway, type GatewayDeps } from '../../src/gateway/index.js'
import { createLogger } from '../../src/shared/index.js'
import {
  makeTenant,
  lookupOf,
  startUpstream,
  request,
  signToken,
  testConfig,
  type Response,
} from '../helpers/gateway.js'

interface Started {
  url: string
  lines: string[]
  fastifySaw: string[]
}

async function start(
  t: { teardown: (fn: () => unknown) => void },
  deps: Omit<GatewayDeps, 'logger'>,
): Promise<Started> {
  const lines: string[] = []
  const stream = new Writable({
    write(c: Buffer, _e, cb) {
      lines.push(...c.toString('utf8').split('\n').filter(Boolean))
      cb()
    },
  })
  const app = buildGateway({ ...deps, logger: createLogger({ level: 'info' }, stream) as never })
  const fastifySaw: string[] = []
  app.addHook('onRequest', (request, _reply, done) => {
    fastifySaw.push(`${request.method} ${request.url}`)
    done()
  })
  await app.listen({ port: 0, host: '127.0.0.1' })
  t.teardown(() => app.close())
  return { url: `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`, lines, fastifySaw }
}

/** What a client sees, minus what differs between any two answers (date, connection timing). */
function seen(r: Response): { status: number; headers: Record<string, unknown>; body: unknown } {
  const headers: Record<string, unknown> = { ...r.headers }
  delete headers.date
  let body: unknown = r.body
  try {
    body = JSON.parse(r.body)
    // The echo upstream reports the headers it got; the re-signed token carries its own iat.
    const b = body as { headers?: Record<string, unknown> }
    if (b.headers !== undefined) {
      delete b.headers.authorization
      delete b.headers.connection
      delete b.headers.host
    }
  } catch {}
  return { status: r.status, headers, body }
}

/** The completion line of request `id`, without its timing. */
function completion(lines: string[], id: string): Record<string, unknown> | undefined {
  const line = lines
    .map((l) => JSON.parse(l) as Record<string, unknown>)
    .find((l) => l.reqId === id && l.msg === 'request completed')
  if (line === undefined) return undefined
  const { time: _t, ms: _m, pid: _p, hostname: _h, ...rest } = line
  return rest
}

t.test("the fast path and fastify's route answer alike", async (t) => {
  const up = await startUpstream(t, (req, res, body) => {
    if (req.url?.includes('/refused')) {
      res.writeHead(403, { 'content-type': 'application/json' })
      res.end('{"code":"42501","message":"permission denied for table refused","details":null,"hint":null}')
      return
    }
    res.writeHead(200, { 'content-type': 'application/json', 'content-range': '0-0/*', vary: 'Accept' })
    res.end(JSON.stringify({ method: req.method, url: req.url, headers: req.headers, bodyLength: body.length }))
  })
  const s = net.createServer()
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve))
  const deadPort = (s.address() as AddressInfo).port
  await new Promise<void>((resolve) => s.close(() => resolve()))

  const acme = makeTenant('acme', { auth: up.url, rest: up.url })
  const dead = makeTenant('dead', { auth: `http://127.0.0.1:${deadPort}`, rest: `http://127.0.0.1:${deadPort}` })
  const config = testConfig({ gateway: { cors_origins: ['https://good.example'], trusted_proxies: ['127.0.0.1'] } })
  const rewriteError: GatewayDeps['rewriteError'] = (ctx) =>
    ctx.status === 403
      ? { status: 403, body: { code: 'rewritten', message: `refused on ${ctx.path}`, details: null, hint: null } }
      : null
  const fast = await start(t, { config, tenants: lookupOf(acme, dead), rewriteError })
  const routed = await start(t, { config, tenants: lookupOf(acme, dead), rewriteError, fastPath: false })
  const key = acme.file.keys.public
  const user = await signToken(acme, { email: 'ada@example.com' })

  const cases: Array<{
    name: string
    path: string
    method?: string
    headers?: Record<string, string>
    body?: string
    entry: 'fast' | 'fastify' | 'router'
  }> = [
    {
      name: 'a table read (default limit, re-signed token, forwarded headers)',
      path: '/acme/rest/v1/todos?select=id',
      headers: { apikey: key, authorization: `Bearer ${user}` },
      entry: 'fast',
    },
    { name: 'HEAD of a table', method: 'HEAD', path: '/acme/rest/v1/todos', headers: { apikey: key }, entry: 'fast' },
    {
      name: 'a JSON insert',
      method: 'POST',
      path: '/acme/rest/v1/todos',
      headers: { apikey: key, 'content-type': 'application/json' },
      body: '{"title":"x"}',
      entry: 'fast',
    },
    {
      name: 'a JSON insert with a charset',
      method: 'POST',
      path: '/acme/rest/v1/todos',
      headers: { apikey: key, 'content-type': 'application/json; charset=utf-8' },
      body: '{"title":"x"}',
      entry: 'fast',
    },
    {
      name: 'a body without a content type',
      method: 'POST',
      path: '/acme/rest/v1/rpc/f',
      headers: { apikey: key },
      body: '{}',
      entry: 'fastify',
    },
    {
      name: 'a malformed content type',
      method: 'POST',
      path: '/acme/rest/v1/todos',
      headers: { apikey: key, 'content-type': 'not a type' },
      body: '{}',
      entry: 'fastify',
    },
    {
      name: 'a content type with other parameters',
      method: 'PATCH',
      path: '/acme/rest/v1/todos?id=eq.1',
      headers: { apikey: key, 'content-type': 'application/json; profile="x"' },
      body: '{}',
      entry: 'fast',
    },
    {
      name: 'a content type that is not type/subtype',
      method: 'PUT',
      path: '/acme/rest/v1/todos?id=eq.1',
      headers: { apikey: key, 'content-type': 'json' },
      body: '{}',
      entry: 'fastify',
    },
    {
      name: 'a content type with a bad character',
      method: 'POST',
      path: '/acme/rest/v1/todos',
      headers: { apikey: key, 'content-type': 'application/js(on)' },
      body: '{}',
      entry: 'fastify',
    },
    {
      name: 'an auth call with a user token',
      path: '/acme/auth/v1/user',
      headers: { apikey: key, authorization: `Bearer ${user}` },
      entry: 'fast',
    },
    { name: 'an open auth route without a key', path: '/acme/auth/v1/verify?token=abc&type=signup', entry: 'fast' },
    { name: 'a bad key', path: '/acme/rest/v1/todos', headers: { apikey: 'pk_wrong' }, entry: 'fast' },
    { name: 'no key', path: '/acme/rest/v1/todos', entry: 'fast' },
    {
      name: 'HEAD with a bad key',
      method: 'HEAD',
      path: '/acme/rest/v1/todos',
      headers: { apikey: 'pk_wrong' },
      entry: 'fast',
    },
    {
      name: 'an expired-looking token',
      path: '/acme/rest/v1/todos',
      headers: { apikey: key, authorization: 'Bearer not.a.jwt' },
      entry: 'fast',
    },
    { name: 'an unknown database', path: '/nosuch/rest/v1/todos', headers: { apikey: key }, entry: 'fast' },
    { name: 'a bad database name', path: '/Acme/rest/v1/todos', headers: { apikey: key }, entry: 'fast' },
    { name: 'an unknown service', path: '/acme/storage/v1/x', headers: { apikey: key }, entry: 'fast' },
    { name: 'a dot segment', path: '/acme/rest/v1/../x', headers: { apikey: key }, entry: 'fast' },
    { name: 'an encoded slash', path: '/acme/rest/v1/a%2Fb', headers: { apikey: key }, entry: 'fastify' },
    // fastify's router answers this one (frameworkErrors) before any hook runs.
    { name: 'an undecodable path', path: '/acme/rest/v1/a%zz', headers: { apikey: key }, entry: 'router' },
    {
      name: "an encoded query is the fast path's",
      path: '/acme/rest/v1/todos?name=eq.a%20b&apikey=' + encodeURIComponent(key),
      entry: 'fast',
    },
    { name: 'the root', path: '/', entry: 'fastify' },
    { name: '/healthz on the public listener', path: '/healthz', entry: 'fastify' },
    { name: '/metrics on the public listener', path: '/metrics?x=1', entry: 'fastify' },
    { name: '/readyz/ is a database path', path: '/readyz/', entry: 'fast' },
    {
      name: 'a method the gateway does not route',
      method: 'PROPFIND',
      path: '/acme/rest/v1/todos',
      headers: { apikey: key },
      entry: 'fastify',
    },
    {
      name: 'a CORS preflight',
      method: 'OPTIONS',
      path: '/acme/rest/v1/todos',
      headers: { origin: 'https://good.example', 'access-control-request-method': 'POST' },
      entry: 'fast',
    },
    {
      name: 'a CORS preflight from another origin',
      method: 'OPTIONS',
      path: '/acme/rest/v1/todos',
      headers: { origin: 'https://evil.example', 'access-control-request-method': 'POST' },
      entry: 'fast',
    },
    {
      name: 'a read from an allowed origin',
      path: '/acme/rest/v1/todos',
      headers: { apikey: key, origin: 'https://good.example' },
      entry: 'fast',
    },
    {
      name: "a trusted proxy's X-Forwarded-For",
      path: '/acme/rest/v1/todos',
      headers: { apikey: key, 'x-forwarded-for': '203.0.113.7, 127.0.0.1' },
      entry: 'fast',
    },
    {
      name: 'a Connection-listed header',
      path: '/acme/rest/v1/todos',
      headers: { apikey: key, connection: 'x-client-info', 'x-client-info': 'js/2' },
      entry: 'fast',
    },
    {
      name: 'a chunked DELETE',
      method: 'DELETE',
      path: '/acme/rest/v1/todos',
      headers: { apikey: key, 'transfer-encoding': 'chunked', 'content-type': 'application/json' },
      body: '{}',
      entry: 'fast',
    },
    {
      name: 'a declared body over the limit',
      method: 'POST',
      path: '/acme/auth/v1/signup',
      headers: { apikey: key, 'content-type': 'application/json', 'content-length': String(10 * 1024 * 1024) },
      entry: 'fast',
    },
    { name: 'a refusal the rewriter rewrites', path: '/acme/rest/v1/refused', headers: { apikey: key }, entry: 'fast' },
    {
      name: 'an unreachable upstream',
      path: '/dead/rest/v1/todos',
      headers: { apikey: dead.file.keys.public },
      entry: 'fast',
    },
  ]
  let n = 0
  for (const c of cases) {
    const id = `fast-path-case-${++n}`
    const send = async (base: string): Promise<Response> => {
      if (c.headers?.['content-length'] !== undefined) return await declaredOnly(base, c, id)
      return await request(`${base}${c.path}`, {
        method: c.method ?? 'GET',
        headers: { 'x-request-id': id, ...(c.headers ?? {}) },
        ...(c.body !== undefined ? { body: c.body } : {}),
      })
    }
    const fastBefore = fast.fastifySaw.length
    const routedBefore = routed.fastifySaw.length
    const a = await send(fast.url)
    const b = await send(routed.url)
    t.same(seen(a), seen(b), `${c.name}: the same answer (${b.status})`)
    t.same(completion(fast.lines, id), completion(routed.lines, id), `${c.name}: the same completion line`)
    t.equal(
      fast.fastifySaw.length - fastBefore,
      c.entry === 'fastify' ? 1 : 0,
      `${c.name}: taken by ${c.entry === 'fast' ? 'the fast path' : 'fastify'}`,
    )
    t.equal(
      routed.fastifySaw.length - routedBefore,
      c.entry === 'router' ? 0 : 1,
      `${c.name}: fastify with the fast path off`,
    )
  }
})

/** A request that declares a body it never sends (the gateway refuses it on the header). */
function declaredOnly(
  base: string,
  c: { path: string; method?: string; headers?: Record<string, string> },
  id: string,
): Promise<Response> {
  return new Promise((resolve, reject) => {
    const u = new URL(base)
    const req = http.request(
      {
        host: u.hostname,
        port: u.port,
        path: c.path,
        method: c.method ?? 'POST',
        headers: { 'x-request-id': id, ...c.headers },
        agent: false,
      },
      (res) => {
        const chunks: Buffer[] = []
        res.on('data', (x: Buffer) => chunks.push(x))
        res.on('end', () => {
          const body = Buffer.concat(chunks).toString('utf8')
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body, json: () => JSON.parse(body) })
          req.destroy()
        })
      },
    )
    req.on('error', reject)
    req.flushHeaders()
  })
}

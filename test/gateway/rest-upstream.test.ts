// What the REST upstream receives: the re-signed token (verified here with the tenant's
// upstream secret: role, claims, exp, caching), the default-limit rewrite, and header
// hygiene (hop-by-hop and Connection-listed headers, spoofed X-Forwarded-*, request ids).
import t from 'tap'
import { jwtVerify, decodeJwt } from 'jose'
import {
  gatewayOverUpstream,
  makeTenant,
  lookupOf,
  startUpstream,
  startGateway,
  request,
  signToken,
  testConfig,
  PUBLIC_URL,
} from '../helpers/gateway.js'

async function upstreamClaims(secret: string, authorization: string | undefined) {
  if (!authorization) throw new Error('no Authorization reached the upstream')
  const { payload, protectedHeader } = await jwtVerify(
    authorization.replace(/^Bearer /, ''),
    new TextEncoder().encode(secret),
    {
      algorithms: ['HS256'],
      requiredClaims: ['exp'],
    },
  )
  return { payload, protectedHeader }
}

t.test("the re-signed token: role, the caller's claims, exp, one token per caller", async (t) => {
  let now = Date.now()
  const {
    upstream: rest,
    acme,
    gw,
  } = await gatewayOverUpstream(t, {
    gateway: { now: () => now, config: testConfig({ gateway: { upstream_token_ttl_seconds: 300 } }) },
  })
  const nowSec = Math.floor(now / 1000)
  const claims = {
    sub: '5b1c0f6e-2f7e-4c3e-9d6a-1e2f3a4b5c6d',
    email: 'ada@example.com',
    phone: '',
    session_id: 'c0ffee00-0000-4000-8000-000000000001',
    app_metadata: { provider: 'email', providers: ['email'] },
    user_metadata: { name: 'Ada' },
    is_anonymous: false,
    aal: 'aal1',
    amr: [{ method: 'password', timestamp: nowSec }],
  }
  const user = await signToken(acme, claims, { now: nowSec, expiresIn: 3600 })
  const headers = { apikey: acme.file.keys.public, authorization: `Bearer ${user}` }

  const r = await request(`${gw.url}/acme/rest/v1/todos?select=*`, { headers })
  t.equal(r.status, 200)
  const sent = rest.last().headers.authorization
  t.not(sent, `Bearer ${user}`, "the caller's token is replaced")
  t.equal(rest.last().headers.apikey, undefined, 'the apikey header is not forwarded to REST')
  const { payload, protectedHeader } = await upstreamClaims(acme.file.jwt.upstream_secret, sent)
  t.equal(protectedHeader.alg, 'HS256')
  t.equal(payload.role, acme.tenant.roles.auth, "role = this tenant's Postgres role for signed-in users")
  for (const [k, v] of Object.entries(claims)) t.same(payload[k], v, `claim ${k} kept`)
  t.equal(payload.aud, 'authenticated', 'aud kept')
  t.equal(payload.iss, `${PUBLIC_URL}/acme/auth/v1`, 'iss kept')
  t.equal(payload.exp, nowSec + 300, "exp = now + upstream_token_ttl_seconds when the caller's is later")
  await t.rejects(upstreamClaims(acme.file.jwt.secret, sent), 'not verifiable with the user-facing secret')

  await request(`${gw.url}/acme/rest/v1/todos`, { headers })
  t.equal(rest.last().headers.authorization, sent, 'the same caller re-uses the cached upstream token')

  now += 250_000 // past the renewal point (a fifth of the TTL left)
  await request(`${gw.url}/acme/rest/v1/todos`, { headers })
  const renewed = rest.last().headers.authorization
  t.not(renewed, sent, 'renewed near expiry')
  t.equal(decodeJwt(renewed!.slice(7)).exp, Math.floor(now / 1000) + 300)

  // A caller token expiring sooner caps the upstream token.
  const shortLived = await signToken(acme, { sub: 'short' }, { now: Math.floor(now / 1000), expiresIn: 40 })
  await request(`${gw.url}/acme/rest/v1/todos`, {
    headers: { apikey: acme.file.keys.public, authorization: `Bearer ${shortLived}` },
  })
  const capped = await upstreamClaims(acme.file.jwt.upstream_secret, rest.last().headers.authorization)
  t.equal(capped.payload.exp, Math.floor(now / 1000) + 40, "exp = the caller's exp when that is sooner")
  t.equal(capped.payload.sub, 'short')

  // Key-only callers.
  await request(`${gw.url}/acme/rest/v1/todos`, { headers: { apikey: acme.file.keys.public } })
  let k = await upstreamClaims(acme.file.jwt.upstream_secret, rest.last().headers.authorization)
  t.equal(k.payload.role, acme.tenant.roles.anon)
  t.equal(k.payload.sub, undefined, 'no user claims for a key')
  await request(`${gw.url}/acme/rest/v1/todos`, { headers: { apikey: acme.file.keys.secret } })
  k = await upstreamClaims(acme.file.jwt.upstream_secret, rest.last().headers.authorization)
  t.equal(k.payload.role, acme.tenant.roles.svc)
})

t.test('default limit on table reads, max_limit caps, nothing elsewhere', async (t) => {
  const rest = await startUpstream(t)
  const acme = makeTenant('acme', { auth: rest.url, rest: rest.url })
  const capped = makeTenant(
    'capped',
    { auth: rest.url, rest: rest.url },
    { rest: { default_limit: 50, max_limit: 200 } },
  )
  const gw = await startGateway(t, { tenants: lookupOf(acme, capped) })
  const get = async (db: string, path: string, method = 'GET') => {
    const tt = db === 'acme' ? acme : capped
    const r = await request(`${gw.url}/${db}/rest/v1${path}`, { method, headers: { apikey: tt.file.keys.public } })
    return { r, url: rest.last().url }
  }

  let x = await get('acme', '/todos')
  t.equal(x.url, '/acme/todos?limit=1000', 'no limit: limit=1000 added')
  t.equal(x.r.headers['x-gatehouse-default-limit'], '1000', 'and the response says so')
  x = await get('acme', '/todos?select=id,title&order=id.desc')
  t.equal(x.url, '/acme/todos?select=id,title&order=id.desc&limit=1000', 'other parameters kept byte for byte')
  x = await get('acme', '/todos', 'HEAD')
  t.equal(x.url, '/acme/todos?limit=1000', 'HEAD too')

  x = await get('acme', '/todos?limit=5&offset=10')
  t.equal(x.url, '/acme/todos?limit=5&offset=10', 'a client limit is kept')
  t.equal(x.r.headers['x-gatehouse-default-limit'], undefined, 'no header when we did not add it')
  x = await get('acme', '/todos?limit=50000')
  t.equal(x.url, '/acme/todos?limit=50000', 'no max_limit: any limit passes')
  x = await get('acme', '/todos?items.limit=3')
  t.equal(x.url, '/acme/todos?items.limit=3&limit=1000', 'an embedded resource limit is not the top-level limit')

  x = await get('acme', '/rpc/search?q=a')
  t.equal(x.url, '/acme/rpc/search?q=a', 'RPC is untouched')
  x = await get('acme', '/')
  t.equal(x.url, '/acme/', 'the OpenAPI root is untouched')
  x = await get('acme', '/todos', 'POST')
  t.equal(x.url, '/acme/todos', 'writes are untouched')
  x = await get('acme', '/todos?id=eq.1', 'DELETE')
  t.equal(x.url, '/acme/todos?id=eq.1')

  x = await get('capped', '/todos')
  t.equal(x.url, '/capped/todos?limit=50', "the tenant's default_limit")
  t.equal(x.r.headers['x-gatehouse-default-limit'], '50')
  x = await get('capped', '/todos?limit=1000&select=id')
  t.equal(x.url, '/capped/todos?limit=200&select=id', 'max_limit caps larger limits')
  t.equal(x.r.headers['x-gatehouse-max-limit'], '200')
  t.equal(x.r.headers['x-gatehouse-default-limit'], undefined)
  x = await get('capped', '/todos?limit=150')
  t.equal(x.url, '/capped/todos?limit=150', 'smaller limits pass')
  t.equal(x.r.headers['x-gatehouse-max-limit'], undefined)
})

t.test('header hygiene', async (t) => {
  const {
    upstream: rest,
    acme,
    gw,
  } = await gatewayOverUpstream(t, {
    handler: (_req, res) => {
      res.writeHead(200, {
        'content-type': 'application/json',
        connection: 'keep-alive, x-upstream-secret',
        'x-upstream-secret': 'internal',
        'keep-alive': 'timeout=5',
        'x-request-id': 'upstream-made-this-up',
        'access-control-allow-origin': 'https://upstream.example',
        'content-range': '0-0/1',
      })
      res.end('[]')
    },
  })
  const user = await signToken(acme)

  const r = await request(`${gw.url}/acme/rest/v1/todos`, {
    headers: {
      apikey: acme.file.keys.public,
      authorization: `Bearer ${user}`,
      // A client naming our headers in Connection must not make us drop them.
      connection: 'keep-alive, authorization, x-forwarded-for, x-request-id, x-custom-drop',
      'keep-alive': 'timeout=100',
      'x-custom-drop': 'gone',
      'x-custom-keep': 'kept',
      'x-forwarded-for': '6.6.6.6',
      'x-forwarded-host': 'evil.example',
      'x-forwarded-proto': 'gopher',
      'x-forwarded-port': '1',
      forwarded: 'for=6.6.6.6',
      'x-real-ip': '6.6.6.6',
      'x-gatehouse-internal': 'forged',
      'proxy-authorization': 'Basic Zm9vOmJhcg==',
      te: 'trailers',
      prefer: 'count=exact',
      range: '0-9',
      'accept-profile': 'public',
      'x-request-id': 'client-req-123',
    },
  })
  t.equal(r.status, 200)
  const got = rest.last().headers
  t.match(got.authorization, /^Bearer ey/, 'the re-signed Authorization survives Connection: authorization')
  t.not(got.authorization, `Bearer ${user}`)
  t.equal(got['x-forwarded-for'], '127.0.0.1', 'X-Forwarded-For overwritten with the peer address')
  t.equal(got['x-forwarded-host'], 'api.gatehouse.test', "X-Forwarded-Host from public_url, never the client's")
  t.equal(got['x-forwarded-proto'], 'https', 'X-Forwarded-Proto from public_url')
  t.equal(got['x-forwarded-port'], undefined)
  t.equal(got.forwarded, undefined)
  t.equal(got['x-real-ip'], undefined)
  t.equal(got['x-gatehouse-internal'], undefined, 'our reserved prefix is never taken from clients')
  t.equal(got['x-custom-drop'], undefined, 'a Connection-listed header is dropped')
  t.equal(got['x-custom-keep'], 'kept')
  t.equal(got['proxy-authorization'], undefined)
  t.equal(got.te, undefined)
  t.not(got['keep-alive'], 'timeout=100', "the client's keep-alive is not forwarded")
  t.equal(got.apikey, undefined)
  t.equal(got.prefer, 'count=exact')
  t.equal(got.range, '0-9')
  t.equal(got['accept-profile'], 'public')
  t.equal(got['x-request-id'], 'client-req-123', 'a valid client request id is passed through')
  t.equal(got.host, new URL(rest.url).host, "Host is the upstream's")
  const xff = rest.last().rawHeaders.filter((_, i, a) => i % 2 === 0 && a[i]!.toLowerCase() === 'x-forwarded-for')
  t.equal(xff.length, 1, 'one X-Forwarded-For, not appended')

  t.equal(r.headers['x-request-id'], 'client-req-123', 'and returned')
  t.equal(r.headers['x-upstream-secret'], undefined, 'upstream Connection-listed headers are dropped on the way back')
  t.not(r.headers['keep-alive'], 'timeout=5')
  t.equal(r.headers['content-range'], '0-0/1')
  t.equal(r.headers['access-control-allow-origin'], undefined, 'no upstream CORS without an Origin')

  const bad = await request(`${gw.url}/acme/rest/v1/todos`, {
    headers: { apikey: acme.file.keys.public, 'x-request-id': 'has spaces and <tags>' },
  })
  const generated = bad.headers['x-request-id'] as string
  t.match(generated, /^[0-9a-f-]{36}$/, 'an invalid request id is replaced by a generated one')
  t.equal(rest.last().headers['x-request-id'], generated, 'the upstream sees the same id')
  const none = await request(`${gw.url}/acme/rest/v1/todos`, { headers: { apikey: acme.file.keys.public } })
  t.match(none.headers['x-request-id'], /^[0-9a-f-]{36}$/, 'generated when absent')
})

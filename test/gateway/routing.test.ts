// Routing over real sockets: /<db>/auth/v1/* and /<db>/rest/v1/* reach the tenant's
// upstreams with the rest of the path and the query; the database segment is checked
// before any look-up; encoded tricks are refused; unknown databases and paths are JSON 404s.
// Also health, readiness, metrics and CORS.
import t from 'tap'
import {
  gatewayOverUpstream,
  makeTenant,
  lookupOf,
  startUpstream,
  startGateway,
  request,
  testConfig,
} from '../helpers/gateway.js'

t.test('routes auth and rest to the tenant upstreams, path and query kept', async (t) => {
  const auth = await startUpstream(t)
  const rest = await startUpstream(t)
  const acme = makeTenant('acme', { auth: auth.url, rest: rest.url })
  const gw = await startGateway(t, { tenants: lookupOf(acme) })
  const key = acme.file.keys.public

  let r = await request(`${gw.url}/acme/auth/v1/settings?x=1&y=%20z`, { headers: { apikey: key } })
  t.equal(r.status, 200)
  t.equal(
    auth.last().url,
    '/acme/settings?x=1&y=%20z',
    'auth: path below /auth/v1 appended to the upstream, query kept',
  )

  r = await request(`${gw.url}/acme/rest/v1/rpc/do_it?a=eq.1`, {
    method: 'POST',
    headers: { apikey: key, 'content-type': 'application/json' },
    body: '{"n":1}',
  })
  t.equal(r.status, 200)
  t.equal(rest.last().url, '/acme/rpc/do_it?a=eq.1')
  t.equal(rest.last().method, 'POST')
  t.equal(rest.last().body.toString(), '{"n":1}', 'body forwarded untouched')

  await request(`${gw.url}/acme/rest/v1/`, { headers: { apikey: key } })
  t.equal(rest.last().url, '/acme/', 'the REST root (OpenAPI) maps to the upstream root')
  await request(`${gw.url}/acme/rest/v1`, { headers: { apikey: key } })
  t.equal(rest.last().url, '/acme/', 'with or without the trailing slash')

  r = await request(`${gw.url}/acme/rest/v1/items`, { method: 'DELETE', headers: { apikey: key } })
  t.equal(rest.last().method, 'DELETE')
  t.equal(r.headers['x-request-id'] !== undefined, true, 'every response carries a request id')
})

t.test('unknown database, other paths, bad names and encoded tricks', async (t) => {
  const up = await startUpstream(t)
  const acme = makeTenant('acme', { auth: up.url, rest: up.url })
  const tenants = lookupOf(acme)
  const gw = await startGateway(t, { tenants })
  const key = acme.file.keys.public

  let r = await request(`${gw.url}/nosuch/rest/v1/items`, { headers: { apikey: key } })
  t.equal(r.status, 404)
  t.same(r.json(), {
    code: 'tenant_not_found',
    message: 'No project database is named "nosuch"',
    details: null,
    hint: "The first segment of the path names the database (<base URL>/<database>/rest/v1): check it against the database's URL.",
  })
  t.equal(r.headers['x-gatehouse-error-code'], 'tenant_not_found')
  t.match(r.headers['content-type'], /^application\/json/)

  // (Supabase's Storage, Functions, GraphQL and Realtime paths: test/gateway/unoffered-services.test.ts)
  for (const path of [
    '/acme',
    '/acme/',
    '/acme/storage/v2/x',
    '/acme/buckets/v1/x',
    '/acme/rest/v2/items',
    '/acme/rest/v10',
    '/acme/restv1',
  ]) {
    r = await request(`${gw.url}${path}`, { headers: { apikey: key } })
    t.equal(r.status, 404, `${path} is 404`)
    t.equal(r.json().code, 'not_found', `${path}: not_found`)
  }
  r = await request(`${gw.url}/`)
  t.equal(r.json().code, 'not_found')

  // A client given the gateway's base URL without the database (createClient('http://host:8000', key)).
  for (const path of [
    '/rest/v1/items?select=id',
    '/auth/v1/token?grant_type=password',
    '/storage/v1/bucket',
    '/rest/v1',
  ]) {
    r = await request(`${gw.url}${path}`, { headers: { apikey: key } })
    t.equal(r.status, 404, `${path} is 404`)
    t.match(
      r.json(),
      { code: 'not_found', hint: /names no database.*createClient\('<base URL>\/<database>', key\)/ },
      `${path}: the hint says the URL needs the database`,
    )
  }

  tenants.calls.length = 0
  for (const bad of [
    '/ACME/rest/v1/x',
    '/1abc/rest/v1/x',
    '/a.b/rest/v1/x',
    `/${'a'.repeat(64)}/rest/v1/x`,
    '/a%62c/rest/v1/x',
  ]) {
    r = await request(`${gw.url}${bad}`, { headers: { apikey: key } })
    t.equal(r.status, 404, `${bad.slice(0, 30)} refused`)
    t.equal(r.json().code, 'tenant_not_found')
  }
  t.same(tenants.calls, [], 'invalid database names never reach the tenant look-up')

  const tricks = [
    '/acme/rest/v1/..%2Fother/rest/v1/x',
    '/acme%2Frest/v1/x',
    '/acme/rest/v1/%2e%2e/x',
    '/acme/rest/v1/../../other/rest/v1/x',
    '/acme//rest/v1/x',
    '/acme/rest/v1//x',
    '/acme;param/rest/v1/x',
    '/acme/rest;param/v1/x',
    '/acme/auth/v1/user;param',
    '/acme/rest/v1/a%5Cb',
    '/acme/rest/v1/a%00',
  ]
  for (const path of tricks) {
    r = await request(`${gw.url}${path}`, { headers: { apikey: key } })
    t.equal(r.status, 400, `${path} refused`)
    t.equal(r.json().code, 'invalid_path', `${path}: invalid_path`)
  }
  t.same(tenants.calls, [], 'tricks are refused before any look-up')
  t.equal(up.received.length, 0, 'nothing reached the upstream')

  r = await request(`${gw.url}/acme/rest/v1/%zz`, { headers: { apikey: key } })
  t.equal(r.status, 400, 'an undecodable escape is refused')
  t.equal(r.json().code, 'invalid_path')
  t.equal(r.headers['x-gatehouse-error-code'], 'invalid_path')
})

t.test('health, readiness and metrics: on the admin listener only', async (t) => {
  let ready = true
  const { acme, gw } = await gatewayOverUpstream(t, { gateway: { ready: () => ready } })

  // The public port does not answer them: 404 in the gateway's shape, no metrics leak.
  for (const p of ['/healthz', '/readyz', '/metrics']) {
    const pub = await request(`${gw.url}${p}`)
    t.equal(pub.status, 404, `public ${p} is 404`)
    t.equal(pub.json().code, 'not_found', `public ${p} answers the gateway's not_found`)
    t.ok(pub.headers['x-request-id'], 'with a request id')
    t.notMatch(pub.body, /gatehouse_|acme/, 'nothing about tenants')
  }

  let r = await request(`${gw.adminUrl}/healthz`)
  t.equal(r.status, 200)
  t.same(r.json(), { status: 'ok', part: 'gateway' })
  r = await request(`${gw.adminUrl}/readyz`)
  t.equal(r.status, 200)
  ready = false
  r = await request(`${gw.adminUrl}/readyz`)
  t.equal(r.status, 503, 'the optional store check makes readyz fail')
  t.equal(r.json().code, 'not_ready')
  t.same(r.json().failing, ['gateway'], 'the failing check is named')
  t.match(r.json().message, /gateway is not ready: gateway/)
  t.ok(Number(r.headers['retry-after']) > 0, 'with Retry-After')

  const key = acme.file.keys.public
  await request(`${gw.url}/acme/rest/v1/items`, { headers: { apikey: key } })
  await request(`${gw.url}/acme/rest/v1/items`)
  for (let i = 0; i < 3; i++) await request(`${gw.url}/db${i}/rest/v1/items`, { headers: { apikey: key } })
  r = await request(`${gw.adminUrl}/metrics`)
  t.equal(r.status, 200)
  t.match(r.headers['content-type'], /text\/plain/)
  t.match(r.body, /gatehouse_requests_total\{part="gateway",tenant="acme",status="200"\} 1/)
  t.match(r.body, /gatehouse_requests_total\{part="gateway",tenant="acme",status="401"\} 1/)
  t.match(
    r.body,
    /gatehouse_requests_total\{part="gateway",tenant="_unknown",status="404"\} 3/,
    'unknown databases are counted under one label',
  )
  t.notMatch(r.body, /db0|db1|db2/, 'no label per unknown name')
  t.match(r.body, /gatehouse_gateway_request_duration_seconds_bucket\{le="[0-9.]+",tenant="acme",service="rest"\}/)

  r = await request(`${gw.adminUrl}/nothing`)
  t.equal(r.status, 404, 'the admin listener serves nothing else')
})

t.test('CORS: preflight without a key, exposed headers on answers and on errors', async (t) => {
  const { upstream: up, acme, gw } = await gatewayOverUpstream(t)

  let r = await request(`${gw.url}/acme/rest/v1/items`, {
    method: 'OPTIONS',
    headers: {
      origin: 'https://app.example',
      'access-control-request-method': 'POST',
      'access-control-request-headers': 'apikey, authorization, x-client-info, content-type, prefer',
    },
  })
  t.equal(r.status, 200, 'preflight answered by the gateway, as PostgREST answers it')
  t.equal(r.headers['access-control-allow-origin'], '*')
  t.equal(r.headers['access-control-allow-methods'], 'GET, POST, PATCH, PUT, DELETE, OPTIONS, HEAD')
  t.equal(
    r.headers['access-control-allow-headers'],
    'Authorization, apikey, x-client-info, content-type, prefer, Accept, Accept-Language, Content-Language',
    'the requested headers, with Authorization and the simple ones',
  )
  t.equal(r.headers['access-control-max-age'], '86400')
  t.equal(up.received.length, 0, 'preflight never reaches the upstream')

  // PostgREST's CorsSpec: the root, headers of its own.
  r = await request(`${gw.url}/acme/rest/v1/`, {
    method: 'OPTIONS',
    headers: {
      accept: '*/*',
      origin: 'http://example.com',
      'access-control-request-method': 'POST',
      'access-control-request-headers': 'Foo,Bar',
    },
  })
  t.equal(r.status, 200)
  t.equal(
    r.headers['access-control-allow-headers'],
    'Authorization, Foo, Bar, Accept, Accept-Language, Content-Language',
  )
  t.equal(r.body, '')

  // An OPTIONS that is not a preflight reaches the engine; its answer allows any origin.
  r = await request(`${gw.url}/acme/rest/v1/items`, {
    method: 'OPTIONS',
    headers: { apikey: acme.file.keys.public, accept: 'application/json' },
  })
  t.equal(r.headers['access-control-allow-origin'], '*', 'OPTIONS without an Origin too, as PostgREST')

  r = await request(`${gw.url}/acme/rest/v1/items`, {
    headers: { origin: 'https://app.example', apikey: acme.file.keys.public },
  })
  t.equal(r.status, 200)
  t.equal(r.headers['access-control-allow-origin'], '*')
  // PostgREST's CorsSpec "exposes necessary response headers to regular request": its list,
  // then the gateway's own.
  for (const h of [
    'content-encoding',
    'content-location',
    'content-range',
    'content-type',
    'date',
    'location',
    'server',
    'transfer-encoding',
    'range-unit',
    'range',
    'x-request-id',
    'preference-applied',
    'x-total-count',
    'link',
    'x-supabase-api-version',
    'x-gatehouse-default-limit',
    'x-gatehouse-max-limit',
    'x-gatehouse-limit-applied',
  ]) {
    t.match(r.headers['access-control-expose-headers'], new RegExp(`(^|, )${h}(,|$)`), `exposes ${h}`)
  }
  r = await request(`${gw.url}/acme/rest/v1/items`, { headers: { origin: 'https://app.example' } })
  t.equal(r.status, 401)
  t.equal(r.headers['access-control-allow-origin'], '*', 'errors are readable by the browser too')

  // An allow-list of origins.
  const gw2 = await startGateway(t, {
    tenants: lookupOf(acme),
    config: testConfig({ gateway: { cors_origins: ['https://good.example'] } }),
  })
  r = await request(`${gw2.url}/acme/rest/v1/items`, {
    method: 'OPTIONS',
    headers: { origin: 'https://good.example', 'access-control-request-method': 'GET' },
  })
  t.equal(r.headers['access-control-allow-origin'], 'https://good.example')
  t.match(r.headers.vary, /Origin/)
  r = await request(`${gw2.url}/acme/rest/v1/items`, {
    method: 'OPTIONS',
    headers: { origin: 'https://evil.example', 'access-control-request-method': 'GET' },
  })
  t.equal(r.headers['access-control-allow-origin'], undefined, 'other origins get no CORS grant')
})

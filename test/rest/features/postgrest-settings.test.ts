// PostgREST 14's per-database settings, in the tenant file as rest.*: db-pre-request
// (pre_request), app.settings.* (app_settings), openapi-mode (openapi_mode) and
// server-trace-header (server_trace_header), db-root-spec (root_spec) and
// openapi-security-active (openapi_security_active), each as PostgREST applies it, through the gateway.
import t from 'tap'
import { startRestGateway } from '../../helpers/rest-gateway.js'
import { createRestFixture } from '../../helpers/rest-fixture.js'

t.test('pre_request, app_settings and server_trace_header', async (t) => {
  const stack = await startRestGateway(t, {
    shared: 'rest-settings',
    rest: {
      pre_request: 'public.check_request',
      app_settings: { greeting: 'hello', plan: 'pro' },
      server_trace_header: 'X-Trace-Id',
    },
  })
  const base = `${stack.gatewayUrl}/${stack.database}/rest/v1`
  const key = { apikey: stack.tenant.file.keys.public }

  let r = await fetch(`${base}/notes`, { headers: { ...key, 'x-trace-id': 'trace-123' } })
  t.equal(r.status, 200)
  t.same(await r.json(), [{ id: 1, body: 'one' }])
  t.equal(r.headers.get('x-pre-request'), 'ran', "the pre-request function ran in the request's transaction")
  t.equal(r.headers.get('x-trace-id'), 'trace-123', 'the trace header is echoed')

  r = await fetch(`${base}/notes`, { headers: { ...key, 'x-blocked': 'yes', 'x-trace-id': 'trace-456' } })
  t.equal(r.status, 403)
  t.match(await r.json(), { code: 'PT403', message: 'blocked by the pre-request function' })
  t.equal(r.headers.get('x-trace-id'), 'trace-456', 'on errors too')

  const setting = await stack.client().rpc('app_setting', { name: 'greeting' })
  t.equal(setting.data, 'hello', 'app.settings.greeting is set in the transaction')
  t.equal((await stack.client().rpc('app_setting', { name: 'missing' })).data, null)
})

t.test('openapi_mode', async (t) => {
  const disabled = await startRestGateway(t, { shared: 'rest-settings', rest: { openapi_mode: 'disabled' } })
  let r = await fetch(`${disabled.gatewayUrl}/${disabled.database}/rest/v1/`, {
    headers: { apikey: disabled.tenant.file.keys.public },
  })
  t.equal(r.status, 404)
  t.same(await r.json(), { code: 'PGRST126', details: null, hint: null, message: 'Root endpoint metadata is disabled' })

  const ignore = await startRestGateway(t, { shared: 'rest-settings', rest: { openapi_mode: 'ignore-privileges' } })
  r = await fetch(`${ignore.gatewayUrl}/${ignore.database}/rest/v1/`, {
    headers: { apikey: ignore.tenant.file.keys.public },
  })
  t.equal(r.status, 200)
  const doc = (await r.json()) as { paths: Record<string, unknown> }
  t.ok('/hidden' in doc.paths, 'a table the caller holds no privilege on is listed')

  const follow = await startRestGateway(t, { shared: 'rest-settings' })
  r = await fetch(`${follow.gatewayUrl}/${follow.database}/rest/v1/`, {
    headers: { apikey: follow.tenant.file.keys.public },
  })
  const own = (await r.json()) as { paths: Record<string, unknown> }
  t.ok('/notes' in own.paths)
  t.notOk('/hidden' in own.paths, 'by default only what the caller may use (follow-privileges)')
})

// db-root-spec (RootSpec: the root calls that function, its media type domain negotiated as
// for /rpc) and openapi-security-active (SecurityOpenApiSpec: the JWT bearer scheme).

t.test('root_spec and openapi_security_active', async (t) => {
  const own = await startRestGateway(t, { shared: 'rest-settings-root', rest: { root_spec: 'root' } })
  const root = `${own.gatewayUrl}/${own.database}/rest/v1/`
  const apikey = own.tenant.file.keys.public
  const wanted = { swagger: '2.0', info: { title: 'Own API', description: 'written by hand' } }
  let r = await fetch(root, { headers: { apikey, accept: 'application/openapi+json' } })
  t.equal(r.status, 200)
  t.equal(r.headers.get('content-type'), 'application/openapi+json; charset=utf-8')
  t.same(await r.json(), wanted, 'the function answers the root')
  r = await fetch(root, { headers: { apikey, accept: 'application/json' } })
  t.equal(r.status, 200)
  t.equal(r.headers.get('content-type'), 'application/json; charset=utf-8')
  t.same(await r.json(), wanted, 'as application/json')
  r = await fetch(`${root}notes?select=id`, { headers: { apikey } })
  t.same(await r.json(), [{ id: 1 }], 'the other paths are as before')

  const disabled = await startRestGateway(t, {
    shared: 'rest-settings-root',
    rest: { root_spec: 'root', openapi_mode: 'disabled' },
  })
  r = await fetch(`${disabled.gatewayUrl}/${disabled.database}/rest/v1/`, {
    headers: { apikey: disabled.tenant.file.keys.public },
  })
  t.equal(r.status, 404, 'openapi_mode disabled wins (PGRST126)')
  t.equal(((await r.json()) as { code: string }).code, 'PGRST126')

  const secured = await startRestGateway(t, { shared: 'rest-settings', rest: { openapi_security_active: true } })
  r = await fetch(`${secured.gatewayUrl}/${secured.database}/rest/v1/`, {
    headers: { apikey: secured.tenant.file.keys.public },
  })
  const doc = (await r.json()) as Record<string, unknown>
  t.same(doc.security, [{ JWT: [] }])
  t.same(doc.securityDefinitions, {
    JWT: {
      description: 'Add the token prepending "Bearer " (without quotes) to it',
      in: 'header',
      name: 'Authorization',
      type: 'apiKey',
    },
  })
  const byDefault = await startRestGateway(t, { shared: 'rest-settings' })
  const d = (await (
    await fetch(`${byDefault.gatewayUrl}/${byDefault.database}/rest/v1/`, {
      headers: { apikey: byDefault.tenant.file.keys.public },
    })
  ).json()) as Record<string, unknown>
  t.notOk('security' in d || 'securityDefinitions' in d, 'off by default')
})

// PostgREST's getResource: a disabled root answers PGRST126 whatever the method, before the
// method or the profile is looked at; with db-root-spec the root takes the function's
// methods (OPTIONS lists them, POST calls it).
t.test('the root path by method', async (t) => {
  const disabled = await createRestFixture(t, {
    shared: 'rest-root',
    rest: { openapi_mode: 'disabled', root_spec: 'root' },
  })
  for (const method of ['OPTIONS', 'POST', 'DELETE'] as const) {
    const r = await disabled.app.inject({
      method,
      url: `/${disabled.database}/`,
      headers: { 'accept-profile': 'nope', 'content-profile': 'nope' },
    })
    t.equal(r.statusCode, 404, method)
    t.equal(JSON.parse(r.body).code, 'PGRST126', method)
  }
  const own = await createRestFixture(t, { shared: 'rest-root', rest: { root_spec: 'root' } })
  const options = await own.app.inject({ method: 'OPTIONS', url: `/${own.database}/` })
  t.equal(options.statusCode, 200)
  t.equal(options.headers.allow, 'OPTIONS,GET,HEAD,POST', 'a stable function: the methods of /rpc/root')
  const post = await own.app.inject({
    method: 'POST',
    url: `/${own.database}/`,
    headers: { accept: 'application/openapi+json' },
  })
  t.equal(post.statusCode, 200)
  t.same(JSON.parse(post.body).info.title, 'Own API')
})

// The per-database REST settings of the panel: request-rate limits (rest.rate_limits, taken
// up by the gateway through the store's invalidation) and the aggregates switch (PostgREST's db-aggregates-enabled):
// read, validated changes written to the tenant store and taken up by the running REST
// engine through the store's invalidation: supabase-js `.select('count()')` is refused
// with PGRST123, then answered once the panel switched aggregates on, then refused again.
import t from 'tap'
import { gatewayCall, startStack, type Stack, type StackTenant } from '../helpers/panel-stack.js'

let stack: Stack
let x: StackTenant
let token: string
const path = () => `/organizations/org_rs/databases/${x.database}/api/rest-settings`

function servicesSeeChange(): Promise<void> {
  return new Promise((resolve) => {
    const off = stack.store.onChange((db) => {
      if (db === x.database) {
        off()
        resolve()
      }
    })
  })
}

t.before(async () => {
  stack = await startStack(t)
  x = await stack.addTenant({ organization: 'org_rs' })
  await stack.owner(
    x,
    `CREATE TABLE orders (id int PRIMARY KEY, customer text, amount numeric);
    INSERT INTO orders VALUES (1, 'ann', 10.5), (2, 'ann', 4.5), (3, 'ben', 7);
    SELECT platform.grant('SELECT', 'orders', 'anon');`,
  )
  token = await stack.panelSession({ userId: 'p1', email: 'ops@example.com', orgs: ['org_rs'] })
})

t.test('GET shows the switch, off by default', async (t) => {
  const r = await stack.panel('GET', path(), { token })
  t.equal(r.status, 200)
  t.same(r.body, {
    database: x.database,
    settings: {
      aggregates_enabled: false,
      plan_enabled: false,
      server_timing_enabled: false,
      extra_search_path: ['public', 'extensions'],
      pre_request: null,
      app_settings: {},
      openapi_mode: 'follow-privileges',
      root_spec: null,
      openapi_security_active: false,
      server_trace_header: null,
      supabase_default_privileges: false,
      rate_limits: null,
    },
  })
})

t.test('bad changes are refused with 400 and nothing is written', async (t) => {
  const cases: Array<[unknown, RegExp]> = [
    [{ aggregates_enabled: 'yes' }, /aggregates_enabled: must be boolean/],
    [{ max_rows: 5 }, /max_rows: not a setting the panel changes/],
    [{ rate_limits: 5 }, /rate_limits: must be an object/],
    [{ rate_limits: { everyone: { second: 1 } } }, /rate_limits\.everyone: not a scope/],
    [{ rate_limits: { client: { hour: 1 } } }, /rate_limits\.client\.hour: not a period/],
    [{ rate_limits: { client: { minute: 0 } } }, /rate_limits\.client\.minute: must be a positive integer/],
    [{ rate_limits: { key: { second: 1.5 } } }, /rate_limits\.key\.second: must be a positive integer/],
    [{}, /name at least one setting/],
    [[true], /JSON object/],
  ]
  for (const [body, message] of cases) {
    const r = await stack.panel('PATCH', path(), { token, body })
    t.equal(r.status, 400, JSON.stringify(body))
    t.equal(r.body.code, 'validation_failed')
    t.match(r.body.message, message, JSON.stringify(body))
  }
  t.equal((await stack.store.get(x.database))?.rest.aggregates_enabled, false)
})

t.test('aggregates switched on answer at once through supabase-js; switched off are refused again', async (t) => {
  const supabase = stack.supabase(x)
  const before = await supabase.from('orders').select('count()')
  t.equal(before.status, 400)
  t.same(before.error, {
    code: 'PGRST123',
    message: 'Use of aggregate functions is not allowed',
    details: null,
    hint: null,
  })

  let seen = servicesSeeChange()
  const on = await stack.panel('PATCH', path(), { token, body: { aggregates_enabled: true } })
  t.equal(on.status, 200)
  t.same(on.body.settings, {
    aggregates_enabled: true,
    plan_enabled: false,
    server_timing_enabled: false,
    extra_search_path: ['public', 'extensions'],
    pre_request: null,
    app_settings: {},
    openapi_mode: 'follow-privileges',
    root_spec: null,
    openapi_security_active: false,
    server_trace_header: null,
    supabase_default_privileges: false,
    rate_limits: null,
  })
  await seen
  const stored = await stack.store.get(x.database)
  t.equal(stored?.rest.aggregates_enabled, true)
  t.equal(stored?.rest.default_limit, 1000, 'the other REST settings are kept')

  const count = await supabase.from('orders').select('count()')
  t.equal(count.error, null)
  t.same(count.data, [{ count: 3 }])
  const sums = await supabase.from('orders').select('customer, total:amount.sum()').order('customer')
  t.same(sums.data, [
    { customer: 'ann', total: 15 },
    { customer: 'ben', total: 7 },
  ])

  seen = servicesSeeChange()
  t.equal((await stack.panel('PATCH', path(), { token, body: { aggregates_enabled: false } })).status, 200)
  await seen
  t.equal((await supabase.from('orders').select('count()')).error?.code, 'PGRST123')
})

t.test('request-rate limits set in the panel apply at the gateway at once; null takes them away', async (t) => {
  let seen = servicesSeeChange()
  const set = await stack.panel('PATCH', path(), { token, body: { rate_limits: { client: { minute: 2 } } } })
  t.equal(set.status, 200)
  t.same(set.body.settings.rate_limits, { client: { minute: 2 } })
  await seen
  t.same((await stack.store.get(x.database))?.rest.rate_limits, { client: { minute: 2 } }, 'written to the store')
  const statuses = []
  for (let i = 0; i < 3; i++) statuses.push((await gatewayCall(stack, x, '/rest/v1/orders?select=id')).status)
  t.same(statuses, [200, 200, 429], 'the third request of this client in the minute is refused')
  const over = await gatewayCall(stack, x, '/rest/v1/orders?select=id')
  t.equal(over.body.code, 'over_request_rate_limit')
  t.equal(over.headers.get('ratelimit-policy'), '"client-minute";q=2;w=60')
  t.ok(Number(over.headers.get('retry-after')) >= 1)

  // Narrowing one period keeps the others; null clears them all.
  const both = await stack.panel('PATCH', path(), {
    token,
    body: { rate_limits: { client: { second: 50 }, key: { minute: 1000 } } },
  })
  t.same(both.body.settings.rate_limits, { client: { minute: 2, second: 50 }, key: { minute: 1000 } })
  seen = servicesSeeChange()
  const off = await stack.panel('PATCH', path(), { token, body: { rate_limits: null } })
  t.same(off.body.settings.rate_limits, null)
  await seen
  t.equal((await gatewayCall(stack, x, '/rest/v1/orders?select=id')).status, 200, 'served again')
})

t.test('only members of the owning organization may read or change it', async (t) => {
  const outsider = await stack.panelSession({ userId: 'p9', orgs: ['org_other'] })
  t.equal((await stack.panel('GET', path(), { token: outsider })).status, 403)
  t.equal((await stack.panel('PATCH', path(), { token: outsider, body: { aggregates_enabled: true } })).status, 403)
  t.equal((await stack.panel('PATCH', path(), { body: { aggregates_enabled: true } })).status, 401)
  t.equal((await stack.store.get(x.database))?.rest.aggregates_enabled, false)
})

t.test('Server-Timing switched on from the panel answers with the header at once', async (t) => {
  t.equal(
    (await gatewayCall(stack, x, '/rest/v1/orders?select=id')).headers.get('server-timing'),
    null,
    'off by default',
  )
  const seen = servicesSeeChange()
  const on = await stack.panel('PATCH', path(), { token, body: { server_timing_enabled: true } })
  t.equal(on.status, 200)
  t.equal(on.body.settings.server_timing_enabled, true)
  await seen
  t.match(
    (await gatewayCall(stack, x, '/rest/v1/orders?select=id')).headers.get('server-timing'),
    /^jwt;dur=[\d.]+, parse;dur=[\d.]+, plan;dur=/,
  )
  t.equal((await stack.panel('PATCH', path(), { token, body: { server_timing_enabled: 'yes' } })).status, 400)
  const seenOff = servicesSeeChange()
  await stack.panel('PATCH', path(), { token, body: { server_timing_enabled: false } })
  await seenOff
})

t.test('PostgREST settings from the panel: checked, app.settings values masked', async (t) => {
  const set = await stack.panel('PATCH', path(), {
    token,
    body: {
      extra_search_path: ['public', 'extensions'],
      pre_request: 'public.check_request',
      app_settings: { secret: 's3cr3t' },
      openapi_mode: 'disabled',
      server_trace_header: 'X-Trace-Id',
    },
  })
  t.equal(set.status, 200, JSON.stringify(set.body))
  t.match(set.body.settings, {
    extra_search_path: ['public', 'extensions'],
    pre_request: 'public.check_request',
    app_settings: { secret: '********' },
    openapi_mode: 'disabled',
    server_trace_header: 'X-Trace-Id',
  })
  t.notMatch(JSON.stringify(set.body), 's3cr3t')
  const stored = await stack.store.get(x.database)
  t.same(stored?.rest.app_settings, { secret: 's3cr3t' })
  const bad = await stack.panel('PATCH', path(), {
    token,
    body: {
      pre_request: 'not a function; drop table x',
      openapi_mode: 'sometimes',
      server_trace_header: 'X Trace',
      app_settings: { 'a.b': 'x' },
    },
  })
  t.equal(bad.status, 400)
  for (const f of ['pre_request', 'openapi_mode', 'server_trace_header', 'app_settings'])
    t.match(bad.body.message, `${f}:`)
  const back = await stack.panel('PATCH', path(), {
    token,
    body: {
      extra_search_path: ['public'],
      pre_request: null,
      app_settings: null,
      openapi_mode: 'follow-privileges',
      server_trace_header: null,
    },
  })
  t.equal(back.status, 200)
})

// db-root-spec and openapi-security-active from the panel: checked as the tenant file checks
// them, and the root path answers differently at once.
t.test('root_spec and openapi_security_active change what the REST root answers', async (t) => {
  await stack.owner(
    x,
    `CREATE DOMAIN "application/openapi+json" AS json;
    CREATE FUNCTION own_root() RETURNS "application/openapi+json" LANGUAGE sql STABLE AS
      $$ SELECT '{"swagger": "2.0", "info": {"title": "Own root"}}'::"application/openapi+json" $$;
    GRANT EXECUTE ON FUNCTION own_root() TO PUBLIC;`,
  )
  const before = await gatewayCall(stack, x, '/rest/v1/')
  t.equal(before.status, 200)
  t.notOk('security' in before.body, 'the OpenAPI document names no scheme by default')

  const bad: Array<[unknown, RegExp]> = [
    [{ root_spec: 'own_root; drop table orders' }, /root_spec: must be a function name/],
    [{ root_spec: 'public.own_root' }, /root_spec: must be a function name/],
    [{ root_spec: 'my root' }, /root_spec: must be a function name/],
    [{ root_spec: '1root' }, /root_spec: must be a function name/],
    [{ root_spec: 'r'.repeat(64) }, /root_spec: must be a function name/],
    [{ root_spec: 7 }, /root_spec: must be a function name/],
    [{ openapi_security_active: 'yes' }, /openapi_security_active: must be boolean/],
  ]
  for (const [body, message] of bad) {
    const r = await stack.panel('PATCH', path(), { token, body })
    t.equal(r.status, 400, JSON.stringify(body))
    t.equal(r.body.code, 'validation_failed')
    t.match(r.body.message, message, JSON.stringify(body))
  }
  t.equal((await stack.store.get(x.database))?.rest.root_spec, null, 'nothing written')

  let seen = servicesSeeChange()
  const secured = await stack.panel('PATCH', path(), { token, body: { openapi_security_active: true } })
  t.equal(secured.status, 200)
  t.match(secured.body.settings, { openapi_security_active: true, root_spec: null })
  await seen
  const doc = await gatewayCall(stack, x, '/rest/v1/')
  t.same(doc.body.security, [{ JWT: [] }], 'the document names the JWT scheme')

  seen = servicesSeeChange()
  const own = await stack.panel('PATCH', path(), { token, body: { root_spec: 'own_root' } })
  t.equal(own.status, 200)
  t.equal(own.body.settings.root_spec, 'own_root')
  t.equal((await stack.store.get(x.database))?.rest.root_spec, 'own_root')
  await seen
  const root = await gatewayCall(stack, x, '/rest/v1/', { headers: { accept: 'application/openapi+json' } })
  t.equal(root.status, 200)
  t.equal(root.headers.get('content-type'), 'application/openapi+json; charset=utf-8')
  t.same(root.body, { swagger: '2.0', info: { title: 'Own root' } }, 'the function answers the root')
  t.same((await gatewayCall(stack, x, '/rest/v1/orders?select=id&id=eq.1')).body, [{ id: 1 }], 'other paths as before')

  seen = servicesSeeChange()
  const back = await stack.panel('PATCH', path(), { token, body: { root_spec: null, openapi_security_active: false } })
  t.equal(back.status, 200)
  t.match(back.body.settings, { root_spec: null, openapi_security_active: false })
  await seen
  const plain = await gatewayCall(stack, x, '/rest/v1/')
  t.equal(plain.body.swagger, '2.0')
  t.notOk('security' in plain.body, 'the generated document again')
  t.not(plain.body.info?.title, 'Own root')
})

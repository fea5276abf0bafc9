// Client input that names an Object.prototype member (constructor, __proto__, toString,
// hasOwnProperty) is never taken for a known role, key kind, provider, table, grant type,
// verify type or preference: each is refused as any unknown value is, over the whole
// stack (gateway, REST and auth engines, panel) on a real tenant.
import t from 'tap'
import { startStack, gatewayCall, userToken, type Stack, type StackTenant } from '../helpers/panel-stack.js'

const NAMES = ['constructor', '__proto__', 'toString', 'hasOwnProperty', 'valueOf']

let stack: Stack
let x: StackTenant

t.before(async () => {
  stack = await startStack(t)
  x = await stack.addTenant({ organization: 'org_proto' })
  await stack.owner(
    x,
    `
    CREATE TABLE public.notes (id int PRIMARY KEY, body text);
    INSERT INTO public.notes VALUES (1, 'hello');
    SELECT platform.grant('SELECT', 'public.notes', 'anon');
  `,
  )
})

t.test('a token whose role is a prototype member is refused, never run as anon', async (t) => {
  for (const role of NAMES) {
    const token = await userToken(x, '00000000-0000-0000-0000-000000000001', { role })
    const r = await gatewayCall(stack, x, '/rest/v1/notes?select=id', { token })
    t.equal(r.status, 401, `role ${role}: 401`)
    t.equal(r.body.code, 'invalid_token', `role ${role}: invalid_token`)
    t.match(r.body.details, `role "${role}" is not accepted; expected authenticated, anon or service_role`)
    const a = await gatewayCall(stack, x, '/auth/v1/user', { token })
    t.equal(a.status, 401, `role ${role} at /auth/v1/user: 401`)
  }
  const ok = await gatewayCall(stack, x, '/rest/v1/notes?select=id', {
    token: await userToken(x, '00000000-0000-0000-0000-000000000001', { role: 'anon' }),
  })
  t.equal(ok.status, 200, 'a real role passes')
})

t.test('an API key named like a prototype member is an invalid key', async (t) => {
  for (const key of NAMES) {
    const r = await gatewayCall(stack, x, '/rest/v1/notes', { headers: { apikey: key } })
    t.equal(r.status, 401, key)
    t.equal(r.body.code, 'invalid_api_key', key)
  }
})

t.test('tables, preferences and content types named like prototype members', async (t) => {
  for (const name of NAMES) {
    const table = await gatewayCall(stack, x, `/rest/v1/${name}`)
    t.equal(table.status, 404, `table ${name}: 404`)
    t.equal(table.body.code, 'unknown_table', `table ${name}: unknown_table`)
    const pref = await gatewayCall(stack, x, '/rest/v1/notes?select=id', {
      headers: { prefer: `${name}=x, handling=strict` },
    })
    t.equal(pref.status, 400, `Prefer ${name}: 400 under handling=strict`)
    t.equal(pref.body.code, 'PGRST122', `Prefer ${name}: the invalid-preference code`)
    const lenient = await gatewayCall(stack, x, '/rest/v1/notes?select=id', { headers: { prefer: `${name}=x` } })
    t.equal(lenient.status, 200, `Prefer ${name}: ignored when lenient`)
    const ct = await fetch(`${stack.gatewayUrl}/${x.database}/rest/v1/rpc/nothing_here`, {
      method: 'POST',
      headers: { apikey: x.file.keys.public, 'content-type': name },
      body: 'x',
    })
    t.ok(ct.status >= 400 && ct.status < 500, `Content-Type ${name}: a client error (${ct.status})`)
  }
})

t.test('auth: grant types, verify types and providers named like prototype members', async (t) => {
  for (const name of NAMES) {
    const grant = await gatewayCall(stack, x, `/auth/v1/token?grant_type=${encodeURIComponent(name)}`, {
      method: 'POST',
      body: {},
    })
    t.equal(grant.status, 400, `grant_type ${name}: 400`)
    t.equal(grant.body.error_code, 'invalid_credentials', `grant_type ${name}`)
    t.equal(grant.body.msg, 'unsupported_grant_type', `grant_type ${name}: unsupported`)

    const verify = await gatewayCall(stack, x, '/auth/v1/verify', {
      method: 'POST',
      body: { type: name, token_hash: 'a'.repeat(56) },
    })
    t.ok(verify.status >= 400 && verify.status < 500, `verify type ${name}: a client error (${verify.status})`)
    t.not(verify.body.error_code, 'unexpected_failure', `verify type ${name}`)

    const authorize = await fetch(
      `${stack.gatewayUrl}/${x.database}/auth/v1/authorize?provider=${encodeURIComponent(name)}`,
      {
        headers: { apikey: x.file.keys.public },
        redirect: 'manual',
      },
    )
    t.equal(authorize.status, 400, `provider ${name}: 400`)
    t.match(await authorize.json(), { error_code: 'validation_failed' }, `provider ${name}: unsupported provider`)
  }
})

t.test('panel: a test query as a prototype member is refused', async (t) => {
  const token = await stack.panelSession({ userId: 'p1', email: 'ops@example.com', orgs: ['org_proto'] })
  for (const as of NAMES) {
    const r = await stack.panel('POST', `/organizations/org_proto/databases/${x.database}/api/test-query`, {
      token,
      body: { sql: 'SELECT 1', as },
    })
    t.equal(r.status, 400, `as ${as}: 400`)
    t.match(r.body.message, /as must be one of/)
  }
})

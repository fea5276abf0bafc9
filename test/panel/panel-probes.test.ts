// What an attacker holding a panel member's session (or none) tries against the panel API:
// a test query whose result is huge (one row may hold a value of up to 1 GB) is cut off
// with a 400 naming the limit instead of filling the panel's memory or answering 500, and
// the panel keeps serving; the exchange (a sign-in) is limited per database and panel user
// by the database's sign-in bucket; client-chosen names (`__proto__`, `constructor`) in the path and
// the body are unknown values like any other; bad sessions are 401s.
import t from 'tap'
import { startStack, type Stack, type StackTenant } from '../helpers/panel-stack.js'
import { adminQuery } from '../helpers/db.js'

let stack: Stack
let x: StackTenant
let token: string
const base = () => `/organizations/org_probe/databases/${x.database}/api`

t.before(async () => {
  stack = await startStack(t, { panelOverrides: { test_query_max_bytes: 64 * 1024 } })
  x = await stack.addTenant({ organization: 'org_probe' })
  token = await stack.panelSession({ userId: 'p-probe', email: 'probe@example.com', orgs: ['org_probe'] })
})

t.test('a huge test-query result is cut off with a 400 naming the limit', async (t) => {
  // 50 MB in one value, then 100 rows of 1 MB each: both far over the 64 KiB limit.
  for (const sql of [
    "SELECT repeat('x', 50000000) AS big",
    "SELECT repeat('y', 1000000) AS big FROM generate_series(1, 100)",
  ]) {
    const r = await stack.panel('POST', `${base()}/test-query`, { token, body: { sql, as: 'anon' } })
    t.equal(r.status, 400, sql)
    t.equal(r.body.code, 'test_query_result_too_large')
    t.match(r.body.message, /larger than 65536 bytes/)
    t.equal(r.headers.get('x-gatehouse-error-code'), 'test_query_result_too_large')
  }
  // The pool and the panel are fine afterwards.
  const ok = await stack.panel('POST', `${base()}/test-query`, {
    token,
    body: { sql: "SELECT repeat('z', 1000) AS fine", as: 'anon' },
  })
  t.equal(ok.status, 200)
  t.equal(ok.body.rows[0].fine.length, 1000)
  const rows = await stack.panel('POST', `${base()}/test-query`, {
    token,
    body: { sql: 'SELECT g FROM generate_series(1, 5) g', as: 'svc' },
  })
  t.equal(rows.status, 200)
  t.same(rows.body.rows, [{ g: 1 }, { g: 2 }, { g: 3 }, { g: 4 }, { g: 5 }])
})

t.test('prototype names in the path and the body are unknown values', async (t) => {
  for (const org of ['__proto__', 'constructor']) {
    const r = await stack.panel('POST', `/organizations/${org}/databases/${x.database}/api/app-session`, { token })
    t.equal(r.status, 403, org)
    t.equal(r.body.code, 'not_a_member')
  }
  for (const db of ['__proto__', 'constructor', 'toString']) {
    const r = await stack.panel('POST', `/organizations/org_probe/databases/${db}/api/app-session`, { token })
    t.equal(r.status, 404, db)
    t.equal(r.body.code, 'database_not_found')
  }
  const as = await stack.panel('POST', `${base()}/test-query`, {
    token,
    body: { sql: 'SELECT current_user', as: '__proto__' },
  })
  t.equal(as.status, 400)
  t.equal(as.body.code, 'validation_failed')
  const key = await stack.panel('POST', `${base()}/test-query`, {
    token,
    body: JSON.parse('{"__proto__": {"as": "svc"}, "sql": "SELECT current_user"}'),
  })
  t.equal(key.status, 400)
  t.equal(key.body.code, 'validation_failed')
  const settings = await stack.panel('PATCH', `${base()}/auth-settings`, {
    token,
    body: JSON.parse('{"providers": {"__proto__": {"client_id": "x"}}}'),
  })
  t.equal(settings.status, 400)
  t.equal(settings.body.code, 'validation_failed')
})

t.test('the exchange is limited like a sign-in, per database and panel user', async (t) => {
  const limited = await stack.addTenant({
    organization: 'org_probe',
    auth: { rate_limits: { sign_in_sign_up: { capacity: 3, rate: 3, interval_seconds: 300 } } } as never,
  })
  const url = `/organizations/org_probe/databases/${limited.database}/api/app-session`
  const member = await stack.panelSession({ userId: 'p-limit', email: 'limit@example.com', orgs: ['org_probe'] })
  const statuses: number[] = []
  let last: Awaited<ReturnType<Stack['panel']>> | undefined
  for (let i = 0; i < 5; i++) {
    last = await stack.panel('POST', url, { token: member })
    statuses.push(last.status)
  }
  t.same(statuses, [200, 200, 200, 429, 429], 'three exchanges, then 429')
  t.equal(last!.body.code, 'over_request_rate_limit')
  t.match(last!.body.message, /at most 3 per 300 s/)
  t.ok(Number(last!.headers.get('retry-after')) >= 1, 'Retry-After')
  const sessions = await adminQuery<{ n: number }>('SELECT count(*)::int AS n FROM auth.sessions', [], limited.database)
  t.equal(sessions.rows[0]!.n, 3, 'a refused exchange made no session')
  const otherMember = await stack.panelSession({
    userId: 'p-limit-2',
    email: 'limit2@example.com',
    orgs: ['org_probe'],
  })
  t.equal(
    (await stack.panel('POST', url, { token: otherMember })).status,
    200,
    'another panel user has their own count',
  )
  t.equal(
    (await stack.panel('POST', `${base()}/app-session`, { token: member })).status,
    200,
    'and another database too',
  )
})

t.test('no session, a forged one, another organization', async (t) => {
  const none = await stack.panel('POST', `${base()}/app-session`)
  t.equal(none.status, 401)
  t.equal(none.body.code, 'no_session')
  const forged = await stack.panel('POST', `${base()}/app-session`, { token: token.slice(0, -4) + 'AAAA' })
  t.equal(forged.status, 401)
  t.equal(forged.body.code, 'invalid_session')
  const p = token.split('.')[1]!
  const algNone = `${Buffer.from(JSON.stringify({ alg: 'none', typ: 'JWT' })).toString('base64url')}.${p}.`
  const r = await stack.panel('POST', `${base()}/app-session`, { token: algNone })
  t.equal(r.status, 401, 'alg none')
  const other = await stack.panelSession({ userId: 'p-other', email: 'o@example.com', orgs: ['org_elsewhere'] })
  const foreign = await stack.panel('POST', `${base()}/app-session`, { token: other })
  t.equal(foreign.status, 403)
  t.equal(foreign.body.code, 'not_a_member')
})

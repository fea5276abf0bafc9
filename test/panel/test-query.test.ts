// The panel's test query on a real tenant: runs under the role of a key or of a user (claims
// set as for a real call, so auth.uid() and the policies work), caps rows, times out,
// always rolls back (nothing changes), answers refusals as the gateway does, and refuses
// bad input with clear 400s.
import t from 'tap'
import { randomUUID } from 'node:crypto'
import { startStack, type Stack, type StackTenant } from '../helpers/panel-stack.js'

let stack: Stack
let x: StackTenant
let token: string
const user = randomUUID()
const path = () => `/organizations/org_tq/databases/${x.database}/api/test-query`

async function query(body: unknown) {
  return stack.panel('POST', path(), { token, body })
}

async function count(): Promise<number> {
  return (await stack.owner<{ n: number }>(x, 'SELECT count(*)::int AS n FROM public.items')).rows[0]!.n
}

t.before(async () => {
  stack = await startStack(t, { panelOverrides: { test_query_timeout_ms: 300 } })
  x = await stack.addTenant({ organization: 'org_tq' })
  token = await stack.panelSession({ userId: 'p1', email: 'ops@example.com', orgs: ['org_tq'] })
  await stack.owner(
    x,
    `
    CREATE TABLE public.items (id int PRIMARY KEY, owner_id uuid NOT NULL, title text);
    ALTER TABLE public.items ENABLE ROW LEVEL SECURITY;
    CREATE POLICY own_items ON public.items FOR ALL TO authenticated USING (owner_id = auth.uid()) WITH CHECK (owner_id = auth.uid());
    SELECT platform.grant('SELECT, INSERT, UPDATE, DELETE', 'public.items', 'auth');
    INSERT INTO public.items SELECT g, '${user}', 'item ' || g FROM generate_series(1, 10) g;
    INSERT INTO public.items VALUES (99, gen_random_uuid(), 'not theirs');
    CREATE TABLE public.board (id int PRIMARY KEY);
    SELECT platform.grant('SELECT', 'public.board', 'anon');
  `,
  )
})

t.test('a write runs, shows its result, and is rolled back', async (t) => {
  const r = await query({ sql: 'DELETE FROM public.items RETURNING id', as: 'svc' })
  t.equal(r.status, 200)
  t.equal(r.body.rolled_back, true)
  t.equal(r.body.rows.length, 5, 'capped at test_query_max_rows')
  t.equal(r.body.truncated, true)
  t.equal(r.body.max_rows, 5)
  t.same(r.body.role, { as: 'svc', name: x.roles.svc })
  t.equal(await count(), 11, 'nothing deleted')

  const ins = await query({ sql: "INSERT INTO public.items VALUES (500, gen_random_uuid(), 'tmp')", as: 'svc' })
  t.equal(ins.status, 200)
  t.equal(ins.body.command, 'INSERT')
  t.equal(ins.body.row_count, 1)
  t.same(ins.body.rows, [])
  t.equal(await count(), 11, 'nothing inserted')
})

t.test('claims as for a real call: auth.uid(), auth.role() and the policies', async (t) => {
  const who = await query({
    sql: 'SELECT auth.uid() AS uid, auth.role() AS role, current_user AS db_role',
    as: 'authenticated',
    user_id: user,
  })
  t.equal(who.status, 200)
  t.same(who.body.rows, [{ uid: user, role: 'authenticated', db_role: x.roles.auth }])
  t.same(
    who.body.fields.map((f: { name: string }) => f.name),
    ['uid', 'role', 'db_role'],
  )

  const mine = await query({ sql: 'SELECT count(*)::int AS n FROM public.items', as: 'authenticated', user_id: user })
  t.same(mine.body.rows, [{ n: 10 }], 'the user sees its own rows')
  t.equal(mine.body.truncated, false)
  const nobody = await query({ sql: 'SELECT count(*)::int AS n FROM public.items', as: 'authenticated' })
  t.same(nobody.body.rows, [{ n: 0 }], 'no user id, no rows')
  const anonRole = await query({ sql: 'SELECT auth.role() AS role, current_user AS db_role', as: 'anon' })
  t.same(anonRole.body.rows, [{ role: 'anon', db_role: x.roles.anon }])
})

t.test('refusals come back as the gateway gives them', async (t) => {
  const unknown = await query({ sql: 'SELECT * FROM public.items', as: 'anon' })
  t.equal(unknown.status, 404)
  t.equal(unknown.body.code, 'unknown_table')
  t.match(unknown.body.message, `role anon (${x.roles.anon})`)
  t.match(unknown.body.details, `authenticated (${x.roles.auth})`)
  t.equal(unknown.headers.get('www-authenticate'), null)

  const grant = await query({ sql: 'INSERT INTO public.board VALUES (1)', as: 'anon' })
  t.equal(grant.status, 403)
  t.equal(grant.body.code, 'no_table_grant')
  t.equal(grant.body.hint, 'GRANT INSERT ON public.board TO anon;')
  t.equal(grant.body.rolled_back, true)

  const rls = await query({
    sql: `INSERT INTO public.items VALUES (600, '${randomUUID()}', 'forged')`,
    as: 'authenticated',
    user_id: user,
  })
  t.equal(rls.status, 403)
  t.equal(rls.body.code, 'permission_denied')
  t.equal(rls.body.sqlstate, '42501')
  t.match(rls.body.message, /row-level security/)
  t.match(rls.body.hint, /Nothing was written/)
})

t.test('Postgres errors of the statement: 400 query_error with sqlstate', async (t) => {
  const syntax = await query({ sql: 'SELEC 1', as: 'anon' })
  t.equal(syntax.status, 400)
  t.equal(syntax.body.code, 'query_error')
  t.equal(syntax.body.sqlstate, '42601')
  t.equal(syntax.body.position, 1)
  const two = await query({ sql: 'SELECT 1; SELECT 2', as: 'anon' })
  t.equal(two.status, 400, 'one statement only')
  t.equal(two.body.code, 'query_error')
})

t.test('the statement timeout cancels a long statement', async (t) => {
  const r = await query({ sql: 'SELECT pg_sleep(5)', as: 'svc' })
  t.equal(r.status, 400)
  t.equal(r.body.code, 'query_timeout')
  // The connection is fine afterwards.
  const ok = await query({ sql: 'SELECT 1 AS one', as: 'svc' })
  t.same(ok.body.rows, [{ one: 1 }])
})

t.test('nothing a statement leaves in the session survives it', async (t) => {
  const prep = await query({
    sql: "DO $$ BEGIN EXECUTE 'PREPARE leftover AS SELECT 1'; PERFORM set_config('app.mark', 'x', false); END $$",
    as: 'svc',
  })
  t.equal(prep.status, 200)
  for (let i = 0; i < 3; i++) {
    const after = await query({
      sql: "SELECT current_setting('app.mark', true) AS mark, (SELECT count(*)::int FROM pg_prepared_statements) AS prepared",
      as: 'svc',
    })
    t.equal(after.body.rows[0].prepared, 0, 'no prepared statement left')
    t.not(after.body.rows[0].mark, 'x', 'no session setting left')
  }
})

t.test('bad input: clear 400s', async (t) => {
  const cases: Array<[unknown, RegExp]> = [
    [{}, /sql must be a non-empty string/],
    [{ sql: '  ', as: 'anon' }, /sql must be a non-empty string/],
    [{ sql: 'SELECT 1', as: 'root' }, /as must be one of/],
    [{ sql: 'SELECT 1' }, /as must be one of/],
    [{ sql: 'SELECT 1', as: 'anon', user_id: user }, /user_id applies only/],
    [{ sql: 'SELECT 1', as: 'authenticated', user_id: 'bob' }, /UUID/],
    [{ sql: 'SELECT 1', as: 'anon', role: 'x' }, /unknown field "role"/],
    [{ sql: 'COMMIT', as: 'svc' }, /COMMIT is not allowed/],
    [{ sql: '/* a /* nested */ comment */ -- and a line\n  begin', as: 'svc' }, /BEGIN is not allowed/],
    [{ sql: 'set role postgres', as: 'svc' }, /SET is not allowed/],
    [{ sql: '-- only a comment', as: 'svc' }, /holds no statement/],
    [['SELECT 1'], /JSON object/],
  ]
  for (const [body, message] of cases) {
    const r = await query(body)
    t.equal(r.status, 400, JSON.stringify(body))
    t.equal(r.body.code, 'validation_failed')
    t.match(r.body.message, message)
  }
  const res = await fetch(`${stack.panelUrl}${path()}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: '{"sql":',
  })
  t.equal(res.status, 400)
  t.equal(((await res.json()) as { code: string }).code, 'bad_request')
  t.equal(await count(), 11)
})

t.test('only members of the owning organization', async (t) => {
  const outsider = await stack.panelSession({ userId: 'p2', orgs: ['org_else'] })
  const r = await stack.panel('POST', path(), { token: outsider, body: { sql: 'SELECT 1', as: 'svc' } })
  t.equal(r.status, 403)
})

// Last: it takes the REST engine's connection out of the tenant record.
t.test('a tenant record without engines.rest answers 409 tenant_engine_missing', async (t) => {
  const seen = new Promise<void>((resolve) => {
    const off = stack.panelStore.onChange((db) => {
      if (db === x.database) {
        off()
        resolve()
      }
    })
  })
  const { rest: _rest, ...engines } = x.tenant.engines ?? {}
  await stack.store.putAll([{ ...x.tenant, engines }])
  await seen
  const r = await query({ sql: 'SELECT 1', as: 'svc' })
  t.equal(r.status, 409)
  t.equal(r.body.code, 'tenant_engine_missing')
  t.match(r.body.message, /has no REST engine connection/)
})

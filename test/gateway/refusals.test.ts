// Refusal rewriting in the gateway, each refusal produced by its real cause on a real tenant
// behind the real REST engine: a grant to the wrong role (unknown_table naming the role),
// a missing privilege (no_table_grant whose hint, run by the owner, fixes it), other
// refusals of the database (permission_denied with sqlstate 42501), a policy letting no row
// through (still 200 []), and errors that are not refusals (unchanged).
import t from 'tap'
import { randomUUID } from 'node:crypto'
import { gatewayCall, startStack, userToken, type Stack, type StackTenant } from '../panel/stack.js'

let stack: Stack
let x: StackTenant
let other: StackTenant

t.before(async () => {
  stack = await startStack(t)
  ;[x, other] = await Promise.all([stack.addTenant(), stack.addTenant()])
  await stack.owner(x, `
    CREATE TABLE public.todos (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, owner_id uuid, title text NOT NULL);
    INSERT INTO public.todos (owner_id, title) VALUES (gen_random_uuid(), 'someone else''s');
    SELECT platform.grant('SELECT', 'public.todos', 'auth');

    CREATE TABLE public.inbox (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, body text);
    INSERT INTO public.inbox (body) VALUES ('hello');
    SELECT platform.grant('INSERT', 'public.inbox', 'anon');

    CREATE TABLE public.profiles (id int PRIMARY KEY, name text, secret text);
    INSERT INTO public.profiles VALUES (1, 'ada', 's3cr3t');
    GRANT SELECT (id, name) ON public.profiles TO ${quote(x.roles.anon)};

    CREATE FUNCTION public.gate_open() RETURNS boolean LANGUAGE sql AS 'SELECT true';
    REVOKE EXECUTE ON FUNCTION public.gate_open() FROM PUBLIC;
    CREATE TABLE public.gated (id int PRIMARY KEY);
    INSERT INTO public.gated VALUES (1);
    ALTER TABLE public.gated ENABLE ROW LEVEL SECURITY;
    CREATE POLICY gated_read ON public.gated FOR SELECT TO PUBLIC USING (public.gate_open());
    SELECT platform.grant('SELECT', 'public.gated', 'anon');

    CREATE TABLE public.mine (id int PRIMARY KEY, owner_id uuid NOT NULL);
    INSERT INTO public.mine VALUES (1, gen_random_uuid());
    ALTER TABLE public.mine ENABLE ROW LEVEL SECURITY;
    CREATE POLICY mine_read ON public.mine FOR SELECT TO PUBLIC USING (owner_id = auth.uid());
    SELECT platform.grant('SELECT', 'public.mine', 'anon');
  `)
})

function quote (name: string): string {
  return '"' + name.replace(/"/g, '""') + '"'
}

t.test('a grant to authenticated only, called as anon: unknown_table naming the anon role', async (t) => {
  // supabase-js sees the refusal as its error object.
  const anon = stack.supabase(x)
  const { data, error, status } = await anon.from('todos').select('*')
  t.equal(data, null)
  t.equal(status, 404)
  t.equal(error?.code, 'unknown_table')
  t.match(error?.message, /\banon\b/)
  t.match(error?.message, x.roles.anon, 'the real role name is named')
  t.match(error?.message, 'public.todos')
  t.match(error?.details, /holds no privilege/)
  t.match(error?.details, `authenticated (${x.roles.auth}): SELECT`, 'says who holds the grant')
  t.match(error?.hint, /grant to the wrong role/)
  t.match(error?.hint, "SELECT platform.grant('SELECT', 'public.todos', 'anon');")

  // The same table as a signed-in user: visible (the grant is right for that role).
  const token = await userToken(x, randomUUID())
  const r = await gatewayCall(stack, x, '/rest/v1/todos?select=title', { token })
  t.equal(r.status, 200)
  t.same(r.body, [{ title: "someone else's" }])
})

t.test('a table that does not exist: unknown_table saying so', async (t) => {
  const r = await gatewayCall(stack, x, '/rest/v1/todoz')
  t.equal(r.status, 404)
  t.equal(r.body.code, 'unknown_table')
  t.equal(r.headers.get('x-gatehouse-error-code'), 'unknown_table')
  t.match(r.body.message, `role anon (${x.roles.anon})`)
  t.match(r.body.details, /No table or view named "todoz" exists in schema public/)
  t.same(Object.keys(r.body).slice(0, 4), ['code', 'message', 'details', 'hint'])
})

t.test('a privilege missing for the method: no_table_grant whose hint the owner runs to fix it', async (t) => {
  // The anon role may INSERT into inbox but not SELECT from it.
  const first = await gatewayCall(stack, x, '/rest/v1/inbox?select=body')
  t.equal(first.status, 403)
  t.equal(first.body.code, 'no_table_grant')
  t.equal(first.body.sqlstate, '42501')
  t.match(first.body.message, `Role anon (${x.roles.anon}) lacks the SELECT privilege on table public.inbox, which GET needs`)
  t.match(first.body.details, /it holds INSERT/)
  t.equal(first.body.hint, "SELECT platform.grant('SELECT', 'public.inbox', 'anon');")

  // 1. The owner runs the hint exactly as given.
  await stack.owner(x, first.body.hint)
  // 2. The same call now succeeds, through supabase-js.
  const { data, error } = await stack.supabase(x).from('inbox').select('body')
  t.equal(error, null)
  t.same(data, [{ body: 'hello' }])
})

t.test('a column-level grant and a non-granted column: permission_denied 401 for anon, sqlstate 42501', async (t) => {
  const ok = await gatewayCall(stack, x, '/rest/v1/profiles?select=id,name')
  t.equal(ok.status, 200)
  t.same(ok.body, [{ id: 1, name: 'ada' }])

  const r = await gatewayCall(stack, x, '/rest/v1/profiles?select=secret')
  t.equal(r.status, 401)
  t.equal(r.body.code, 'permission_denied')
  t.equal(r.body.sqlstate, '42501')
  t.equal(r.headers.get('www-authenticate'), 'Bearer')
  t.match(r.body.message, 'permission denied for table profiles')
  t.match(r.body.details, `The request ran as role anon (${x.roles.anon})`)
  t.match(r.body.hint, /holds SELECT on some columns of public.profiles only/)
  t.notMatch(JSON.stringify(r.body), 's3cr3t')
})

t.test('a refusal from the database itself: permission_denied (403 when signed in) with sqlstate 42501', async (t) => {
  // The policy calls a function the request roles may not execute.
  const anon = await gatewayCall(stack, x, '/rest/v1/gated')
  t.equal(anon.status, 401)
  t.equal(anon.body.code, 'permission_denied')
  t.equal(anon.body.sqlstate, '42501')
  t.match(anon.body.message, 'permission denied for function gate_open')

  const token = await userToken(x, randomUUID())
  const { error, status } = await stack.supabase(x, 'public', token).from('gated').select('*')
  t.equal(status, 403)
  t.equal(error?.code, 'permission_denied')
  t.match(error?.details, `role authenticated (${x.roles.auth})`)
})

t.test('a policy that lets no row through stays 200 with an empty array', async (t) => {
  const { data, error, status } = await stack.supabase(x).from('mine').select('*')
  t.equal(error, null)
  t.equal(status, 200)
  t.same(data, [])
})

t.test('errors that are not refusals pass through unchanged', async (t) => {
  const r = await gatewayCall(stack, x, '/rest/v1/mine?id=zz.1')
  t.equal(r.status, 400)
  t.equal(r.body.code, 'PGRST100', 'PostgREST parse error kept as the engine sent it')
  const col = await gatewayCall(stack, x, '/rest/v1/mine?select=nope')
  t.equal(col.status, 400)
  t.equal(col.body.code, '42703')
})

t.test('nothing of another tenant leaks into a refusal', async (t) => {
  // The other tenant has a table of the same name granted to its anon role.
  await stack.owner(other, "CREATE TABLE public.todos (id int); SELECT platform.grant('SELECT', 'public.todos', 'anon');")
  const r = await gatewayCall(stack, x, '/rest/v1/todos')
  t.equal(r.body.code, 'unknown_table')
  const text = JSON.stringify(r.body)
  for (const role of Object.values(other.roles)) t.notMatch(text, role)
  t.notMatch(text, /\bFROM\b|json_agg|set_config/i, 'no SQL of the engine')
  t.notMatch(text, /at .*\.ts:\d+/, 'no stack trace')
})

t.test('when the catalog cannot be read, the refusal is still made, with less detail', async (t) => {
  // A tenant record whose owner connection is wrong (a real fault: bad credentials).
  const broken = { ...x.tenant, postgres: x.tenant.postgres.replace(/:[^:@/]+@/, ':wrong-password@') }
  await stack.store.putAll([broken])
  t.teardown(() => stack.store.putAll([x.tenant]))
  const r = await gatewayCall(stack, x, '/rest/v1/todos')
  t.equal(r.status, 404)
  t.equal(r.body.code, 'unknown_table')
  t.match(r.body.message, x.roles.anon)
  t.notMatch(JSON.stringify(r.body), 'wrong-password')
})

// Refusal rewriting in the gateway, each refusal produced by its real cause on a real tenant
// behind the real REST engine: a grant to the wrong role (unknown_table naming the role),
// a missing privilege (no_table_grant whose hint, run by the owner, fixes it), other
// refusals of the database (permission_denied with sqlstate 42501), an insert whose row the
// SELECT policy hides (rls_refusal, the row kept), a policy letting no row through (still
// 200 []), and errors that are not refusals (unchanged).
import t from 'tap'
import { randomUUID } from 'node:crypto'
import { gatewayCall, startStack, userToken, type Stack, type StackTenant } from '../helpers/panel-stack.js'

let stack: Stack
let x: StackTenant
let other: StackTenant

t.before(async () => {
  stack = await startStack(t)
  ;[x, other] = await Promise.all([stack.addTenant(), stack.addTenant()])
  await stack.owner(
    x,
    `
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

    CREATE TABLE public.notes (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, body text);
    SELECT platform.grant('SELECT', 'public.notes', 'auth');

    CREATE TABLE public.drops (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, owner_id uuid DEFAULT auth.uid(), body text NOT NULL);
    ALTER TABLE public.drops ENABLE ROW LEVEL SECURITY;
    CREATE POLICY drops_insert ON public.drops FOR INSERT TO authenticated WITH CHECK (body <> 'forbidden');
    CREATE POLICY drops_read ON public.drops FOR SELECT TO authenticated USING (owner_id <> auth.uid());
    SELECT platform.grant('SELECT, INSERT', 'public.drops', 'auth');

    CREATE TABLE public.guestbook (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, body text NOT NULL);
    ALTER TABLE public.guestbook ENABLE ROW LEVEL SECURITY;
    CREATE POLICY guestbook_sign ON public.guestbook FOR INSERT TO anon WITH CHECK (true);
    SELECT platform.grant('SELECT, INSERT', 'public.guestbook', 'anon');

    CREATE TABLE public.members (user_id uuid PRIMARY KEY);
    CREATE TABLE public.club (id int PRIMARY KEY);
    INSERT INTO public.club VALUES (1);
    ALTER TABLE public.club ENABLE ROW LEVEL SECURITY;
    CREATE POLICY club_members ON public.club FOR SELECT TO PUBLIC USING (EXISTS (SELECT 1 FROM public.members m WHERE m.user_id = auth.uid()));
    SELECT platform.grant('SELECT', 'public.club', 'anon');

    CREATE TABLE public.mine (id int PRIMARY KEY, owner_id uuid NOT NULL);
    INSERT INTO public.mine VALUES (1, gen_random_uuid());
    ALTER TABLE public.mine ENABLE ROW LEVEL SECURITY;
    CREATE POLICY mine_read ON public.mine FOR SELECT TO PUBLIC USING (owner_id = auth.uid());
    SELECT platform.grant('SELECT', 'public.mine', 'anon');
  `,
  )
})

function quote(name: string): string {
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
  t.match(
    error?.hint,
    'GRANT SELECT ON public.todos TO anon; then enable row-level security on the table and add a policy.',
  )

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
  t.equal(
    r.headers.get('proxy-status'),
    'gatehouse; error=unknown_table',
    "the engine's PostgREST; error=PGRST205 is replaced",
  )
  t.match(r.body.message, `role anon (${x.roles.anon})`)
  t.match(r.body.details, /No table or view named "todoz" exists in schema public/)
  t.same(Object.keys(r.body).slice(0, 4), ['code', 'message', 'details', 'hint'])
})

t.test('the hint asks only for the row-level security steps still missing', async (t) => {
  await stack.owner(
    x,
    `CREATE TABLE public.guarded (id int PRIMARY KEY);
     ALTER TABLE public.guarded ENABLE ROW LEVEL SECURITY;
     CREATE TABLE public.policed (id int PRIMARY KEY);
     ALTER TABLE public.policed ENABLE ROW LEVEL SECURITY;
     CREATE POLICY policed_read ON public.policed FOR SELECT USING (true);`,
  )
  const guarded = await stack.supabase(x).from('guarded').select('*')
  t.match(
    guarded.error?.hint,
    /GRANT SELECT ON public\.guarded TO anon; then add a policy \(row-level security is on\)\.$/,
  )
  const policed = await stack.supabase(x).from('policed').select('*')
  t.match(
    policed.error?.hint,
    /GRANT SELECT ON public\.policed TO anon; \(row-level security is on and the table has policies\)\.$/,
  )
  t.notMatch(policed.error?.hint, /enable row-level security/)
})

t.test('a privilege missing for the method: no_table_grant whose hint the owner runs to fix it', async (t) => {
  // The anon role may INSERT into inbox but not SELECT from it.
  const first = await gatewayCall(stack, x, '/rest/v1/inbox?select=body')
  t.equal(first.status, 403)
  t.equal(first.body.code, 'no_table_grant')
  t.equal(first.body.sqlstate, '42501')
  t.match(
    first.body.message,
    `Role anon (${x.roles.anon}) lacks the SELECT privilege on table public.inbox, which GET needs`,
  )
  t.match(first.body.details, /it holds INSERT/)
  t.equal(first.body.hint, 'GRANT SELECT ON public.inbox TO anon;')

  // 1. The owner runs the hint exactly as given.
  await stack.owner(x, first.body.hint)
  // 2. The same call now succeeds, through supabase-js.
  const { data, error } = await stack.supabase(x).from('inbox').select('body')
  t.equal(error, null)
  t.same(data, [{ body: 'hello' }])
})

t.test('SELECT granted but INSERT not: no_table_grant for the insert, and the hint fixes it', async (t) => {
  const token = await userToken(x, randomUUID())
  const client = stack.supabase(x, 'public', token)
  const first = await client.from('notes').insert({ body: 'first' })
  t.equal(first.status, 403)
  t.equal(first.error?.code, 'no_table_grant')
  t.match(
    first.error?.message,
    `Role authenticated (${x.roles.auth}) lacks the INSERT privilege on table public.notes, which POST needs`,
  )
  t.match(first.error?.details, /it holds SELECT/)
  t.equal(first.error?.hint, 'GRANT INSERT ON public.notes TO authenticated;')

  // 1. The owner runs the hint as given; 2. the same insert succeeds and the row is there.
  await stack.owner(x, first.error!.hint)
  const retry = await client.from('notes').insert({ body: 'first' })
  t.equal(retry.error, null)
  t.equal(retry.status, 201)
  const rows = await stack.owner(x, 'SELECT body FROM public.notes')
  t.same(rows.rows, [{ body: 'first' }])

  // Anon holds nothing on notes: its insert is an unknown_table naming anon, hint for INSERT.
  const anon = await stack.supabase(x).from('notes').insert({ body: 'anon' })
  t.equal(anon.error?.code, 'unknown_table')
  t.match(anon.error?.message, `role anon (${x.roles.anon})`)
  t.match(anon.error?.hint, 'GRANT INSERT ON public.notes TO anon;')
})

t.test('an insert whose row the SELECT policy hides: rls_refusal, and the row is in the table', async (t) => {
  const token = await userToken(x, randomUUID())
  const client = stack.supabase(x, 'public', token)
  const r = await client.from('drops').insert({ body: 'hidden from me' }).select()
  t.equal(r.status, 403)
  t.equal(r.data, null)
  t.equal(r.error?.code, 'rls_refusal')
  t.match(
    r.error?.message,
    `The row was written, but the SELECT policy of public.drops hides it from role authenticated (${x.roles.auth})`,
  )
  t.match(r.error?.details, /written to public.drops/)
  t.match(r.error?.hint, /Do not retry/)
  const kept = await stack.owner(x, "SELECT count(*)::int AS n FROM public.drops WHERE body = 'hidden from me'")
  t.equal(kept.rows[0]!.n, 1, 'the row was written once')
  const raw = await gatewayCall(stack, x, '/rest/v1/drops', {
    method: 'POST',
    token,
    body: { body: 'hidden too' },
    headers: { prefer: 'return=representation' },
  })
  t.same([raw.status, raw.body.code, raw.body.row_written], [403, 'rls_refusal', true], 'the body says row_written')

  // With return=minimal the same insert is a plain success.
  const minimal = await client.from('drops').insert({ body: 'minimal' })
  t.equal(minimal.error, null)
  t.equal(minimal.status, 201)
})

t.test(
  'the same for anon: rls_refusal is 401 with a Bearer challenge, as PostgREST answers 42501 to anon',
  async (t) => {
    const r = await gatewayCall(stack, x, '/rest/v1/guestbook', {
      method: 'POST',
      body: { body: 'signed' },
      headers: { prefer: 'return=representation' },
    })
    t.same([r.status, r.body.code, r.body.row_written], [401, 'rls_refusal', true])
    t.equal(r.headers.get('www-authenticate'), 'Bearer')
    t.match(r.body.message, `hides it from role anon (${x.roles.anon})`)
    const kept = await stack.owner(x, "SELECT count(*)::int AS n FROM public.guestbook WHERE body = 'signed'")
    t.equal(kept.rows[0]!.n, 1, 'the row was written once')
  },
)

t.test('an insert the INSERT policy refuses: permission_denied, nothing written', async (t) => {
  const token = await userToken(x, randomUUID())
  const r = await gatewayCall(stack, x, '/rest/v1/drops', {
    method: 'POST',
    token,
    body: { body: 'forbidden' },
    headers: { prefer: 'return=representation' },
  })
  t.equal(r.status, 403)
  t.equal(r.body.code, 'permission_denied')
  t.equal(r.body.sqlstate, '42501')
  t.match(r.body.message, 'new row violates row-level security policy for table "drops"')
  t.match(r.body.hint, /Nothing was written/)
  const none = await stack.owner(x, "SELECT count(*)::int AS n FROM public.drops WHERE body = 'forbidden'")
  t.equal(none.rows[0]!.n, 0)
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

t.test('a policy reading a table the role may not read: permission_denied naming that table', async (t) => {
  const r = await gatewayCall(stack, x, '/rest/v1/club')
  t.equal(r.status, 401)
  t.equal(r.body.code, 'permission_denied', 'not unknown_table: the addressed table is visible')
  t.equal(r.body.sqlstate, '42501')
  t.match(r.body.message, 'permission denied for table members')
  t.match(r.body.hint, 'The statement touched public.members, on which role anon holds no privilege')
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
  await stack.owner(
    other,
    "CREATE TABLE public.todos (id int); SELECT platform.grant('SELECT', 'public.todos', 'anon');",
  )
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

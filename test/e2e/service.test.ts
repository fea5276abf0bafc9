// docs/service.md from top to bottom with @supabase/supabase-js against the stack `npm start`
// brings up (startDev on a renamed working copy of config/tenants, tenant files in memory):
// sign-up and sign-in, a fresh database exposing zero tables, making a table visible with
// platform.grant + RLS + a policy on auth.uid(), reads (filters, order, embedding), the
// default limit of 1000, inserts with return=representation, every refusal of the Errors
// table, and the secret key running as svc.
import t from 'tap'
import { randomUUID } from 'node:crypto'
import { email, startE2eStack, type E2eStack, type E2eTenant } from '../helpers/e2e-stack.js'
import { until } from '../helpers/eventually.js'

let stack: E2eStack
let a: E2eTenant

t.before(async () => {
  stack = await startE2eStack(t, { source: 'files', prefix: 'e2e_svc' })
  a = stack.tenant('demo')
})

/** Waits until the REST engine knows a table the owner just created (the secret key sees every table). */
async function untilKnown(table: string): Promise<void> {
  await until(
    async () => (await stack.gateway(a, `/rest/v1/${table}?limit=0`, { apikey: a.secret_key })).status === 200,
    `the REST engine sees public.${table}`,
  )
}

interface Signed {
  id: string
  email: string
  token: string
}

const users: Record<'ada' | 'bob', Signed> = {} as never

t.test('sign-up, sign-in, read and update the user, sign out (supabase-js)', async (t) => {
  const client = stack.supabase(a)
  const address = email('ada')

  // 1. Sign up with e-mail and password: the demo tenant needs no confirmation mail.
  const up = await client.auth.signUp({ email: address, password: 'correct horse 1' })
  t.equal(up.error, null)
  t.equal(up.data.user?.email, address)
  t.ok(up.data.session?.access_token, 'a session right away')
  t.equal(up.data.user?.role, 'authenticated')

  // 2. Sign out, then sign in with the password.
  t.equal((await client.auth.signOut()).error, null)
  const wrong = await client.auth.signInWithPassword({ email: address, password: 'not it at all' })
  t.equal(wrong.data.session, null)
  t.equal(wrong.error?.status, 400)
  t.equal(wrong.error?.code, 'invalid_credentials')
  const inn = await client.auth.signInWithPassword({ email: address, password: 'correct horse 1' })
  t.equal(inn.error, null)
  const session = inn.data.session!
  t.equal(session.user.id, up.data.user?.id, 'the same user')
  t.equal(session.token_type, 'bearer')
  t.equal(session.expires_in, 3600)

  // 3. Read the current user.
  const me = await client.auth.getUser()
  t.equal(me.error, null)
  t.equal(me.data.user?.id, session.user.id)
  t.equal(me.data.user?.email, address)

  // 4. Update the user: metadata, then the password (the new one signs in).
  const upd = await client.auth.updateUser({ data: { nickname: 'ada' } })
  t.equal(upd.error, null)
  t.equal(upd.data.user?.user_metadata.nickname, 'ada')
  t.equal((await client.auth.getUser()).data.user?.user_metadata.nickname, 'ada', 'kept')
  t.equal((await client.auth.updateUser({ password: 'correct horse 2' })).error, null)

  // 5. Sign out: the session's refresh token is revoked and getUser with the old token fails.
  const oldAccess = (await client.auth.getSession()).data.session!.access_token
  const oldRefresh = (await client.auth.getSession()).data.session!.refresh_token
  t.equal((await client.auth.signOut()).error, null)
  t.equal((await client.auth.getSession()).data.session, null)
  const after = await stack.supabase(a).auth.getUser(oldAccess)
  t.equal(after.data.user, null, 'the signed-out session is gone')
  t.ok(after.error)
  const refreshed = await stack.supabase(a).auth.refreshSession({ refresh_token: oldRefresh })
  t.equal(refreshed.data.session, null, 'its refresh token no longer works')
  t.ok(refreshed.error)
  const again = await client.auth.signInWithPassword({ email: address, password: 'correct horse 2' })
  t.equal(again.error, null, 'the new password signs in')
  users.ada = { id: again.data.user!.id, email: address, token: again.data.session!.access_token }

  const bobAddress = email('bob')
  const bob = await stack.supabase(a).auth.signUp({ email: bobAddress, password: 'bob password 1' })
  t.equal(bob.error, null)
  users.bob = { id: bob.data.user!.id, email: bobAddress, token: bob.data.session!.access_token }
})

t.test('a fresh database exposes zero tables', async (t) => {
  // No table of the exposed schema is granted to the anon or signed-in role.
  const granted = await stack.owner(
    a,
    `
    SELECT count(*)::int AS n FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p', 'v', 'm', 'f')
       AND (has_table_privilege(platform.role('anon'), c.oid, 'SELECT, INSERT, UPDATE, DELETE')
         OR has_table_privilege(platform.role('auth'), c.oid, 'SELECT, INSERT, UPDATE, DELETE'))`,
  )
  t.equal(granted.rows[0].n, 0)
  // The OpenAPI root lists no table, for the public key and for a signed-in user.
  const tablePaths = (doc: any): string[] =>
    Object.keys(doc?.paths ?? {}).filter((p) => p !== '/' && !p.startsWith('/rpc/'))
  const rootAnon = await stack.gateway(a, '/rest/v1/')
  t.equal(rootAnon.status, 200)
  t.same(tablePaths(rootAnon.body), [])
  const rootUser = await stack.gateway(a, '/rest/v1/', { token: users.ada.token })
  t.equal(rootUser.status, 200)
  t.same(tablePaths(rootUser.body), [])
  // The auth schema (users, sessions) is not reachable over REST either.
  const authUsers = await stack.gateway(a, '/rest/v1/users?select=email', { headers: { 'accept-profile': 'auth' } })
  t.equal(authUsers.status, 406)
  t.equal(authUsers.body.code, 'PGRST106')
  const plain = await stack.gateway(a, '/rest/v1/users?select=email')
  t.equal(plain.status, 404)
  t.equal(plain.body.code, 'unknown_table')

  // A table the owner creates stays invisible until it is granted.
  await stack.owner(a, 'CREATE TABLE public.drafts (id int PRIMARY KEY, body text)')
  await untilKnown('drafts')
  const anon = await stack.supabase(a).from('drafts').select('*')
  t.equal(anon.status, 404)
  t.equal(anon.error?.code, 'unknown_table')
  const signedIn = await stack.supabase(a, { accessToken: users.ada.token }).from('drafts').select('*')
  t.equal(signedIn.status, 404)
  t.equal(signedIn.error?.code, 'unknown_table')
  t.match(signedIn.error?.message, `authenticated (${a.roles.auth})`)
  const rootAfter = await stack.gateway(a, '/rest/v1/', { token: users.ada.token })
  t.same(tablePaths(rootAfter.body), [], 'still not listed')
  const rootSecret = await stack.gateway(a, '/rest/v1/', { apikey: a.secret_key })
  t.same(tablePaths(rootSecret.body), ['/drafts'], 'the secret key sees it')
})

t.test('making a table visible: platform.grant + RLS + a policy on auth.uid()', async (t) => {
  // The owner, connected with owner_url from dev.json, as docs/service.md §3 says.
  await stack.owner(
    a,
    `
    CREATE TABLE public.projects (
      id int PRIMARY KEY,
      owner_id uuid NOT NULL,
      name text NOT NULL
    );
    CREATE TABLE public.notes (
      id int PRIMARY KEY,
      owner_id uuid NOT NULL DEFAULT auth.uid(),
      project_id int REFERENCES public.projects (id),
      title text NOT NULL,
      done boolean NOT NULL DEFAULT false,
      rank int
    );
    -- 1. grant to the role platform.role() names
    SELECT platform.grant('SELECT', 'public.projects', 'auth');
    SELECT platform.grant('SELECT', 'public.notes', 'auth');
    -- 2. enable RLS
    ALTER TABLE public.projects ENABLE ROW LEVEL SECURITY;
    ALTER TABLE public.notes ENABLE ROW LEVEL SECURITY;
    -- 3. a policy comparing the owner column to auth.uid()
    CREATE POLICY projects_own ON public.projects FOR SELECT TO PUBLIC USING (owner_id = auth.uid());
    CREATE POLICY notes_own ON public.notes FOR SELECT TO PUBLIC USING (owner_id = auth.uid());
  `,
  )
  await stack.owner(a, "INSERT INTO public.projects VALUES (1, $1, 'house'), (2, $1, 'garden'), (3, $2, 'boat')", [
    users.ada.id,
    users.bob.id,
  ])
  await stack.owner(
    a,
    `
    INSERT INTO public.notes (id, owner_id, project_id, title, done, rank) VALUES
      (1, $1, 1, 'paint the door', false, 3),
      (2, $1, 1, 'fix the roof', true, 1),
      (3, $1, 2, 'plant tulips', false, 2),
      (4, $1, NULL, 'call mum', true, 5),
      (5, $2, 3, 'sand the hull', false, 4)`,
    [users.ada.id, users.bob.id],
  )
  await untilKnown('notes')

  const ada = stack.supabase(a, { accessToken: users.ada.token })
  const mine = await ada.from('notes').select('id').order('id')
  t.equal(mine.error, null)
  t.same(mine.data, [{ id: 1 }, { id: 2 }, { id: 3 }, { id: 4 }], 'ada sees her four notes')
  const bobs = await stack.supabase(a, { accessToken: users.bob.token }).from('notes').select('id, title')
  t.same(bobs.data, [{ id: 5, title: 'sand the hull' }], 'bob sees his one note')

  // The grant went to the signed-in role only: the public key alone does not find the table.
  const anon = await stack.supabase(a).from('notes').select('id')
  t.equal(anon.status, 404)
  t.equal(anon.error?.code, 'unknown_table')
  t.match(anon.error?.message, `anon (${a.roles.anon})`, 'names the role the request ran as')

  // Granted to anon as well: the policy lets no anonymous row through (an empty array, not an error).
  await stack.owner(a, "SELECT platform.grant('SELECT', 'public.notes', 'anon')")
  const empty = await stack.supabase(a).from('notes').select('id')
  t.equal(empty.error, null)
  t.equal(empty.status, 200)
  t.same(empty.data, [])
})

t.test('reads: filters, order, embedding', async (t) => {
  const ada = stack.supabase(a, { accessToken: users.ada.token })

  const open = await ada.from('notes').select('id, title').eq('done', false).order('rank', { ascending: false })
  t.same(open.data, [
    { id: 1, title: 'paint the door' },
    { id: 3, title: 'plant tulips' },
  ])

  const some = await ada.from('notes').select('id').in('id', [2, 4, 5]).order('id', { ascending: false })
  t.same(some.data, [{ id: 4 }, { id: 2 }], "bob's note 5 stays hidden even when asked for")

  const like = await ada.from('notes').select('title').ilike('title', '%THE%').gt('rank', 1).order('title')
  t.same(like.data, [{ title: 'paint the door' }])

  const nulls = await ada.from('notes').select('id').is('project_id', null)
  t.same(nulls.data, [{ id: 4 }])

  const either = await ada.from('notes').select('id').or('rank.eq.1,title.eq.call mum').order('id')
  t.same(either.data, [{ id: 2 }, { id: 4 }])

  const paged = await ada.from('notes').select('id', { count: 'exact' }).order('id').range(1, 2)
  t.same(paged.data, [{ id: 2 }, { id: 3 }])
  t.equal(paged.count, 4)

  // Many-to-one: each note with its project.
  const withProject = await ada.from('notes').select('title, projects(name)').order('id').limit(2)
  t.same(withProject.data, [
    { title: 'paint the door', projects: { name: 'house' } },
    { title: 'fix the roof', projects: { name: 'house' } },
  ])
  // One-to-many, with a filter and an order inside the embedding.
  const withNotes = await ada
    .from('projects')
    .select('name, notes(title)')
    .eq('notes.done', false)
    .order('name')
    .order('id', { referencedTable: 'notes' })
  t.equal(withNotes.error, null)
  t.same(withNotes.data, [
    { name: 'garden', notes: [{ title: 'plant tulips' }] },
    { name: 'house', notes: [{ title: 'paint the door' }] },
  ])
  // An inner join drops projects without a matching note; RLS applies inside the embedding too.
  const inner = await ada.from('projects').select('name, notes!inner(id)').eq('notes.rank', 1)
  t.same(inner.data, [{ name: 'house', notes: [{ id: 2 }] }])

  // A single object.
  const one = await ada.from('notes').select('title').eq('id', 3).single()
  t.same(one.data, { title: 'plant tulips' })
  const none = await ada.from('notes').select('title').eq('id', 5).single()
  t.equal(none.status, 406)
  t.equal(none.error?.code, 'PGRST116', "bob's note is not there for ada")
})

t.test('the default limit of 1000 on a 1,500-row table, and an explicit larger limit', async (t) => {
  await stack.owner(
    a,
    `
    CREATE TABLE public.readings (id int PRIMARY KEY, value double precision NOT NULL);
    INSERT INTO public.readings SELECT i, i / 10.0 FROM generate_series(1, 1500) AS i;
    SELECT platform.grant('SELECT', 'public.readings', 'anon');
    ALTER TABLE public.readings ENABLE ROW LEVEL SECURITY;
    CREATE POLICY readings_all ON public.readings FOR SELECT TO PUBLIC USING (true);
  `,
  )
  await untilKnown('readings')
  const client = stack.supabase(a)

  const all = await client.from('readings').select('id', { count: 'exact' }).order('id')
  t.equal(all.error, null)
  t.equal(all.data?.length, 1000, 'no limit given: the gateway applies 1000')
  t.equal(all.data?.[999]?.id, 1000)
  t.equal(all.count, 1500, 'the count still covers the whole table')

  const raw = await stack.gateway(a, '/rest/v1/readings?select=id&order=id')
  t.equal(raw.body.length, 1000)
  t.equal(raw.headers.get('x-gatehouse-default-limit'), '1000')
  t.equal(raw.headers.get('content-range'), '0-999/*')
  t.equal(
    raw.headers.get('x-gatehouse-limit-applied'),
    '1000',
    'the gateway says, from Content-Range, that the result was cut by a limit the caller did not give',
  )

  // The demo tenant has max_limit: null, so a larger explicit limit is honoured.
  const more = await client.from('readings').select('id').order('id').limit(1200)
  t.equal(more.data?.length, 1200)
  const rawMore = await stack.gateway(a, '/rest/v1/readings?select=id&limit=1200')
  t.equal(rawMore.body.length, 1200)
  t.equal(rawMore.headers.get('x-gatehouse-default-limit'), null)
  t.equal(rawMore.headers.get('x-gatehouse-limit-applied'), null, "the caller's own limit is not reported as a cut")

  // A range past the first page reaches the rest of the table.
  const tail = await client.from('readings').select('id').order('id').range(1400, 1599)
  t.equal(tail.data?.length, 100)
  t.equal(tail.data?.[99]?.id, 1500)
})

t.test('insert with return=representation is subject to the SELECT policy', async (t) => {
  await stack.owner(
    a,
    `
    CREATE TABLE public.messages (
      id int GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      author_id uuid NOT NULL DEFAULT auth.uid(),
      recipient_id uuid NOT NULL,
      body text NOT NULL
    );
    SELECT platform.grant('SELECT, INSERT', 'public.messages', 'auth');
    ALTER TABLE public.messages ENABLE ROW LEVEL SECURITY;
    -- anyone signed in may write, as themselves; only the recipient may read
    CREATE POLICY messages_write ON public.messages FOR INSERT TO PUBLIC WITH CHECK (author_id = auth.uid());
    CREATE POLICY messages_read ON public.messages FOR SELECT TO PUBLIC USING (recipient_id = auth.uid());
  `,
  )
  await untilKnown('messages')
  const ada = stack.supabase(a, { accessToken: users.ada.token })

  // A note to herself: the read policy shows it, so it comes back.
  const self = await ada.from('messages').insert({ recipient_id: users.ada.id, body: 'remember the milk' }).select()
  t.equal(self.error, null, 'POST with return=representation')
  t.equal(self.status, 201)
  t.match(self.data, [{ author_id: users.ada.id, recipient_id: users.ada.id, body: 'remember the milk' }])

  // Without a representation the read policy does not matter.
  const minimal = await ada.from('messages').insert({ recipient_id: users.bob.id, body: 'hi bob (minimal)' })
  t.equal(minimal.error, null)
  t.equal(minimal.status, 201)

  // To bob with return=representation: written, but ada may not read it back: RLS refusal.
  const toBob = await ada
    .from('messages')
    .insert({ recipient_id: users.bob.id, body: 'hi bob (representation)' })
    .select()
  t.equal(toBob.data, null)
  t.equal(toBob.error?.code, 'rls_refusal')
  t.equal(toBob.status, 403)
  const written = await stack.owner(a, 'SELECT body FROM public.messages WHERE recipient_id = $1 ORDER BY id', [
    users.bob.id,
  ])
  t.same(
    written.rows.map((r) => r.body),
    ['hi bob (minimal)', 'hi bob (representation)'],
    'the insert succeeded',
  )
  const bobReads = await stack.supabase(a, { accessToken: users.bob.token }).from('messages').select('body').order('id')
  t.same(bobReads.data, [{ body: 'hi bob (minimal)' }, { body: 'hi bob (representation)' }])

  // The insert policy itself still refuses a message in someone else's name.
  const forged = await ada
    .from('messages')
    .insert({ author_id: users.bob.id, recipient_id: users.ada.id, body: 'forged' })
  t.equal(forged.status, 403)
  t.ok(forged.error)
})

t.test('every refusal of the Errors table', async (t) => {
  await stack.owner(
    a,
    `
    CREATE TABLE public.wrong_grant (id int PRIMARY KEY);
    SELECT platform.grant('SELECT', 'public.wrong_grant', 'auth');
    CREATE TABLE public.suggestions (id int PRIMARY KEY, body text);
    INSERT INTO public.suggestions VALUES (1, 'more tea');
    SELECT platform.grant('INSERT', 'public.suggestions', 'anon');
    CREATE TABLE public.staff (id int PRIMARY KEY, name text, salary int);
    INSERT INTO public.staff VALUES (1, 'ada', 100);
    CREATE TABLE public.private_rows (id int PRIMARY KEY, owner_id uuid);
    INSERT INTO public.private_rows VALUES (1, gen_random_uuid());
    SELECT platform.grant('SELECT', 'public.private_rows', 'anon');
    ALTER TABLE public.private_rows ENABLE ROW LEVEL SECURITY;
    CREATE POLICY private_own ON public.private_rows FOR SELECT TO PUBLIC USING (owner_id = auth.uid());
  `,
  )
  // A plain GRANT of some columns only, to this database's anon role.
  await stack.owner(a, `GRANT SELECT (id, name) ON public.staff TO "${a.roles.anon}"`)
  await untilKnown('staff')
  const anon = stack.supabase(a)

  // unknown_table: the grant went to the wrong role; the text names the role of the request.
  const unknown = await anon.from('wrong_grant').select('*')
  t.equal(unknown.status, 404)
  t.equal(unknown.error?.code, 'unknown_table')
  t.match(unknown.error?.message, `anon (${a.roles.anon})`)
  t.match(unknown.error?.hint, /wrong role/)
  t.notMatch(JSON.stringify(unknown.error), /t_[0-9a-f]{10}_(rest|authn|owner)/, 'no login role leaks')

  // no_table_grant: the table exists, the role lacks SELECT; the hint is a GRANT the owner can run.
  const noGrant = await anon.from('suggestions').select('body')
  t.equal(noGrant.status, 403)
  t.equal(noGrant.error?.code, 'no_table_grant')
  t.match(noGrant.error?.hint, /^GRANT SELECT ON public\.suggestions TO anon;$/)
  await stack.owner(a, noGrant.error!.hint)
  const fixed = await anon.from('suggestions').select('body')
  t.equal(fixed.error, null, 'the hint, run by the owner, fixes it')
  t.same(fixed.data, [{ body: 'more tea' }])

  // permission_denied / 42501: a refusal from the database itself (a column not granted).
  const columns = await anon.from('staff').select('id, name')
  t.same(columns.data, [{ id: 1, name: 'ada' }])
  const denied = await anon.from('staff').select('salary')
  t.equal(denied.status, 401, 'anonymous: 401')
  t.equal(denied.error?.code, 'permission_denied')
  t.match(denied.error, { sqlstate: '42501' })
  t.notMatch(JSON.stringify(denied.error), '100', 'no value leaks')
  const deniedSignedIn = await stack.supabase(a, { accessToken: users.ada.token }).from('staff').select('salary')
  t.equal(deniedSignedIn.status, 403, 'signed in: 403')
  t.equal(deniedSignedIn.error?.code, 'permission_denied')

  // Empty array: the grant exists and the policy lets no row through: not an error.
  const empty = await anon.from('private_rows').select('*')
  t.equal(empty.error, null)
  t.equal(empty.status, 200)
  t.same(empty.data, [])

  // (The RLS refusal on insert with return=representation is the test above.)
})

t.test('the secret key runs as svc: every row, RLS bypassed', async (t) => {
  await stack.owner(
    a,
    `
    CREATE VIEW public.whoami AS
      SELECT current_user::text AS role_name, auth.role() AS kind, auth.uid() AS uid,
             (SELECT rolbypassrls FROM pg_roles WHERE rolname = current_user) AS bypass_rls;
    SELECT platform.grant('SELECT', 'public.whoami', 'anon');
  `,
  )
  await untilKnown('whoami')
  const svc = stack.supabase(a, { key: 'secret' })

  const who = await svc.from('whoami').select('*').single()
  t.same(who.data, { role_name: a.roles.svc, kind: 'service_role', uid: null, bypass_rls: true })
  const anonWho = await stack.supabase(a).from('whoami').select('*').single()
  t.same(anonWho.data, { role_name: a.roles.anon, kind: 'anon', uid: null, bypass_rls: false })
  const adaWho = await stack.supabase(a, { accessToken: users.ada.token }).from('whoami').select('*').single()
  t.same(adaWho.data, { role_name: a.roles.auth, kind: 'authenticated', uid: users.ada.id, bypass_rls: false })

  // Every note of every user, though the policy shows each user only theirs.
  const notes = await svc.from('notes').select('id').order('id')
  t.same(notes.data, [{ id: 1 }, { id: 2 }, { id: 3 }, { id: 4 }, { id: 5 }])
  // And tables nobody granted to the request roles (the owner's default privileges go to svc).
  const drafts = await svc.from('drafts').select('*')
  t.equal(drafts.error, null)
  t.same(drafts.data, [])
  // Writes too, whatever the policies say.
  const id = randomUUID()
  const put = await svc.from('private_rows').insert({ id: 2, owner_id: id }).select()
  t.equal(put.error, null)
  t.same(put.data, [{ id: 2, owner_id: id }])

  // The secret key also reaches the auth admin API (service_role), the public key does not.
  const admin = await svc.auth.admin.listUsers()
  t.equal(admin.error, null)
  t.ok(admin.data.users.some((u) => u.id === users.ada.id))
  const notAdmin = await stack.supabase(a).auth.admin.listUsers()
  t.ok(notAdmin.error, 'the public key is not an admin')
})

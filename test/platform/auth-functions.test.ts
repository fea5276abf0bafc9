// The auth schema's policy helpers (docs/auth-protocol.md §7.3, §4.3): auth.uid(), auth.role(),
// auth.email(), auth.jwt() read request.jwt.claims of the current transaction; auth.role()
// and auth.jwt()'s role claim map this tenant's role names back (docs/supabase.md, "The role
// claim in SQL"). Also: RLS policies built on them, and the DDL event trigger that asks the
// REST engine to reload its schema cache.
import t from 'tap'
import pg from 'pg'
import { createTestTenant, asRole, withClient } from '../helpers/tenants.js'
import { adminQuery, adminUrl } from '../helpers/db.js'
import { withDatabase } from '../../src/shared/index.js'
import { migrateDatabase } from '../../src/platform/index.js'

/** EXPLAIN (VERBOSE, COSTS OFF) of a statement, as one text. */
async function plan(c: pg.Client, sql: string): Promise<string> {
  const rows = (await c.query(`EXPLAIN (VERBOSE, COSTS OFF) ${sql}`)).rows as Array<Record<string, string>>
  return rows.map((r) => r['QUERY PLAN']).join('\n')
}

const USER = '4f0c5a3e-1c2b-4e8e-9a55-2a7f3f1b9c01'
const OTHER = '0b9e1f0a-7d44-4a8b-8f1e-5c3a2d6e7f80'

t.test('auth helper functions', async (t) => {
  const a = await createTestTenant(t)
  const rest = a.file.engines!.rest!
  const read = 'SELECT auth.uid()::text AS uid, auth.role() AS role, auth.email() AS email, auth.jwt() AS jwt'

  await t.test('auth.uid() is the sub of the claims set in the transaction', async (t) => {
    const claims = {
      sub: USER,
      role: a.roles.auth,
      email: 'ann@example.com',
      aud: 'authenticated',
      app_metadata: { provider: 'email' },
    }
    const row = await asRole(rest, a.roles.auth, async (c) => (await c.query(read)).rows[0], claims)
    t.same(row, {
      uid: USER,
      role: 'authenticated',
      email: 'ann@example.com',
      jwt: { ...claims, role: 'authenticated' },
    })
    // A new transaction on the same connection starts without claims.
    const after = await withClient(rest, async (c) => {
      await c.query('BEGIN')
      await c.query(`SET LOCAL ROLE "${a.roles.auth}"`)
      await c.query("SELECT set_config('request.jwt.claims', $1, true)", [JSON.stringify(claims)])
      const inside = (await c.query('SELECT auth.uid()::text AS uid')).rows[0].uid
      await c.query('COMMIT')
      await c.query('BEGIN')
      await c.query(`SET LOCAL ROLE "${a.roles.anon}"`)
      const outside = (await c.query('SELECT auth.uid()::text AS uid, auth.role() AS role')).rows[0]
      await c.query('ROLLBACK')
      return { inside, outside }
    })
    t.same(after, { inside: USER, outside: { uid: null, role: 'anon' } }, 'claims are transaction-local')
  })

  await t.test('auth.role() maps role names and passes other values through', async (t) => {
    const cases: Array<[string, string]> = [
      [a.roles.anon, 'anon'],
      [a.roles.auth, 'authenticated'],
      [a.roles.svc, 'service_role'],
      ['authenticated', 'authenticated'],
      ['anon', 'anon'],
      ['service_role', 'service_role'],
      ['t_0000000000_auth', 't_0000000000_auth'],
      ['custom', 'custom'],
    ]
    for (const [claim, expected] of cases) {
      const role = await asRole(rest, a.roles.anon, async (c) => (await c.query('SELECT auth.role() AS r')).rows[0].r, {
        role: claim,
      })
      t.equal(role, expected, `claim role ${claim} -> ${expected}`)
    }
    const none = await withClient(a.ownerUrl, async (c) => (await c.query(read)).rows[0])
    t.same(none, { uid: null, role: null, email: null, jwt: null }, 'no claims, not a request role: all NULL')
  })

  await t.test('auth.jwt() maps the role claim as auth.role() does and keeps every other claim', async (t) => {
    const cases: Array<[unknown, unknown]> = [
      [a.roles.anon, 'anon'],
      [a.roles.auth, 'authenticated'],
      [a.roles.svc, 'service_role'],
      ['authenticated', 'authenticated'],
      ['service_role', 'service_role'],
      [a.roles.owner, a.roles.owner],
      ['t_0000000000_auth', 't_0000000000_auth'],
      [7, 7],
      [null, null],
    ]
    const extra = { sub: USER, app_metadata: { provider: 'email', role: a.roles.svc }, user_role: 'admin' }
    for (const [claim, expected] of cases) {
      const row = await asRole(
        rest,
        a.roles.anon,
        async (c) =>
          (
            await c.query(
              "SELECT auth.jwt() AS jwt, current_setting('request.jwt.claims', true)::jsonb ->> 'role' AS raw",
            )
          ).rows[0],
        { ...extra, role: claim },
      )
      t.same(
        row.jwt,
        { ...extra, role: expected },
        `claim role ${JSON.stringify(claim)} -> ${JSON.stringify(expected)}`,
      )
      t.equal(row.raw, claim === null ? null : String(claim), 'request.jwt.claims itself is unchanged')
    }
    const noRole = await asRole(
      rest,
      a.roles.auth,
      async (c) => (await c.query('SELECT auth.jwt() AS j')).rows[0].j,
      extra,
    )
    t.same(noRole, extra, 'claims without role: no role added')
    const legacy = await asRole(rest, a.roles.auth, async (c) => {
      await c.query("SELECT set_config('request.jwt.claim', $1, true)", [
        JSON.stringify({ sub: OTHER, role: a.roles.auth }),
      ])
      return (await c.query('SELECT auth.jwt() AS j')).rows[0].j
    })
    t.same(legacy, { sub: OTHER, role: 'authenticated' }, 'the legacy request.jwt.claim is read first, as GoTrue does')
  })

  await t.test('a policy on auth.jwt() ->> role is inlined: no function call per row', async (t) => {
    await withClient(a.ownerUrl, (c) =>
      c.query(`CREATE TABLE public.feed (id int PRIMARY KEY);
        ALTER TABLE public.feed ENABLE ROW LEVEL SECURITY;
        CREATE POLICY signed_in ON public.feed FOR SELECT TO PUBLIC USING ((auth.jwt() ->> 'role') = 'authenticated');
        GRANT SELECT ON public.feed TO "${a.roles.anon}", "${a.roles.auth}";
        INSERT INTO public.feed VALUES (1), (2);`),
    )
    const run = (role: string) =>
      asRole(
        rest,
        role,
        async (c) => ({
          plan: (await c.query('EXPLAIN (VERBOSE, COSTS OFF) SELECT id FROM public.feed')).rows
            .map((r: Record<string, string>) => r['QUERY PLAN'])
            .join('\n'),
          ids: (await c.query('SELECT id FROM public.feed ORDER BY id')).rows.map((r: { id: number }) => r.id),
        }),
        { sub: USER, role },
      )
    const user = await run(a.roles.auth)
    t.same(user.ids, [1, 2], 'the signed-in role passes')
    t.same((await run(a.roles.anon)).ids, [], 'the anon role does not')
    t.match(user.plan, /Filter: .*current_setting\('request\.jwt\.claims'::text, true\)/, 'the body is in the filter')
    t.notMatch(user.plan, /auth\.jwt\(\)/, 'not a call of auth.jwt()')
  })

  await t.test('a database migrated before 0250 gets the mapping from the migration runner', async (t) => {
    const claims = { sub: USER, role: a.roles.svc }
    const jwt = () =>
      asRole(rest, a.roles.svc, async (c) => (await c.query('SELECT auth.jwt() AS j')).rows[0].j, claims)
    // auth.jwt() as 0002_auth made it (GoTrue's definition), no record of 0250.
    await withClient(a.file.engines!.auth!, (c) =>
      c.query(`CREATE OR REPLACE FUNCTION auth.jwt() RETURNS jsonb LANGUAGE sql STABLE AS $$
        SELECT coalesce(nullif(current_setting('request.jwt.claim', true), ''),
          nullif(current_setting('request.jwt.claims', true), ''))::jsonb $$`),
    )
    await adminQuery('DELETE FROM platform.schema_migrations WHERE version = 250', [], a.database)
    t.same(await jwt(), claims, 'before: the role name as the token has it')
    const r = await migrateDatabase(withDatabase(adminUrl(), a.database))
    t.same(r.applied, ['0250_auth_jwt_role.sql'])
    t.same(await jwt(), { ...claims, role: 'service_role' }, 'after: mapped')
    const callable = await asRole(rest, a.roles.anon, async (c) => (await c.query('SELECT auth.jwt() AS j')).rows[0].j)
    t.equal(callable, null, 'still callable by the request roles (grants kept)')
  })

  await t.test('auth.role(), auth.uid() and auth.email() in a policy are inlined: no call per row', async (t) => {
    await withClient(a.ownerUrl, (c) =>
      c.query(`CREATE TABLE public.posts (id int PRIMARY KEY, author uuid, mail text);
        ALTER TABLE public.posts ENABLE ROW LEVEL SECURITY;
        CREATE POLICY by_role ON public.posts FOR SELECT TO PUBLIC USING (auth.role() = 'authenticated');
        CREATE POLICY own ON public.posts FOR UPDATE TO PUBLIC USING (author = auth.uid() OR mail = auth.email());
        GRANT SELECT, UPDATE ON public.posts TO "${a.roles.anon}", "${a.roles.auth}";
        INSERT INTO public.posts VALUES (1, '${USER}', 'ann@example.com'), (2, '${OTHER}', 'bob@example.com');`),
    )
    const claims = { sub: USER, email: 'bob@example.com', role: a.roles.auth }
    const user = await asRole(
      rest,
      a.roles.auth,
      async (c) => ({
        select: await plan(c, 'SELECT id FROM public.posts'),
        update: await plan(c, 'UPDATE public.posts SET mail = mail RETURNING id'),
        ids: (await c.query('SELECT id FROM public.posts ORDER BY id')).rows.map((r: { id: number }) => r.id),
        updated: (await c.query('UPDATE public.posts SET mail = mail RETURNING id')).rows.map(
          (r: { id: number }) => r.id,
        ),
      }),
      claims,
    )
    t.same(user.ids, [1, 2], 'auth.role() lets the signed-in role read')
    t.same(user.updated.sort(), [1, 2], 'auth.uid() matches row 1, auth.email() row 2')
    t.match(
      user.select,
      /Filter: .*current_setting\('request\.jwt\.claim\.role'::text, true\)/,
      'role body in the filter',
    )
    t.notMatch(user.select, /auth\.role\(\)/, 'not a call of auth.role()')
    t.match(user.update, /current_setting\('request\.jwt\.claim\.sub'::text, true\)/, 'uid body in the filter')
    t.match(user.update, /current_setting\('request\.jwt\.claim\.email'::text, true\)/, 'email body in the filter')
    t.notMatch(user.update, /auth\.(uid|email)\(\)/, 'no call of auth.uid() or auth.email()')
    const anon = await asRole(rest, a.roles.anon, async (c) => (await c.query('SELECT id FROM public.posts')).rows, {
      role: a.roles.anon,
    })
    t.same(anon, [], 'anon does not pass')
  })

  await t.test('0260 gives auth.role() the inlined shape with the same answer for every input', async (t) => {
    // auth.role() as 0002_auth made it (a SELECT with FROM), no record of 0260.
    const names = [a.roles.anon, a.roles.auth, a.roles.svc].map((n) => `'${n}'`)
    await withClient(a.file.engines!.auth!, (c) =>
      c.query(`CREATE OR REPLACE FUNCTION auth.role() RETURNS text LANGUAGE sql STABLE AS $$
        SELECT CASE r WHEN ${names[0]} THEN 'anon' WHEN ${names[1]} THEN 'authenticated'
          WHEN ${names[2]} THEN 'service_role' ELSE r END
        FROM (SELECT coalesce(nullif(current_setting('request.jwt.claim.role', true), ''),
          (nullif(current_setting('request.jwt.claims', true), '')::jsonb ->> 'role'),
          CASE WHEN current_user IN (${names.join(', ')}) THEN current_user::text END)::text AS r) AS claim $$`),
    )
    await adminQuery('DELETE FROM platform.schema_migrations WHERE version = 260', [], a.database)
    const rolePlan = () =>
      asRole(rest, a.roles.auth, (c) => plan(c, 'SELECT id FROM public.posts'), { role: a.roles.auth })
    t.match(await rolePlan(), /auth\.role\(\)/, 'before: a call of auth.role() per row')
    const before = await roleAnswers()
    const r = await migrateDatabase(withDatabase(adminUrl(), a.database))
    t.same(r.applied, ['0260_auth_role_inlined.sql'])
    t.notMatch(await rolePlan(), /auth\.role\(\)/, 'after: inlined')
    const after = await roleAnswers()
    t.same(after, before, 'every case answers as before')
    t.same(after, expectedRoles(), 'and as documented')
    const callable = await asRole(rest, a.roles.anon, async (c) => (await c.query('SELECT auth.role() AS r')).rows[0].r)
    t.equal(callable, 'anon', 'still callable by the request roles (grants kept)')
  })

  /** auth.role() for every kind of input: settings, claims, current role. */
  async function roleAnswers(): Promise<Record<string, unknown>> {
    const out: Record<string, unknown> = {}
    const ask = async (label: string, login: string, role: string | null, settings: Record<string, string>) => {
      out[label] = await withClient(login, async (c) => {
        await c.query('BEGIN')
        try {
          if (role !== null) await c.query(`SET LOCAL ROLE "${role}"`)
          for (const [k, v] of Object.entries(settings)) await c.query('SELECT set_config($1, $2, true)', [k, v])
          return (await c.query('SELECT auth.role() AS r')).rows[0].r
        } finally {
          await c.query('ROLLBACK')
        }
      })
    }
    const claims = (role: unknown) => JSON.stringify({ sub: USER, role })
    for (const [kind, role] of [
      ['anon', a.roles.anon],
      ['auth', a.roles.auth],
      ['svc', a.roles.svc],
    ] as const) {
      await ask(`${kind}: no claims`, rest, role, {})
      await ask(`${kind}: empty claims`, rest, role, { 'request.jwt.claims': '' })
      await ask(`${kind}: claims without role`, rest, role, { 'request.jwt.claims': JSON.stringify({ sub: USER }) })
      await ask(`${kind}: role null`, rest, role, { 'request.jwt.claims': claims(null) })
      await ask(`${kind}: own name`, rest, role, { 'request.jwt.claims': claims(role) })
      await ask(`${kind}: authenticated`, rest, role, { 'request.jwt.claims': claims('authenticated') })
      await ask(`${kind}: custom`, rest, role, { 'request.jwt.claims': claims('custom') })
      await ask(`${kind}: number`, rest, role, { 'request.jwt.claims': claims(7) })
      await ask(`${kind}: legacy svc name`, rest, role, {
        'request.jwt.claim.role': a.roles.svc,
        'request.jwt.claims': claims(a.roles.anon),
      })
      await ask(`${kind}: legacy custom`, rest, role, {
        'request.jwt.claim.role': 'custom',
        'request.jwt.claims': claims(a.roles.auth),
      })
      await ask(`${kind}: legacy empty`, rest, role, {
        'request.jwt.claim.role': '',
        'request.jwt.claims': claims(a.roles.auth),
      })
    }
    await ask('owner: no claims', a.ownerUrl, null, {})
    await ask('owner: auth name', a.ownerUrl, null, { 'request.jwt.claims': claims(a.roles.auth) })
    await ask('owner: other tenant', a.ownerUrl, null, { 'request.jwt.claims': claims('t_0000000000_auth') })
    await ask('owner: legacy anon name', a.ownerUrl, null, { 'request.jwt.claim.role': a.roles.anon })
    await ask('auth engine login: no claims', a.file.engines!.auth!, null, {})
    return out
  }

  function expectedRoles(): Record<string, unknown> {
    const out: Record<string, unknown> = {}
    const mapped = { anon: 'anon', auth: 'authenticated', svc: 'service_role' } as const
    for (const kind of ['anon', 'auth', 'svc'] as const) {
      Object.assign(out, {
        [`${kind}: no claims`]: mapped[kind],
        [`${kind}: empty claims`]: mapped[kind],
        [`${kind}: claims without role`]: mapped[kind],
        [`${kind}: role null`]: mapped[kind],
        [`${kind}: own name`]: mapped[kind],
        [`${kind}: authenticated`]: 'authenticated',
        [`${kind}: custom`]: 'custom',
        [`${kind}: number`]: '7',
        [`${kind}: legacy svc name`]: 'service_role',
        [`${kind}: legacy custom`]: 'custom',
        [`${kind}: legacy empty`]: 'authenticated',
      })
    }
    return {
      ...out,
      'owner: no claims': null,
      'owner: auth name': 'authenticated',
      'owner: other tenant': 't_0000000000_auth',
      'owner: legacy anon name': 'anon',
      'auth engine login: no claims': null,
    }
  }

  await t.test('legacy per-claim settings (PostgREST < 9) still work', async (t) => {
    const row = await asRole(rest, a.roles.auth, async (c) => {
      await c.query(
        "SELECT set_config('request.jwt.claim.sub', $1, true), set_config('request.jwt.claim.role', $2, true), set_config('request.jwt.claim.email', 'old@example.com', true)",
        [OTHER, a.roles.auth],
      )
      return (await c.query('SELECT auth.uid()::text AS uid, auth.role() AS role, auth.email() AS email')).rows[0]
    })
    t.same(row, { uid: OTHER, role: 'authenticated', email: 'old@example.com' })
  })

  await t.test('a policy on auth.uid() lets each user see only their rows', async (t) => {
    await withClient(a.ownerUrl, async (c) => {
      await c.query(
        'CREATE TABLE public.todos (id serial PRIMARY KEY, owner_id uuid NOT NULL REFERENCES auth.users (id), title text)',
      )
      await c.query('ALTER TABLE public.todos ENABLE ROW LEVEL SECURITY')
      await c.query(
        "CREATE POLICY own ON public.todos FOR SELECT TO authenticated USING (owner_id = auth.uid() AND auth.role() = 'authenticated')",
      )
      await c.query("SELECT platform.grant('select', 'public.todos', 'auth')")
    })
    // The auth engine's login owns auth.users.
    await withClient(a.file.engines!.auth!, (c) =>
      c.query(
        "INSERT INTO auth.users (id, aud, role, email, created_at) VALUES ($1, 'authenticated', 'authenticated', 'a@x', now()), ($2, 'authenticated', 'authenticated', 'b@x', now())",
        [USER, OTHER],
      ),
    )
    await withClient(a.ownerUrl, (c) =>
      c.query("INSERT INTO public.todos (owner_id, title) VALUES ($1, 'mine'), ($2, 'theirs')", [USER, OTHER]),
    )
    const mine = await asRole(rest, a.roles.auth, async (c) => (await c.query('SELECT title FROM public.todos')).rows, {
      sub: USER,
      role: a.roles.auth,
    })
    t.same(mine, [{ title: 'mine' }], 'claims role as Postgres role name')
    const same = await asRole(rest, a.roles.auth, async (c) => (await c.query('SELECT title FROM public.todos')).rows, {
      sub: USER,
      role: 'authenticated',
    })
    t.same(same, [{ title: 'mine' }], 'claims role as GoTrue writes it')
    const anon = await asRole(
      rest,
      a.roles.anon,
      async (c) => (await c.query('SELECT count(*)::int AS n FROM public.todos')).rows[0].n,
    ).catch((err: { code?: string }) => err.code)
    t.equal(anon, '42501', 'anon has no grant')
    const svc = await asRole(
      rest,
      a.roles.svc,
      async (c) => (await c.query('SELECT count(*)::int AS n FROM public.todos')).rows[0].n,
    )
    t.equal(svc, 2, 'svc bypasses RLS')
  })

  await t.test('the auth tables are owned by the auth engine login', async (t) => {
    const r = await adminQuery<{ owner: string; name: string }>(
      `
      SELECT pg_get_userbyid(c.relowner) AS owner, c.relname AS name FROM pg_class c
        JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'auth' AND c.relkind = 'r' ORDER BY 2`,
      [],
      a.database,
    )
    const gotrue = [
      'audit_log_entries',
      'flow_state',
      'identities',
      'instances',
      'mfa_amr_claims',
      'mfa_challenges',
      'mfa_factors',
      'oauth_client_states',
      'one_time_tokens',
      'refresh_tokens',
      'sessions',
      'users',
    ]
    const names = r.rows.map((row) => row.name)
    t.same(
      gotrue.filter((n) => !names.includes(n)),
      [],
      'every GoTrue table of docs/auth-protocol.md §7 exists',
    )
    t.same([...new Set(r.rows.map((row) => row.owner))], [a.roles.authn], 'all owned by the auth engine login')
    const schema = await adminQuery<{ owner: string }>(
      "SELECT pg_get_userbyid(nspowner) AS owner FROM pg_namespace WHERE nspname = 'auth'",
      [],
      a.database,
    )
    t.equal(schema.rows[0].owner, a.roles.authn)
    const pub = await adminQuery<{ owner: string }>(
      "SELECT pg_get_userbyid(nspowner) AS owner FROM pg_namespace WHERE nspname = 'public'",
      [],
      a.database,
    )
    t.equal(pub.rows[0].owner, a.roles.owner, "public is the owner's")
    const cols = await adminQuery<{ column_name: string; data_type: string }>(
      `
      SELECT column_name, data_type FROM information_schema.columns
       WHERE table_schema = 'auth' AND table_name = 'users' AND column_name IN ('id', 'confirmed_at', 'phone', 'is_anonymous')
       ORDER BY column_name`,
      [],
      a.database,
    )
    t.same(cols.rows, [
      { column_name: 'confirmed_at', data_type: 'timestamp with time zone' },
      { column_name: 'id', data_type: 'uuid' },
      { column_name: 'is_anonymous', data_type: 'boolean' },
      { column_name: 'phone', data_type: 'text' },
    ])
    const created = await withClient(
      a.ownerUrl,
      async (c) =>
        (
          await c.query(
            "SELECT has_schema_privilege('public', 'CREATE') AS pub, has_schema_privilege('auth', 'CREATE') AS auth",
          )
        ).rows[0],
    )
    t.same(created, { pub: true, auth: false }, 'the owner creates in public, not in auth')
    const restCreate = await asRole(
      rest,
      a.roles.anon,
      async (c) => (await c.query("SELECT has_schema_privilege('public', 'CREATE') AS c")).rows[0].c,
    )
    t.equal(restCreate, false, 'request roles cannot create in public')
  })

  await t.test('DDL notifies pgrst to reload the schema cache', async (t) => {
    const listener = new pg.Client({ connectionString: withDatabase(adminUrl(), a.database) })
    await listener.connect()
    t.teardown(() => listener.end())
    const got: string[] = []
    const next = () => new Promise<void>((resolve) => listener.once('notification', () => resolve()))
    listener.on('notification', (n) => {
      if (n.channel === 'pgrst') got.push(n.payload ?? '')
    })
    await listener.query('LISTEN pgrst')
    let wait = next()
    await withClient(a.ownerUrl, (c) => c.query('CREATE TABLE public.reload_me (x int)'))
    await wait
    wait = next()
    await withClient(a.ownerUrl, (c) => c.query('DROP TABLE public.reload_me'))
    await wait
    t.ok(got.length >= 2, 'one notification per DDL statement')
    t.ok(
      got.every((p) => p === 'reload schema'),
      'payload is "reload schema"',
    )
  })
})

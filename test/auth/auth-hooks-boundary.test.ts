// Postgres-function auth hooks stay inside the tenant boundary (docs/auth-hooks.md, "Privileges"
// and "Limits"; docs/security.md "The tenant boundary"):
// 1. a hook runs as the database's hook role, not as the auth engine's login that owns `auth`:
//    it cannot read auth.users, grant on it, replace auth.uid(), switch roles or run DDL;
// 2. Supabase's custom access token hook SQL (grants and a policy `to supabase_auth_admin`)
//    applies as the owner writes it, and the hook then reads the row RLS lets it see;
// 3. a hook that catches the cancel is terminated: the request answers hook_timeout near the
//    limit, and its backend is gone (stopped from the pool when no connection can be opened);
// 4. an answer over 200 KB is refused in Postgres with GoTrue's size error;
// 5. a database migrated before all this gets the hook role, and its hooks keep their grants;
// 6. nothing a hook leaves in the session (search path, prepared statements) outlives it.
import t from 'tap'
import { copyFileSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { MIGRATIONS_DIR, migrateDatabase } from '../../src/platform/index.js'
import { withDatabase } from '../../src/shared/index.js'
import { startAuth, call, decodeJwt, email } from '../helpers/auth-harness.js'
import { adminQuery, adminUrl } from '../helpers/db.js'
import { eventually } from '../helpers/eventually.js'
import type { TestTenant } from '../helpers/tenants.js'

const PASSWORD = 'correct horse battery'
const hookOn = (fn: string) => ({ hooks: { custom_access_token: { uri: `pg-functions://postgres/public/${fn}` } } })
const hookRole = (x: TestTenant): string => x.roles.authn.replace(/_authn$/, '_hook')

t.test('a hook runs with its own role: no auth tables, no grants, no role switch, no DDL', async (t) => {
  const h = await startAuth(t, { tenants: [{ auth: hookOn('peek') as never }] })
  const x = h.list[0]!
  await h.ownerQuery(
    x,
    `CREATE FUNCTION public.peek(event jsonb) RETURNS jsonb LANGUAGE sql AS $$
       SELECT jsonb_build_object('claims', event->'claims' || jsonb_build_object('pw',
         (SELECT encrypted_password FROM auth.users WHERE id = (event->>'user_id')::uuid)))
     $$;
     -- Each attempt in a block of its own; the claims carry the SQLSTATE each one met.
     CREATE FUNCTION public.attempts(event jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
     DECLARE
       tries jsonb := jsonb_build_object(
         'grant', 'GRANT SELECT ON auth.users TO PUBLIC',
         'replace_uid', 'CREATE OR REPLACE FUNCTION auth.uid() RETURNS uuid LANGUAGE sql AS ''SELECT NULL::uuid''',
         'reset_role', 'RESET ROLE',
         'set_role', 'SET ROLE ${x.roles.authn}',
         'drop_owned', 'DROP OWNED BY CURRENT_USER');
       outcome jsonb := jsonb_build_object('current_user', current_user::text);
       k text;
     BEGIN
       FOR k IN SELECT jsonb_object_keys(tries) LOOP
         BEGIN
           EXECUTE tries->>k;
           outcome := outcome || jsonb_build_object(k, 'ran');
         EXCEPTION WHEN OTHERS THEN
           outcome := outcome || jsonb_build_object(k, SQLSTATE);
         END;
       END LOOP;
       RETURN jsonb_build_object('claims', event->'claims' || jsonb_build_object('attempts', outcome));
     END $$;
     SELECT platform.grant_hook('public.peek(jsonb)'::regprocedure);
     SELECT platform.grant_hook('public.attempts(jsonb)'::regprocedure);`,
  )

  const address = email('peek')
  const peeked = await call(`${h.base(x)}/signup`, { body: { email: address, password: PASSWORD } })
  t.match(
    peeked,
    { status: 500, body: { code: 'unexpected_failure', message: /^Error running hook URI/ } },
    'reading auth.users.encrypted_password is refused: the hook fails',
  )
  t.notMatch(JSON.stringify(peeked.body), /\$2[aby]\$/, 'no password hash in the answer')

  h.setAuth(x, hookOn('attempts') as never)
  const signUp = await call(`${h.base(x)}/signup`, { body: { email: address, password: PASSWORD } })
  t.equal(signUp.status, 200, 'a hook whose attempts were refused still answers')
  t.same(
    decodeJwt(signUp.body.access_token).attempts,
    {
      current_user: hookRole(x),
      grant: '42501',
      replace_uid: '42501',
      reset_role: '42501',
      set_role: '42501',
      drop_owned: '42501',
    },
    "the hook runs as the database's hook role and each attempt is refused",
  )
  const after = await adminQuery(
    `SELECT has_table_privilege($1, 'auth.users', 'SELECT') AS anon_reads,
            (SELECT prosrc FROM pg_proc WHERE oid = 'auth.uid()'::regprocedure) NOT LIKE '%NULL::uuid%' AS uid_kept,
            EXISTS (SELECT 1 FROM pg_proc WHERE oid = 'platform.call_hook(text, text, jsonb, integer)'::regprocedure
                    AND prosecdef) AS wrapper_kept`,
    [x.roles.anon],
    x.database,
  )
  t.same(after.rows[0], { anon_reads: false, uid_kept: true, wrapper_kept: true }, 'nothing the hook tried took effect')
})

t.test("Supabase's custom access token hook SQL applies as the owner writes it", async (t) => {
  const h = await startAuth(t, {
    tenants: [
      { auth: hookOn('custom_access_token_hook') as never },
      { auth: hookOn('custom_access_token_hook') as never },
    ],
  })
  const [x, y] = h.list as [TestTenant, TestTenant]
  // Our own hook in the style of Supabase's RBAC guide: a roles table under RLS, read by the hook.
  const setup = `
    create table public.user_roles (
      id bigint generated by default as identity primary key,
      user_id uuid not null,
      role text not null
    );
    alter table public.user_roles enable row level security;
    create or replace function public.custom_access_token_hook(event jsonb) returns jsonb
    language plpgsql stable as $$
    declare
      found_role text;
    begin
      select ur.role into found_role from public.user_roles ur where ur.user_id = (event->>'user_id')::uuid;
      return jsonb_set(event, '{claims,user_role}', coalesce(to_jsonb(found_role), 'null'::jsonb));
    end;
    $$;
    grant usage on schema public to supabase_auth_admin;
    grant execute on function public.custom_access_token_hook to supabase_auth_admin;
    revoke execute on function public.custom_access_token_hook from authenticated, anon, public;
    grant all on table public.user_roles to supabase_auth_admin;
    revoke all on table public.user_roles from authenticated, anon, public;
    create policy "Allow auth admin to read user roles" on public.user_roles
      as permissive for select to supabase_auth_admin using (true);`
  for (const tenant of [x, y]) await h.ownerQuery(tenant, setup)

  const signInWithRole = async (tenant: TestTenant, role: string): Promise<unknown> => {
    const first = await h.client(tenant).signUp({ email: email('rbac'), password: PASSWORD })
    t.error(first.error)
    t.equal(decodeJwt(first.data.session!.access_token).user_role, null, 'no row yet: user_role is null')
    await h.ownerQuery(tenant, 'insert into public.user_roles (user_id, role) values ($1, $2)', [
      first.data.user!.id,
      role,
    ])
    const refreshed = await h.client(tenant).refreshSession({ refresh_token: first.data.session!.refresh_token })
    t.error(refreshed.error)
    return decodeJwt(refreshed.data.session!.access_token).user_role
  }
  t.equal(await signInWithRole(x, 'moderator'), 'moderator', 'the hook read the row its policy lets it see')
  t.equal(await signInWithRole(y, 'admin'), 'admin', "another database's hook reads its own rows")

  const reach = await adminQuery(
    `SELECT has_database_privilege($1, $2, 'CONNECT') AS other_hook_connects,
            (SELECT rolcanlogin FROM pg_roles WHERE rolname = $1) AS other_hook_logs_in`,
    [hookRole(y), x.database],
  )
  t.same(reach.rows[0], { other_hook_connects: false, other_hook_logs_in: false }, "y's hook role cannot reach x")
})

t.test('a hook that catches the cancel is terminated at its limit, its backend gone', async (t) => {
  const limitMs = 300
  const h = await startAuth(t, {
    auth: { hook_function_timeout_ms: limitMs },
    tenants: [{ auth: hookOn('stubborn') as never }],
  })
  const x = h.list[0]!
  // Catches every cancel and goes on; returns by itself only after 10 s.
  await h.ownerQuery(
    x,
    `CREATE FUNCTION public.stubborn(event jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
     DECLARE until timestamptz := clock_timestamp() + interval '10 seconds';
     BEGIN
       WHILE clock_timestamp() < until LOOP
         BEGIN
           PERFORM pg_catalog.pg_sleep(0.05);
         EXCEPTION WHEN query_canceled THEN NULL;
         END;
       END LOOP;
       RETURN event;
     END $$;
     SELECT platform.grant_hook('public.stubborn(jsonb)'::regprocedure);`,
  )
  const started = Date.now()
  const pending = call(`${h.base(x)}/signup`, { body: { email: email('stubborn'), password: PASSWORD } })
  const running = await eventually(async () => {
    const r = await adminQuery<{ pid: number }>(
      `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND state = 'active'
          AND application_name = 'gatehouse-auth'`,
      [],
      x.database,
    )
    return r.rows[0]?.pid ?? false
  })
  const answer = await pending
  const elapsed = Date.now() - started
  t.match(
    answer,
    {
      status: 422,
      body: { code: 'hook_timeout', message: 'Failed to reach hook within maximum time of 0.300000 seconds' },
    },
    "GoTrue's hook timeout",
  )
  t.ok(elapsed < limitMs + 3_000, `answered at the deadline, not when the hook chose to return (${elapsed} ms)`)
  await eventually(async () => {
    const r = await adminQuery('SELECT count(*)::int AS n FROM pg_stat_activity WHERE pid = $1', [running])
    return r.rows[0].n === 0
  })
  t.pass("the hook's backend is gone")

  h.setAuth(x, { hooks: {} } as never)
  const next = await h.client(x).signUp({ email: email('next'), password: PASSWORD })
  t.error(next.error, 'the pool serves the next request')

  // A refresh grant calls the hook in autocommit on a pooled connection of its own: the same.
  h.setAuth(x, hookOn('stubborn') as never)
  const refreshStarted = Date.now()
  const refresh = await call(`${h.base(x)}/token?grant_type=refresh_token`, {
    body: { refresh_token: next.data.session!.refresh_token },
  })
  t.match(refresh, { status: 422, body: { code: 'hook_timeout' } }, 'refresh: hook_timeout')
  t.ok(Date.now() - refreshStarted < limitMs + 3_000, 'refresh: answered at the deadline')
  await eventually(async () => {
    const r = await adminQuery(
      "SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = $1 AND state = 'active' AND query LIKE '%call_hook%'",
      [x.database],
    )
    return r.rows[0].n === 0
  })
  t.pass('refresh: no hook call left running')
})

t.test('a function hook answer over 200 KB is refused with a clear error', async (t) => {
  const h = await startAuth(t, { tenants: [{ auth: hookOn('huge') as never }] })
  const x = h.list[0]!
  await h.ownerQuery(
    x,
    `CREATE FUNCTION public.huge(event jsonb) RETURNS jsonb LANGUAGE sql AS $$
       SELECT jsonb_build_object('claims', event->'claims' || jsonb_build_object('blob', repeat('x', 1024 * 1024)))
     $$;
     SELECT platform.grant_hook('public.huge(jsonb)'::regprocedure);`,
  )
  const address = email('huge')
  const answer = await call(`${h.base(x)}/signup`, { body: { email: address, password: PASSWORD } })
  t.match(
    answer,
    {
      status: 422,
      body: { code: 'hook_payload_over_size_limit', message: 'Payload size exceeded size limit of 204800 bytes' },
    },
    "GoTrue's size error, not a 5xx",
  )
  t.notMatch(JSON.stringify(answer.body), /xxxx|at .*\.ts/, 'no blob, no stack')
  const users = await call(`${h.base(x)}/admin/users`, { token: await h.serviceToken(x) })
  t.notOk(
    users.body.users.some((u: { email: string }) => u.email === address),
    'the sign-up was rolled back',
  )
})

t.test('a database migrated before the hook role gets it, and its hooks keep their grants', async (t) => {
  const h = await startAuth(t, { tenants: [{ auth: hookOn('legacy_claims') as never }] })
  const x = h.list[0]!
  // Back to before 0280: no hook role, no call_hook, grant_hook granting to the engine's login (0190 again).
  await adminQuery(
    `DROP EVENT TRIGGER gatehouse_refuse_hook_ddl;
     DROP FUNCTION platform.refuse_hook_ddl(), platform.call_hook(text, text, jsonb, integer);
     DROP ROLE "${hookRole(x)}";
     DELETE FROM platform.schema_migrations WHERE version IN (190, 280);`,
    [],
    x.database,
  )
  const only0190 = mkdtempSync(path.join(tmpdir(), 'migrations-'))
  t.teardown(() => rmSync(only0190, { recursive: true, force: true }))
  copyFileSync(path.join(MIGRATIONS_DIR, '0190_auth_hooks.sql'), path.join(only0190, '0190_auth_hooks.sql'))
  const url = withDatabase(adminUrl(), x.database)
  await migrateDatabase(url, { dir: only0190 })
  await h.ownerQuery(
    x,
    `CREATE TABLE public.plans (user_id uuid PRIMARY KEY, plan text NOT NULL);
     CREATE FUNCTION public.legacy_claims(event jsonb) RETURNS jsonb LANGUAGE sql AS $$
       SELECT jsonb_build_object('claims', event->'claims' || jsonb_build_object('plan',
         coalesce((SELECT plan FROM public.plans WHERE user_id = (event->>'user_id')::uuid), 'free'), 'as', current_user))
     $$;
     SELECT platform.grant_hook('public.legacy_claims(jsonb)'::regprocedure);
     SELECT platform.grant_hook('SELECT', 'public.plans');`,
  )

  const r = await migrateDatabase(url)
  t.same(r.applied, ['0280_auth_hook_role.sql'], 'the runner applies 0280')
  const signUp = await h.client(x).signUp({ email: email('legacy'), password: PASSWORD })
  t.error(signUp.error)
  t.match(
    decodeJwt(signUp.data.session!.access_token),
    { plan: 'free', as: hookRole(x) },
    'the hook runs as the new role with the grants it had',
  )
})

t.test("a hook's search_path does not outlive it on the engine's connection", async (t) => {
  // One connection: the hook's call and the next sign-in share it.
  const h = await startAuth(t, { poolPerTenant: 1, tenants: [{ auth: hookOn('wander') as never }] })
  const x = h.list[0]!
  // The owner's trap: an `=` on varchar (an exact match where the built-in needs a cast, as
  // in the engine's `aud = $2`) that notes who called it; found only by a search path naming public.
  await h.ownerQuery(
    x,
    `GRANT USAGE ON SCHEMA public TO PUBLIC;
     CREATE TABLE public.callers (who text);
     GRANT INSERT ON public.callers TO PUBLIC;
     CREATE FUNCTION public.noted_eq(a varchar, b varchar) RETURNS boolean LANGUAGE plpgsql AS $f$
     BEGIN INSERT INTO public.callers VALUES (current_user); RETURN a::text = b::text; END $f$;
     CREATE OPERATOR public.= (LEFTARG = varchar, RIGHTARG = varchar, FUNCTION = public.noted_eq);
     CREATE FUNCTION public.wander(event jsonb) RETURNS jsonb LANGUAGE plpgsql AS $f$
     BEGIN PERFORM pg_catalog.set_config('search_path', 'public', false); RETURN event; END $f$;
     SELECT platform.grant_hook('public.wander(jsonb)'::regprocedure);`,
  )
  const address = email('wander')
  const signUp = await h.client(x).signUp({ email: address, password: PASSWORD })
  t.error(signUp.error)
  const signIn = await h.client(x).signInWithPassword({ email: address, password: PASSWORD })
  t.error(signIn.error)
  const callers = await h.ownerQuery(x, 'SELECT who FROM public.callers')
  t.same(callers.rows, [], "the engine's statements never resolved the owner's operator")
})

t.test("a hook cannot replace the engine's prepared statements", async (t) => {
  // One connection: the hook's call and the next one share it.
  const h = await startAuth(t, { poolPerTenant: 1, tenants: [{ auth: hookOn('hijack') as never }] })
  const x = h.list[0]!
  // The hook swaps the engine's hook-call statement for one that reads auth.users when the
  // engine's login runs it next (query_to_xml runs its query as the current user).
  await h.ownerQuery(
    x,
    `CREATE FUNCTION public.hijack(event jsonb) RETURNS jsonb LANGUAGE plpgsql AS $f$
     DECLARE name text;
     BEGIN
       FOR name IN SELECT p.name FROM pg_catalog.pg_prepared_statements p WHERE NOT p.from_sql LOOP
         EXECUTE pg_catalog.format('DEALLOCATE %I', name);
         EXECUTE pg_catalog.format($p$PREPARE %I(text, text, text, text) AS SELECT pg_catalog.jsonb_build_object(
           'claims', $3::jsonb->'claims' || pg_catalog.jsonb_build_object('stolen',
             pg_catalog.query_to_xml('SELECT encrypted_password FROM auth.users', true, true, '')::text))::text$p$, name);
       END LOOP;
       RETURN event;
     END $f$;
     CREATE FUNCTION public.plain(event jsonb) RETURNS jsonb LANGUAGE sql AS $f$ SELECT event $f$;
     SELECT platform.grant_hook('public.hijack(jsonb)'::regprocedure);
     SELECT platform.grant_hook('public.plain(jsonb)'::regprocedure);`,
  )
  const first = await call(`${h.base(x)}/signup`, { body: { email: email('hijack'), password: PASSWORD } })
  t.match(first, { status: 500, body: { code: 'unexpected_failure' } }, 'the swapping hook fails')

  h.setAuth(x, hookOn('plain') as never)
  const next = await call(`${h.base(x)}/signup`, { body: { email: email('after'), password: PASSWORD } })
  t.equal(next.status, 200, 'the next call on the same connection works')
  t.equal(decodeJwt(next.body.access_token).stolen, undefined, "and runs the engine's own statement")
})

t.test('a runaway hook is stopped from the pool when its login is at its CONNECTION LIMIT', async (t) => {
  const limitMs = 300
  const h = await startAuth(t, {
    poolPerTenant: 2,
    auth: { hook_function_timeout_ms: limitMs },
    tenants: [{ auth: hookOn('slow') as never }],
  })
  const x = h.list[0]!
  await h.ownerQuery(
    x,
    `CREATE FUNCTION public.slow(event jsonb) RETURNS jsonb LANGUAGE sql AS $f$
       SELECT event FROM pg_catalog.pg_sleep(0.1) $f$;
     CREATE FUNCTION public.stubborn(event jsonb) RETURNS jsonb LANGUAGE plpgsql AS $f$
     DECLARE until timestamptz := clock_timestamp() + interval '10 seconds';
     BEGIN
       WHILE clock_timestamp() < until LOOP
         BEGIN PERFORM pg_catalog.pg_sleep(0.05); EXCEPTION WHEN query_canceled THEN NULL; END;
       END LOOP;
       RETURN event;
     END $f$;
     SELECT platform.grant_hook('public.slow(jsonb)'::regprocedure);
     SELECT platform.grant_hook('public.stubborn(jsonb)'::regprocedure);`,
  )
  // Two sign-ups at once open the pool's two connections; then the login may open no third.
  const warm = await Promise.all([0, 1].map(() => h.client(x).signUp({ email: email('warm'), password: PASSWORD })))
  for (const w of warm) t.error(w.error)
  await adminQuery(`ALTER ROLE "${x.roles.authn}" CONNECTION LIMIT 2`)
  const open = await adminQuery('SELECT count(*)::int AS n FROM pg_stat_activity WHERE usename = $1', [x.roles.authn])
  t.equal(open.rows[0].n, 2, "the login's two connections are open")

  h.setAuth(x, hookOn('stubborn') as never)
  const started = Date.now()
  const answer = await call(`${h.base(x)}/signup`, { body: { email: email('stubborn'), password: PASSWORD } })
  t.match(answer, { status: 422, body: { code: 'hook_timeout' } })
  t.ok(Date.now() - started < limitMs + 3_000, 'answered at the deadline')
  await eventually(async () => {
    const r = await adminQuery(
      "SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = $1 AND state = 'active' AND query LIKE '%call_hook%'",
      [x.database],
    )
    return r.rows[0].n === 0
  })
  t.pass('no hook call left running')
})

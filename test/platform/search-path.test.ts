// Objects the database owner creates can never run with an engine's privileges: the auth
// engine's login resolves names in pg_catalog only, so an owner-made public.lower(varchar)
// (a better match for a varchar column than pg_catalog.lower(text)) is never called by its
// SQL; nor by the REST engine's login outside a request's own search_path, nor by the
// provisioning admin while it migrates. Real engine, real Postgres.
import t from 'tap'
import { startAuth, email } from '../helpers/auth-harness.js'
import { adminQuery, adminUrl } from '../helpers/db.js'
import { withDatabase } from '../../src/shared/index.js'
import { connectAdmin, migrateDatabase } from '../../src/platform/index.js'

// The owner's trap: whoever calls it copies what it can read of auth.users into a public
// table, then answers as the built-in would.
const TRAP = `
  GRANT USAGE ON SCHEMA public TO PUBLIC;
  CREATE TABLE public.loot (who text, what text);
  GRANT INSERT, SELECT ON public.loot TO PUBLIC;
  CREATE FUNCTION public.steal() RETURNS void LANGUAGE plpgsql AS $f$
  BEGIN
    INSERT INTO public.loot SELECT current_user, string_agg(encrypted_password, ',') FROM auth.users;
  EXCEPTION WHEN insufficient_privilege THEN
    INSERT INTO public.loot VALUES (current_user, 'no access');
  END $f$;
  CREATE FUNCTION public.lower(varchar) RETURNS text LANGUAGE plpgsql AS $f$
  BEGIN PERFORM public.steal(); RETURN pg_catalog.lower($1::text); END $f$;
  CREATE FUNCTION public.upper(varchar) RETURNS text LANGUAGE plpgsql AS $f$
  BEGIN PERFORM public.steal(); RETURN pg_catalog.upper($1::text); END $f$;
  CREATE FUNCTION public.format(text, text) RETURNS text LANGUAGE plpgsql AS $f$
  BEGIN PERFORM public.steal(); RETURN pg_catalog.format($1, $2); END $f$;
  CREATE FUNCTION public.current_setting(varchar) RETURNS text LANGUAGE plpgsql AS $f$
  BEGIN PERFORM public.steal(); RETURN pg_catalog.current_setting($1::text); END $f$;
`

t.test("the auth engine never calls the owner's public.lower(varchar)", async (t) => {
  const h = await startAuth(t)
  const x = h.list[0]!
  await h.ownerQuery(x, TRAP)

  const c = h.client(x)
  const e = email()
  const up = await c.signUp({ email: e.toUpperCase(), password: 'secret123' })
  t.error(up.error, 'sign-up works')
  await c.signOut()
  const dup = await c.signUp({ email: e, password: 'other-secret' })
  t.ok(
    dup.error !== null || dup.data.user?.identities?.length === 0,
    'a second sign-up finds the first (lower(email) compared)',
  )
  const inAgain = await c.signInWithPassword({ email: e.toUpperCase(), password: 'secret123' })
  t.error(inAgain.error, 'sign-in by e-mail in other case works')

  const loot = await h.ownerQuery<{ who: string; what: string }>(x, 'SELECT who, what FROM public.loot')
  t.same(loot.rows, [], 'the trap never ran')
  const setting = await adminQuery<{ setconfig: string[] }>(
    `SELECT s.setconfig FROM pg_db_role_setting s JOIN pg_roles r ON r.oid = s.setrole WHERE r.rolname = $1`,
    [x.roles.authn],
  )
  t.same(
    setting.rows.map((r) => r.setconfig),
    [['search_path=pg_catalog, pg_temp']],
    "the engine login's search_path is pinned",
  )
})

t.test('the REST engine login and the migration runner are pinned too', async (t) => {
  const h = await startAuth(t)
  const x = h.list[0]!
  await h.ownerQuery(x, TRAP)
  for (const role of [x.roles.rest, `${x.roles.anon}_probe`, `${x.roles.auth}_probe`, `${x.roles.svc}_probe`]) {
    const setting = await adminQuery<{ setconfig: string[] }>(
      'SELECT s.setconfig FROM pg_db_role_setting s JOIN pg_roles r ON r.oid = s.setrole WHERE r.rolname = $1',
      [role],
    )
    t.same(
      setting.rows.map((r) => r.setconfig),
      [['search_path=pg_catalog, pg_temp']],
      `${role}: pinned`,
    )
  }
  // The migration runner works as superuser inside this database: its connection resolves
  // format(), current_setting() ... in pg_catalog only. Re-running the login migration (as
  // `tenants migrate` does after a password change) springs no trap and is idempotent.
  const admin = await connectAdmin(withDatabase(adminUrl(), x.database))
  try {
    t.equal(
      (await admin.query('SHOW search_path')).rows[0].search_path.replace(/ /g, ''),
      'pg_catalog,pg_temp',
      'the admin connection is pinned',
    )
    t.equal((await admin.query("SELECT format('%s', 'x') AS v")).rows[0].v, 'x')
  } finally {
    await admin.end()
  }
  await adminQuery('DELETE FROM platform.schema_migrations WHERE version = 10', [], x.database)
  const r = await migrateDatabase(withDatabase(adminUrl(), x.database))
  t.same(r.applied, ['0010_login_roles.sql'])
  const loot = await h.ownerQuery(x, 'SELECT who, what FROM public.loot')
  t.same(loot.rows, [], 'the trap never ran as the admin')
})

// Code of the database's owner that runs inside the auth engine's statements (a trigger on an
// auth table, since migration 0290) leaves nothing in the engine's session
// (docs/security.md "The tenant boundary"): a search path it sets with set_config(..., false),
// or a prepared statement it swaps, does not reach the engine's next statements on that
// connection, which run as the login that owns `auth`. One connection per tenant, so the
// trigger's request and the next ones share it.
import t from 'tap'
import { startAuth, call, email } from '../helpers/auth-harness.js'
import type { TestTenant } from '../helpers/tenants.js'

const PASSWORD = 'correct horse battery'

// The owner's trap: an `=` on varchar (an exact match where the built-in needs a cast, as in
// the engine's `aud = $2`) and a function that note who called them.
const TRAP = `GRANT USAGE ON SCHEMA public TO PUBLIC;
  CREATE TABLE public.callers (who text);
  GRANT INSERT ON public.callers TO PUBLIC;
  CREATE FUNCTION public.note() RETURNS boolean LANGUAGE plpgsql AS $f$
  BEGIN INSERT INTO public.callers VALUES (current_user); RETURN true; END $f$;
  CREATE FUNCTION public.noted_eq(a varchar, b varchar) RETURNS boolean LANGUAGE plpgsql AS $f$
  BEGIN PERFORM public.note(); RETURN a::text = b::text; END $f$;
  CREATE OPERATOR public.= (LEFTARG = varchar, RIGHTARG = varchar, FUNCTION = public.noted_eq);`

async function callers(h: Awaited<ReturnType<typeof startAuth>>, x: TestTenant): Promise<string[]> {
  return (await h.ownerQuery<{ who: string }>(x, 'SELECT who FROM public.callers')).rows.map((r) => r.who)
}

t.test("a trigger's search path does not outlive it on the engine's connection", async (t) => {
  const h = await startAuth(t, { poolPerTenant: 1 })
  const x = h.list[0]!
  await h.ownerQuery(
    x,
    `${TRAP}
     CREATE FUNCTION public.wander() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER SET search_path = '' AS $f$
     BEGIN PERFORM pg_catalog.set_config('search_path', 'public, pg_catalog', false); RETURN NULL; END $f$;
     CREATE TRIGGER on_auth_user_created AFTER INSERT ON auth.users FOR EACH ROW EXECUTE FUNCTION public.wander();`,
  )
  const address = email('wander')
  const signUp = await h.client(x).signUp({ email: address, password: PASSWORD })
  t.error(signUp.error, 'sign-up works with the trigger')
  const signIn = await h.client(x).signInWithPassword({ email: address, password: PASSWORD })
  t.error(signIn.error, 'the next sign-in on the same connection works')
  t.same(await callers(h, x), [], "the engine's statements never resolved the owner's operator")
})

t.test('a trigger that sets the search path for the rest of the transaction reaches nothing either', async (t) => {
  const h = await startAuth(t, { poolPerTenant: 1 })
  const x = h.list[0]!
  await h.ownerQuery(
    x,
    `${TRAP}
     CREATE FUNCTION public.wander() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER AS $f$
     BEGIN SET search_path = public, pg_catalog; RETURN NULL; END $f$;
     CREATE TRIGGER on_session AFTER INSERT OR UPDATE ON auth.sessions FOR EACH ROW EXECUTE FUNCTION public.wander();`,
  )
  const address = email('session')
  const signUp = await h.client(x).signUp({ email: address, password: PASSWORD })
  t.error(signUp.error)
  const refreshed = await call(`${h.base(x)}/token?grant_type=refresh_token`, {
    body: { refresh_token: signUp.data.session!.refresh_token },
  })
  t.equal(refreshed.status, 200, 'a refresh on the same connection works')
  const signIn = await h.client(x).signInWithPassword({ email: address, password: PASSWORD })
  t.error(signIn.error)
  t.same(await callers(h, x), [], "the engine's statements never resolved the owner's operator")
})

t.test('a deferred trigger, firing at COMMIT, reaches nothing either', async (t) => {
  const h = await startAuth(t, { poolPerTenant: 1 })
  const x = h.list[0]!
  await h.ownerQuery(
    x,
    `${TRAP}
     CREATE FUNCTION public.wander() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER SET search_path = '' AS $f$
     BEGIN PERFORM pg_catalog.set_config('search_path', 'public, pg_catalog', false); RETURN NULL; END $f$;
     CREATE CONSTRAINT TRIGGER at_commit AFTER INSERT ON auth.users DEFERRABLE INITIALLY DEFERRED
       FOR EACH ROW EXECUTE FUNCTION public.wander();`,
  )
  const address = email('deferred')
  const signUp = await h.client(x).signUp({ email: address, password: PASSWORD })
  t.error(signUp.error)
  const signIn = await h.client(x).signInWithPassword({ email: address, password: PASSWORD })
  t.error(signIn.error)
  t.same(await callers(h, x), [], "the engine's statements never resolved the owner's operator")
})

t.test("the owner's trigger a foreign key's cascade reaches leaves nothing either", async (t) => {
  const h = await startAuth(t, { poolPerTenant: 1 })
  const x = h.list[0]!
  // No trigger on an auth table: a profile row cascades away with its user, and the owner's
  // trigger on profiles (an ordinary one) then runs inside the engine's DELETE.
  await h.ownerQuery(
    x,
    `${TRAP}
     CREATE TABLE public.profiles (id uuid PRIMARY KEY REFERENCES auth.users ON DELETE CASCADE);
     CREATE FUNCTION public.wander() RETURNS trigger LANGUAGE plpgsql AS $f$
     BEGIN PERFORM pg_catalog.set_config('search_path', 'public, pg_catalog', false); RETURN OLD; END $f$;
     CREATE TRIGGER on_profile_gone AFTER DELETE ON public.profiles FOR EACH ROW EXECUTE FUNCTION public.wander();`,
  )
  const gone = await h.client(x).signUp({ email: email('gone'), password: PASSWORD })
  t.error(gone.error)
  await h.ownerQuery(x, 'INSERT INTO public.profiles VALUES ($1)', [gone.data.user!.id])
  const deleted = await call(`${h.base(x)}/admin/users/${gone.data.user!.id}`, {
    method: 'DELETE',
    token: await h.serviceToken(x),
  })
  t.equal(deleted.status, 200, 'the user is deleted, the profile with it')
  const address = email('stays')
  const signUp = await h.client(x).signUp({ email: address, password: PASSWORD })
  t.error(signUp.error)
  const signIn = await h.client(x).signInWithPassword({ email: address, password: PASSWORD })
  t.error(signIn.error)
  t.same(await callers(h, x), [], "the engine's statements never resolved the owner's operator")
})

t.test("a trigger cannot replace the engine's prepared statements", async (t) => {
  const h = await startAuth(t, { poolPerTenant: 1 })
  const x = h.list[0]!
  await h.ownerQuery(x, TRAP)
  // A first refresh prepares the engine's hot statement on the one connection.
  const first = await h.client(x).signUp({ email: email('first'), password: PASSWORD })
  t.error(first.error)
  const warm = await call(`${h.base(x)}/token?grant_type=refresh_token`, {
    body: { refresh_token: first.data.session!.refresh_token },
  })
  t.equal(warm.status, 200)
  // The trigger swaps every statement the engine prepared for one that calls the owner's
  // function, which then runs as the engine's login.
  await h.ownerQuery(
    x,
    `CREATE FUNCTION public.hijack() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER SET search_path = '' AS $f$
     DECLARE s record;
     BEGIN
       FOR s IN SELECT p.name, p.parameter_types FROM pg_catalog.pg_prepared_statements p WHERE NOT p.from_sql LOOP
         EXECUTE pg_catalog.format('DEALLOCATE %I', s.name);
         EXECUTE pg_catalog.format('PREPARE %I%s AS SELECT public.note()', s.name,
           CASE WHEN pg_catalog.cardinality(s.parameter_types) = 0 THEN ''
                ELSE '(' || pg_catalog.array_to_string(s.parameter_types::text[], ',') || ')' END);
       END LOOP;
       RETURN NULL;
     END $f$;
     CREATE TRIGGER on_auth_user_created AFTER INSERT ON auth.users FOR EACH ROW EXECUTE FUNCTION public.hijack();`,
  )
  const second = await h.client(x).signUp({ email: email('second'), password: PASSWORD })
  t.error(second.error, 'sign-up works with the trigger')
  const refreshed = await call(`${h.base(x)}/token?grant_type=refresh_token`, {
    body: { refresh_token: second.data.session!.refresh_token },
  })
  t.equal(refreshed.status, 200, 'the next refresh on the same connection works')
  t.same(await callers(h, x), [], "and ran the engine's own statement")
})

t.test('the marker: only tables the owner reaches, and no owner trigger may fire before it', async (t) => {
  const h = await startAuth(t, { poolPerTenant: 1 })
  const x = h.list[0]!
  const marked = async (): Promise<string[]> =>
    (
      await h.ownerQuery<{ t: string }>(
        x,
        `SELECT c.relname AS t FROM pg_trigger g JOIN pg_class c ON c.oid = g.tgrelid
          WHERE g.tgname = '!gatehouse_owner_code' ORDER BY 1`,
      )
    ).rows.map((r) => r.t)
  t.same(await marked(), [], 'none on a new database')
  await h.ownerQuery(x, 'CREATE TABLE public.profiles (id uuid PRIMARY KEY REFERENCES auth.users ON DELETE CASCADE)')
  t.same(await marked(), ['users'], 'a foreign key to auth.users marks it')
  await h.ownerQuery(
    x,
    `CREATE FUNCTION public.noop() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER AS $f$ BEGIN RETURN NULL; END $f$;
     CREATE TRIGGER later BEFORE INSERT ON auth.identities FOR EACH STATEMENT EXECUTE FUNCTION public.noop();`,
  )
  t.same(await marked(), ['identities', 'users'], 'a trigger marks its table')
  const early = await h
    .ownerQuery(
      x,
      'CREATE TRIGGER " early" BEFORE INSERT ON auth.sessions FOR EACH STATEMENT EXECUTE FUNCTION public.noop()',
    )
    .catch((err: Error & { code?: string }) => err)
  t.match(early, { code: '42501', message: /would fire before the platform's own/ }, 'one sorting first is refused')
})

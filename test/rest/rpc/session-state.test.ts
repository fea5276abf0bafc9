// A function the database's owner wrote, called through /rpc, leaves nothing in the REST
// engine's pooled session (docs/security.md "The tenant boundary"): a session-level search
// path, or prepared statements it swapped, never reach the engine's next statements on that
// connection, the first of which run as the engine's login, before the request's role is set.
// One connection per tenant, so the call and the next requests share it.
import t from 'tap'
import { createRestFixture, type RestFixture } from '../../helpers/rest-fixture.js'

const SQL = `
GRANT USAGE ON SCHEMA public TO PUBLIC;
CREATE TABLE callers (who text);
GRANT INSERT ON callers TO PUBLIC;
CREATE FUNCTION note() RETURNS boolean LANGUAGE plpgsql AS $f$
BEGIN INSERT INTO public.callers VALUES (current_user); RETURN true; END $f$;
-- Found only by a search path naming public first: the engine's schema-version read adds bigints.
CREATE FUNCTION noted_plus(a bigint, b bigint) RETURNS bigint LANGUAGE plpgsql AS $f$
BEGIN PERFORM public.note(); RETURN a OPERATOR(pg_catalog.+) b; END $f$;
CREATE OPERATOR public.+ (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = noted_plus);
CREATE FUNCTION wander() RETURNS int LANGUAGE plpgsql AS $f$
BEGIN PERFORM pg_catalog.set_config('search_path', 'public, pg_catalog', false); RETURN 1; END $f$;
CREATE FUNCTION swap() RETURNS int LANGUAGE plpgsql AS $f$
DECLARE s record; n int := 0;
BEGIN
  -- All but the COMMIT of its own transaction.
  FOR s IN SELECT p.name, p.parameter_types FROM pg_catalog.pg_prepared_statements p
            WHERE NOT p.from_sql AND p.name <> 'gatehouse_commit' LOOP
    EXECUTE pg_catalog.format('DEALLOCATE %I', s.name);
    EXECUTE pg_catalog.format('PREPARE %I%s AS SELECT public.note()', s.name,
      CASE WHEN pg_catalog.cardinality(s.parameter_types) = 0 THEN ''
           ELSE '(' || pg_catalog.array_to_string(s.parameter_types::text[], ',') || ')' END);
    n := n + 1;
  END LOOP;
  RETURN n;
END $f$;
CREATE FUNCTION swap_and_fail() RETURNS int LANGUAGE plpgsql AS $f$
BEGIN PERFORM public.swap(); RAISE EXCEPTION 'refused'; END $f$;
CREATE FUNCTION pid() RETURNS int LANGUAGE sql AS 'SELECT pg_catalog.pg_backend_pid()';
CREATE FUNCTION fail() RETURNS int LANGUAGE plpgsql AS $f$ BEGIN RAISE EXCEPTION 'refused'; END $f$;
SELECT platform.grant('SELECT', 'authors', 'anon');
`

async function oneConnection(t: Parameters<typeof createRestFixture>[0]): Promise<RestFixture> {
  return createRestFixture(t, { sql: SQL, config: { pool_budget: 2, pool_per_tenant: 1 } })
}

async function rpc(fx: RestFixture, name: string): Promise<{ status: number; body: string }> {
  const res = await fx.app.inject({
    method: 'POST',
    url: `/${fx.database}/rpc/${name}`,
    headers: { 'content-type': 'application/json' },
    payload: '{}',
  })
  return { status: res.statusCode, body: res.body }
}

async function callers(fx: RestFixture): Promise<string[]> {
  return ((await fx.ownerSql('SELECT who FROM public.callers')) as Array<{ who: string }>).map((r) => r.who)
}

t.test("a function's session-level search path does not reach the engine's next request", async (t) => {
  const fx = await oneConnection(t)
  t.equal((await fx.get('/authors?select=id&id=eq.1')).status, 200, 'warm')
  t.equal((await rpc(fx, 'wander')).status, 200)
  const next = await fx.get('/authors?select=id&id=eq.1')
  t.same([next.status, next.json()], [200, [{ id: 1 }]], 'the next request on the connection works')
  t.same(await callers(fx), [], "and never resolved the owner's operator")
})

t.test("a function cannot replace the engine's prepared statements", async (t) => {
  const fx = await oneConnection(t)
  t.equal((await fx.get('/authors?select=id&id=eq.1')).status, 200, 'warm: statements prepared')
  const swapped = await rpc(fx, 'swap')
  t.equal(swapped.status, 200)
  t.ok(Number(swapped.body) > 0, 'the function swapped the prepared statements')
  const next = await fx.get('/authors?select=id&id=eq.1')
  t.same([next.status, next.json()], [200, [{ id: 1 }]], 'the next request on the connection works')
  t.same(await callers(fx), [], "and ran the engine's own statements")
})

t.test('nor one that swaps them and then fails', async (t) => {
  const fx = await oneConnection(t)
  t.equal((await fx.get('/authors?select=id&id=eq.1')).status, 200, 'warm: statements prepared')
  t.equal((await rpc(fx, 'swap_and_fail')).status, 400, 'the call fails')
  const next = await fx.get('/authors?select=id&id=eq.1')
  t.same([next.status, next.json()], [200, [{ id: 1 }]], 'the next request on the connection works')
  t.same(await callers(fx), [], "and ran the engine's own statements")
})

t.test('a connection whose session nothing changed stays in use', async (t) => {
  const fx = await oneConnection(t)
  // The connection that read the catalogs serves the first request only.
  t.equal((await fx.get('/authors?select=id&id=eq.1')).status, 200, 'warm')
  const before = await rpc(fx, 'pid')
  t.equal((await fx.get('/authors?select=id&id=eq.1')).status, 200)
  t.equal((await rpc(fx, 'fail')).status, 400)
  t.equal((await rpc(fx, 'pid')).body, before.body, 'the same backend answers after reads, writes and failures')
  const after = await rpc(fx, 'swap')
  t.equal(after.status, 200)
  t.not((await rpc(fx, 'pid')).body, before.body, 'one whose statements were swapped is replaced')
})

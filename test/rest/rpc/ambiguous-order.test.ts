// PGRST203 lists the candidates in PostgREST's order of overloads (its `Ord Routine`, by which
// its schema cache sorts them), whatever order they were created in: fewer parameters first,
// then a function without a description, then parameter by parameter by name and type.
// postgrest-js's live test "unresolvable function with text param" creates (a text) before
// (a int) and reads `(a => integer), (a => text)`; PostgREST's RpcSpec overloaded_same_args
// reads the one-parameter functions before the two-parameter one.
import t from 'tap'
import { createWriteFixture } from '../../helpers/rest-writes.js'

const SQL = `
CREATE FUNCTION pick_one(a text, b int DEFAULT 0) RETURNS text LANGUAGE sql STABLE AS $$ SELECT 'text, int' $$;
CREATE FUNCTION pick_one(a xml) RETURNS text LANGUAGE sql STABLE AS $$ SELECT 'xml' $$;
CREATE FUNCTION pick_one(a text) RETURNS text LANGUAGE sql STABLE AS $$ SELECT 'text' $$;
CREATE FUNCTION pick_one(a int) RETURNS text LANGUAGE sql STABLE AS $$ SELECT 'int' $$;
CREATE FUNCTION described(a int) RETURNS text LANGUAGE sql STABLE AS $$ SELECT 'int' $$;
CREATE FUNCTION described(a text) RETURNS text LANGUAGE sql STABLE AS $$ SELECT 'text' $$;
COMMENT ON FUNCTION described(int) IS 'the integer one';
`

t.test("PGRST203 candidates in PostgREST's order of overloads", async (t) => {
  const fx = await createWriteFixture(t, { sql: SQL })
  const r = await fx.call('POST', '/rpc/pick_one', { body: { a: '1' } })
  t.equal(r.status, 300)
  t.same(r.json(), {
    code: 'PGRST203',
    message:
      'Could not choose the best candidate function between: public.pick_one(a => integer), public.pick_one(a => text), public.pick_one(a => xml), public.pick_one(a => text, b => integer)',
    details: null,
    hint: 'Try renaming the parameters or the function itself in the database so function overloading can be resolved',
  })
  const d = await fx.call('GET', '/rpc/described?a=1')
  t.equal(d.status, 300)
  t.equal(
    d.json().message,
    'Could not choose the best candidate function between: public.described(a => text), public.described(a => integer)',
    'a function without a description comes first',
  )
})

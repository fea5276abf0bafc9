// RPC resolution as PostgREST 14 does it: overloads chosen by argument names (defaults
// optional), the single unnamed json/jsonb/text/xml/bytea parameter as a fallback beside
// overloads, polymorphic parameters, and PGRST202 / PGRST203 with PostgREST's message,
// details (singular "parameter" for one) and fuzzy "Perhaps you meant" hints. Real
// Postgres through the engine.
import t from 'tap'
import { createWriteFixture } from '../../helpers/rest-writes.js'
import { RPC_SQL } from '../../helpers/rest-rpc.js'

const SQL = `
CREATE FUNCTION sayhello(name text) RETURNS text LANGUAGE sql STABLE AS $$SELECT 'Hello, ' || name$$;
CREATE FUNCTION overloaded_unnamed_param() RETURNS int LANGUAGE sql IMMUTABLE AS 'SELECT 1';
CREATE FUNCTION overloaded_unnamed_param(x int, y int) RETURNS int LANGUAGE sql IMMUTABLE AS 'SELECT x + y';
CREATE FUNCTION overloaded_unnamed_param(json) RETURNS json LANGUAGE sql IMMUTABLE AS 'SELECT $1';
CREATE FUNCTION overloaded_unnamed_param(text) RETURNS text LANGUAGE sql IMMUTABLE AS 'SELECT $1';
CREATE FUNCTION overloaded_unnamed_param(bytea) RETURNS bytea LANGUAGE sql IMMUTABLE AS 'SELECT $1';
CREATE FUNCTION unnamed_json_jsonb(json) RETURNS int LANGUAGE sql IMMUTABLE AS 'SELECT 1';
CREATE FUNCTION unnamed_json_jsonb(jsonb) RETURNS int LANGUAGE sql IMMUTABLE AS 'SELECT 2';
CREATE FUNCTION unnamed_int_param(int) RETURNS int LANGUAGE sql IMMUTABLE AS 'SELECT $1';
CREATE FUNCTION named_json_param(data json) RETURNS json LANGUAGE sql IMMUTABLE AS 'SELECT data';
CREATE FUNCTION overloaded_same_args(arg integer) RETURNS text LANGUAGE sql IMMUTABLE AS $$SELECT 'int'$$;
CREATE FUNCTION overloaded_same_args(arg xml) RETURNS text LANGUAGE sql IMMUTABLE AS $$SELECT 'xml'$$;
CREATE FUNCTION overloaded_same_args(arg text, num integer DEFAULT 0) RETURNS text LANGUAGE sql IMMUTABLE AS $$SELECT 'text'$$;
CREATE FUNCTION opt_only(a int DEFAULT 1, b int DEFAULT 2) RETURNS int LANGUAGE sql IMMUTABLE AS 'SELECT a * 10 + b';
CREATE FUNCTION req_opt(a int, b int DEFAULT 5) RETURNS int LANGUAGE sql IMMUTABLE AS 'SELECT a + b';
CREATE FUNCTION poly_first(arr anyarray) RETURNS anyelement LANGUAGE sql IMMUTABLE AS 'SELECT arr[1]';
CREATE FUNCTION poly_same(x anyelement) RETURNS anyelement LANGUAGE sql IMMUTABLE AS 'SELECT x';
`

t.test('RPC resolution as PostgREST', async (t) => {
  const fx = await createWriteFixture(t, { sql: RPC_SQL + SQL })
  const json = (body: unknown) => ({ body: JSON.stringify(body), headers: { 'content-type': 'application/json' } })

  t.test('unknown function: fuzzy hint on the name (close enough only)', async (t) => {
    const r = await fx.call('GET', '/rpc/sayhell')
    t.equal(r.status, 404)
    t.same(r.json(), {
      code: 'PGRST202',
      message: 'Could not find the function public.sayhell without parameters in the schema cache',
      details:
        'Searched for the function public.sayhell without parameters, but no matches were found in the schema cache.',
      hint: 'Perhaps you meant to call the function public.sayhello',
    })
    t.equal((await fx.call('GET', '/rpc/zzzqqq')).json().hint, null)
    t.equal(r.headers['content-length'], String(Buffer.byteLength(r.body)))
  })

  t.test('known function, unknown arguments: fuzzy hint on the parameter lists', async (t) => {
    t.same((await fx.call('GET', '/rpc/sayhello?nam=Peter')).json(), {
      code: 'PGRST202',
      message: 'Could not find the function public.sayhello(nam) in the schema cache',
      details:
        'Searched for the function public.sayhello with parameter nam, but no matches were found in the schema cache.',
      hint: 'Perhaps you meant to call the function public.sayhello(name)',
    })
    t.same((await fx.call('GET', '/rpc/add_them?a=1&b=2&smthelse=blabla')).json(), {
      code: 'PGRST202',
      message: 'Could not find the function public.add_them(a, b, smthelse) in the schema cache',
      details:
        'Searched for the function public.add_them with parameters a, b, smthelse, but no matches were found in the schema cache.',
      hint: 'Perhaps you meant to call the function public.add_them(a, b)',
    })
    t.equal((await fx.call('GET', '/rpc/overloaded?wrong_arg=value')).json().hint, null, 'nothing close')
    t.same((await fx.call('POST', '/rpc/named_json_param', json({ A: 1, B: 2, C: 3 }))).json(), {
      code: 'PGRST202',
      message: 'Could not find the function public.named_json_param(A, B, C) in the schema cache',
      details:
        'Searched for the function public.named_json_param with parameters A, B, C or with a single unnamed json/jsonb parameter, but no matches were found in the schema cache.',
      hint: null,
    })
  })

  t.test('a raw body looks only for the single unnamed parameter of its type (no hint)', async (t) => {
    for (const [ct, type] of [
      ['text/plain', 'text'],
      ['text/xml', 'xml'],
      ['application/octet-stream', 'bytea'],
    ]) {
      const r = await fx.call('POST', '/rpc/unnamed_int_param', { body: '<a/>', headers: { 'content-type': ct } })
      t.equal(r.status, 404)
      t.same(r.json(), {
        code: 'PGRST202',
        message: 'Could not find the function public.unnamed_int_param in the schema cache',
        details: `Searched for the function public.unnamed_int_param with a single unnamed ${type} parameter, but no matches were found in the schema cache.`,
        hint: null,
      })
    }
    const j = await fx.call('POST', '/rpc/unnamed_int_param', json({ x: 1, y: 2 }))
    t.equal(j.json().message, 'Could not find the function public.unnamed_int_param(x, y) in the schema cache')
    t.equal(
      j.json().details,
      'Searched for the function public.unnamed_int_param with parameters x, y or with a single unnamed json/jsonb parameter, but no matches were found in the schema cache.',
    )
  })

  t.test('the single unnamed parameter beside overloads', async (t) => {
    t.equal(
      (await fx.call('POST', '/rpc/overloaded_unnamed_param', json({}))).body,
      '1',
      'no arguments: the function without parameters',
    )
    t.equal(
      (await fx.call('POST', '/rpc/overloaded_unnamed_param', json({ x: 1, y: 2 }))).body,
      '3',
      'named arguments win',
    )
    t.same(
      (await fx.call('POST', '/rpc/overloaded_unnamed_param', json({ A: 1, B: 2, C: 3 }))).json(),
      { A: 1, B: 2, C: 3 },
      'else the json fallback',
    )
    const text = await fx.call('POST', '/rpc/overloaded_unnamed_param', {
      body: 'unnamed text arg',
      headers: { 'content-type': 'text/plain' },
    })
    t.equal(text.json(), 'unnamed text arg')
    t.equal(
      (await fx.call('GET', '/rpc/overloaded_unnamed_param', { headers: { 'content-type': 'text/plain' } })).body,
      '1',
      'GET ignores Content-Type',
    )
    const both = await fx.call('POST', '/rpc/unnamed_json_jsonb', json({ A: 1 }))
    t.equal(both.status, 300)
    t.same(both.json(), {
      code: 'PGRST203',
      message:
        'Could not choose the best candidate function between: public.unnamed_json_jsonb( => json), public.unnamed_json_jsonb( => jsonb)',
      details: null,
      hint: 'Try renaming the parameters or the function itself in the database so function overloading can be resolved',
    })
  })

  t.test('same names, different types (a default counts as optional): PGRST203', async (t) => {
    const r = await fx.call('GET', '/rpc/overloaded_same_args?arg=value')
    t.equal(r.status, 300)
    t.same(r.json(), {
      code: 'PGRST203',
      message:
        'Could not choose the best candidate function between: public.overloaded_same_args(arg => integer), public.overloaded_same_args(arg => xml), public.overloaded_same_args(arg => text, num => integer)',
      details: null,
      hint: 'Try renaming the parameters or the function itself in the database so function overloading can be resolved',
    })
    t.equal((await fx.call('GET', '/rpc/overloaded_same_args?arg=value&num=1')).body, '"text"')
  })

  t.test('default parameters: any subset of the optional ones, all the required ones', async (t) => {
    t.equal((await fx.call('GET', '/rpc/opt_only')).body, '12')
    t.equal((await fx.call('GET', '/rpc/opt_only?b=7')).body, '17')
    t.equal((await fx.call('POST', '/rpc/opt_only', json({ a: 3, b: 4 }))).body, '34')
    t.equal(
      (await fx.call('POST', '/rpc/opt_only', { body: 'ignored', headers: { 'content-type': 'text/plain' } })).body,
      '12',
      'a raw body calls it with its defaults',
    )
    t.equal((await fx.call('GET', '/rpc/req_opt?a=1')).body, '6')
    t.equal((await fx.call('GET', '/rpc/req_opt?a=1&b=1')).body, '2')
    const missing = await fx.call('GET', '/rpc/req_opt?b=1')
    t.equal(missing.status, 404)
    t.equal(missing.json().hint, 'Perhaps you meant to call the function public.req_opt(a, b)')
  })

  t.test('array and CSV bodies: keys from the rows, called with the first row, as PostgREST', async (t) => {
    t.equal(
      (
        await fx.call(
          'POST',
          '/rpc/add_them',
          json([
            { a: 1, b: 2 },
            { a: 3, b: 4 },
          ]),
        )
      ).body,
      '3',
    )
    const mixed = await fx.call('POST', '/rpc/add_them', json([{ a: 1, b: 2 }, { a: 3 }]))
    t.equal(mixed.status, 400)
    t.same(mixed.json(), { code: 'PGRST102', message: 'All object keys must match', details: null, hint: null })
    t.same(
      (await fx.call('POST', '/rpc/echo_json', json([{ z: 1 }]))).json(),
      [{ z: 1 }],
      'no parameter named so: the single unnamed json parameter takes the array',
    )
    t.equal(
      (await fx.call('POST', '/rpc/echo_json', json([1, 2]))).json().message,
      'All object keys must match',
      'an array of scalars is refused',
    )
    t.same((await fx.call('POST', '/rpc/echo_json', json('x'))).json(), [], 'a bare scalar is taken as an empty array')
    t.equal((await fx.call('POST', '/rpc/overloaded_unnamed_param', json(5))).body, '1', 'which names no argument')
    const csv = { headers: { 'content-type': 'text/csv' } }
    t.equal((await fx.call('POST', '/rpc/add_them', { ...csv, body: 'a,b\n1,2\n4,6' })).body, '3')
    const none = await fx.call('POST', '/rpc/overloaded_unnamed_param', { ...csv, body: 'a,b\n1,2\n4,6\n100,200' })
    t.equal(none.status, 404)
    t.same(none.json(), {
      code: 'PGRST202',
      message: 'Could not find the function public.overloaded_unnamed_param(a, b) in the schema cache',
      details:
        'Searched for the function public.overloaded_unnamed_param with parameters a, b, but no matches were found in the schema cache.',
      hint: 'Perhaps you meant to call the function public.overloaded_unnamed_param(x, y)',
    })
  })

  t.test('polymorphic parameters: typed JSON values resolve, untyped text cannot', async (t) => {
    t.equal(
      (await fx.call('POST', '/rpc/poly_first', json({ arr: [3, 4] }))).status,
      400,
      'json_to_record cannot type anyarray, as in PostgREST',
    )
    const text = await fx.call('GET', '/rpc/poly_same?x=5')
    t.equal(text.status, 400)
    t.equal(text.json().code, '42804')
  })
})

// RPC resolution and errors (docs/rest-protocol.md §4.2, §7.3-7.4): overloads chosen by argument
// names, PGRST202 (404) and PGRST203 (300) with PostgREST's texts, RAISE EXCEPTION (P0001,
// 400, details and hint kept), RAISE SQLSTATE 'PTxyz' (status xyz), RAISE SQLSTATE 'PGRST'
// (full control, PGRST121 when malformed), EXECUTE revoked (42501). Real Postgres, inject.
import t from 'tap'
import { createWriteFixture } from '../../helpers/rest-writes.js'
import { RPC_SQL } from '../../helpers/rest-rpc.js'
import { eventually } from '../../helpers/eventually.js'

t.test('RPC resolution and errors', async (t) => {
  const fx = await createWriteFixture(t, { sql: RPC_SQL })

  t.test('overloads are chosen by the names of the arguments', async (t) => {
    t.equal((await fx.call('POST', '/rpc/overloaded', { body: { a: 1 } })).body, '"one int"')
    t.equal((await fx.call('POST', '/rpc/overloaded', { body: { a: 1, b: 2 } })).body, '"two ints"')
    t.equal((await fx.call('POST', '/rpc/overloaded', { body: { x: 'y' } })).body, '"one text"')
    t.equal((await fx.call('GET', '/rpc/overloaded?a=1&b=2')).body, '"two ints"')
  })

  t.test("no match: PGRST202 404 with PostgREST's texts", async (t) => {
    const r = await fx.call('POST', '/rpc/overloaded', { body: { z: 1, a: 2 } })
    t.equal(r.status, 404)
    t.same(r.json(), {
      code: 'PGRST202',
      message: 'Could not find the function public.overloaded(a, z) in the schema cache',
      details:
        'Searched for the function public.overloaded with parameters a, z or with a single unnamed json/jsonb parameter, but no matches were found in the schema cache.',
      hint: 'Perhaps you meant to call the function public.overloaded(a, b)',
    })
    const g = await fx.call('GET', '/rpc/add_them?a=1')
    t.equal(g.status, 404, 'a required argument is missing')
    t.equal(
      g.json().details,
      'Searched for the function public.add_them with parameter a, but no matches were found in the schema cache.',
    )
    const none = await fx.call('POST', '/rpc/nope')
    t.equal(none.status, 404)
    t.same(none.json(), {
      code: 'PGRST202',
      message: 'Could not find the function public.nope without parameters in the schema cache',
      details:
        'Searched for the function public.nope without parameters or with a single unnamed json/jsonb parameter, but no matches were found in the schema cache.',
      hint: null,
    })
    const text = await fx.call('POST', '/rpc/add_them', { body: 'x', headers: { 'content-type': 'text/plain' } })
    t.equal(text.status, 404)
    t.equal(text.json().message, 'Could not find the function public.add_them in the schema cache')
    t.equal(
      text.json().details,
      'Searched for the function public.add_them with a single unnamed text parameter, but no matches were found in the schema cache.',
    )
  })

  t.test('several matches: PGRST203 300', async (t) => {
    const r = await fx.call('POST', '/rpc/ambiguous', { body: { a: 1 } })
    t.equal(r.status, 300)
    t.same(r.json(), {
      code: 'PGRST203',
      message:
        'Could not choose the best candidate function between: public.ambiguous(a => integer), public.ambiguous(a => text)',
      details: null,
      hint: 'Try renaming the parameters or the function itself in the database so function overloading can be resolved',
    })
  })

  t.test('RAISE EXCEPTION: P0001 400 with its details and hint', async (t) => {
    const r = await fx.call('POST', '/rpc/fail_plain')
    t.equal(r.status, 400)
    t.same(r.json(), { code: 'P0001', message: 'plain failure', details: 'some detail', hint: 'some hint' })
    t.equal(r.headers['proxy-status'], 'PostgREST; error=P0001')
  })

  t.test('RAISE SQLSTATE PTxyz: status xyz', async (t) => {
    const r = await fx.call('POST', '/rpc/fail_payment')
    t.equal(r.status, 402)
    t.same(r.json(), {
      code: 'PT402',
      message: 'Payment Required',
      details: 'Quota exceeded',
      hint: 'Upgrade your plan',
    })
    const g = await fx.call('POST', '/rpc/fail_teapot')
    t.equal(g.status, 418)
    t.same(g.json(), { code: 'PT418', message: 'I am a teapot', details: null, hint: null })
  })

  t.test('RAISE SQLSTATE PGRST: the JSON in MESSAGE and DETAIL decides; malformed is PGRST121', async (t) => {
    const r = await fx.call('POST', '/rpc/fail_custom')
    t.equal(r.status, 409)
    t.equal(r.headers['x-custom'], 'yes')
    t.same(r.json(), { code: '123', message: 'Custom failure', details: 'custom details', hint: 'custom hint' })
    const bad = await fx.call('POST', '/rpc/fail_custom_bad')
    t.equal(bad.status, 500)
    t.same(bad.json(), {
      code: 'PGRST121',
      message: 'Could not parse JSON in the "RAISE SQLSTATE \'PGRST\'" error',
      details: "Invalid JSON value for MESSAGE: 'not json'",
      hint: "MESSAGE must be a JSON object with obligatory keys: 'code', 'message' and optional keys: 'details', 'hint'.",
    })
  })

  t.test('EXECUTE revoked: 42501 (401 for anon, 403 signed in)', async (t) => {
    const r = await fx.call('POST', '/rpc/secret_fn')
    t.equal(r.status, 401)
    t.equal(r.json().code, '42501')
    t.equal(r.json().message, 'permission denied for function secret_fn')
    const a = await fx.call('POST', '/rpc/secret_fn', { role: 'auth' })
    t.equal(a.status, 403)
    const s = await fx.call('POST', '/rpc/secret_fn', { role: 'svc' })
    t.equal(s.status, 200, "the secret key's role holds EXECUTE (default privileges)")
    t.equal(s.body, '42')
  })

  t.test('a function created after the schema cache loaded is found (reload on a miss)', async (t) => {
    await fx.call('POST', '/rpc/no_args')
    await fx.ownerSql("CREATE FUNCTION brand_new() RETURNS text LANGUAGE sql STABLE AS $$SELECT 'new'$$")
    const r = await eventually(async () => {
      const answer = await fx.call('GET', '/rpc/brand_new')
      return answer.status !== 404 && answer
    })
    t.equal(r.status, 200)
    t.equal(r.body, '"new"')
  })

  t.test('OPTIONS on a function: its methods, found as a GET call without arguments (PostgREST 14)', async (t) => {
    const v = await fx.call('OPTIONS', '/rpc/harmless_volatile')
    t.same([v.status, v.headers.allow], [200, 'OPTIONS,POST'])
    const s = await fx.call('OPTIONS', '/rpc/no_args')
    t.same([s.status, s.headers.allow], [200, 'OPTIONS,GET,HEAD,POST'])
    const needsArgs = await fx.call('OPTIONS', '/rpc/add_them')
    t.same(
      [needsArgs.status, needsArgs.json()],
      [
        404,
        {
          code: 'PGRST202',
          message: 'Could not find the function public.add_them without parameters in the schema cache',
          details:
            'Searched for the function public.add_them without parameters, but no matches were found in the schema cache.',
          hint: null,
        },
      ],
      'a function that needs arguments is not found without them',
    )
    const n = await fx.call('OPTIONS', '/rpc/nope')
    t.same(
      [n.status, n.json().message],
      [404, 'Could not find the function public.nope without parameters in the schema cache'],
    )
  })
})

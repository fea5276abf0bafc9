// Functions with unnamed parameters, as PostgREST 14 calls them through supabase-js's rpc():
// - the schema cache keeps only functions it can call: all parameters named, or exactly one
//   unnamed parameter of type bytea, json, jsonb, text or xml (PostgREST's funcsSqlQuery);
// - `rpc(fn, {'': value})` names the unnamed parameter '' and calls it by position with the
//   whole body (PostgREST's matchesParams and OnePosParam);
// - overloads PostgREST cannot choose between answer 300 PGRST203, one it does not keep 404
//   PGRST202 with the closest kept function as hint.
import t from 'tap'
import { startRestGateway } from '../../helpers/rest-gateway.js'

t.test('unnamed parameters as PostgREST calls them', async (t) => {
  const stack = await startRestGateway(t, { shared: 'rpc-unnamed' })
  const db = stack.client()

  const json = await db.rpc('unnamed_json', { '': { test: 'value' } })
  t.same(
    { status: json.status, data: json.data, error: json.error },
    { status: 200, data: 1, error: null },
    'json: called with the body',
  )
  const jsonb = await db.rpc('unnamed_jsonb', { '': { test: 'value' } })
  t.same(jsonb.data, { '': { test: 'value' } }, 'jsonb: the whole body is the argument')
  const text = await db.rpc('unnamed_text', { '': 'test' })
  t.same(
    { status: text.status, data: text.data },
    { status: 200, data: '{"":"test"}' },
    'text: the body as sent, as text',
  )

  const int = await db.rpc('unnamed_int', { '': 1 })
  t.equal(int.status, 404)
  t.same(
    int.error,
    {
      code: 'PGRST202',
      details:
        'Searched for the function public.unnamed_int with parameter  or with a single unnamed json/jsonb parameter, but no matches were found in the schema cache.',
      hint: 'Perhaps you meant to call the function public.unnamed_text',
      message: 'Could not find the function public.unnamed_int() in the schema cache',
    },
    'a single unnamed int is not kept: the closest kept function is the hint',
  )
  t.equal((await db.rpc('two_unnamed', { '': 'a' })).status, 404, 'two unnamed parameters are not kept either')

  const none = await db.rpc('none_or_unnamed')
  t.same(
    { status: none.status, data: none.data },
    { status: 200, data: 1 },
    'no arguments: the function without parameters',
  )
  const withText = await db.rpc('none_or_unnamed', { '': 'x' })
  t.same(
    { status: withText.status, data: withText.data },
    { status: 200, data: 'text one' },
    '{"": ...}: the unnamed text one',
  )

  const ambiguous = await db.rpc('unnamed_default')
  t.equal(ambiguous.status, 300)
  t.same(ambiguous.error, {
    code: 'PGRST203',
    details: null,
    hint: 'Try renaming the parameters or the function itself in the database so function overloading can be resolved',
    message:
      'Could not choose the best candidate function between: public.unnamed_default(), public.unnamed_default( => text)',
  })
  const chosen = await db.rpc('unnamed_default', { '': 'custom' })
  t.same({ status: chosen.status, data: chosen.data }, { status: 200, data: 'text one' })
})

t.test('a function returning record or SETOF record answers its rows, as PostgREST (RpcSpec)', async (t) => {
  const stack = await startRestGateway(t, { shared: 'rpc-unnamed' })
  const db = stack.client()
  const one = await db.rpc('one_record')
  t.same(
    { status: one.status, data: one.data, error: one.error },
    { status: 200, data: { id: 1, name: 'Windows 7', client_id: 1 }, error: null },
  )
  const some = await db.rpc('some_records', { id: 1, name: 'Windows%' })
  t.same(
    { status: some.status, data: some.data },
    {
      status: 200,
      data: [
        { id: 1, name: 'Windows 7', client_id: 1 },
        { id: 2, name: 'Windows 10', client_id: 1 },
      ],
    },
  )
})

t.test('a function returning a domain over a composite type answers the row, as PostgREST (RpcSpec)', async (t) => {
  const stack = await startRestGateway(t, { shared: 'rpc-unnamed' })
  const db = stack.client()
  const one = await db.rpc('ret_positive_point')
  t.same({ status: one.status, data: one.data, error: one.error }, { status: 200, data: { x: 10, y: 5 }, error: null })
  const some = await db.rpc('ret_positive_points')
  t.same(
    { status: some.status, data: some.data },
    {
      status: 200,
      data: [
        { x: 1, y: 1 },
        { x: 2, y: 2 },
      ],
    },
  )
})

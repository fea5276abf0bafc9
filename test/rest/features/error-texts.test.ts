// PostgREST 14's error texts and reason phrases: PGRST205's and PGRST200's fuzzy "Perhaps
// you meant" hints and details word for word, and the HTTP reason phrases PostgREST sends
// (its http-types names, e.g. 416 "Requested Range Not Satisfiable"; RAISE SQLSTATE 'PTnnn'
// with the message as the phrase; RAISE 'PGRST' with status_text), which supabase-js shows
// as statusText: over the engine, then supabase-js through the gateway on real sockets.
import t from 'tap'
import { createWriteFixture } from '../../helpers/rest-writes.js'
import { FIXTURE_SQL } from '../../helpers/rest-fixture.js'
import { WRITE_SQL } from '../../helpers/rest-writes.js'
import { RPC_SQL } from '../../helpers/rest-rpc.js'
import { startRestGateway } from '../../helpers/rest-gateway.js'

const PHRASE_SQL = `
CREATE FUNCTION fail_with_text() RETURNS void LANGUAGE plpgsql AS $$
BEGIN RAISE SQLSTATE 'PGRST' USING
  MESSAGE = '{"code":"X1","message":"Quota"}',
  DETAIL = '{"status":429,"status_text":"Slow Down Please","headers":{}}'; END $$;
`

t.test('error texts of the engine', async (t) => {
  const fx = await createWriteFixture(t, { sql: RPC_SQL })

  t.test('PGRST205: the closest table of the schema as hint', async (t) => {
    const near = await fx.call('GET', '/author')
    t.equal(near.status, 404)
    t.same(near.json(), {
      code: 'PGRST205',
      message: "Could not find the table 'public.author' in the schema cache",
      details: null,
      hint: "Perhaps you meant the table 'public.authors'",
    })
    t.equal((await fx.call('GET', '/qqqqzzzz')).json().hint, null, 'nothing close: no hint')
    t.equal((await fx.call('OPTIONS', '/autors')).json().hint, "Perhaps you meant the table 'public.authors'")
  })

  t.test('PGRST200: details and the closest target as hint', async (t) => {
    const r = await fx.call('GET', '/authors?select=*,book(*)')
    t.equal(r.status, 400)
    t.same(r.json(), {
      code: 'PGRST200',
      message: "Could not find a relationship between 'authors' and 'book' in the schema cache",
      details:
        "Searched for a foreign key relationship between 'authors' and 'book' in the schema 'public', but no matches were found.",
      hint: "Perhaps you meant 'books' instead of 'book'.",
    })
    const hinted = await fx.call('GET', '/authors?select=*,books!nope(*)')
    t.same(
      hinted.json(),
      {
        code: 'PGRST200',
        message: "Could not find a relationship between 'authors' and 'books' in the schema cache",
        details:
          "Searched for a foreign key relationship between 'authors' and 'books' using the hint 'nope' in the schema 'public', but no matches were found.",
        hint: null,
      },
      'the target exists: the embed hint is the problem, no suggestion',
    )
  })

  t.test('reason phrases on the engine', async (t) => {
    const range = await fx.app.inject({
      method: 'GET',
      url: `/${fx.database}/authors?offset=100`,
      headers: { prefer: 'count=exact' },
    })
    t.equal(range.statusCode, 416)
    t.equal(range.statusMessage, 'Requested Range Not Satisfiable')
    const teapot = await fx.app.inject({ method: 'POST', url: `/${fx.database}/rpc/fail_teapot` })
    t.equal(teapot.statusCode, 418)
    t.equal(teapot.statusMessage, 'I am a teapot', "PTnnn: the error's message is the phrase")
    const ok = await fx.app.inject({ method: 'GET', url: `/${fx.database}/authors?limit=1` })
    t.equal(ok.statusMessage, 'OK')
  })
})

t.test('supabase-js statusText through the gateway', async (t) => {
  const stack = await startRestGateway(t, { sql: FIXTURE_SQL + WRITE_SQL + RPC_SQL + PHRASE_SQL })
  const sb = stack.client()
  const range = await sb.from('authors').select('*', { count: 'exact' }).range(100, 110)
  t.equal(range.status, 416)
  t.equal(range.statusText, 'Requested Range Not Satisfiable')
  t.equal(range.error?.code, 'PGRST103')
  const teapot = await sb.rpc('fail_teapot')
  t.equal(teapot.status, 418)
  t.equal(teapot.statusText, 'I am a teapot')
  const custom = await sb.rpc('fail_with_text')
  t.equal(custom.status, 429)
  t.equal(custom.statusText, 'Slow Down Please', "RAISE 'PGRST' with status_text")
  const partial = await sb.from('authors').select('id', { count: 'exact' }).range(0, 0)
  t.equal(partial.status, 206)
  t.equal(partial.statusText, 'Partial Content')
  const created = await sb.from('items').insert({ name: 'phrase' })
  t.equal(created.statusText, 'Created')
})

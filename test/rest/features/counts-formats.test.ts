// Counts and formats as PostgREST 14 answers them: Prefer: count=estimated under max-rows
// (QueryLimitedSpec: the planner's guess when more rows match than max-rows, for HEAD as for
// GET) and CSV output (Postgres' text output of the row: booleans t/f, money $12.00, as
// PostgREST writes it; its own "disparate csv types" case is pending).
import t from 'tap'
import { createRestFixture } from '../../helpers/rest-fixture.js'
import { startRestGateway } from '../../helpers/rest-gateway.js'

t.test('count=estimated under max-rows', async (t) => {
  const fx = await createRestFixture(t, { shared: 'rest-counts', rest: { max_rows: 2 } })
  for (const method of ['GET', 'HEAD'] as const) {
    const guess = await fx.get('/all_proj_view', { prefer: 'count=estimated' }, method)
    t.equal(guess.status, 206, `${method}: more rows than max-rows: partial`)
    t.equal(guess.headers['content-range'], '0-1/2019', `${method}: the planner's guess`)

    const few = await fx.get('/all_proj_view?id=lt.3', { prefer: 'count=estimated' }, method)
    t.equal(few.status, 200, `${method}: no more rows than max-rows`)
    t.equal(few.headers['content-range'], '0-1/2', `${method}: the exact count`)

    const low = await fx.get('/proj_above_view', { prefer: 'count=estimated' }, method)
    t.equal(low.status, 206, `${method}: a guess below the rows counted`)
    t.equal(low.headers['content-range'], '0-1/3', `${method}: the rows counted up to max-rows + 1`)
  }
})

t.test('count=estimated under max-rows through the gateway (supabase-js head: true)', async (t) => {
  const stack = await startRestGateway(t, { shared: 'rest-counts', rest: { max_rows: 2 } })
  const sb = stack.client()
  const head = await sb.from('all_proj_view').select('*', { count: 'estimated', head: true })
  t.same(
    { status: head.status, count: head.count, error: head.error },
    { status: 206, count: 2019, error: null },
    'HEAD',
  )
  const get = await sb.from('all_proj_view').select('id', { count: 'estimated' })
  t.same({ status: get.status, count: get.count, rows: get.data?.length }, { status: 206, count: 2019, rows: 2 }, 'GET')
  const r = await fetch(`${stack.gatewayUrl}/${stack.database}/rest/v1/all_proj_view`, {
    method: 'HEAD',
    headers: { apikey: stack.tenant.file.keys.public, prefer: 'count=estimated' },
  })
  t.equal(r.status, 206)
  t.equal(r.headers.get('content-range'), '0-1/2019')
})

const CSV_SQL = `
CREATE TYPE menagerie_kind AS ENUM ('foo', 'bar');
CREATE TABLE menagerie ("integer" integer NOT NULL, double double precision NOT NULL, "varchar" varchar NOT NULL,
  "boolean" boolean NOT NULL, date date NOT NULL, money money NOT NULL, enum menagerie_kind NOT NULL);
GRANT SELECT, INSERT ON menagerie TO PUBLIC;
`

t.test('CSV in and out: booleans and money as Postgres writes them', async (t) => {
  const fx = await createRestFixture(t, { sql: CSV_SQL })
  const body =
    'integer,double,varchar,boolean,date,money,enum\n13,3.14159,testing!,false,1900-01-01,$3.99,foo\n12,0.1,a string,true,1929-10-01,12,bar'
  const res = await fx.app.inject({
    method: 'POST',
    url: `/${fx.database}/menagerie`,
    headers: { 'content-type': 'text/csv', accept: 'text/csv', prefer: 'return=representation' },
    payload: body,
  })
  t.equal(res.statusCode, 201)
  t.equal(res.headers['content-type'], 'text/csv; charset=utf-8')
  t.equal(
    res.body,
    'integer,double,varchar,boolean,date,money,enum\n13,3.14159,testing!,f,1900-01-01,$3.99,foo\n12,0.1,"a string",t,1929-10-01,$12.00,bar',
  )
  const read = await fx.get('/menagerie?order=integer', { accept: 'text/csv' })
  t.equal(
    read.body,
    'integer,double,varchar,boolean,date,money,enum\n12,0.1,"a string",t,1929-10-01,$12.00,bar\n13,3.14159,testing!,f,1900-01-01,$3.99,foo',
  )
})

// Execution plans as PostgREST 14 answers them (db-plan-enabled as the tenant key
// rest.plan_enabled): Accept: application/vnd.pgrst.plan[+text|+json] with for="<type>" and
// options=analyze|verbose|settings|buffers|wal answers the EXPLAIN of the read, write or
// call; without analyze nothing runs, with analyze a write is committed unless Prefer:
// tx=rollback; a tenant without the key does not offer the media type (PGRST107). The SQL
// plan, the engine over fastify inject, and supabase-js .explain() through the gateway.
import t from 'tap'
import { createWriteFixture } from '../../helpers/rest-writes.js'
import { RPC_SQL } from '../../helpers/rest-rpc.js'
import { parseApiRequest } from '../../../src/rest/api-request/index.js'
import { planAction, type ReadPlan, type MutatePlan } from '../../../src/rest/plan/index.js'
import { renderAction } from '../../../src/rest/query/index.js'
import { loadSchemaCache } from '../../../src/rest/schema-cache/index.js'
import { startRestGateway } from '../../helpers/rest-gateway.js'
import { withClient } from '../../helpers/tenants.js'

const PLAN_JSON = 'application/vnd.pgrst.plan+json; for="application/json"; charset=utf-8'

t.test('execution plans', async (t) => {
  const fx = await createWriteFixture(t, { sql: RPC_SQL, rest: { plan_enabled: true } })
  const countItems = async (name: string): Promise<number> =>
    Number((await fx.ownerSql('SELECT count(*)::int AS n FROM items WHERE name = $1', [name]))[0].n)

  t.test('the plan: the main statement explained, its parameters unchanged', async (t) => {
    const cache = await withClient(fx.t.ownerUrl, (c) =>
      loadSchemaCache(async (text, values) => (await c.query(text, values)).rows, ['public'], 1),
    )
    const plan = (method: string, path: string, query: string, accept: string, plans = true): ReadPlan | MutatePlan =>
      planAction(
        parseApiRequest(
          {
            method,
            path,
            query,
            headers: { accept, 'content-type': 'application/json' },
            body: method === 'POST' ? Buffer.from('{"name":"x"}') : null,
          },
          { schemas: ['public'] },
        ),
        cache,
        { maxRows: null, plans },
      ) as ReadPlan | MutatePlan
    const read = plan('GET', '/authors', 'id=eq.1', 'application/vnd.pgrst.plan+json; options=analyze|verbose')
    t.same(read.explain, { format: 'json', options: ['analyze', 'verbose'], forMediaType: 'application/json' })
    const st = renderAction(read)
    t.match(st.main.text, /^EXPLAIN \(FORMAT JSON, ANALYZE, VERBOSE\) WITH pgrst_source AS/)
    t.same(st.main.values, ['1'])
    t.equal(st.main.textResult, true)
    t.equal(
      renderAction(plan('GET', '/authors', '', 'application/vnd.pgrst.plan')).main.text.slice(0, 22),
      'EXPLAIN (FORMAT TEXT) ',
    )
    const write = plan(
      'POST',
      '/items',
      '',
      'application/vnd.pgrst.plan+text; for="application/vnd.pgrst.object"; options=wal|buffers',
    )
    t.same(write.explain, {
      format: 'text',
      options: ['buffers', 'wal'],
      forMediaType: 'application/vnd.pgrst.object+json',
    })
    t.equal(write.media.kind, 'singular', 'planned for the media type it is for')
    t.match(
      renderAction(write).main.text,
      /^EXPLAIN \(FORMAT TEXT, BUFFERS, WAL\) WITH pgrst_payload AS .* INSERT INTO /,
    )
    t.equal(
      plan('GET', '/authors', '', 'application/json, application/vnd.pgrst.plan').explain,
      undefined,
      'an earlier type wins',
    )
    t.throws(
      () => plan('GET', '/authors', '', 'application/vnd.pgrst.plan+json', false),
      { code: 'PGRST107' },
      'not offered when disabled',
    )
  })

  t.test('reads: JSON and text output, options, for=', async (t) => {
    const json = await fx.call('GET', '/authors?select=id,name&id=in.(1,2)', {
      headers: { accept: 'application/vnd.pgrst.plan+json' },
    })
    t.equal(json.status, 200)
    t.equal(json.headers['content-type'], PLAN_JSON)
    t.ok(json.body.endsWith('\n'))
    t.match(json.json()[0].Plan, { 'Node Type': 'Aggregate' })
    t.equal(json.headers['content-range'], undefined)

    const text = await fx.call('GET', '/authors', { headers: { accept: 'application/vnd.pgrst.plan' } })
    t.equal(text.status, 200)
    t.equal(text.headers['content-type'], 'application/vnd.pgrst.plan+text; for="application/json"; charset=utf-8')
    t.match(text.body, /^Aggregate {2}\(cost=/)
    t.ok(text.body.split('\n').length > 2, 'one line per row of the EXPLAIN')

    const opts = await fx.call('GET', '/authors', {
      headers: { accept: 'application/vnd.pgrst.plan+json; options=analyze|verbose|settings|buffers|wal' },
    })
    t.equal(
      opts.headers['content-type'],
      'application/vnd.pgrst.plan+json; for="application/json"; options=analyze|verbose|settings|buffers|wal; charset=utf-8',
    )
    const doc = opts.json()[0]
    t.type(doc.Plan['Actual Rows'], 'number', 'analyze')
    t.type(doc.Plan.Output, Array, 'verbose')
    t.type(
      doc['Query Identifier'],
      'number',
      "verbose: the query identifier (compute_query_id is on, as in Supabase's Postgres)",
    )
    t.type(doc.Plan['Shared Hit Blocks'], 'number', 'buffers')
    t.type(doc.Plan['WAL Records'], 'number', 'wal')
    t.type(doc['Execution Time'], 'number')

    const obj = await fx.call('GET', '/authors?id=eq.1', {
      headers: { accept: 'application/vnd.pgrst.plan+json; for="application/vnd.pgrst.object"; options=verbose' },
    })
    t.equal(
      obj.headers['content-type'],
      'application/vnd.pgrst.plan+json; for="application/vnd.pgrst.object+json"; options=verbose; charset=utf-8',
    )
    t.match(obj.json()[0].Plan.Output[2], /-> 0/, 'the plan of the singular body')
  })

  t.test('writes: explained without running; analyze commits unless tx=rollback', async (t) => {
    const plain = await fx.call('POST', '/items', {
      body: { name: 'planned only' },
      headers: { accept: 'application/vnd.pgrst.plan+json' },
    })
    t.equal(plain.status, 200)
    t.equal(plain.headers['content-type'], PLAN_JSON)
    t.match(plain.json()[0].Plan.Plans[0], { 'Node Type': 'ModifyTable', Operation: 'Insert' })
    t.equal(await countItems('planned only'), 0, 'EXPLAIN alone writes nothing')

    const analyzed = await fx.call('POST', '/items', {
      body: { name: 'analyzed' },
      headers: { accept: 'application/vnd.pgrst.plan+json; options=analyze' },
    })
    t.equal(analyzed.status, 200)
    t.equal(await countItems('analyzed'), 1, 'EXPLAIN ANALYZE runs the insert and commits it, as PostgREST')

    const rolledBack = await fx.call('POST', '/items', {
      body: { name: 'rolled back' },
      headers: { accept: 'application/vnd.pgrst.plan+json; options=analyze', prefer: 'tx=rollback' },
    })
    t.equal(rolledBack.status, 200)
    t.equal(await countItems('rolled back'), 0, 'Prefer: tx=rollback undoes it')

    const patch = await fx.call('PATCH', '/items?name=eq.analyzed', {
      body: { qty: 9 },
      headers: { accept: 'application/vnd.pgrst.plan' },
    })
    t.equal(patch.status, 200)
    t.match(patch.body, /Update on items/)
    const del = await fx.call('DELETE', '/items?name=eq.analyzed', {
      headers: { accept: 'application/vnd.pgrst.plan' },
    })
    t.match(del.body, /Delete on items/)
    t.equal(await countItems('analyzed'), 1, 'neither ran')
  })

  t.test('calls', async (t) => {
    const get = await fx.call('GET', '/rpc/books_by?author=1', {
      headers: { accept: 'application/vnd.pgrst.plan+json' },
    })
    t.equal(get.status, 200)
    t.equal(get.headers['content-type'], PLAN_JSON)
    t.match(get.json()[0], { Plan: { 'Node Type': 'Aggregate' } })
    const post = await fx.call('POST', '/rpc/add_them', {
      body: { a: 1, b: 2 },
      headers: { accept: 'application/vnd.pgrst.plan' },
    })
    t.equal(post.status, 200)
    t.match(post.body, /cost=/)
  })

  t.test('a tenant without rest.plan_enabled does not offer the plan media type', async (t) => {
    const off = await createWriteFixture(t)
    const r = await off.call('GET', '/authors', { headers: { accept: 'application/vnd.pgrst.plan+json' } })
    t.equal(r.status, 406)
    t.equal(r.json().code, 'PGRST107')
    const fallback = await off.call('GET', '/authors?select=id&id=eq.1', {
      headers: { accept: 'application/vnd.pgrst.plan+json, application/json' },
    })
    t.equal(fallback.status, 200)
    t.same(fallback.json(), [{ id: 1 }], 'the next acceptable type is used')
  })
})

t.test('supabase-js .explain() through the gateway', async (t) => {
  const stack = await startRestGateway(t, { shared: 'rest-rpc', rest: { plan_enabled: true } })
  const sb = stack.client()
  const text = await sb.from('authors').select('id, name').eq('id', 1).explain()
  t.equal(text.error, null)
  t.equal(text.status, 200)
  t.type(text.data, 'string')
  t.match(text.data as unknown as string, /^Aggregate/)
  const json = await sb.from('authors').select('id').explain({ format: 'json', analyze: true, verbose: true })
  t.equal(json.error, null)
  const doc = (json.data as unknown as Array<{ Plan: Record<string, unknown> }>)[0]
  t.type(doc.Plan['Actual Rows'], 'number')
  t.type(doc.Plan.Output, Array)
  const call = await sb.rpc('books_by', { author: 1 }).explain({ format: 'json' })
  t.equal(call.error, null)
  t.ok(Array.isArray(call.data))
})

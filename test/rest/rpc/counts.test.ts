// Counts on RPC as PostgREST 14 answers them: Prefer: count=exact|estimated on GET, POST
// and HEAD calls puts the total in Content-Range (a function returning one value or void
// counts as one row); count=planned leaves the total unknown (PostgREST runs no EXPLAIN
// for calls). The SQL of the call counts only when asked. Engine over fastify inject,
// then supabase-js `.rpc(fn, args, { count })` through the gateway on real sockets.
import t from 'tap'
import { createWriteFixture } from '../../helpers/rest-writes.js'
import { RPC_SQL } from '../../helpers/rest-rpc.js'
import { parseApiRequest } from '../../../src/rest/api-request/index.js'
import { planAction, type CallPlan } from '../../../src/rest/plan/index.js'
import { renderCall } from '../../../src/rest/query/index.js'
import { loadSchemaCache } from '../../../src/rest/schema-cache/index.js'
import { startRestGateway } from '../../helpers/rest-gateway.js'
import { withClient } from '../../helpers/tenants.js'

t.test('RPC counts', async (t) => {
  const fx = await createWriteFixture(t, { sql: RPC_SQL })

  t.test('the call plan counts rows for exact and estimated only', async (t) => {
    const cache = await withClient(fx.t.ownerUrl, (c) =>
      loadSchemaCache(async (text, values) => (await c.query(text, values)).rows, ['public'], 1),
    )
    const plan = (prefer: string | undefined): CallPlan =>
      planAction(
        parseApiRequest(
          {
            method: 'GET',
            path: '/rpc/books_by',
            query: 'author=1',
            headers: prefer === undefined ? {} : { prefer },
            body: null,
          },
          { schemas: ['public'] },
        ),
        cache,
        { maxRows: null },
      ) as CallPlan
    t.equal(plan('count=exact').countRows, true)
    t.equal(plan('count=estimated').countRows, true)
    t.equal(plan('count=planned').countRows, false)
    t.equal(plan(undefined).countRows, false)
    t.match(renderCall(plan('count=exact')).text, /SELECT pg_catalog\.count\(_postgrest_t\) AS total_result_set/)
    t.match(renderCall(plan('count=planned')).text, /SELECT null::bigint AS total_result_set/)
  })

  t.test('set-returning: GET, POST and HEAD with count=exact', async (t) => {
    const get = await fx.call('GET', '/rpc/books_by?author=1&select=id&order=id&limit=2', {
      headers: { prefer: 'count=exact' },
    })
    t.equal(get.status, 206)
    t.equal(get.headers['content-range'], '0-1/3')
    t.equal(get.headers['preference-applied'], 'count=exact')
    const post = await fx.call('POST', '/rpc/books_by?select=id', {
      body: { author: 1 },
      headers: { prefer: 'count=exact' },
    })
    t.equal(post.status, 200)
    t.equal(post.headers['content-range'], '0-2/3')
    const head = await fx.call('HEAD', '/rpc/books_by?author=1&offset=1', { headers: { prefer: 'count=exact' } })
    t.equal(head.status, 206)
    t.equal(head.body, '')
    t.equal(head.headers['content-range'], '1-2/3')
    const filtered = await fx.call('GET', '/rpc/books_by?author=1&year=gt.1968', { headers: { prefer: 'count=exact' } })
    t.equal(filtered.headers['content-range'], '0-1/2', 'filters apply to the count')
  })

  t.test('estimated counts as exact; planned leaves the total unknown', async (t) => {
    const est = await fx.call('GET', '/rpc/books_by?author=1&limit=1', { headers: { prefer: 'count=estimated' } })
    t.equal(est.status, 206)
    t.equal(est.headers['content-range'], '0-0/3')
    t.equal(est.headers['preference-applied'], 'count=estimated')
    const planned = await fx.call('GET', '/rpc/books_by?author=1&limit=1', { headers: { prefer: 'count=planned' } })
    t.equal(planned.status, 200)
    t.equal(planned.headers['content-range'], '0-0/*')
    t.equal(planned.headers['preference-applied'], 'count=planned')
  })

  t.test('one value, one row, void: one row', async (t) => {
    const scalar = await fx.call('GET', '/rpc/add_them?a=3&b=4', { headers: { prefer: 'count=exact' } })
    t.equal(scalar.body, '7')
    t.equal(scalar.headers['content-range'], '0-0/1')
    const row = await fx.call('GET', '/rpc/author_row?author_id=2', { headers: { prefer: 'count=exact' } })
    t.equal(row.headers['content-range'], '0-0/1')
    t.equal((await fx.call('GET', '/rpc/add_them?a=3&b=4')).headers['content-range'], '0-0/*')
    const voidCall = await fx.call('POST', '/rpc/do_nothing', { headers: { prefer: 'count=exact' } })
    t.equal(voidCall.status, 204)
    t.equal(voidCall.headers['content-range'], '0-0/1')
    t.equal((await fx.call('POST', '/rpc/do_nothing')).headers['content-range'], '0-0/*')
  })
})

t.test('supabase-js .rpc(fn, args, { count }) through the gateway', async (t) => {
  const stack = await startRestGateway(t, { shared: 'rest-rpc' })
  const sb = stack.client()
  const exact = await sb.rpc('books_by', { author: 1 }, { count: 'exact' }).select('id').order('id').limit(2)
  t.equal(exact.error, null)
  t.equal(exact.count, 3)
  t.equal(exact.status, 206)
  t.same(exact.data, [{ id: 1 }, { id: 2 }])
  const head = await sb.rpc('books_by', { author: 1 }, { head: true, count: 'exact' })
  t.equal(head.error, null)
  t.equal(head.count, 3)
  t.equal(head.data, null)
  const get = await sb.rpc('books_by', { author: 2 }, { get: true, count: 'estimated' })
  t.equal(get.count, 2)
  const planned = await sb.rpc('books_by', { author: 2 }, { count: 'planned' })
  t.equal(planned.error, null)
  t.ok(Number.isNaN(planned.count), "no total for a planned count of a call (supabase-js reads PostgREST's '*' as NaN)")
  const scalar = await sb.rpc('add_them', { a: 1, b: 2 }, { count: 'exact' })
  t.equal(scalar.data, 3)
  t.equal(scalar.count, 1)
})

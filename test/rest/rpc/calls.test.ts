// RPC (docs/rest-protocol.md §4): POST with named arguments from a JSON object or a form, GET with
// query arguments (STABLE/IMMUTABLE only), the single unnamed json/text/bytea parameter,
// array and variadic arguments, scalar / composite / set-returning / OUT / TABLE results,
// filters, order, limit and embeds on set results, counts, singular, void, volatile
// writers and read-only transactions, response.* settings. Real Postgres, fastify inject.
import t from 'tap'
import { createWriteFixture } from '../../helpers/rest-writes.js'
import { ALICE } from '../../helpers/rest-fixture.js'
import { RPC_SQL } from '../../helpers/rest-rpc.js'

t.test('RPC calls', async (t) => {
  const fx = await createWriteFixture(t, { sql: RPC_SQL })

  t.test('a scalar: POST named JSON arguments, GET query arguments', async (t) => {
    const p = await fx.call('POST', '/rpc/add_them', { body: { a: 1, b: 2 } })
    t.equal(p.status, 200)
    t.equal(p.body, '3')
    t.equal(p.headers['content-type'], 'application/json; charset=utf-8')
    t.equal(p.headers['content-range'], '0-0/*')
    const g = await fx.call('GET', '/rpc/add_them?a=40&b=2')
    t.equal(g.status, 200)
    t.equal(g.body, '42')
    const h = await fx.call('HEAD', '/rpc/add_them?a=40&b=2')
    t.equal(h.status, 200)
    t.equal(h.body, '')
    t.equal((await fx.call('POST', '/rpc/hello', { body: {} })).body, '"Hello, world"', 'a default may be left out')
    t.equal((await fx.call('POST', '/rpc/hello')).body, '"Hello, world"', 'an empty body counts as {}')
    t.equal((await fx.call('GET', '/rpc/hello?name=Ada')).body, '"Hello, Ada"')
    t.equal((await fx.call('GET', '/rpc/no_args')).body, '"none"')
    const form = await fx.call('POST', '/rpc/add_them', {
      body: 'a=5&b=6',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
    })
    t.equal(form.body, '11', 'form fields are arguments')
    const cols = await fx.call('POST', '/rpc/add_them?columns=a,b', { body: { a: 1, b: 2, c: 3 } })
    t.equal(cols.body, '3', 'columns= picks the arguments')
  })

  t.test('a set of rows of a table: filters, order, limit, embeds, count, Range', async (t) => {
    const r = await fx.call(
      'GET',
      '/rpc/books_by?author=1&select=title,year,author:authors(name)&year=gt.1968&order=year.desc',
    )
    t.equal(r.status, 200)
    t.same(r.json(), [
      { title: 'The Dispossessed', year: 1974, author: { name: 'Ursula Le Guin' } },
      { title: 'The Left Hand of Darkness', year: 1969, author: { name: 'Ursula Le Guin' } },
    ])
    t.equal(r.headers['content-range'], '0-1/*')
    const lim = await fx.call('POST', '/rpc/books_by?select=id&order=id&limit=2&offset=1', {
      body: { author: 1 },
      headers: { prefer: 'count=exact' },
    })
    t.equal(lim.status, 206)
    t.same(lim.json(), [{ id: 2 }, { id: 3 }])
    t.equal(lim.headers['content-range'], '1-2/3')
    t.equal(lim.headers['preference-applied'], 'count=exact')
    const range = await fx.call('GET', '/rpc/books_by?author=2&select=id&order=id', { headers: { range: '1-1' } })
    t.same(range.json(), [{ id: 5 }])
    t.equal(range.headers['content-range'], '1-1/*')
    const none = await fx.call('GET', '/rpc/books_by?author=99')
    t.same(none.json(), [])
    t.equal(none.headers['content-range'], '*/*')
    const csv = await fx.call('GET', '/rpc/books_by?author=2&select=id,title&order=id', {
      headers: { accept: 'text/csv' },
    })
    t.equal(csv.headers['content-type'], 'text/csv; charset=utf-8')
    t.equal(csv.body, 'id,title\n4,Solaris\n5,"The Cyberiad"')
  })

  t.test('a set of scalars, a composite, RETURNS TABLE, OUT parameters', async (t) => {
    t.same((await fx.call('GET', '/rpc/numbers?n=4')).json(), [1, 2, 3, 4])
    t.same(
      (await fx.call('GET', '/rpc/numbers?n=5&order=numbers.desc&limit=2')).json(),
      [5, 4],
      'ordered and limited by its own name',
    )
    t.same((await fx.call('GET', '/rpc/numbers?n=5&numbers=gt.3')).json(), [4, 5], 'filtered by its own name')
    const row = await fx.call('GET', '/rpc/author_row?author_id=2')
    t.same(
      row.json(),
      {
        id: 2,
        name: 'Stanislaw Lem',
        country: 'PL',
        profile: { tags: ['sf'], stats: { books: 17 } },
        born: '1921-09-12',
      },
      'one row: an object',
    )
    t.equal(row.headers['content-range'], '0-0/*')
    const sel = await fx.call(
      'GET',
      '/rpc/author_row?author_id=1&select=name,books(title)&books.order=id&books.limit=1',
    )
    t.same(
      sel.json(),
      { name: 'Ursula Le Guin', books: [{ title: 'A Wizard of Earthsea' }] },
      'select and embeds on a composite',
    )
    t.same((await fx.call('GET', '/rpc/squares?n=4&sq=gt.4&order=i.desc')).json(), [
      { i: 4, sq: 16 },
      { i: 3, sq: 9 },
    ])
    t.same((await fx.call('POST', '/rpc/twice_thrice', { body: { x: 5 } })).json(), { doubled: 10, tripled: 15 })
    const emb = await fx.call('GET', '/rpc/squares?n=2&select=sq,books(id)')
    t.equal(emb.status, 400, 'a result that is not a table has no relationships')
    t.equal(emb.json().code, 'PGRST200')
  })

  t.test('a single unnamed parameter takes the whole body: json, text, bytea', async (t) => {
    const arr = await fx.call('POST', '/rpc/echo_json', { body: [{ a: 'b' }, { a: 'c' }] })
    t.equal(arr.status, 200)
    t.same(arr.json(), [{ a: 'b' }, { a: 'c' }], 'an array of objects whose keys name no parameter')
    const scalars = await fx.call('POST', '/rpc/echo_json', { body: [1, { a: 'b' }] })
    t.same(
      [scalars.status, scalars.json().code, scalars.json().message],
      [400, 'PGRST102', 'All object keys must match'],
      'as PostgREST, an array body must hold objects with the same keys',
    )
    const obj = await fx.call('POST', '/rpc/echo_json', { body: { any: 'keys' } })
    t.same(obj.json(), { any: 'keys' }, 'an object with keys that name no parameter')
    const text = await fx.call('POST', '/rpc/shout', { body: 'quiet words', headers: { 'content-type': 'text/plain' } })
    t.equal(text.body, '"QUIET WORDS"')
    const bytes = await fx.call('POST', '/rpc/byte_count', {
      body: Buffer.from([0, 1, 2, 255, 0]),
      headers: { 'content-type': 'application/octet-stream' },
    })
    t.equal(bytes.body, '5')
    const named = await fx.call('POST', '/rpc/named_json', { body: { data: { x: [1, 2] } } })
    t.same(named.json(), { x: [1, 2] }, 'a named json parameter takes its key')
    const notFallback = await fx.call('POST', '/rpc/named_json', { body: [{ x: 1 }] })
    t.equal(notFallback.status, 404, 'a named json parameter is no fallback (v14)')
    t.equal(notFallback.json().code, 'PGRST202')
  })

  t.test('arrays and variadic parameters', async (t) => {
    t.equal((await fx.call('POST', '/rpc/sum_array', { body: { arr: [1, 2, 3] } })).body, '6', 'a JSON array')
    t.equal((await fx.call('GET', '/rpc/sum_array?arr=%7B4,5,6%7D')).body, '15', 'an array literal in the query')
    t.equal(
      (await fx.call('GET', '/rpc/count_args?v=a&v=b&v=c')).body,
      '3',
      'a repeated name fills a variadic parameter',
    )
    t.equal((await fx.call('POST', '/rpc/count_args', { body: { v: ['a', 'b'] } })).body, '2')
    const bad = await fx.call('GET', '/rpc/add_them?a=x&b=1')
    t.equal(bad.status, 400)
    t.equal(bad.json().code, '22P02')
  })

  t.test('volatile functions over GET run read-only (PostgREST 14); POST writes', async (t) => {
    const g = await fx.call('GET', '/rpc/add_item?item_name=x')
    t.equal(g.status, 405, 'a write in the read-only transaction')
    t.same(g.json(), {
      code: '25006',
      message: 'cannot execute INSERT in a read-only transaction',
      details: null,
      hint: null,
    })
    t.equal(g.headers['proxy-status'], 'PostgREST; error=25006')
    const h = await fx.call('GET', '/rpc/harmless_volatile')
    t.same([h.status, h.body], [200, '1'], 'a volatile function that does not write answers over GET')
    t.equal((await fx.call('HEAD', '/rpc/harmless_volatile')).status, 200)
    const p = await fx.call('POST', '/rpc/add_item?select=name,qty', { body: { item_name: 'from rpc', qty: 3 } })
    t.equal(p.status, 200)
    t.same(p.json(), { name: 'from rpc', qty: 3 })
    t.same(await fx.ownerSql("SELECT qty FROM items WHERE name = 'from rpc'"), [{ qty: 3 }], 'written')
    const rb = await fx.call('POST', '/rpc/add_item', {
      body: { item_name: 'rolled back' },
      headers: { prefer: 'tx=rollback' },
    })
    t.equal(rb.status, 200)
    t.equal(rb.headers['preference-applied'], 'tx=rollback')
    t.same(await fx.ownerSql("SELECT 1 FROM items WHERE name = 'rolled back'"), [])
    const put = await fx.call('PUT', '/rpc/add_them')
    t.equal(put.status, 405)
    t.equal(put.json().code, 'PGRST101')
  })

  t.test('void: 204; singular; max-affected; response.* settings; request settings', async (t) => {
    const v = await fx.call('POST', '/rpc/do_nothing')
    t.equal(v.status, 204)
    t.equal(v.body, '')
    const one = await fx.call('GET', '/rpc/books_by?author=3&select=title', {
      headers: { accept: 'application/vnd.pgrst.object+json' },
    })
    t.equal(one.status, 200)
    t.same(one.json(), { title: 'Kindred' })
    const many = await fx.call('GET', '/rpc/books_by?author=1', {
      headers: { accept: 'application/vnd.pgrst.object+json' },
    })
    t.equal(many.status, 406)
    t.same(many.json(), {
      code: 'PGRST116',
      message: 'Cannot coerce the result to a single JSON object',
      details: 'The result contains 3 rows',
      hint: null,
    })
    const max = await fx.call('POST', '/rpc/numbers', {
      body: { n: 5 },
      headers: { prefer: 'handling=strict, max-affected=3' },
    })
    t.equal(max.status, 400)
    t.same(max.json(), {
      code: 'PGRST124',
      message: 'Query result exceeds max-affected preference constraint',
      details: 'The query affects 5 rows',
      hint: null,
    })
    const okMax = await fx.call('POST', '/rpc/numbers', {
      body: { n: 2 },
      headers: { prefer: 'handling=strict, max-affected=3' },
    })
    t.equal(okMax.status, 200)
    t.equal(okMax.headers['preference-applied'], 'handling=strict, max-affected=3')
    const notSet = await fx.call('POST', '/rpc/add_them', {
      body: { a: 1, b: 1 },
      headers: { prefer: 'handling=strict, max-affected=3' },
    })
    t.equal(notSet.status, 400)
    t.same(notSet.json(), {
      code: 'PGRST128',
      message: 'Function must return SETOF or TABLE when max-affected preference is used with handling=strict',
      details: null,
      hint: null,
    })
    const custom = await fx.call('GET', '/rpc/custom_response')
    t.equal(custom.status, 202)
    t.equal(custom.headers['x-extra'], '1')
    t.equal(custom.headers['cache-control'], 'no-store')
    t.equal(custom.body, '"accepted"')
    const who = await fx.call('POST', '/rpc/whoami', { role: 'auth', claims: { sub: ALICE } })
    t.same(who.json(), { uid: ALICE, method: 'POST', path: '/rpc/whoami' })
  })
})

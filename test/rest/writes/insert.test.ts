// POST on a table (docs/rest-protocol.md §3.1-3.2, §3.7-3.8): object and array bodies, columns=,
// CSV and form bodies, missing=default, every return preference with its exact status,
// headers and body, count, singular responses, embedding in the representation,
// tx=rollback and handling=strict. Real Postgres, real HTTP (fastify inject).
import t from 'tap'
import { createWriteFixture } from '../../helpers/rest-writes.js'

t.test('POST insert', async (t) => {
  const fx = await createWriteFixture(t)
  const rows = (sql: string): Promise<Array<Record<string, unknown>>> => fx.ownerSql(sql)

  t.test('an object, return=minimal (the default): 201, empty body, Content-Range */*', async (t) => {
    const r = await fx.call('POST', '/items', { body: { name: 'hammer', qty: 3 } })
    t.equal(r.status, 201)
    t.equal(r.body, '')
    t.equal(r.headers['content-length'], '0')
    t.equal(r.headers['content-type'], undefined, 'no Content-Type without a body')
    t.equal(r.headers['content-range'], '*/*')
    t.equal(r.headers.location, undefined)
    t.equal(r.headers['preference-applied'], undefined, 'nothing was asked for')
    t.same(
      await rows("SELECT name, qty, note FROM items WHERE name = 'hammer'"),
      [{ name: 'hammer', qty: 3, note: 'none' }],
      'written; absent columns take their DEFAULT',
    )

    const m = await fx.call('POST', '/items', { body: { name: 'saw' }, headers: { prefer: 'return=minimal' } })
    t.equal(m.status, 201)
    t.equal(m.headers['preference-applied'], 'return=minimal')
  })

  t.test('an array with return=representation, select and an embed: 201, JSON, no Location', async (t) => {
    const r = await fx.call('POST', '/items?select=name,qty,author:authors(name)', {
      body: [
        { name: 'r1', qty: 1, author_id: 1 },
        { name: 'r2', qty: 2, author_id: null },
      ],
      headers: { prefer: 'return=representation' },
    })
    t.equal(r.status, 201)
    t.equal(r.headers['content-type'], 'application/json; charset=utf-8')
    t.equal(r.headers['content-range'], '*/*')
    t.equal(r.headers['preference-applied'], 'return=representation')
    t.equal(r.headers.location, undefined)
    t.same(r.json(), [
      { name: 'r1', qty: 1, author: { name: 'Ursula Le Guin' } },
      { name: 'r2', qty: 2, author: null },
    ])
  })

  t.test('representation of every column, jsonb and array columns, values as Postgres stored them', async (t) => {
    const r = await fx.call('POST', '/items', {
      body: { id: 500, name: 'full', price: '12.5', tags: ['a', 'b c'], data: { k: [1, { x: null }] } },
      headers: { prefer: 'return=representation' },
    })
    t.equal(r.status, 201)
    t.same(r.json(), [
      {
        id: 500,
        name: 'full',
        qty: 1,
        price: 12.5,
        tags: ['a', 'b c'],
        data: { k: [1, { x: null }] },
        author_id: null,
        note: 'none',
      },
    ])
    t.match(r.body, /"price":12\.50/, 'numeric keeps its scale (Postgres builds the JSON)')
  })

  t.test('return=headers-only: Location of the one inserted row', async (t) => {
    const r = await fx.call('POST', '/items', {
      body: { id: 600, name: 'loc' },
      headers: { prefer: 'return=headers-only' },
    })
    t.equal(r.status, 201)
    t.equal(r.body, '')
    t.equal(r.headers.location, '/items?id=eq.600')
    t.equal(r.headers['preference-applied'], 'return=headers-only')

    const composite = await fx.call('POST', '/pairs', {
      body: { a: 1, b: 2, v: 'x y' },
      headers: { prefer: 'return=headers-only' },
    })
    t.equal(composite.headers.location, '/pairs?a=eq.1&b=eq.2', 'every primary key column')
    const text = await fx.call('POST', '/kv', {
      body: { k: 'a b/c', v: '1' },
      headers: { prefer: 'return=headers-only' },
    })
    t.equal(text.headers.location, '/kv?k=eq.a%20b%2Fc', 'values are URL-encoded')

    const two = await fx.call('POST', '/items', {
      body: [{ name: 'h1' }, { name: 'h2' }],
      headers: { prefer: 'return=headers-only' },
    })
    t.equal(two.status, 201)
    t.equal(two.headers.location, undefined, 'no Location for two rows')
    const nopk = await fx.call('POST', '/nopk', { body: { x: 1 }, headers: { prefer: 'return=headers-only' } })
    t.equal(nopk.status, 201)
    t.equal(nopk.headers.location, undefined, 'no Location without a primary key')
  })

  t.test('count=exact: Content-Range */N', async (t) => {
    const r = await fx.call('POST', '/items', {
      body: [{ name: 'c1' }, { name: 'c2' }, { name: 'c3' }],
      headers: { prefer: 'count=exact' },
    })
    t.equal(r.status, 201)
    t.equal(r.headers['content-range'], '*/3')
    t.equal(r.headers['preference-applied'], 'count=exact')
  })

  t.test(
    'columns=: only the listed keys are read; a listed key a row lacks is NULL, or its DEFAULT with missing=default',
    async (t) => {
      const body = [
        { id: 700, name: 'k1', qty: 7, ignored: 'x' },
        { id: 701, name: 'k2' },
      ]
      const r = await fx.call('POST', '/items?columns=id,name,qty,note&select=id,name,qty,note', {
        body,
        headers: { prefer: 'return=representation' },
      })
      t.equal(r.status, 400, 'qty is NOT NULL: the NULL of the second row fails the whole statement')
      t.equal(r.json().code, '23502')
      t.same(await rows('SELECT id FROM items WHERE id IN (700, 701)'), [], 'nothing written')

      const d = await fx.call('POST', '/items?columns=id,name,qty,note&select=id,name,qty,note', {
        body,
        headers: { prefer: 'return=representation, missing=default' },
      })
      t.equal(d.status, 201)
      t.equal(d.headers['preference-applied'], 'missing=default, return=representation')
      t.same(
        d.json().sort((a: any, b: any) => a.id - b.id),
        [
          { id: 700, name: 'k1', qty: 7, note: 'none' },
          { id: 701, name: 'k2', qty: 1, note: 'none' },
        ],
        'absent listed columns took their DEFAULT; the unlisted key was ignored',
      )

      const n = await fx.call('POST', '/items?columns=id,name,note&select=id,note', {
        body: { id: 702, name: 'k3' },
        headers: { prefer: 'return=representation' },
      })
      t.same(n.json(), [{ id: 702, note: null }], 'without missing=default a listed absent key is NULL')

      const o = await fx.call('POST', '/items?columns="name","qty"&select=name,qty', {
        body: { name: 'quoted', qty: 4, id: 9999 },
        headers: { prefer: 'return=representation' },
      })
      t.same(o.json(), [{ name: 'quoted', qty: 4 }], 'quoted names as postgrest-js sends them')
    },
  )

  t.test('a CSV body: header line, NULL, empty strings, quotes', async (t) => {
    const csv = 'id,name,note\n800,"comma, inside",NULL\n801,"say ""hi""",\n'
    const r = await fx.call('POST', '/items?select=id,name,note', {
      body: csv,
      headers: { 'content-type': 'text/csv', prefer: 'return=representation' },
    })
    t.equal(r.status, 201)
    t.same(r.json(), [
      { id: 800, name: 'comma, inside', note: null },
      { id: 801, name: 'say "hi"', note: '' },
    ])
  })

  t.test('a form body: one row of text values', async (t) => {
    const r = await fx.call('POST', '/items?select=id,name,qty', {
      body: 'id=810&name=form+row%21&qty=5',
      headers: { 'content-type': 'application/x-www-form-urlencoded', prefer: 'return=representation' },
    })
    t.equal(r.status, 201)
    t.same(r.json(), [{ id: 810, name: 'form row!', qty: 5 }])
  })

  t.test('an empty array or a bare scalar writes nothing: 201', async (t) => {
    const before = await rows('SELECT count(*)::int AS n FROM items')
    const a = await fx.call('POST', '/items', { body: [], headers: { prefer: 'return=representation' } })
    t.equal(a.status, 201)
    t.same(a.json(), [])
    const s = await fx.call('POST', '/items', {
      body: '42',
      headers: { 'content-type': 'application/json', prefer: 'return=representation' },
    })
    t.equal(s.status, 201)
    t.same(s.json(), [])
    t.same(await rows('SELECT count(*)::int AS n FROM items'), before)
  })

  t.test('{} inserts a row of defaults', async (t) => {
    const r = await fx.call('POST', '/kv?select=n', { body: {}, headers: { prefer: 'return=representation' } })
    t.equal(r.status, 400, 'kv.k has no default: NOT NULL fails')
    t.equal(r.json().code, '23502')
    const i = await fx.call('POST', '/uniq?select=v', { body: [{}], headers: { prefer: 'return=representation' } })
    t.equal(i.status, 400)
    const n = await fx.call('POST', '/nopk?select=x,y', {
      body: [{}, {}],
      headers: { prefer: 'return=representation' },
    })
    t.equal(n.status, 201)
    t.same(n.json(), [
      { x: null, y: null },
      { x: null, y: null },
    ])
  })

  t.test("big numbers keep every digit (the client's JSON text is what Postgres reads)", async (t) => {
    const raw = '{"id": 9007199254740993, "amount": 12345678901234567890.123456789}'
    const r = await fx.call('POST', '/big', {
      body: raw,
      headers: { 'content-type': 'application/json', prefer: 'return=representation' },
    })
    t.equal(r.status, 201)
    t.equal(r.body, '[{"id":9007199254740993,"amount":12345678901234567890.123456789}]')
  })

  t.test(
    'singular: Accept vnd.pgrst.object gives an object; not exactly one row is 406 and nothing is written',
    async (t) => {
      const one = await fx.call('POST', '/items?select=id,name', {
        body: { id: 900, name: 'single' },
        headers: { prefer: 'return=representation', accept: 'application/vnd.pgrst.object+json' },
      })
      t.equal(one.status, 201)
      t.equal(one.headers['content-type'], 'application/vnd.pgrst.object+json; charset=utf-8')
      t.same(one.json(), { id: 900, name: 'single' })

      const two = await fx.call('POST', '/items', {
        body: [
          { id: 901, name: 's1' },
          { id: 902, name: 's2' },
        ],
        headers: { accept: 'application/vnd.pgrst.object+json' },
      })
      t.equal(two.status, 406)
      t.same(two.json(), {
        code: 'PGRST116',
        message: 'Cannot coerce the result to a single JSON object',
        details: 'The result contains 2 rows',
        hint: null,
      })
      t.same(await rows('SELECT id FROM items WHERE id IN (901, 902)'), [], 'rolled back')
    },
  )

  t.test('a view takes inserts like its table', async (t) => {
    const r = await fx.call('POST', '/item_names', {
      body: { id: 950, name: 'via view', qty: 2 },
      headers: { prefer: 'return=representation' },
    })
    t.equal(r.status, 201)
    t.same(r.json(), [{ id: 950, name: 'via view', qty: 2 }])
    t.same(await rows('SELECT note FROM items WHERE id = 950'), [{ note: 'none' }])
  })

  t.test('Prefer: tx=rollback answers as usual and keeps nothing', async (t) => {
    const r = await fx.call('POST', '/items?select=id,name', {
      body: { id: 960, name: 'ghost' },
      headers: { prefer: 'return=representation, tx=rollback' },
    })
    t.equal(r.status, 201)
    t.same(r.json(), [{ id: 960, name: 'ghost' }])
    t.equal(r.headers['preference-applied'], 'return=representation, tx=rollback')
    t.same(await rows('SELECT id FROM items WHERE id = 960'), [])
    const c = await fx.call('POST', '/items', { body: { id: 961, name: 'kept' }, headers: { prefer: 'tx=commit' } })
    t.equal(c.status, 201)
    t.equal(c.headers['preference-applied'], 'tx=commit')
    t.same(await rows('SELECT id FROM items WHERE id = 961'), [{ id: 961 }])
  })

  t.test('handling=strict: unknown preferences are PGRST122; lenient ignores them', async (t) => {
    const s = await fx.call('POST', '/items', {
      body: { id: 970, name: 'strict' },
      headers: { prefer: 'handling=strict, foo=bar, return=nothing' },
    })
    t.equal(s.status, 400)
    t.same(s.json(), {
      code: 'PGRST122',
      message: 'Invalid preferences given with handling=strict',
      details: 'Invalid preferences: foo=bar, return=nothing',
      hint: null,
    })
    t.same(await rows('SELECT id FROM items WHERE id = 970'), [])
    const l = await fx.call('POST', '/items', {
      body: { id: 971, name: 'lenient' },
      headers: { prefer: 'handling=lenient, foo=bar' },
    })
    t.equal(l.status, 201)
    t.equal(l.headers['preference-applied'], 'handling=lenient')
    const g = await fx.get('/items?id=eq.1', { prefer: 'handling=strict, nope' })
    t.equal(g.status, 400, 'reads too')
    t.equal(g.json().code, 'PGRST122')
  })

  t.test('a privilege the role lacks, a table it cannot see', async (t) => {
    const r = await fx.call('POST', '/books', { body: { id: 100, title: 'x' } })
    t.equal(r.status, 401, 'anon: 401')
    t.equal(r.json().code, '42501')
    t.equal(r.headers['www-authenticate'], 'Bearer')
    const a = await fx.call('POST', '/books', { body: { id: 100, title: 'x' }, role: 'auth' })
    t.equal(a.status, 403, 'a signed-in role: 403')
    const s = await fx.call('POST', '/secrets', { body: { id: 2, value: 'x' } })
    t.equal(s.status, 404)
    t.equal(s.json().code, 'PGRST205')
    const ins = await fx.call('POST', '/insert_only', { body: { id: 5 } })
    t.equal(ins.status, 201, 'INSERT alone suffices for return=minimal')
    const rep = await fx.call('POST', '/insert_only', { body: { id: 6 }, headers: { prefer: 'return=representation' } })
    t.equal(rep.status, 401, 'a representation needs SELECT')
    t.equal(rep.json().code, '42501')
  })
})

// Functions as resources (PostgREST's computed relationships and computed fields): a
// function taking a row of a table or view and returning a row, SETOF a table or SETOF a
// view is embedded by its name (to-one when it returns one row or is declared ROWS 1); a
// function of the row returning a scalar is a computed field, also on partitioned tables
// and views. The statements are asserted, then run through the engine.
import t from 'tap'
import { withClient } from '../../helpers/tenants.js'
import { createRestFixture } from '../../helpers/rest-fixture.js'
import { sharedFixtureTenant } from '../../helpers/shared-fixture.js'
import { loadSchemaCache, qnKey, type SchemaCache } from '../../../src/rest/schema-cache/index.js'
import { parseApiRequest } from '../../../src/rest/api-request/index.js'
import { planAction, type ReadPlan } from '../../../src/rest/plan/index.js'
import { renderRead } from '../../../src/rest/query/index.js'
import { createWriteFixture } from '../../helpers/rest-writes.js'

t.test('computed relationships: schema cache, SQL, results', async (t) => {
  const tt = await sharedFixtureTenant('rest-computed')
  const cache: SchemaCache = await withClient(tt.ownerUrl, (c) =>
    loadSchemaCache(async (text, values) => (await c.query(text, values)).rows, ['public'], 1),
  )
  const plan = (path: string, query: string): ReadPlan =>
    planAction(
      parseApiRequest({ method: 'GET', path, query, headers: {}, body: null }, { schemas: ['public'] }),
      cache,
      { maxRows: null },
    ) as ReadPlan

  t.test('the schema cache knows them, to-one for single rows and ROWS 1', async (t) => {
    const rels = (name: string) =>
      (cache.relationships.get(qnKey('public', name)) ?? [])
        .filter((r) => r.cardinality.kind === 'computed')
        .map((r) =>
          r.cardinality.kind === 'computed'
            ? `${r.cardinality.function.name}:${r.foreignTable.name}:${r.cardinality.toOne ? 'one' : 'many'}`
            : '',
        )
        .sort()
    t.same(rels('authors'), ['author_books:books:many', 'latest_book:books:one', 'listed_books:book_list:many'])
    t.same(rels('books'), ['book_author:authors:one'])
    t.same(rels('book_list'), ['listed_author:authors:one'], 'functions over views')
  })

  t.test('the function is called on the parent row in FROM, with no join condition', async (t) => {
    const st = renderRead(plan('/authors', 'select=name,author_books(title),latest_book(title)&id=eq.1'))
    t.match(
      st.main.text,
      'LEFT JOIN LATERAL ( SELECT json_agg("authors_author_books_1")::jsonb AS "authors_author_books_1" FROM ( SELECT "books_1"."title" FROM "public"."author_books"("authors"::"public"."authors") AS "books_1" ) AS "authors_author_books_1" ) AS "authors_author_books_1" ON TRUE',
    )
    t.match(
      st.main.text,
      'LEFT JOIN LATERAL ( SELECT "books_1"."title" FROM "public"."latest_book"("authors"::"public"."authors") AS "books_1" ) AS "authors_latest_book_1" ON TRUE',
    )
  })

  const fx = await createRestFixture(t, { shared: 'rest-computed' })
  const get = async (path: string): Promise<unknown> => {
    const r = await fx.get(path)
    t.equal(r.status, 200, path)
    return r.json()
  }

  t.test('to-many, to-one and ROWS 1 embeds', async (t) => {
    t.same(
      await get('/authors?select=name,author_books(title)&author_books.order=year.desc&author_books.limit=2&id=eq.1'),
      [
        {
          name: 'Ursula Le Guin',
          author_books: [{ title: 'The Dispossessed' }, { title: 'The Left Hand of Darkness' }],
        },
      ],
    )
    t.same(await get('/authors?select=name,latest:latest_book(title,year)&id=in.(2,4)&order=id'), [
      { name: 'Stanislaw Lem', latest: { title: 'The Cyberiad', year: 1965 } },
      { name: 'Nobody', latest: null },
    ])
    t.same(
      await get('/books?select=title,book_author(name)&id=in.(6,7)&order=id'),
      [
        { title: 'Kindred', book_author: { name: 'Octavia Butler' } },
        { title: 'Anonymous Pamphlet', book_author: { name: null } },
      ],
      'a function that is not SETOF yields one row even when its query finds none (all columns null), as in PostgREST',
    )
    t.same(
      await get('/books?select=title,...book_author(writer:name)&id=eq.4'),
      [{ title: 'Solaris', writer: 'Stanislaw Lem' }],
      'spread',
    )
    t.same(
      await get('/authors?select=name,book_author:author_books!inner(title)&author_books.year=gt.1970&order=id'),
      [
        { name: 'Ursula Le Guin', book_author: [{ title: 'The Dispossessed' }] },
        { name: 'Octavia Butler', book_author: [{ title: 'Kindred' }] },
      ],
      '!inner with a filter',
    )
  })

  t.test('SETOF a view, and a function over a view', async (t) => {
    t.same(await get('/authors?select=listed_books(id)&id=eq.2'), [{ listed_books: [{ id: 4 }, { id: 5 }] }])
    t.same(await get('/book_list?select=id,listed_author(name)&id=eq.6'), [
      { id: 6, listed_author: { name: 'Octavia Butler' } },
    ])
  })

  t.test('computed fields: select, filter, order; on views and partitioned tables', async (t) => {
    t.same(await get('/books?select=id,full_title&full_title=like.*Solaris*'), [
      { id: 4, full_title: 'Solaris (1961)' },
    ])
    t.same(await get('/book_list?select=shout_title&id=eq.1'), [{ shout_title: 'A WIZARD OF EARTHSEA' }])
    t.same(await get('/events?select=id,label&order=label.desc'), [
      { id: 2, label: 'party@2025-02-03' },
      { id: 1, label: 'launch@2024-05-01' },
    ])
  })

  t.test('embedded on the rows of an RPC', async (t) => {
    t.same(await get('/rpc/books_before?y=1966&select=title,book_author(name)&order=year'), [
      { title: 'Solaris', book_author: { name: 'Stanislaw Lem' } },
      { title: 'The Cyberiad', book_author: { name: 'Stanislaw Lem' } },
    ])
  })

  t.test(
    "RPC: SETOF a view embeds through the view's relationships; a row-returning function embeds computed ones",
    async (t) => {
      t.same(await get('/rpc/listed_before?y=1966&select=id,authors(name),listed_author(country)&order=id'), [
        { id: 4, authors: { name: 'Stanislaw Lem' }, listed_author: { country: 'PL' } },
        { id: 5, authors: { name: 'Stanislaw Lem' }, listed_author: { country: 'PL' } },
      ])
      t.same(await get('/rpc/one_author?i=3&select=name,latest_book(title)'), {
        name: 'Octavia Butler',
        latest_book: { title: 'Kindred' },
      })
    },
  )

  t.test('a function named like a related table overrides the detected relationships (no PGRST201)', async (t) => {
    t.same(await get('/messages?select=body,people(name)&order=id'), [
      { body: 'hi', people: { name: 'Ben' } },
      { body: 'yo', people: { name: 'Ann' } },
    ])
  })

  t.test('a hint does not matter; an unknown name is PGRST200', async (t) => {
    t.same(await get('/authors?select=author_books!anything(id)&id=eq.3'), [{ author_books: [{ id: 6 }] }])
    const r = await fx.get('/authors?select=author_bookz(title)')
    t.equal(r.status, 400)
    t.equal(r.json().code, 'PGRST200')
  })
})

t.test('computed relationships in the representation of a write', async (t) => {
  const fx = await createWriteFixture(t, {
    sql: `CREATE FUNCTION item_author(items) RETURNS authors LANGUAGE sql STABLE AS 'SELECT * FROM authors WHERE id = $1.author_id';`,
  })
  const r = await fx.call('POST', '/items?select=name,item_author(name)', {
    body: { name: 'pen', author_id: 2 },
    headers: { prefer: 'return=representation' },
  })
  t.equal(r.status, 201)
  t.same(
    r.json(),
    [{ name: 'pen', item_author: { name: 'Stanislaw Lem' } }],
    'the whole row is returned for the function to take it',
  )
  const u = await fx.call('PATCH', '/items?name=eq.pen&select=qty,item_author(country)', {
    body: { qty: 3 },
    headers: { prefer: 'return=representation' },
  })
  t.same(u.json(), [{ qty: 3, item_author: { country: 'PL' } }])
})

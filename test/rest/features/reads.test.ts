// The read protocol over HTTP: status codes and the headers a client reads
// (Content-Range, Content-Location, Content-Profile, Preference-Applied, none of ours),
// counts, ranges, HEAD, singular objects, CSV, profiles, views, embedding, and the errors
// of each bad request.
import t from 'tap'
import { createRestFixture } from '../../helpers/rest-fixture.js'

t.test('reads', async (t) => {
  const fx = await createRestFixture(t, { shared: 'rest' })

  t.test('Content-Range, Content-Location, 200', async (t) => {
    const r = await fx.get('/books?select=id&order=id&limit=3&offset=2')
    t.equal(r.status, 200)
    t.same(r.json(), [{ id: 3 }, { id: 4 }, { id: 5 }])
    t.equal(r.headers['content-range'], '2-4/*')
    t.equal(r.headers['content-type'], 'application/json; charset=utf-8')
    t.equal(r.headers['content-location'], '/books?limit=3&offset=2&order=id&select=id')
    t.notOk(r.headers['content-profile'], 'one exposed schema: no Content-Profile')
    const none = await fx.get('/books?id=gt.100')
    t.same([none.status, none.json(), none.headers['content-range']], [200, [], '*/*'])
    const past = await fx.get('/books?offset=50')
    t.same([past.status, past.headers['content-range']], [200, '*/*'], 'offset past the end without a count: 200')
  })

  t.test('Prefer: count=exact|planned|estimated', async (t) => {
    const exact = await fx.get('/books?select=id&author_id=eq.1&limit=2&order=id', { prefer: 'count=exact' })
    t.same(
      [exact.status, exact.headers['content-range'], exact.headers['preference-applied']],
      [206, '0-1/3', 'count=exact'],
    )
    const all = await fx.get('/books?select=id&author_id=eq.1', { prefer: 'count=exact' })
    t.same([all.status, all.headers['content-range']], [200, '0-2/3'])
    const zero = await fx.get('/books?id=gt.100', { prefer: 'count=exact' })
    t.same([zero.status, zero.headers['content-range']], [200, '*/0'])
    const beyond = await fx.get('/books?offset=10', { prefer: 'count=exact' })
    t.equal(beyond.status, 416)
    t.same(beyond.json(), {
      code: 'PGRST103',
      message: 'Requested range not satisfiable',
      details: 'An offset of 10 was requested, but there are only 7 rows.',
      hint: null,
    })
    t.equal(beyond.headers['content-range'], '*/7')
    const planned = await fx.get('/books?select=id&limit=1', { prefer: 'count=planned' })
    t.equal(planned.headers['preference-applied'], 'count=planned')
    t.match(planned.headers['content-range'], /^0-0\/\d+$/)
    const estimated = await fx.get('/books?select=id&limit=1', { prefer: 'count=estimated' })
    const plannedTotal = Number(String(planned.headers['content-range']).split('/')[1])
    t.same(
      [estimated.headers['content-range'], estimated.status],
      [`0-0/${Math.max(7, plannedTotal)}`, 206],
      'estimated without max_rows: the larger of exact and planned, as PostgREST 14',
    )
    const inner = await fx.get('/authors?select=id,books!inner(id)&books.year=gt.1970&limit=1&order=id', {
      prefer: 'count=exact',
    })
    t.same(
      [inner.json(), inner.headers['content-range']],
      [[{ id: 1, books: [{ id: 3 }] }], '0-0/2'],
      '!inner embeds count as EXISTS',
    )
  })

  t.test('Range and Range-Unit', async (t) => {
    const r = await fx.get('/books?select=id&order=id', { range: '1-2', 'range-unit': 'items' })
    t.same([r.json(), r.headers['content-range']], [[{ id: 2 }, { id: 3 }], '1-2/*'])
    const open = await fx.get('/books?select=id&order=id', { range: '5-' })
    t.same(open.json(), [{ id: 6 }, { id: 7 }])
    const both = await fx.get('/books?select=id&order=id&limit=2', { range: '1-5' })
    t.same(both.json(), [{ id: 2 }], 'intersection with limit/offset')
    const bad = await fx.get('/books', { range: '5-1' })
    t.same([bad.status, bad.json().code], [416, 'PGRST103'])
    const neg = await fx.get('/books?limit=-1')
    t.same([neg.status, neg.json().details], [416, 'Limit should be greater than or equal to zero.'])
    const zero = await fx.get('/books?limit=0')
    t.same([zero.status, zero.json()], [200, []])
  })

  t.test('HEAD: headers only', async (t) => {
    const r = await fx.get('/books?select=id&limit=2', { prefer: 'count=exact' }, 'HEAD')
    t.same([r.status, r.body, r.headers['content-range']], [206, '', '0-1/7'])
  })

  t.test('singular objects', async (t) => {
    const one = await fx.get('/books?select=id,title&id=eq.4', { accept: 'application/vnd.pgrst.object+json' })
    t.same(
      [one.status, one.json(), one.headers['content-type']],
      [200, { id: 4, title: 'Solaris' }, 'application/vnd.pgrst.object+json; charset=utf-8'],
    )
    const many = await fx.get('/books?select=id', { accept: 'application/vnd.pgrst.object+json' })
    t.same(
      [many.status, many.json()],
      [
        406,
        {
          code: 'PGRST116',
          message: 'Cannot coerce the result to a single JSON object',
          details: 'The result contains 7 rows',
          hint: null,
        },
      ],
    )
    const none = await fx.get('/books?id=eq.99', { accept: 'application/vnd.pgrst.object+json' })
    t.same([none.status, none.json().details], [406, 'The result contains 0 rows'])
    const stripped = await fx.get('/books?select=id,price&id=eq.5', {
      accept: 'application/vnd.pgrst.object+json;nulls=stripped',
    })
    t.same(stripped.json(), { id: 5 })
    const arr = await fx.get('/books?select=id,price&id=eq.5', {
      accept: 'application/vnd.pgrst.array+json;nulls=stripped',
    })
    t.same(arr.json(), [{ id: 5 }])
  })

  t.test('CSV', async (t) => {
    const r = await fx.get('/authors?select=id,name,country&order=id&id=lte.2', { accept: 'text/csv' })
    t.same(
      [r.status, r.headers['content-type'], r.body],
      [200, 'text/csv; charset=utf-8', 'id,name,country\n1,"Ursula Le Guin",US\n2,"Stanislaw Lem",PL'],
    )
    const empty = await fx.get('/authors?id=eq.99', { accept: 'text/csv' })
    t.equal(empty.body, '\n')
    const bad = await fx.get('/authors', { accept: 'image/png' })
    t.same(
      [bad.status, bad.json()],
      [
        406,
        { code: 'PGRST107', message: 'None of these media types are available: image/png', details: null, hint: null },
      ],
    )
  })

  t.test('views are read like tables, with embedding through their base keys', async (t) => {
    const r = await fx.get('/book_list?select=title,authors(name)&id=eq.4')
    t.same(r.json(), [{ title: 'Solaris', authors: { name: 'Stanislaw Lem' } }])
    const back = await fx.get('/authors?select=name,book_list(title)&id=eq.3')
    t.same(back.json(), [{ name: 'Octavia Butler', book_list: [{ title: 'Kindred' }] }])
  })

  t.test('embedding: every cardinality, hints, inner joins, spreads, scoped params', async (t) => {
    t.same(
      (await fx.get('/authors?select=name,author_profiles(website)&id=eq.1')).json(),
      [{ name: 'Ursula Le Guin', author_profiles: { website: 'https://ursula.example' } }],
      'one-to-one is an object',
    )
    t.same(
      (await fx.get('/authors?select=name,author_profiles(website)&id=eq.3')).json(),
      [{ name: 'Octavia Butler', author_profiles: null }],
      'missing to-one is null',
    )
    t.same(
      (await fx.get('/tags?select=name,books(id)&order=id&books.order=id.desc')).json(),
      [
        { name: 'classic', books: [{ id: 4 }, { id: 2 }, { id: 1 }] },
        { name: 'award', books: [{ id: 6 }, { id: 2 }] },
        { name: 'unused', books: [] },
      ],
      'many-to-many; empty to-many is []',
    )
    t.same(
      (
        await fx.get(
          '/messages?select=body,from:people!messages_sender_fkey(name),to:people!receiver_id(name)&order=id',
        )
      ).json(),
      [
        { body: 'hi', from: { name: 'Ann' }, to: { name: 'Ben' } },
        { body: 'yo', from: { name: 'Ben' }, to: { name: 'Ann' } },
      ],
      'hints by constraint and by column',
    )
    const amb = await fx.get('/messages?select=people(name)')
    t.same([amb.status, amb.json().code, amb.json().details.length], [300, 'PGRST201', 2])
    const none = await fx.get('/books?select=employees(id)')
    t.same([none.status, none.json().code], [400, 'PGRST200'])
    t.same(
      (await fx.get('/authors?select=name,books!inner(title)&books.title=like.*Dark*')).json(),
      [{ name: 'Ursula Le Guin', books: [{ title: 'The Left Hand of Darkness' }] }],
      '!inner drops parents without children',
    )
    t.same(
      (await fx.get('/authors?select=name,books(title)&books.title=like.*Dark*&order=id&limit=2')).json(),
      [
        { name: 'Ursula Le Guin', books: [{ title: 'The Left Hand of Darkness' }] },
        { name: 'Stanislaw Lem', books: [] },
      ],
      'embedded filters restrict children only',
    )
    t.same(
      (await fx.get('/authors?select=name,books(title)&books=not.is.null&books.year=lt.1962')).json(),
      [{ name: 'Stanislaw Lem', books: [{ title: 'Solaris' }] }],
      'top-level null filter on an embed',
    )
    t.same(
      (await fx.get('/books?select=title,...authors(author:name,country)&id=eq.6')).json(),
      [{ title: 'Kindred', author: 'Octavia Butler', country: 'US' }],
      'to-one spread',
    )
    t.same(
      (await fx.get('/authors?select=name,...books(titles:title,years:year)&books.order=year&id=eq.1')).json(),
      [
        {
          name: 'Ursula Le Guin',
          titles: ['A Wizard of Earthsea', 'The Left Hand of Darkness', 'The Dispossessed'],
          years: [1968, 1969, 1974],
        },
      ],
      'to-many spread',
    )
    t.same(
      (
        await fx.get(
          '/authors?select=name,books(title,tags(name))&books.limit=1&books.order=year.desc&books.tags.order=name&id=eq.1',
        )
      ).json(),
      [{ name: 'Ursula Le Guin', books: [{ title: 'The Dispossessed', tags: [] }] }],
      'nested embeds with scoped limit and order',
    )
    t.same(
      (
        await fx.get('/books?select=title,a:authors(name)&authors.name=eq.Stanislaw Lem&order=id&limit=5&id=gt.2')
      ).json(),
      [
        { title: 'The Dispossessed', a: null },
        { title: 'Solaris', a: { name: 'Stanislaw Lem' } },
        { title: 'The Cyberiad', a: { name: 'Stanislaw Lem' } },
        { title: 'Kindred', a: null },
        { title: 'Anonymous Pamphlet', a: null },
      ],
      'legacy: an aliased embed is also reachable by its table name',
    )
    t.same(
      (await fx.get('/books?select=title,authors(name)&order=authors(name).desc.nullslast,id&limit=2')).json(),
      [
        { title: 'A Wizard of Earthsea', authors: { name: 'Ursula Le Guin' } },
        { title: 'The Left Hand of Darkness', authors: { name: 'Ursula Le Guin' } },
      ],
      'order by a to-one embed',
    )
    t.same(
      (await fx.get('/employees?select=name,manager:manager_id(name),reports:employees(name)&id=eq.2')).json(),
      [{ name: 'Mid', manager: { name: 'Boss' }, reports: [{ name: 'Low' }] }],
      'self reference both ways',
    )
  })

  t.test('select: aliases, casts, JSON paths, quoted identifiers', async (t) => {
    t.same(
      (
        await fx.get(
          '/authors?select=who:name,books:profile->stats->books,first:profile->tags->>0,profile->>alias,born::text&id=eq.1',
        )
      ).json(),
      [{ who: 'Ursula Le Guin', books: 23, first: 'sf', alias: 'UKL', born: '1929-10-21' }],
    )
    t.same((await fx.get('/books?select=id,meta->pages&order=meta->pages.desc.nullslast&limit=2')).json(), [
      { id: 3, pages: 387 },
      { id: 2, pages: 286 },
    ])
    t.same((await fx.get('/Odd%20%22Name%22%20table?select=%22weird%20col%22,%22x%5C%22y%22')).json(), [])
  })

  t.test('Accept-Profile', async (t) => {
    const fx2 = await createRestFixture(t, { rest: { schemas: ['public', 'other'] } })
    await fx2.ownerSql(`CREATE SCHEMA other; CREATE TABLE other.things (id int PRIMARY KEY, label text); INSERT INTO other.things VALUES (1, 'x');
      SELECT platform.grant('SELECT', 'other.things', 'anon');
      DO $$ BEGIN EXECUTE format('GRANT USAGE ON SCHEMA other TO %I', platform.role('anon')); END $$`)
    const r = await fx2.get('/things', { 'accept-profile': 'other' })
    t.same([r.status, r.json(), r.headers['content-profile']], [200, [{ id: 1, label: 'x' }], 'other'])
    const pub = await fx2.get('/tags?select=id&limit=1')
    t.equal(pub.headers['content-profile'], 'public', 'several schemas: Content-Profile always')
    const notThere = await fx2.get('/things')
    t.same([notThere.status, notThere.json().code], [404, 'PGRST205'], 'the default schema is the first')
    const bad = await fx2.get('/things', { 'accept-profile': 'secret' })
    t.same(
      [bad.status, bad.json()],
      [
        406,
        {
          code: 'PGRST106',
          message: 'Invalid schema: secret',
          details: null,
          hint: 'Only the following schemas are exposed: public, other',
        },
      ],
    )
  })

  t.test('errors from Postgres and the grammar', async (t) => {
    const col = await fx.get('/books?select=nope')
    t.same([col.status, col.json().code, col.json().message], [400, '42703', 'column books.nope does not exist'])
    const embedCol = await fx.get('/books?select=authors(nope)')
    t.same([embedCol.status, embedCol.json().message], [400, 'column authors_1.nope does not exist'])
    const input = await fx.get('/books?id=eq.abc')
    t.same([input.status, input.json().code], [400, '22P02'])
    const parse = await fx.get('/books?id=xx.1')
    t.same(
      [parse.status, parse.json()],
      [
        400,
        {
          code: 'PGRST100',
          message: '"failed to parse filter (xx.1)" (line 1, column 1)',
          details: 'unexpected "x" expecting "not" or operator (eq, gt, ...)',
          hint: null,
        },
      ],
    )
    t.equal(parse.headers['proxy-status'], 'PostgREST; error=PGRST100')
    const path = await fx.get('/a/b')
    t.same([path.status, path.json().code], [404, 'PGRST125'])
    const noTenant = await fx.app.inject({ method: 'GET', url: '/no_such_db/books' })
    t.same([noTenant.statusCode, JSON.parse(noTenant.body).code], [404, 'tenant_not_found'])
    const write = await fx.app.inject({ method: 'TRACE', url: `/${fx.database}/books` })
    t.equal(write.statusCode >= 400, true)
  })
})

t.test('max rows caps reads silently, as db-max-rows; no header of ours is read or sent', async (t) => {
  const ours = (h: Record<string, unknown>): string[] => Object.keys(h).filter((k) => k.startsWith('x-gatehouse-'))
  const fx = await createRestFixture(t, { shared: 'rest', rest: { max_rows: 3 } })
  const capped = await fx.get('/books?select=id&order=id')
  t.same(capped.json(), [{ id: 1 }, { id: 2 }, { id: 3 }])
  t.equal(capped.headers['content-range'], '0-2/*')
  t.same(ours(capped.headers), [], 'cut by max_rows: only Content-Range tells')
  const own = await fx.get('/books?select=id&limit=2')
  t.equal(own.headers['content-range'], '0-1/*')
  const embed = await fx.get('/tags?select=books(id)&id=eq.1')
  t.equal(embed.json()[0].books.length, 3, 'max rows also caps embeds')
  const counted = await fx.get('/books?select=id', { prefer: 'count=exact' })
  t.same([counted.status, counted.headers['content-range'], ours(counted.headers)], [206, '0-2/7', []])
  const estimated = await fx.get('/books?select=id', { prefer: 'count=estimated' })
  const total = Number(String(estimated.headers['content-range']).split('/')[1])
  t.ok(total >= 4, 'estimated over max rows: the larger of the capped exact count and the planner estimate')
  t.same([estimated.status, estimated.headers['preference-applied']], [206, 'count=estimated'])
  const small = await fx.get('/books?select=id&author_id=eq.2', { prefer: 'count=estimated' })
  t.equal(small.headers['content-range'], '0-1/2', 'estimated under max rows is exact')

  const fx2 = await createRestFixture(t, { shared: 'rest' })
  const marked = await fx2.get('/books?select=id&order=id&limit=5', { 'x-gatehouse-default-limit': '5' })
  t.same(
    [marked.json().length, marked.headers['content-range'], ours(marked.headers)],
    [5, '0-4/*', []],
    "the default limit is the gateway's alone: the engine answers as PostgREST does",
  )
})

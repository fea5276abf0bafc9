// SQL tests of the read renderer: the statement's text and values are asserted for a
// plan, then the statement is executed as the tenant's anon role and its body checked.
import t from 'tap'
import { withClient, asRole } from '../../helpers/tenants.js'
import { sharedFixtureTenant } from '../../helpers/shared-fixture.js'
import { loadSchemaCache, type SchemaCache } from '../../../src/rest/schema-cache/index.js'
import { parseApiRequest } from '../../../src/rest/api-request/index.js'
import { planAction, type ReadPlan } from '../../../src/rest/plan/index.js'
import { renderRead, type ReadStatements } from '../../../src/rest/query/index.js'

const TAIL =
  "SELECT null::bigint AS total_result_set, pg_catalog.count(_postgrest_t) AS page_total, coalesce(json_agg(_postgrest_t), '[]')::text AS body, nullif(current_setting('response.headers', true), '') AS response_headers, nullif(current_setting('response.status', true), '') AS response_status FROM ( SELECT * FROM pgrst_source ) _postgrest_t"

t.test('read statements: text, values, then executed', async (t) => {
  const tt = await sharedFixtureTenant('rest')
  const cache: SchemaCache = await withClient(tt.ownerUrl, (c) =>
    loadSchemaCache(async (text, values) => (await c.query(text, values)).rows, ['public'], 1),
  )
  const restUrl = tt.file.engines?.rest as string

  const statements = (
    path: string,
    query: string,
    headers: Record<string, string> = {},
    maxRows: number | null = null,
  ): ReadStatements => {
    const req = parseApiRequest({ method: 'GET', path, query, headers, body: null }, { schemas: ['public'] })
    return renderRead(planAction(req, cache, { maxRows }) as ReadPlan)
  }
  const run = (st: ReadStatements): Promise<Record<string, unknown>> =>
    asRole(
      restUrl,
      tt.tenant.roles.anon,
      async (c) => (await c.query(st.main.text, st.main.values as unknown[])).rows[0],
    )

  t.test('filters, order, limit and offset', async (t) => {
    const st = statements('/books', 'select=id,title&year=gte.1969&order=year.desc.nullslast,id&limit=2&offset=1')
    t.equal(
      st.main.text,
      'WITH pgrst_source AS ( SELECT "public"."books"."id", "public"."books"."title" FROM "public"."books" WHERE "public"."books"."year" >= $1 ORDER BY "public"."books"."year" DESC NULLS LAST, "public"."books"."id" LIMIT $2 OFFSET $3 ) ' +
        TAIL,
    )
    t.same(st.main.values, ['1969', 2, 1])
    const row = await run(st)
    t.same(JSON.parse(row.body as string), [
      { id: 3, title: 'The Dispossessed' },
      { id: 2, title: 'The Left Hand of Darkness' },
    ])
    t.equal(row.page_total, '2')
  })

  t.test('many-to-one with alias, many-to-many with scoped order and limit', async (t) => {
    const st = statements(
      '/books',
      'select=title,author:authors(name),tags(name)&tags.order=name&tags.limit=1&id=lte.2&order=id',
    )
    t.equal(
      st.main.text,
      'WITH pgrst_source AS ( SELECT "public"."books"."title", row_to_json("books_author_1".*)::jsonb AS "author", COALESCE( "books_tags_1"."books_tags_1", \'[]\') AS "tags" FROM "public"."books" ' +
        'LEFT JOIN LATERAL ( SELECT "authors_1"."name" FROM "public"."authors" AS "authors_1" WHERE "authors_1"."id" = "public"."books"."author_id" ) AS "books_author_1" ON TRUE ' +
        'LEFT JOIN LATERAL ( SELECT json_agg("books_tags_1")::jsonb AS "books_tags_1" FROM ( SELECT "public"."tags"."name" FROM "public"."tags", "public"."book_tags" WHERE "public"."book_tags"."tag_id" = "public"."tags"."id" AND "public"."book_tags"."book_id" = "public"."books"."id" ORDER BY "public"."tags"."name" LIMIT $1 ) AS "books_tags_1" ) AS "books_tags_1" ON TRUE ' +
        'WHERE "public"."books"."id" <= $2 ORDER BY "public"."books"."id" ) ' +
        TAIL,
    )
    t.same(st.main.values, [1, '2'])
    t.same(JSON.parse((await run(st)).body as string), [
      { title: 'A Wizard of Earthsea', author: { name: 'Ursula Le Guin' }, tags: [{ name: 'classic' }] },
      { title: 'The Left Hand of Darkness', author: { name: 'Ursula Le Guin' }, tags: [{ name: 'award' }] },
    ])
  })

  t.test('!inner with an embedded filter and an exact count with a limit', async (t) => {
    const st = statements('/authors', 'select=name,books!inner(title)&books.year=lt.1966&order=id&limit=1', {
      prefer: 'count=exact',
    })
    t.match(
      st.main.text,
      'INNER JOIN LATERAL ( SELECT json_agg("authors_books_1")::jsonb AS "authors_books_1" FROM ( SELECT "books_1"."title" FROM "public"."books" AS "books_1" WHERE "books_1"."year" < $1 AND "books_1"."author_id" = "public"."authors"."id" ) AS "authors_books_1" ) AS "authors_books_1" ON "authors_books_1" IS NOT NULL',
    )
    t.match(
      st.main.text,
      'pgrst_source_count AS ( SELECT 1 FROM "public"."authors" WHERE EXISTS (SELECT 1 FROM "public"."books" AS "books_1" WHERE "books_1"."year" < $3 AND "books_1"."author_id" = "public"."authors"."id") )',
    )
    t.match(st.main.text, 'SELECT (SELECT pg_catalog.count(*) FROM pgrst_source_count) AS total_result_set')
    t.same(st.main.values, ['1966', 1, '1966'])
    const row = await run(st)
    t.same(JSON.parse(row.body as string), [
      { name: 'Stanislaw Lem', books: [{ title: 'Solaris' }, { title: 'The Cyberiad' }] },
    ])
    t.equal(row.total_result_set, '1')
  })

  t.test('null filter on an embed: anti-join', async (t) => {
    const st = statements('/authors', 'select=name,books()&books=is.null')
    t.match(st.main.text, 'WHERE "authors_books_1" IS NOT DISTINCT FROM NULL')
    t.same(JSON.parse((await run(st)).body as string), [{ name: 'Nobody' }])
    const semi = statements('/authors', 'select=name,books(id)&books=not.is.null&books.year=gt.1970&order=id')
    t.same(JSON.parse((await run(semi)).body as string), [
      { name: 'Ursula Le Guin', books: [{ id: 3 }] },
      { name: 'Octavia Butler', books: [{ id: 6 }] },
    ])
  })

  t.test('spreads: to-one lifts columns, to-many gives ordered arrays', async (t) => {
    const one = statements('/books', 'select=title,...authors(author:name)&id=eq.4')
    t.match(
      one.main.text,
      'SELECT "public"."books"."title", "books_authors_1"."author" FROM "public"."books" LEFT JOIN LATERAL ( SELECT "authors_1"."name" AS "author"',
    )
    t.same(JSON.parse((await run(one)).body as string), [{ title: 'Solaris', author: 'Stanislaw Lem' }])
    const many = statements('/authors', 'select=name,...books(titles:title)&books.order=year.desc&id=eq.2')
    t.match(
      many.main.text,
      'COALESCE(json_agg("authors_books_1"."titles" ORDER BY "authors_books_1"."authors_books_1_year_1" DESC),\'[]\')::jsonb AS "titles"',
    )
    t.same(JSON.parse((await run(many)).body as string), [
      { name: 'Stanislaw Lem', titles: ['The Cyberiad', 'Solaris'] },
    ])
  })

  t.test('aliases, casts and JSON paths', async (t) => {
    const st = statements(
      '/authors',
      'select=n:name,profile->stats->>books::int,profile->tags->0,born::text&profile->>alias=eq.UKL',
    )
    t.match(
      st.main.text,
      'SELECT "public"."authors"."name" AS "n", CAST( "public"."authors"."profile"->$1->>$2 AS int ) AS "books", "public"."authors"."profile"->$3->$4::int AS "tags", CAST( "public"."authors"."born" AS text ) FROM "public"."authors" WHERE "public"."authors"."profile"->>$5 = $6',
    )
    t.same(st.main.values, ['stats', 'books', 'tags', '+0', 'alias', 'UKL'])
    t.same(JSON.parse((await run(st)).body as string), [
      { n: 'Ursula Le Guin', books: 23, tags: 'sf', born: '1929-10-21' },
    ])
    const nonJson = statements('/books', 'select=id,tags->0&id=eq.1')
    t.match(
      nonJson.main.text,
      'to_jsonb("public"."books"."tags")->$1::int AS "tags"',
      'arrows on a non-json column go through to_jsonb',
    )
    t.same(JSON.parse((await run(nonJson)).body as string), [{ id: 1, tags: 'fantasy' }])
  })

  t.test('logic trees, arrays, in lists, full-text search', async (t) => {
    const st = statements(
      '/books',
      'select=id&or=(year.lt.1962,and(year.gt.1970,title.not.like.*Kind*))&tags=cs.{sf}&id=in.(1,3,4,"5")&body=fts(english).planet&order=id',
    )
    t.match(
      st.main.text,
      'WHERE "public"."books"."tags" @> $1 AND "public"."books"."id" = ANY($2) AND to_tsvector($3, "public"."books"."body") @@ to_tsquery($4, $5) AND ("public"."books"."year" < $6 OR ("public"."books"."year" > $7 AND NOT "public"."books"."title" LIKE $8))',
    )
    t.same(st.main.values, ['{sf}', '{"1","3","4","5"}', 'english', 'english', 'planet', '1962', '1970', '%Kind%'])
    t.same(JSON.parse((await run(st)).body as string), [{ id: 4 }])
    const ops = async (q: string): Promise<number[]> =>
      (
        JSON.parse((await run(statements('/books', `select=id&order=id&${q}`))).body as string) as Array<{ id: number }>
      ).map((r) => r.id)
    t.same(await ops('id=in.()'), [], 'in.() matches nothing')
    t.same(await ops('id=not.in.()'), [1, 2, 3, 4, 5, 6, 7])
    t.same(await ops('title=ilike.*THE*'), [2, 3, 5])
    t.same(await ops('title=match.^The'), [2, 3, 5])
    t.same(await ops('title=imatch.^the d'), [3])
    t.same(await ops('id=eq(any).{1,2}'), [1, 2])
    t.same(await ops('title=like(all).{*The*,*of*}'), [2])
    t.same(await ops('title=like(any).{*Sol*,*Kin*}'), [4, 6])
    t.same(await ops('price=is.null'), [5, 7])
    t.same(await ops('price=not.is.null&price=gt.10'), [2, 3])
    t.same(await ops('author_id=isdistinct.1'), [4, 5, 6, 7])
    t.same(await ops('tags=cd.{sf,classic,humor}'), [2, 3, 4, 5, 6])
    t.same(await ops('tags=ov.{humor,fantasy}'), [1, 5])
    t.same(await ops('during=adj.[1980,1990)'), [3, 6])
    t.same(await ops('during=sl.[1970,1980)'), [1, 2, 4, 5])
    t.same(await ops('during=sr.[1960,1970)'), [3, 6])
    t.same(await ops('during=nxr.[1960,1970)'), [1, 2, 4, 5])
    t.same(await ops('during=nxl.[1970,1980)'), [3, 6])
    t.same(await ops('year=neq.1968&year=lte.1969&year=gte.1965'), [2, 5])
    t.same(await ops('body=plfts.wizard ged'), [1])
    t.same(await ops('body=phfts(english).sentient ocean'), [4])
    t.same(await ops('body=wfts.planet -ocean'), [2])
    t.same(await ops('meta->pages=gt.250'), [2, 3, 6])
    t.same(await ops('meta->>isbn=eq.0-395'), [1])
  })

  t.test('related order, csv, singular', async (t) => {
    const st = statements('/books', 'select=title,authors(name)&order=authors(name).desc,id&author_id=not.is.null', {
      accept: 'text/csv',
    })
    t.match(st.main.text, 'ORDER BY "books_authors_1"."name" DESC, "public"."books"."id"')
    t.equal(
      (await run(st)).body,
      'title,authors\n' +
        '"A Wizard of Earthsea","{""name"": ""Ursula Le Guin""}"\n' +
        '"The Left Hand of Darkness","{""name"": ""Ursula Le Guin""}"\n' +
        '"The Dispossessed","{""name"": ""Ursula Le Guin""}"\n' +
        'Solaris,"{""name"": ""Stanislaw Lem""}"\n' +
        '"The Cyberiad","{""name"": ""Stanislaw Lem""}"\n' +
        'Kindred,"{""name"": ""Octavia Butler""}"',
    )
    const one = statements('/employees', 'select=name,manager_id(name),employees(name)&id=eq.2', {
      accept: 'application/vnd.pgrst.object+json',
    })
    t.match(one.main.text, "coalesce(json_agg(_postgrest_t)->0, 'null')::text AS body")
    t.same(JSON.parse((await run(one)).body as string), {
      name: 'Mid',
      manager_id: { name: 'Boss' },
      employees: [{ name: 'Low' }],
    })
  })

  t.test('max rows caps every node, silently (no extra row fetched)', async (t) => {
    const st = statements('/authors', 'select=id,books(id)&order=id', {}, 2)
    t.match(st.main.text, 'LIMIT $1 ) AS "authors_books_1"')
    t.match(st.main.text, 'ORDER BY "public"."authors"."id" LIMIT $2 )')
    t.match(st.main.text, 'FROM ( SELECT * FROM pgrst_source ) _postgrest_t')
    t.notMatch(st.main.text, ' AS cut ')
    t.same(st.main.values, [2, 2])
    const row = await run(st)
    t.same(JSON.parse(row.body as string), [
      { id: 1, books: [{ id: 1 }, { id: 2 }] },
      { id: 2, books: [{ id: 4 }, { id: 5 }] },
    ])
    t.equal(row.cut, undefined)
  })

  t.test('planned count: EXPLAIN of the count query', async (t) => {
    const st = statements('/books', 'select=id&year=gt.1960', { prefer: 'count=planned' })
    t.equal(st.planned?.text, 'EXPLAIN (FORMAT JSON) SELECT 1 FROM "public"."books" WHERE "public"."books"."year" > $1')
    t.same(st.planned?.values, ['1960'])
    const plan = await asRole(
      restUrl,
      tt.tenant.roles.anon,
      async (c) => (await c.query(st.planned?.text as string, st.planned?.values as unknown[])).rows[0],
    )
    t.type((plan['QUERY PLAN'] as Array<{ Plan: { 'Plan Rows': number } }>)[0].Plan['Plan Rows'], 'number')
  })
})

// SQL tests of aggregates (PostgREST's db-aggregates-enabled): count(), sum(), avg(), min(),
// max() at the root, inside embeds and hoisted out of to-one spreads, with aliases and
// casts; the GROUP BY over the other selected columns. The statement text is asserted,
// then it runs as the tenant's anon role against the REST fixture.
import t from 'tap'
import { withClient, asRole } from '../../helpers/tenants.js'
import { sharedFixtureTenant } from '../../helpers/shared-fixture.js'
import { loadSchemaCache, type SchemaCache } from '../../../src/rest/schema-cache/index.js'
import { parseApiRequest } from '../../../src/rest/api-request/index.js'
import { planAction, type ReadPlan } from '../../../src/rest/plan/index.js'
import { renderRead, type ReadStatements } from '../../../src/rest/query/index.js'
import { isGatehouseError } from '../../../src/shared/index.js'

const TAIL =
  "SELECT null::bigint AS total_result_set, pg_catalog.count(_postgrest_t) AS page_total, coalesce(json_agg(_postgrest_t), '[]')::text AS body, nullif(current_setting('response.headers', true), '') AS response_headers, nullif(current_setting('response.status', true), '') AS response_status FROM ( SELECT * FROM pgrst_source ) _postgrest_t"

t.test('aggregate statements: text, then executed', async (t) => {
  const tt = await sharedFixtureTenant('rest')
  const cache: SchemaCache = await withClient(tt.ownerUrl, (c) =>
    loadSchemaCache(async (text, values) => (await c.query(text, values)).rows, ['public'], 1),
  )
  const restUrl = tt.file.engines?.rest as string

  const plan = (path: string, query: string, aggregates = true): ReadPlan => {
    const req = parseApiRequest({ method: 'GET', path, query, headers: {}, body: null }, { schemas: ['public'] })
    return planAction(req, cache, { maxRows: null, aggregates }) as ReadPlan
  }
  const statements = (path: string, query: string): ReadStatements => renderRead(plan(path, query))
  const body = async (st: ReadStatements): Promise<unknown> =>
    JSON.parse(
      (
        await asRole(
          restUrl,
          tt.tenant.roles.anon,
          async (c) => (await c.query(st.main.text, st.main.values as unknown[])).rows[0],
        )
      ).body as string,
    )
  const failure = (fn: () => unknown): Record<string, unknown> => {
    try {
      fn()
    } catch (err) {
      if (isGatehouseError(err)) return err.toWire()
      throw err
    }
    throw new Error('expected a failure')
  }

  t.test('count() alone and with grouping columns', async (t) => {
    const st = statements('/books', 'select=count()')
    t.equal(st.main.text, 'WITH pgrst_source AS ( SELECT COUNT("public"."books".*) FROM "public"."books" ) ' + TAIL)
    t.same(await body(st), [{ count: 7 }])

    const grouped = statements('/books', 'select=author_id,count()&order=author_id.nullsfirst')
    t.equal(
      grouped.main.text,
      'WITH pgrst_source AS ( SELECT "public"."books"."author_id", COUNT("public"."books".*) FROM "public"."books" GROUP BY "public"."books"."author_id" ORDER BY "public"."books"."author_id" NULLS FIRST ) ' +
        TAIL,
    )
    t.same(await body(grouped), [
      { author_id: null, count: 1 },
      { author_id: 1, count: 3 },
      { author_id: 2, count: 2 },
      { author_id: 3, count: 1 },
    ])
  })

  t.test('sum, avg, min, max with aliases and casts', async (t) => {
    const st = statements(
      '/books',
      'select=author_id,total:price.sum(),price::int.avg()::numeric,first:year.min(),last:year.max()::text&author_id=not.is.null&order=author_id',
    )
    t.equal(
      st.main.text,
      'WITH pgrst_source AS ( SELECT "public"."books"."author_id", SUM("public"."books"."price") AS "total", CAST( AVG(CAST( "public"."books"."price" AS int )) AS numeric ), MIN("public"."books"."year") AS "first", CAST( MAX("public"."books"."year") AS text ) AS "last" FROM "public"."books" WHERE NOT "public"."books"."author_id" IS NULL GROUP BY "public"."books"."author_id" ORDER BY "public"."books"."author_id" ) ' +
        TAIL,
    )
    t.same(await body(st), [
      { author_id: 1, total: 33.49, avg: 11.333333333333334, first: 1968, last: '1974' },
      { author_id: 2, total: 8.75, avg: 9, first: 1961, last: '1965' },
      { author_id: 3, total: 10.0, avg: 10, first: 1979, last: '1979' },
    ])
  })

  t.test(
    'count as a column (backwards compatible: Postgres reads it as count(row)), a cast JSON path summed',
    async (t) => {
      t.same(await body(statements('/books', 'select=count')), [{ count: 7 }])
      t.same(await body(statements('/authors', 'select=name,books(count)&id=eq.1')), [
        { name: 'Ursula Le Guin', books: [{ count: 3 }] },
      ])
      const st = statements('/books', 'select=s:meta->>pages::integer.sum()::text')
      t.match(st.main.text, 'SELECT CAST( SUM(CAST( "public"."books"."meta"->>$1 AS integer )) AS text ) AS "s" FROM')
      t.same(await body(st), [{ s: '1324' }])
    },
  )

  t.test('an aliased grouping column is grouped by its alias; count(col) skips nulls', async (t) => {
    const st = statements('/books', 'select=who:author_id,priced:price.count()&order=author_id&author_id=lte.2')
    t.match(st.main.text, /GROUP BY "who" ORDER BY/)
    t.same(await body(st), [
      { who: 1, priced: 3 },
      { who: 2, priced: 1 },
    ])
  })

  t.test('aggregates inside an embed, grouped there', async (t) => {
    const st = statements('/authors', 'select=name,books(count(),year.max())&id=lte.2&order=id')
    t.match(
      st.main.text,
      'LEFT JOIN LATERAL ( SELECT json_agg("authors_books_1")::jsonb AS "authors_books_1" FROM ( SELECT COUNT("books_1".*), MAX("books_1"."year") FROM "public"."books" AS "books_1" WHERE "books_1"."author_id" = "public"."authors"."id" ) AS "authors_books_1" ) AS "authors_books_1" ON TRUE',
    )
    t.same(await body(st), [
      { name: 'Ursula Le Guin', books: [{ count: 3, max: 1974 }] },
      { name: 'Stanislaw Lem', books: [{ count: 2, max: 1965 }] },
    ])
  })

  t.test('a star beside an aggregate expands to the table columns, grouped by each', async (t) => {
    const st = statements('/tags', 'select=*,book_tags(count())&order=id')
    t.match(st.main.text, 'SELECT "public"."tags".*, COALESCE(', 'aggregates below a node do not expand its star')
    t.notMatch(st.main.text, 'GROUP BY', 'nothing is aggregated at the root')
    t.same(await body(st), [
      { id: 1, name: 'classic', book_tags: [{ count: 3 }] },
      { id: 2, name: 'award', book_tags: [{ count: 2 }] },
      { id: 3, name: 'unused', book_tags: [{ count: 0 }] },
    ])
    const agg = statements('/authors', 'select=*,id.count()&id=eq.3')
    t.match(
      agg.main.text,
      'GROUP BY "public"."authors"."id", "public"."authors"."name", "public"."authors"."country", "public"."authors"."profile", "public"."authors"."born"',
    )
    t.same(await body(agg), [
      { id: 3, name: 'Octavia Butler', country: 'US', profile: null, born: '1947-06-22', count: 1 },
    ])
  })

  t.test('aggregates in a to-one spread are hoisted and applied in the parent', async (t) => {
    const st = statements('/books', 'select=year,...authors(country,count())&year=not.is.null&order=year&limit=3')
    t.equal(
      st.main.text,
      'WITH pgrst_source AS ( SELECT "public"."books"."year", "books_authors_1"."country", COUNT("books_authors_1"."count") AS "count" FROM "public"."books" ' +
        'LEFT JOIN LATERAL ( SELECT "authors_1"."country", "authors_1" AS "count" FROM "public"."authors" AS "authors_1" WHERE "authors_1"."id" = "public"."books"."author_id" ) AS "books_authors_1" ON TRUE ' +
        'WHERE NOT "public"."books"."year" IS NULL GROUP BY "public"."books"."year", "books_authors_1"."country" ORDER BY "public"."books"."year" LIMIT $1 ) ' +
        TAIL,
    )
    t.same(await body(st), [
      { year: 1961, country: 'PL', count: 1 },
      { year: 1965, country: 'PL', count: 1 },
      { year: 1968, country: 'US', count: 1 },
    ])

    const byCountry = statements(
      '/books',
      'select=...authors(country,total:id.sum())&author_id=not.is.null&order=authors(country)',
    )
    t.match(byCountry.main.text, 'SELECT "books_authors_1"."country", SUM("books_authors_1"."total") AS "total" FROM')
    const rows = await body(statements('/books', 'select=...authors(country,total:id.sum())&author_id=not.is.null'))
    t.same(
      (rows as Array<{ country: string }>).sort((a, b) => a.country.localeCompare(b.country)),
      [
        { country: 'PL', total: 4 },
        { country: 'US', total: 6 },
      ],
    )
  })

  t.test('nested to-one spreads hoist to the first level that is not a to-one spread', async (t) => {
    const st = statements('/author_profiles', 'select=...authors(name,...author_profiles(website.count()))')
    t.match(
      st.main.text,
      'SELECT "author_profiles_authors_1"."name", COUNT("author_profiles_authors_1"."count") AS "count" FROM "public"."author_profiles"',
    )
    t.match(
      st.main.text,
      'SELECT "authors_1"."name", "authors_author_profiles_2"."count" FROM "public"."authors" AS "authors_1"',
    )
    t.match(st.main.text, 'GROUP BY "author_profiles_authors_1"."name" )')
    const rows = (await body(st)) as Array<{ name: string }>
    t.same(
      rows.sort((a, b) => a.name.localeCompare(b.name)),
      [
        { name: 'Stanislaw Lem', count: 1 },
        { name: 'Ursula Le Guin', count: 1 },
      ],
    )
  })

  t.test('misuse: PGRST123 when disabled, PGRST127 in to-many spreads, 42703 for a missing column', async (t) => {
    t.same(
      failure(() => plan('/books', 'select=count()', false)),
      { code: 'PGRST123', message: 'Use of aggregate functions is not allowed', details: null, hint: null },
    )
    t.same(failure(() => plan('/authors', 'select=books(price.sum())', false)).code, 'PGRST123')
    t.same(
      failure(() => plan('/authors', 'select=name,...books(price.sum())')),
      {
        code: 'PGRST127',
        message: 'Feature not implemented',
        details: 'Aggregates are not implemented for one-to-many or many-to-many spreads.',
        hint: null,
      },
    )
    const err = await asRole(restUrl, tt.tenant.roles.anon, async (c) => {
      const st = statements('/authors', 'select=missing_column.sum()')
      return c.query(st.main.text, st.main.values as unknown[]).then(
        () => null,
        (e: Error & { code: string }) => e,
      )
    })
    t.equal(err?.code, '42703')
    t.equal(err?.message, 'column authors.missing_column does not exist')
  })
})

// Injection suite: hostile column names, aliases, casts, operators, values, JSON paths,
// hints, headers. Each comes back as a quoted identifier or a bind parameter (asserted on
// the rendered SQL) and executes harmlessly (asserted over HTTP: a clean error or a
// plain result, and the canary table and its rows still there afterwards).
import t from 'tap'
import { createRestFixture } from '../../helpers/rest-fixture.js'
import { parseApiRequest } from '../../../src/rest/api-request/index.js'
import { planAction, type ReadPlan } from '../../../src/rest/plan/index.js'
import { renderRead } from '../../../src/rest/query/index.js'
import { loadSchemaCache } from '../../../src/rest/schema-cache/index.js'
import { withClient } from '../../helpers/tenants.js'

const DROP = 'drop table canary'

t.test('hostile input', async (t) => {
  const fx = await createRestFixture(t, {
    sql: `CREATE TABLE canary (id int PRIMARY KEY); INSERT INTO canary VALUES (1);
      SELECT platform.grant('SELECT', 'canary', 'anon');
      INSERT INTO authors VALUES (10, 'quote''s "double" \\back} {brace, comma', 'XX', '{"we''ird": {"k\\"ey": 1}}', null);`,
  })
  const cache = await withClient(fx.t.ownerUrl, (c) =>
    loadSchemaCache(async (text, values) => (await c.query(text, values)).rows, ['public'], 1),
  )
  const render = (path: string, query: string) =>
    renderRead(
      planAction(
        parseApiRequest({ method: 'GET', path, query, headers: {}, body: null }, { schemas: ['public'] }),
        cache,
        { maxRows: null },
      ) as ReadPlan,
    ).main

  // [query, expected status, what the body must contain or not]
  const cases: Array<[string, string, number]> = [
    ['hostile column name', `select=${encodeURIComponent(`id"; ${DROP}; --`)}`, 400],
    ['quoted hostile column', `select=${encodeURIComponent(`"id\\"; ${DROP}; --"`)}`, 400],
    ['hostile alias', `select=${encodeURIComponent(`"x\\"; ${DROP}; --":id`)}`, 200],
    // PostgREST's grammar ignores what follows a complete name, value or list: such input
    // is cut where the name or value ends, never run.
    ['hostile filter column', `${encodeURIComponent(`id"; ${DROP}; --`)}=eq.1`, 200],
    ['hostile value', `name=eq.${encodeURIComponent(`'; ${DROP}; --`)}`, 200],
    ['hostile like value', `name=like.${encodeURIComponent(`%'; ${DROP}; --`)}`, 200],
    ['hostile in list', `name=in.(${encodeURIComponent(`"a'); ${DROP}; --",b`)})`, 200],
    ['hostile array value', `id=eq(any).${encodeURIComponent(`{1}'); ${DROP}; --`)}`, 400],
    ['hostile operator', `id=${encodeURIComponent(`eq); ${DROP}; --.1`)}`, 400],
    ['hostile is value', `id=is.${encodeURIComponent(`null; ${DROP}`)}`, 200],
    ['hostile json key', `select=profile->>${encodeURIComponent(`"'); ${DROP}; --"`)}`, 200],
    ['hostile unquoted json key', `select=profile->>${encodeURIComponent(`'); ${DROP}; --`)}`, 200],
    ['hostile quoted json key', `select=profile->${encodeURIComponent(`"x'); ${DROP}; --"`)}`, 200],
    ['hostile json index', `select=profile->${encodeURIComponent(`0); ${DROP}; --`)}`, 200],
    ['hostile json filter', `profile->>${encodeURIComponent(`"a'); ${DROP}; --"`)}=eq.1`, 200],
    ['hostile cast', `select=id::${encodeURIComponent(`int); ${DROP}; --`)}`, 200],
    ['cast with words', `select=id::${encodeURIComponent('text union select 1')}`, 400],
    ['hostile order', `order=${encodeURIComponent(`id; ${DROP}`)}`, 400],
    ['hostile quoted order', `order=${encodeURIComponent(`"id; ${DROP}"`)}.desc`, 400],
    ['hostile embed', `select=${encodeURIComponent(`"books'); ${DROP}; --"(id)`)}`, 400],
    ['hostile hint', `select=books!${encodeURIComponent(`"x'); ${DROP}; --"`)}(id)`, 400],
    ['hostile logic tree', `or=(${encodeURIComponent(`name.eq."'); ${DROP}; --",id.eq.1`)})`, 200],
    ['hostile unquoted logic value', `or=(${encodeURIComponent(`name.eq.'); ${DROP}; --,id.eq.1`)})`, 200],
    ['hostile fts language', `name=fts(${encodeURIComponent(`english'); ${DROP}`)}).x`, 400],
    ['fts language as a parameter', `name=fts(${encodeURIComponent('no such config')}).x`, 400],
    ['hostile limit', `limit=${encodeURIComponent(`1; ${DROP}`)}`, 200],
    ['NUL in a name', 'select=%22a%00b%22', 400],
    ['NUL in a value', 'name=eq.a%00b', 400],
  ]
  for (const [name, query, status] of cases) {
    const r = await fx.get(`/authors?${query}`)
    t.equal(r.status, status, `${name}: ${r.body.slice(0, 200)}`)
    t.type(r.json(), r.status === 200 ? Array : Object, `${name}: JSON body`)
    if (r.status >= 400) t.ok(r.json().code, `${name}: error code`)
    t.notMatch(r.body, /stack|at Object\.|\.ts:\d+/, `${name}: no stack in the body`)
  }

  t.test('the rendered SQL holds hostile text only as quoted identifiers or parameters', async (t) => {
    const alias = render('/authors', `select=${encodeURIComponent(`"x\\"; ${DROP}; --":id`)}`)
    t.match(alias.text, `AS "x""; ${DROP}; --"`, 'alias quoted, quote doubled')
    const value = render('/authors', `name=eq.${encodeURIComponent(`'; ${DROP}; --`)}`)
    t.notMatch(value.text, DROP)
    t.same(value.values, [`'; ${DROP}; --`])
    const inList = render('/authors', `name=in.(${encodeURIComponent(`"a'); ${DROP}; --",b\\c`)})`)
    t.notMatch(inList.text, DROP)
    t.same(inList.values, [`{"a'); ${DROP}; --","b\\\\c"}`])
    const key = render('/authors', `select=profile->>${encodeURIComponent(`"'); ${DROP}; --"`)}`)
    t.match(key.text, `->>$1 AS "'); ${DROP}; --"`, 'the output name is a quoted identifier')
    t.same(key.values, [`'); ${DROP}; --`])
    const col = render('/authors', `select=${encodeURIComponent(`"a\\"b"`)}`)
    t.match(col.text, '"public"."authors"."a""b"')
    const tree = render('/authors', `or=(${encodeURIComponent(`name.eq."'); ${DROP}; --",id.eq.1`)})`)
    t.notMatch(tree.text, DROP)
    t.same(tree.values, [`'); ${DROP}; --`, '1'])
  })

  t.test('odd values match exactly (array literal escaping)', async (t) => {
    const odd = 'quote\'s "double" \\back} {brace, comma'
    const r = await fx.get(`/authors?select=id&name=in.(${encodeURIComponent(JSON.stringify(odd))},x)`)
    t.same(r.json(), [{ id: 10 }])
    const eq = await fx.get(`/authors?select=id&name=eq.${encodeURIComponent(odd)}`)
    t.same(eq.json(), [{ id: 10 }])
    const anyOf = await fx.get(`/authors?select=id&or=(name.eq.${encodeURIComponent(JSON.stringify(odd))},id.eq.-1)`)
    t.same(anyOf.json(), [{ id: 10 }])
    const k = await fx.get(`/authors?select=v:profile->"we'ird"->>"k\\"ey"&id=eq.10`)
    t.same(k.json(), [{ v: '1' }])
  })

  t.test('hostile path, headers and profile', async (t) => {
    const table = await fx.get(`/${encodeURIComponent(`authors; ${DROP}`)}`)
    t.same([table.status, table.json().code], [404, 'PGRST205'])
    const profile = await fx.get('/authors', { 'accept-profile': `public"; ${DROP}` })
    t.same([profile.status, profile.json().code], [406, 'PGRST106'])
    const header = await fx.get('/authors?select=id&limit=1', {
      'x-evil': `'); ${DROP}; --`,
      prefer: `count=exact; ${DROP}`,
    })
    t.equal(header.status, 200)
  })

  const still = await fx.ownerSql('SELECT count(*)::int AS n FROM canary')
  t.same(still, [{ n: 1 }], 'the canary survived')
  const authors = await fx.ownerSql('SELECT count(*)::int AS n FROM authors')
  t.same(authors, [{ n: 5 }])
})

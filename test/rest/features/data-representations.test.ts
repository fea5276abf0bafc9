// Data representations (PostgREST's "Domain Representations"): a domain with implicit casts
// WITH FUNCTION to json (output), from text (filter values) and from json (write bodies).
// Our own schema: `rgb` is an integer shown as "#RRGGBB"; `day` is a date shown as
// "DD.MM.YYYY" with no parser (filters and bodies read it as a plain date).
import t from 'tap'
import { createWriteFixture } from '../../helpers/rest-writes.js'
import { buildSchemaCache } from '../../../src/rest/schema-cache/index.js'

const SQL = `
CREATE DOMAIN rgb AS integer;
CREATE DOMAIN day AS date;
CREATE FUNCTION rgb_to_json(rgb) RETURNS json LANGUAGE sql IMMUTABLE AS
  $$ SELECT to_json('#' || lpad(upper(to_hex($1::int)), 6, '0')) $$;
CREATE FUNCTION rgb_from_text(text) RETURNS rgb LANGUAGE sql IMMUTABLE AS
  $$ SELECT (('x' || lpad(ltrim($1, '#'), 8, '0'))::bit(32)::int)::rgb $$;
CREATE FUNCTION rgb_from_json(json) RETURNS rgb LANGUAGE sql IMMUTABLE AS
  $$ SELECT rgb_from_text($1 #>> '{}') $$;
CREATE FUNCTION day_to_json(day) RETURNS json LANGUAGE sql IMMUTABLE AS
  $$ SELECT to_json(to_char($1, 'DD.MM.YYYY')) $$;
CREATE CAST (rgb AS json) WITH FUNCTION rgb_to_json(rgb) AS IMPLICIT;
CREATE CAST (text AS rgb) WITH FUNCTION rgb_from_text(text) AS IMPLICIT;
CREATE CAST (json AS rgb) WITH FUNCTION rgb_from_json(json) AS IMPLICIT;
CREATE CAST (day AS json) WITH FUNCTION day_to_json(day) AS IMPLICIT;
CREATE TABLE paints (id int PRIMARY KEY, name text, shade rgb, made day);
CREATE TABLE palettes (id int PRIMARY KEY, title text, main_id int REFERENCES paints (id));
CREATE VIEW paint_shades AS SELECT id, shade, (shade / 2)::rgb AS half FROM paints;
CREATE FUNCTION paints_named(prefix text) RETURNS SETOF paints LANGUAGE sql STABLE AS
  $$ SELECT * FROM paints WHERE name LIKE prefix || '%' ORDER BY id $$;
INSERT INTO paints VALUES (1, 'red', 16711680, '2020-01-02'), (2, 'green', 65280, NULL), (3, 'blue', 255, '2021-12-31');
INSERT INTO palettes VALUES (1, 'warm', 1), (2, 'cool', 3);
SELECT platform.grant('SELECT, INSERT, UPDATE, DELETE', 'paints', 'anon');
SELECT platform.grant('SELECT', 'palettes', 'anon');
SELECT platform.grant('SELECT, INSERT', 'paint_shades', 'anon');
`

const RED = { id: 1, name: 'red', shade: '#FF0000', made: '02.01.2020' }
const GREEN = { id: 2, name: 'green', shade: '#00FF00', made: null }
const BLUE = { id: 3, name: 'blue', shade: '#0000FF', made: '31.12.2021' }

t.test('data representations', async (t) => {
  const fx = await createWriteFixture(t, { sql: SQL })
  const get = async (path: string): Promise<{ status: number; body: unknown }> => {
    const r = await fx.call('GET', path)
    return { status: r.status, body: r.json() }
  }

  t.test('a selected domain column goes through its cast to json', async (t) => {
    t.same(await get('/paints?select=id,shade&order=id'), {
      status: 200,
      body: [
        { id: 1, shade: '#FF0000' },
        { id: 2, shade: '#00FF00' },
        { id: 3, shade: '#0000FF' },
      ],
    })
  })

  t.test('two columns with different formatters; a null goes through the function too', async (t) => {
    t.same((await get('/paints?select=id,shade,made&id=gte.2&order=id')).body, [
      { id: 2, shade: '#00FF00', made: null },
      { id: 3, shade: '#0000FF', made: '31.12.2021' },
    ])
  })

  t.test('renamed, and cast after formatting', async (t) => {
    t.same((await get('/paints?select=c:shade&id=eq.1')).body, [{ c: '#FF0000' }])
    t.same((await get('/paints?select=c:shade::text&id=eq.1')).body, [{ c: '"#FF0000"' }])
  })

  t.test('explicit and implicit star expand to the formatted columns', async (t) => {
    t.same((await get('/paints?select=*&order=id')).body, [RED, GREEN, BLUE])
    t.same((await get('/paints?order=id')).body, [RED, GREEN, BLUE])
    // The star's columns follow the explicit one, which comes out twice (as PostgREST).
    t.equal(
      (await fx.call('GET', '/paints?select=made,*&id=eq.1')).body,
      '[{"made":"02.01.2020","id":1,"name":"red","shade":"#FF0000","made":"02.01.2020"}]',
    )
  })

  t.test('a view column (computed) of the domain is formatted', async (t) => {
    t.same((await get('/paint_shades?select=id,shade,half&id=eq.1')).body, [
      { id: 1, shade: '#FF0000', half: '#7F8000' },
    ])
  })

  t.test('formatted in embeds, named and starred', async (t) => {
    t.same((await get('/palettes?select=id,main:paints(shade,made)&order=id')).body, [
      { id: 1, main: { shade: '#FF0000', made: '02.01.2020' } },
      { id: 2, main: { shade: '#0000FF', made: '31.12.2021' } },
    ])
    t.same((await get('/palettes?select=id,paints(*)&id=eq.2')).body, [{ id: 2, paints: BLUE }])
  })

  t.test('an unknown column next to a formatted one: 42703', async (t) => {
    const r = await get('/paints?select=id,shade,banana')
    t.equal(r.status, 400)
    t.same(r.body, { code: '42703', details: null, hint: null, message: 'column paints.banana does not exist' })
  })

  t.test('a filter value goes through the cast from text', async (t) => {
    t.same((await get('/paints?select=id&shade=eq.00FF00')).body, [{ id: 2 }])
    t.same((await get('/paints?select=id&shade=eq.%2300FF00')).body, [{ id: 2 }])
    t.same((await get('/paints?select=id&shade=gt.00FF00&order=id')).body, [{ id: 1 }])
  })

  t.test('in and not.in parse every element', async (t) => {
    t.same((await get('/paints?select=id&shade=in.(FF0000,0000FF)&order=id')).body, [{ id: 1 }, { id: 3 }])
    t.same((await get('/paints?select=id&shade=not.in.(FF0000,0000FF)')).body, [{ id: 2 }])
  })

  t.test('filters of an embed parse too', async (t) => {
    t.same((await get('/palettes?select=id,paints(shade)&paints.shade=neq.FF0000&order=id')).body, [
      { id: 1, paints: null },
      { id: 2, paints: { shade: '#0000FF' } },
    ])
  })

  t.test('without a text parser the value is read as the base type', async (t) => {
    t.same((await get('/paints?select=id&made=eq.2021-12-31')).body, [{ id: 3 }])
    const r = await get('/paints?select=id&made=eq.31.12.2021x')
    t.equal(r.status, 400)
    t.equal((r.body as { code: string }).code, '22007')
  })

  t.test('like on a domain column is not parsed: Postgres has no operator', async (t) => {
    const r = await get('/paints?select=id&shade=ilike.*FF*')
    t.equal(r.status, 404)
    t.equal((r.body as { code: string }).code, '42883')
  })

  t.test('an insert body goes through the cast from json', async (t) => {
    const r = await fx.call('POST', '/paints?select=id,shade', {
      body: { id: 10, name: 'teal', shade: '#008080' },
      headers: { prefer: 'return=representation' },
    })
    t.equal(r.status, 201)
    t.same(r.json(), [{ id: 10, shade: '#008080' }])
    t.same(await fx.ownerSql('SELECT shade FROM paints WHERE id = 10'), [{ shade: 0x008080 }])
  })

  t.test('every row of a bulk insert is parsed; a domain without a json parser reads as usual', async (t) => {
    const r = await fx.call('POST', '/paints', {
      body: [
        { id: 11, name: 'a', shade: '0A0B0C', made: '2022-02-03' },
        { id: 12, name: 'b', shade: null, made: null },
      ],
      headers: { prefer: 'return=representation' },
    })
    t.equal(r.status, 201)
    t.same(r.json(), [
      { id: 11, name: 'a', shade: '#0A0B0C', made: '03.02.2022' },
      { id: 12, name: 'b', shade: null, made: null },
    ])
  })

  t.test('with columns=, only the listed keys are read and parsed', async (t) => {
    const r = await fx.call('POST', '/paints?columns=id,shade&select=id,name,shade,made', {
      body: { id: 13, name: 'ignored', shade: '#010203', made: 'not a date, not read' },
      headers: { prefer: 'return=representation' },
    })
    t.equal(r.status, 201)
    t.same(r.json(), [{ id: 13, name: null, shade: '#010203', made: null }])
  })

  t.test('keys columns= leaves out are not read, even without a parser among the listed', async (t) => {
    const r = await fx.call('PATCH', '/paints?id=eq.13&columns=name&select=id,name,shade', {
      body: { name: 'other', shade: 'invalid', made: 'bad' },
      headers: { prefer: 'return=representation' },
    })
    t.equal(r.status, 200)
    t.same(r.json(), [{ id: 13, name: 'other', shade: '#010203' }])
  })

  t.test('headers-only: parsed, no body, Location of the row', async (t) => {
    const r = await fx.call('POST', '/paints', {
      body: { id: 14, shade: '#000001' },
      headers: { prefer: 'return=headers-only' },
    })
    t.equal(r.status, 201)
    t.equal(r.headers.location, '/paints?id=eq.14')
    t.equal(r.body, '')
    t.same(await fx.ownerSql('SELECT shade FROM paints WHERE id = 14'), [{ shade: 1 }])
  })

  t.test('an insert through an updatable view parses and formats its columns', async (t) => {
    const r = await fx.call('POST', '/paint_shades?columns=id,shade', {
      body: { id: 15, shade: '#000004', half: 'not read' },
      headers: { prefer: 'return=representation' },
    })
    t.equal(r.status, 201)
    t.same(r.json(), [{ id: 15, shade: '#000004', half: '#000002' }])
  })

  t.test('an update body is parsed and its filter too', async (t) => {
    const r = await fx.call('PATCH', '/paints?shade=eq.0A0B0C&select=id,shade', {
      body: { shade: '#FFFFFF' },
      headers: { prefer: 'return=representation' },
    })
    t.equal(r.status, 200)
    t.same(r.json(), [{ id: 11, shade: '#FFFFFF' }])
    t.same(await fx.ownerSql('SELECT shade FROM paints WHERE id = 11'), [{ shade: 0xffffff }])
  })

  t.test('a function returning rows of the table formats them', async (t) => {
    t.same((await get('/rpc/paints_named?prefix=re&select=id,shade')).body, [{ id: 1, shade: '#FF0000' }])
  })

  t.test('a schema cache without representations carries none', async (t) => {
    const cache = buildSchemaCache(
      {
        relations: [],
        columns: [],
        constraints: [],
        views: new Map(),
        attnames: [],
        routines: [],
        representations: [],
      },
      ['public'],
      1,
    )
    t.equal(cache.representations, undefined)
  })
})

// Media type handlers (PostgREST's "Media Type Handlers"): domains named after a media type;
// functions returning one answer it raw, aggregates returning one build the body of a
// relation's rows (or of any relation's, over anyelement), chosen by the Accept header.
// Our own schema: songs with a text/plain aggregate and an application/json override,
// an anyelement aggregate for text/tab-separated-values, and functions returning
// text/html and `*/*` (bytes, answered as application/octet-stream).
import t from 'tap'
import { createWriteFixture } from '../../helpers/rest-writes.js'
import { buildSchemaCache } from '../../../src/rest/schema-cache/index.js'

const SQL = `
CREATE TABLE songs (id int PRIMARY KEY, title text);
INSERT INTO songs VALUES (1, 'Blackbird'), (2, 'Yesterday');
CREATE DOMAIN "text/plain" AS text;
CREATE DOMAIN "text/html" AS text;
CREATE DOMAIN "text/tab-separated-values" AS text;
CREATE DOMAIN "application/json" AS json;
CREATE DOMAIN "*/*" AS bytea;
CREATE FUNCTION songs_line(acc text, s songs) RETURNS text LANGUAGE sql IMMUTABLE AS
  $$ SELECT coalesce(acc || E'\\n', '') || s.id || ' ' || s.title $$;
CREATE FUNCTION plain_final(acc text) RETURNS "text/plain" LANGUAGE sql IMMUTABLE AS $$ SELECT coalesce(acc, '') $$;
CREATE AGGREGATE songs_plain(songs) (sfunc = songs_line, stype = text, finalfunc = plain_final);
CREATE FUNCTION songs_titles(acc jsonb, s songs) RETURNS jsonb LANGUAGE sql IMMUTABLE AS
  $$ SELECT coalesce(acc, '[]') || to_jsonb(s.title) $$;
CREATE FUNCTION titles_final(acc jsonb) RETURNS "application/json" LANGUAGE sql IMMUTABLE AS
  $$ SELECT json_build_object('titles', coalesce(acc, '[]')) $$;
CREATE AGGREGATE songs_json(songs) (sfunc = songs_titles, stype = jsonb, finalfunc = titles_final);
CREATE FUNCTION tsv_line(acc text, r anyelement) RETURNS text LANGUAGE sql IMMUTABLE AS
  $$ SELECT coalesce(acc || E'\\n', '') || (SELECT string_agg(value, E'\\t') FROM json_each_text(row_to_json(r))) $$;
CREATE FUNCTION tsv_final(acc text) RETURNS "text/tab-separated-values" LANGUAGE sql IMMUTABLE AS $$ SELECT coalesce(acc, '') $$;
CREATE AGGREGATE any_tsv(anyelement) (sfunc = tsv_line, stype = text, finalfunc = tsv_final);
CREATE FUNCTION "hello.html"() RETURNS "text/html" LANGUAGE sql IMMUTABLE AS $$ SELECT '<h1>hello</h1>' $$;
CREATE FUNCTION blob() RETURNS "*/*" LANGUAGE sql IMMUTABLE AS $$ SELECT '\\x00ff10'::bytea $$;
CREATE DOMAIN "text/xml" AS xml;
CREATE FUNCTION "page.xml"() RETURNS "text/xml" LANGUAGE sql IMMUTABLE AS $f$ SELECT $$
<page>
  <title>songs</title>
</page>$$::"text/xml" $f$;
CREATE FUNCTION all_songs() RETURNS SETOF songs LANGUAGE sql STABLE AS $$ SELECT * FROM songs ORDER BY id $$;
SELECT platform.grant('SELECT, INSERT', 'songs', 'anon');
`

t.test('media type handlers', async (t) => {
  const fx = await createWriteFixture(t, { sql: SQL, rest: { plan_enabled: true } })
  const get = async (path: string, accept?: string, method: 'GET' | 'HEAD' = 'GET') => {
    const res = await fx.app.inject({
      method,
      url: `/${fx.database}${path}`,
      headers: accept === undefined ? {} : { accept },
    })
    return { status: res.statusCode, type: res.headers['content-type'], body: res.body, raw: res.rawPayload }
  }

  t.test('a function returning a media type domain answers it raw for that Accept', async (t) => {
    const r = await get('/rpc/hello.html', 'text/html')
    t.same([r.status, r.type, r.body], [200, 'text/html', '<h1>hello</h1>'])
  })

  // CustomMediaSpec "can get raw xml output with Accept: text/xml" (/rpc/welcome.xml): the
  // value as xml's output function gives it, without the blank line the literal starts with.
  t.test('an xml media type domain answers the xml as Postgres outputs it', async (t) => {
    const r = await get('/rpc/page.xml', 'text/xml')
    t.same([r.status, r.type, r.body], [200, 'text/xml; charset=utf-8', '<page>\n  <title>songs</title>\n</page>'])
  })

  t.test('for another acceptable type it answers as usual (JSON)', async (t) => {
    const r = await get('/rpc/hello.html')
    t.same([r.status, r.type, r.body], [200, 'application/json; charset=utf-8', '"<h1>hello</h1>"'])
  })

  t.test('a `*/*` domain answers any Accept as application/octet-stream bytes', async (t) => {
    for (const accept of [undefined, 'image/png', 'application/json']) {
      const r = await get('/rpc/blob', accept)
      t.equal(r.status, 200, String(accept))
      t.equal(r.type, 'application/octet-stream')
      t.same([...r.raw], [0x00, 0xff, 0x10])
    }
  })

  t.test('an aggregate over a table answers its media type, with charset for text/plain', async (t) => {
    const r = await get('/songs?order=id', 'text/plain')
    t.same([r.status, r.type, r.body], [200, 'text/plain; charset=utf-8', '1 Blackbird\n2 Yesterday'])
  })

  t.test("the table's handler applies only to the default select", async (t) => {
    const r = await get('/songs?select=title', 'text/plain')
    t.equal(r.status, 406)
    t.same(JSON.parse(r.body), {
      code: 'PGRST107',
      details: null,
      hint: null,
      message: 'None of these media types are available: text/plain',
    })
  })

  t.test("a table's application/json handler overrides the builtin JSON for that Accept only", async (t) => {
    const custom = await get('/songs?order=id', 'application/json')
    t.same(
      [custom.status, custom.type, JSON.parse(custom.body)],
      [200, 'application/json; charset=utf-8', { titles: ['Blackbird', 'Yesterday'] }],
    )
    const builtin = await get('/songs?order=id')
    t.same(JSON.parse(builtin.body), [
      { id: 1, title: 'Blackbird' },
      { id: 2, title: 'Yesterday' },
    ])
  })

  t.test('an anyelement aggregate serves every relation, with any select', async (t) => {
    const r = await get('/songs?select=title,id&order=id', 'text/tab-separated-values')
    t.same([r.status, r.type, r.body], [200, 'text/tab-separated-values', 'Blackbird\t1\nYesterday\t2'])
  })

  t.test('the first acceptable type in preference order wins', async (t) => {
    const r = await get('/songs?order=id', 'application/xml, text/plain;q=0.5, text/tab-separated-values;q=0.9')
    t.equal(r.type, 'text/tab-separated-values')
  })

  t.test("a function returning rows of the table uses the table's handler", async (t) => {
    const r = await get('/rpc/all_songs', 'text/plain')
    t.same([r.status, r.type, r.body], [200, 'text/plain; charset=utf-8', '1 Blackbird\n2 Yesterday'])
  })

  t.test('HEAD negotiates the handler and sends no body', async (t) => {
    const r = await get('/songs', 'text/plain', 'HEAD')
    t.same([r.status, r.type, r.body], [200, 'text/plain; charset=utf-8', ''])
  })

  t.test('a media type no handler produces is still PGRST107', async (t) => {
    const r = await get('/rpc/hello.html', 'text/xml')
    t.equal(r.status, 406)
    t.equal(JSON.parse(r.body).code, 'PGRST107')
  })

  t.test('a type no handler of the database has is refused before the table is looked up', async (t) => {
    const r = await get('/no_such_table', 'image/gif')
    t.equal(r.status, 406)
    t.equal(JSON.parse(r.body).code, 'PGRST107')
  })

  t.test("the plan media type explains the read for a handler's type", async (t) => {
    const r = await get('/songs', 'application/vnd.pgrst.plan+text; for="text/plain"')
    t.equal(r.status, 200)
    t.equal(r.type, 'application/vnd.pgrst.plan+text; for="text/plain"; charset=utf-8')
    t.match(r.body, /Aggregate/)
  })

  t.test("a write's representation goes through the table's handler", async (t) => {
    const r = await fx.call('POST', '/songs', {
      body: { id: 3, title: 'Help' },
      headers: { accept: 'text/plain', prefer: 'return=representation' },
    })
    t.same([r.status, r.headers['content-type'], r.body], [201, 'text/plain; charset=utf-8', '3 Help'])
  })

  t.test("a write without representation accepts the handler's type and sends no body", async (t) => {
    const r = await fx.call('POST', '/songs', {
      body: { id: 4, title: 'Something' },
      headers: { accept: 'text/plain' },
    })
    t.same([r.status, r.body], [201, ''])
  })

  t.test('a schema cache without handlers carries none', async (t) => {
    const cache = buildSchemaCache(
      { relations: [], columns: [], constraints: [], views: new Map(), attnames: [], routines: [], mediaHandlers: [] },
      ['public'],
      1,
    )
    t.equal(cache.mediaHandlers, undefined)
  })
})

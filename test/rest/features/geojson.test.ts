// Accept: application/geo+json (PostgREST's geo+json media type): the rows as a GeoJSON
// FeatureCollection of PostGIS' ST_AsGeoJSON(row), for reads, RPC and write
// representations. As in PostgREST, it is always negotiated: without PostGIS Postgres
// answers 42883 (404) for ST_AsGeoJSON. PostGIS is not installable on the embedded
// Postgres of the tests (no build for its version), so the last subtest creates a
// stand-in ST_AsGeoJSON(record) in the tenant to check the FeatureCollection the engine
// assembles around it; the real PostGIS output is not exercised here.
import t from 'tap'
import { createRestFixture } from '../../helpers/rest-fixture.js'
import { parseApiRequest } from '../../../src/rest/api-request/index.js'
import { negotiateRead } from '../../../src/rest/plan/index.js'

t.test('geo+json', async (t) => {
  t.test("negotiated like PostgREST, in the client's order of preference", async (t) => {
    const accept = (h: string) =>
      parseApiRequest(
        { method: 'GET', path: '/x', query: '', headers: { accept: h }, body: null },
        { schemas: ['public'] },
      ).accept
    t.same(negotiateRead(accept('application/geo+json')), {
      kind: 'geojson',
      contentType: 'application/geo+json; charset=utf-8',
    })
    t.equal(negotiateRead(accept('text/html, application/geo+json;q=0.5')).kind, 'geojson')
    t.equal(negotiateRead(accept('application/json, application/geo+json')).kind, 'json')
  })

  const fx = await createRestFixture(t, {
    sql: `CREATE FUNCTION books_of(a int) RETURNS SETOF books LANGUAGE sql STABLE AS 'SELECT * FROM books WHERE author_id = a';`,
  })

  t.test("without PostGIS: Postgres' 42883 for ST_AsGeoJSON, as PostgREST answers", async (t) => {
    const r = await fx.get('/books?select=id&id=eq.1', { accept: 'application/geo+json' })
    t.equal(r.status, 404)
    t.same(r.json(), {
      code: '42883',
      details: null,
      hint: 'No function matches the given name and argument types. You might need to add explicit type casts.',
      message: 'function st_asgeojson(record) does not exist',
    })
  })

  t.test('the FeatureCollection around ST_AsGeoJSON (stand-in for PostGIS, see the header)', async (t) => {
    await fx.ownerSql(`CREATE FUNCTION st_asgeojson(r record) RETURNS text LANGUAGE plpgsql IMMUTABLE AS $$
      BEGIN RETURN json_build_object('type', 'Feature', 'geometry', null, 'properties', to_jsonb(r))::text; END $$;
      NOTIFY pgrst, 'reload schema';`)
    const r = await fx.get('/books?select=id,title&id=lte.2&order=id', { accept: 'application/geo+json' })
    t.equal(r.status, 200)
    t.equal(r.headers['content-type'], 'application/geo+json; charset=utf-8')
    t.same(r.json(), {
      type: 'FeatureCollection',
      features: [
        { type: 'Feature', geometry: null, properties: { id: 1, title: 'A Wizard of Earthsea' } },
        { type: 'Feature', geometry: null, properties: { id: 2, title: 'The Left Hand of Darkness' } },
      ],
    })
    t.same(
      (await fx.get('/books?id=eq.99', { accept: 'application/geo+json' })).json(),
      { type: 'FeatureCollection', features: [] },
      'no rows',
    )
    const rpc = await fx.get('/rpc/books_of?a=3&select=title', { accept: 'application/geo+json' })
    t.equal(rpc.headers['content-type'], 'application/geo+json; charset=utf-8')
    t.same(rpc.json(), {
      type: 'FeatureCollection',
      features: [{ type: 'Feature', geometry: null, properties: { title: 'Kindred' } }],
    })
  })
})

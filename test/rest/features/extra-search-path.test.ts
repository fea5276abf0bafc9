// rest.extra_search_path (PostgREST's db-extra-search-path; by default Supabase's public,
// extensions, where PostgREST's own is public): the schemas put
// after the request's on each request's search path, so a function body that names an object
// of an extension schema unqualified finds it.
import t from 'tap'
import { startRestGateway } from '../../helpers/rest-gateway.js'
import { createRestFixture } from '../../helpers/rest-fixture.js'

t.test('the extra search path is on every request search path', async (t) => {
  const withExtensions = await startRestGateway(t, {
    shared: 'search-path',
    rest: { schemas: ['api'], extra_search_path: ['public', 'extensions'] },
  })
  const r = await withExtensions.client().schema('api').rpc('answer')
  t.same({ status: r.status, data: r.data, error: r.error }, { status: 200, data: 42, error: null })

  const publicOnly = await startRestGateway(t, {
    shared: 'search-path',
    rest: { schemas: ['api'], extra_search_path: ['public'] },
  })
  const missing = await publicOnly.client().schema('api').rpc('answer')
  t.equal(
    missing.error?.code,
    '42883',
    "with PostgREST's own default (public only) after the request schema: helper() is not found",
  )
  const byDefault = await startRestGateway(t, { shared: 'search-path', rest: { schemas: ['api'] } })
  const found = await byDefault.client().schema('api').rpc('answer')
  t.same(
    { data: found.data, error: found.error },
    { data: 42, error: null },
    "by default Supabase's: public, extensions",
  )
})

// PostgREST's ExtraSearchPathSpec with the exposed schema `api` and ltree in public: its
// operators (`cd` is <@, `match` is ~) and a computed column whose body calls nlevel() are
// found through the extra search path. A function of public taking the row is found too
// (Postgres' functional notation), unless the extra search path leaves public out, as
// PostgREST's own spec configuration does (QuerySpec: "cannot access a computed column that
// is outside of the config schema", 400).

t.test('operators and computed columns through the extra search path', async (t) => {
  const fx = await createRestFixture(t, {
    shared: 'rest-ltree',
    rest: { schemas: ['api'], extra_search_path: ['public', 'EXTRA "@/\\#~_-'] },
  })
  const within = await fx.get('/ltree_sample?path=cd.Top.Science')
  t.equal(within.status, 200, within.body)
  t.same(
    within.json(),
    [{ path: 'Top.Science' }, { path: 'Top.Science.Astronomy' }, { path: 'Top.Science.Astronomy.Cosmology' }],
    'ltree <@',
  )
  const match = await fx.get('/ltree_sample?path=match.*.Astronomy.*')
  t.equal(match.status, 200, match.body)
  t.same(match.json(), [{ path: 'Top.Science.Astronomy' }, { path: 'Top.Science.Astronomy.Cosmology' }], 'ltree ~')
  const labels = await fx.get('/ltree_sample?select=number_of_labels&path=eq.Top.Science')
  t.equal(labels.status, 200, labels.body)
  t.same(labels.json(), [{ number_of_labels: 2 }], 'nlevel() found by the computed column')
  const special = await fx.get('/rpc/special_extended_schema?val=value')
  t.same(
    { status: special.status, body: special.json() },
    { status: 200, body: 'value' },
    'a schema named with quotes and symbols',
  )
  t.equal(
    (await fx.get('/ltree_sample?always_false=is.false')).status,
    200,
    'public is on the search path: always_false(row) is found',
  )

  const bare = await createRestFixture(t, { shared: 'rest-ltree', rest: { schemas: ['api'], extra_search_path: [] } })
  const outside = await bare.get('/ltree_sample?always_false=is.false')
  t.equal(outside.status, 400, 'no extra search path: a function of public is no computed column')
  t.equal(outside.json().code, '42703')
})

// PostgREST sets search_path to the request's schema followed by db-extra-search-path as
// given, a schema named twice kept (postgrest-js's live test "explain with options" reads
// `"public", "public", "extensions"` in the plan's settings).
t.test('the search path is the request schema, then the extra search path, as given', async (t) => {
  const stack = await startRestGateway(t, {
    shared: 'search-path',
    rest: { extra_search_path: ['public', 'extensions'] },
  })
  const r = await stack.client().rpc('search_path_now')
  t.same({ data: r.data, error: r.error }, { data: '"public", "public", "extensions"', error: null })
  const api = await startRestGateway(t, {
    shared: 'search-path',
    rest: { schemas: ['api'] },
  })
  const a = await api.client().schema('api').rpc('search_path_now')
  t.same(
    { data: a.data, error: a.error },
    { data: '"api", "public", "extensions"', error: null },
    "by default Supabase's public, extensions after the request schema",
  )
})

// A Supabase project's search_path names `extensions` (the database's, and its API's
// extra_search_path): what its migrations write unqualified works as written.
t.test('an extension created WITH SCHEMA extensions is found unqualified, as in a Supabase project', async (t) => {
  const sql = `CREATE EXTENSION IF NOT EXISTS pg_trgm WITH SCHEMA extensions;
    CREATE TABLE words (w text);
    CREATE INDEX words_trgm ON words USING gin (w gin_trgm_ops);
    INSERT INTO words VALUES ('gatehouse'), ('gatekeeper'), ('postgres');
    GRANT SELECT ON words TO anon;
    CREATE FUNCTION closest(q text) RETURNS SETOF words LANGUAGE sql STABLE AS
      $$ SELECT * FROM words WHERE similarity(w, q) > 0.3 ORDER BY similarity(w, q) DESC $$;
    GRANT EXECUTE ON FUNCTION closest(text) TO anon;`
  // The owner's session (withClient on the owner URL) ran that: gin_trgm_ops and similarity()
  // resolved through the database's search_path.
  const stack = await startRestGateway(t, { sql })
  const r = await stack.client().rpc('closest', { q: 'gatehous' })
  t.same(
    { data: r.data, error: r.error },
    { data: [{ w: 'gatehouse' }], error: null },
    'a request calls the function, whose body names similarity() unqualified',
  )
})

// Schema cache against a real tenant database: relations, keys, relationships (also
// through views and chains of views), routines; and the store's reloads: on a newer schema
// version (moved by provisioning's DDL event trigger), on NOTIFY pgrst (the engine passes
// its connections' notifications on), on a miss; a failed reload keeps the old cache.
import t from 'tap'
import { createTestTenant, withClient } from '../../helpers/tenants.js'
import { FIXTURE_SQL } from '../../helpers/rest-fixture.js'
import { sharedFixtureTenant } from '../../helpers/shared-fixture.js'
import {
  createSchemaCacheStore,
  loadSchemaCache,
  qnKey,
  parseViewColumns,
  SCHEMA_VERSION_SQL,
  type CacheSource,
  type SchemaCache,
} from '../../../src/rest/schema-cache/index.js'

const EXTRA = `
CREATE SCHEMA api;
GRANT USAGE ON SCHEMA api TO PUBLIC;
CREATE VIEW api.books AS SELECT id AS book_id, title, author_id AS writer, year * 1 AS y FROM public.books;
CREATE VIEW api.authors AS SELECT id, name FROM public.authors;
CREATE VIEW api.authors_v2 AS SELECT a.id AS ident, a.name FROM api.authors a WHERE a.id > 0;
CREATE FUNCTION api.add(a int, b int DEFAULT 1) RETURNS int LANGUAGE sql IMMUTABLE AS 'SELECT a + b';
CREATE FUNCTION api.list_books() RETURNS SETOF public.books LANGUAGE sql STABLE AS 'SELECT * FROM public.books';
CREATE FUNCTION api.noop() RETURNS void LANGUAGE sql AS '';
`

t.test('load: relations, keys, relationships, views, routines', async (t) => {
  const tt = await createTestTenant(t)
  await withClient(tt.ownerUrl, async (c) => {
    await c.query(FIXTURE_SQL)
    await c.query(EXTRA)
  })
  const load = (schemas: string[]): Promise<SchemaCache> =>
    withClient(tt.ownerUrl, (c) =>
      loadSchemaCache(async (text, values) => (await c.query(text, values)).rows, schemas, 1),
    )
  const cache = await load(['public', 'api'])

  const books = cache.tables.get(qnKey('public', 'books'))
  t.ok(books)
  t.same(books?.pk, ['id'])
  t.same(books?.columns.map((c) => [c.name, c.type, c.baseType]).slice(0, 6), [
    ['id', 'integer', 'int4'],
    ['title', 'text', 'text'],
    ['author_id', 'integer', 'int4'],
    ['year', 'integer', 'int4'],
    ['price', 'numeric(6,2)', 'numeric'],
    ['tags', 'text[]', '_text'],
  ])
  t.same([books?.insertable, books?.updatable, books?.deletable], [true, true, true])
  t.same(cache.tables.get(qnKey('public', 'book_tags'))?.pk, ['book_id', 'tag_id'])
  const apiBooks = cache.tables.get(qnKey('api', 'books'))
  t.same([apiBooks?.kind, apiBooks?.pk], ['view', ['book_id']], 'a view takes its base table PK')
  t.same(cache.tables.get(qnKey('api', 'authors_v2'))?.pk, ['ident'], 'through a chain of views')

  const rels = (schema: string, name: string) =>
    (cache.relationships.get(qnKey(schema, name)) ?? [])
      .map(
        (r) =>
          `${r.cardinality.kind}:${r.foreignTable.schema}.${r.foreignTable.name}:${r.cardinality.kind === 'm2m' ? r.cardinality.junction.table.name : r.cardinality.kind === 'computed' ? r.cardinality.function.name : r.cardinality.columns.map((p) => p.join('=')).join(',')}`,
      )
      .sort()
  t.ok(rels('public', 'tags').includes('m2m:public.books:book_tags'), 'many-to-many through the junction')
  t.ok(rels('public', 'tags').includes('m2m:public.book_list:book_tags'), 'many-to-many to a view over the target')
  t.ok(rels('public', 'tags').includes('o2m:public.book_tags:id=tag_id'))
  t.ok(rels('public', 'authors').includes('o2o:public.author_profiles:id=author_id'), 'one-to-one (FK is the PK)')
  t.ok(rels('public', 'author_profiles').includes('o2o:public.authors:author_id=id'))
  t.ok(rels('api', 'books').includes('m2o:public.authors:writer=id'), 'view -> table, with the view column names')
  t.ok(rels('api', 'books').includes('m2o:api.authors:writer=id'), 'view -> view')
  t.ok(rels('api', 'books').includes('m2o:api.authors_v2:writer=ident'), 'view -> view over a view')
  t.ok(rels('api', 'authors').includes('o2m:api.books:id=writer'))
  t.ok(rels('public', 'authors').includes('o2m:public.book_list:id=author_id'))

  const add = cache.routines.get(qnKey('api', 'add'))?.[0]
  t.match(
    add && {
      params: add.params,
      returnType: add.returnType,
      returnKind: add.returnKind,
      volatility: add.volatility,
      returnsSet: add.returnsSet,
    },
    {
      params: [
        { name: 'a', type: 'integer', variadic: false, hasDefault: false },
        { name: 'b', type: 'integer', variadic: false, hasDefault: true },
      ],
      returnType: 'integer',
      returnKind: 'scalar',
      volatility: 'immutable',
      returnsSet: false,
    },
  )
  const list = cache.routines.get(qnKey('api', 'list_books'))?.[0]
  t.same(list && [list.returnKind, list.returnsSet, list.returnRelation], [
    'composite',
    true,
    { schema: 'public', name: 'books' },
  ])
  t.equal(cache.routines.get(qnKey('api', 'noop'))?.[0].returnKind, 'void')

  const onlyPublic = await load(['public'])
  t.notOk(onlyPublic.tables.has(qnKey('api', 'books')), 'only exposed schemas')
})

t.test('view definitions: the target list of the top-level query', async (t) => {
  const tt = await createTestTenant(t)
  const rows = await withClient(tt.ownerUrl, async (c) => {
    await c.query(FIXTURE_SQL)
    await c.query(`CREATE VIEW tricky AS
      SELECT b.id, (SELECT max(id) FROM authors) AS sub, b.title || 'x' AS "odd name", a.name "a b"
      FROM books b JOIN (SELECT id, name FROM authors) a ON a.id = b.author_id ORDER BY b.year`)
    return (
      await c.query(`SELECT r.ev_action::text AS action, (SELECT oid FROM pg_class WHERE relname = 'books' AND relnamespace = 'public'::regnamespace) AS books,
      (SELECT oid FROM pg_class WHERE relname = 'authors' AND relnamespace = 'public'::regnamespace) AS authors
      FROM pg_rewrite r WHERE r.ev_class = 'tricky'::regclass`)
    ).rows[0]
  })
  t.same(parseViewColumns(rows.action), [
    { name: 'id', relOid: rows.books, attnum: 1 },
    { name: 'sub', relOid: 0, attnum: 0 },
    { name: 'odd name', relOid: 0, attnum: 0 },
    { name: 'a b', relOid: rows.authors, attnum: 2 },
  ])
  t.same(parseViewColumns('garbage'), [])
})

t.test('store: loads once, reloads on a notification, on a newer schema version and on a miss', async (t) => {
  const tt = await createTestTenant(t)
  await withClient(tt.ownerUrl, (c) => c.query(FIXTURE_SQL))
  let loads = 0
  const source: CacheSource = {
    withCatalog: (statements) =>
      withClient(tt.file.engines!.rest!, async (c) => {
        loads++
        const out: Array<Array<Record<string, unknown>>> = []
        for (const st of statements) out.push((await c.query(st.text, [...st.values])).rows)
        return out
      }),
  }
  let clock = 1_000_000 // the store's clock: the miss interval below is counted on it
  const store = createSchemaCacheStore({ missReloadIntervalMs: 200, now: () => clock })
  t.teardown(() => store.close())
  const [a, b] = await Promise.all([store.get('k', ['public'], source), store.get('k', ['public'], source)])
  t.equal(a, b, 'concurrent first uses share one load')
  t.equal(loads, 1)
  t.equal(await store.get('k', ['public'], source), a, 'cached')
  t.match(a.dbVersion, /^\d+$/, 'the schema version the catalog was read at')

  // DDL moves the schema version when it commits; a request that read the new version
  // tells the store, and the next get() waits for the reload.
  await withClient(tt.ownerUrl, (c) => c.query('CREATE TABLE fresh (id int PRIMARY KEY)'))
  const version = await withClient(tt.file.engines!.rest!, async (c) =>
    String((await c.query(SCHEMA_VERSION_SQL)).rows[0].version),
  )
  t.ok(BigInt(version) > BigInt(a.dbVersion!), 'DDL moved the version')
  store.observed('k', version)
  const cache = await store.get('k', ['public'], source)
  t.ok(cache.tables.has(qnKey('public', 'fresh')), 'the next get() has the new table')
  t.ok(cache.version > a.version)
  t.equal(cache.dbVersion, version)
  const n = loads
  store.observed('k', version)
  t.equal(await store.get('k', ['public'], source), cache, 'the same version again: no reload')
  t.equal(loads, n)

  // Any other version reloads, a lower one too (a database dropped and made again under
  // the same name starts again from a low version); the same news again does not.
  store.observed('k', '0')
  const again = await store.get('k', ['public'], source)
  t.not(again, cache, 'a lower version reloads')
  t.equal(loads, n + 1)
  store.observed('k', '0')
  t.equal(await store.get('k', ['public'], source), again, 'reported once')
  t.equal(loads, n + 1)

  // A NOTIFY pgrst with 'reload schema', 'reload config' (the request roles' settings are read
  // with the catalog) or an empty payload reloads; other payloads do not.
  store.notified('k', 'reload something else')
  t.equal(await store.get('k', ['public'], source), again, 'another payload does not reload')
  t.equal(loads, n + 1)
  store.notified('k', '')
  t.not(await store.get('k', ['public'], source), again, 'an empty payload reloads')
  t.equal(loads, n + 2)
  store.notified('k', 'reload schema')
  await store.get('k', ['public'], source)
  t.equal(loads, n + 3, "'reload schema' reloads")
  store.notified('k', 'reload config')
  await store.get('k', ['public'], source)
  t.equal(loads, n + 4, "'reload config' reloads")

  // A miss reloads at most once per interval (counted from the end of the last load).
  clock += 199
  t.equal(await store.reloadOnMiss('k', ['public'], source), null, 'not within the interval of the last load')
  t.equal(loads, n + 4)
  clock += 1
  const m1 = await store.reloadOnMiss('k', ['public'], source)
  t.ok(m1)
  t.equal(await store.reloadOnMiss('k', ['public'], source), null, 'rate limited')
})

t.test('store: a failed reload keeps the old cache in service and is tried again after the interval', async (t) => {
  // The fault: a catalog source that fails on demand (a catalog read cannot be made to fail
  // from a tenant database while its requests still work).
  const tt = await sharedFixtureTenant('rest')
  let failing = false
  let tries = 0
  const source: CacheSource = {
    withCatalog: (statements) => {
      tries++
      if (failing) return Promise.reject(new Error('catalog unavailable'))
      return withClient(tt.file.engines!.rest!, async (c) => {
        const out: Array<Array<Record<string, unknown>>> = []
        for (const st of statements) out.push((await c.query(st.text, [...st.values])).rows)
        return out
      })
    },
  }
  const warnings: string[] = []
  let clock = 1_000_000 // the store's clock: the retry interval below is counted on it
  const store = createSchemaCacheStore({
    missReloadIntervalMs: 300,
    now: () => clock,
    logger: {
      warn: (_o, msg) => {
        warnings.push(String(msg))
      },
    },
  })
  t.teardown(() => store.close())
  const a = await store.get('k', ['public'], source)
  failing = true
  store.notified('k', 'reload schema')
  t.equal(await store.get('k', ['public'], source), a, 'the old cache serves while the reload fails')
  const afterFailure = tries
  for (let i = 0; i < 5; i++) t.equal(await store.get('k', ['public'], source), a)
  t.equal(tries, afterFailure, 'no new try on every request')
  t.ok(warnings.includes('rest: schema cache load failed'), 'the failure is logged')
  failing = false
  clock += 299
  t.equal(await store.get('k', ['public'], source), a, 'not tried again within the interval')
  t.equal(tries, afterFailure)
  clock += 1
  const b = await store.get('k', ['public'], source)
  t.ok(b.version > a.version, 'tried again after the interval, and loaded')
})

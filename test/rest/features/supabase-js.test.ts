// supabase-js through the gateway against the REST engine, over real sockets, for the
// PostgREST 14 features a client reaches with its own methods: aggregates in select()
// (the tenant has rest.aggregates_enabled), spreads, computed relationships, RPC
// resolution errors and geojson().
import t from 'tap'
import type { AddressInfo } from 'node:net'
import { createClient } from '@supabase/supabase-js'
import { loadConfig } from '../../../src/config/index.js'
import { buildGateway } from '../../../src/gateway/index.js'
import { buildRestEngine } from '../../../src/rest/index.js'
import type { Tenant } from '../../../src/tenants/index.js'
import { sharedFixtureTenant } from '../../helpers/shared-fixture.js'
import { TEST_CONFIG } from '../../helpers/rest-fixture.js'

const PUBLIC_URL = 'http://gatehouse.test'

class NoRealtime {
  constructor() {
    throw new Error('realtime is not used here')
  }
}

t.test('supabase-js: aggregates, spreads, computed relationships, RPC resolution', async (t) => {
  const tenants = new Map<string, Tenant>()
  const lookup = { get: async (db: string) => tenants.get(db) ?? null }
  const engine = buildRestEngine({ config: TEST_CONFIG, tenants: lookup })
  await engine.listen({ port: 0, host: '127.0.0.1' })
  t.teardown(() => engine.close())
  const enginePort = (engine.server.address() as AddressInfo).port

  const tt = await sharedFixtureTenant('rest-supabase-js', {
    rest: { aggregates_enabled: true },
    upstreams: (db) => ({ auth: 'http://127.0.0.1:9/unused', rest: `http://127.0.0.1:${enginePort}/${db}` }),
  })
  const database = tt.database
  tenants.set(database, tt.tenant)

  const config = loadConfig({
    env: {},
    overrides: { public_url: PUBLIC_URL, log: { level: 'silent' }, gateway: { port: 0 } },
  })
  const gateway = buildGateway({ config, tenants: lookup })
  await gateway.listen({ port: 0, host: '127.0.0.1' })
  t.teardown(() => gateway.close())
  const url = `http://127.0.0.1:${(gateway.server.address() as AddressInfo).port}/${database}`
  const anon = createClient(url, tt.file.keys.public, {
    auth: { persistSession: false, autoRefreshToken: false, detectSessionInUrl: false },
    realtime: { transport: NoRealtime as never },
  })

  t.test('aggregates', async (t) => {
    const count = await anon.from('books').select('count()')
    t.same([count.status, count.error, count.data], [200, null, [{ count: 7 }]])
    const grouped = await anon
      .from('books')
      .select('author_id, count(), total:price.sum(), year.max()')
      .not('author_id', 'is', null)
      .order('author_id')
    t.same(grouped.data, [
      { author_id: 1, count: 3, total: 33.49, max: 1974 },
      { author_id: 2, count: 2, total: 8.75, max: 1965 },
      { author_id: 3, count: 1, total: 10.0, max: 1979 },
    ])
    const cast = await anon.from('books').select('price::int.avg()::int').eq('author_id', 1)
    t.same(cast.data, [{ avg: 11 }])
    const embedded = await anon.from('authors').select('name, books(count())').eq('id', 2)
    t.same(embedded.data, [{ name: 'Stanislaw Lem', books: [{ count: 2 }] }])
    const missing = await anon.from('authors').select('missing_column.sum()')
    t.equal(missing.status, 400)
    t.same(missing.error, {
      code: '42703',
      message: 'column authors.missing_column does not exist',
      details: null,
      hint: null,
    })
  })

  t.test('spreads', async (t) => {
    const toOne = await anon.from('books').select('title, ...authors(author:name)').eq('id', 4)
    t.same(toOne.data, [{ title: 'Solaris', author: 'Stanislaw Lem' }])
    const toMany = await anon
      .from('authors')
      .select('name, ...books(title)')
      .eq('id', 2)
      .order('id', { referencedTable: 'books' })
    t.same(toMany.data, [{ name: 'Stanislaw Lem', title: ['Solaris', 'The Cyberiad'] }])
    const counted = await anon
      .from('books')
      .select('...authors(country), count()')
      .not('author_id', 'is', null)
      .order('authors(country)')
    t.same(counted.data, [
      { country: 'PL', count: 2 },
      { country: 'US', count: 4 },
    ])
  })

  t.test('computed relationships', async (t) => {
    const r = await anon.from('authors').select('name, latest_book(title), author_books(count())').eq('id', 1)
    t.same(r.data, [
      { name: 'Ursula Le Guin', latest_book: { title: 'The Dispossessed' }, author_books: [{ count: 3 }] },
    ])
  })

  t.test('RPC resolution errors', async (t) => {
    const typo = await anon.rpc('sayhell')
    t.equal(typo.status, 404)
    t.same(typo.error, {
      code: 'PGRST202',
      message: 'Could not find the function public.sayhell without parameters in the schema cache',
      details:
        'Searched for the function public.sayhell without parameters or with a single unnamed json/jsonb parameter, but no matches were found in the schema cache.',
      hint: 'Perhaps you meant to call the function public.sayhello',
    })
    const args = await anon.rpc('sayhello', { nam: 'Ada' })
    t.equal(args.error?.hint, 'Perhaps you meant to call the function public.sayhello(name)')
    t.equal(
      args.error?.details,
      'Searched for the function public.sayhello with parameter nam or with a single unnamed json/jsonb parameter, but no matches were found in the schema cache.',
    )
    const ambiguous = await anon.rpc('pick', { a: 1 })
    t.equal(ambiguous.status, 300)
    t.equal(
      ambiguous.error?.message,
      'Could not choose the best candidate function between: public.pick(a => integer), public.pick(a => text)',
    )
  })

  t.test("geojson() without PostGIS: Postgres' 42883, as PostgREST", async (t) => {
    const r = await anon.from('books').select('id').eq('id', 1).geojson()
    t.equal(r.status, 404)
    t.equal(r.error?.code, '42883')
  })
})

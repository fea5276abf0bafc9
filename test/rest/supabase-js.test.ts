// supabase-js through the gateway against the REST engine, over real sockets: select with
// filters, order, range, embedding, single(), counts, and RLS per caller.
import t from 'tap'
import type { AddressInfo } from 'node:net'
import { createClient, type SupabaseClient } from '@supabase/supabase-js'
import { loadConfig } from '../../src/config/index.js'
import { buildGateway } from '../../src/gateway/index.js'
import { buildRestEngine } from '../../src/rest/index.js'
import { signHS256 } from '../../src/shared/index.js'
import { tenantIssuer, type Tenant } from '../../src/tenants/index.js'
import { sharedFixtureTenant } from '../helpers/shared-fixture.js'
import { TEST_CONFIG, ALICE } from '../helpers/rest-fixture.js'

const PUBLIC_URL = 'http://gatehouse.test'

t.test('supabase-js through the gateway', async (t) => {
  const tenants = new Map<string, Tenant>()
  const lookup = { get: async (db: string) => tenants.get(db) ?? null }
  const engine = buildRestEngine({ config: TEST_CONFIG, tenants: lookup })
  await engine.listen({ port: 0, host: '127.0.0.1' })
  t.teardown(() => engine.close())
  const enginePort = (engine.server.address() as AddressInfo).port

  const tt = await sharedFixtureTenant('rest', {
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

  const client = (accessToken?: string): SupabaseClient =>
    createClient(url, tt.file.keys.public, {
      auth: { persistSession: false, autoRefreshToken: false, detectSessionInUrl: false },
      ...(accessToken ? { global: { headers: { Authorization: `Bearer ${accessToken}` } } } : {}),
    })
  const anon = client()
  const userToken = await signHS256(
    { sub: ALICE, role: 'authenticated', email: 'alice@example.com' },
    {
      secret: tt.file.jwt.secret,
      expiresInSeconds: 600,
      issuer: tenantIssuer(tt.tenant, PUBLIC_URL),
      audience: tt.tenant.jwt.aud,
    },
  )
  const alice = client(userToken)

  t.test('select with filters and order', async (t) => {
    const { data, error, status } = await anon
      .from('books')
      .select('id,title')
      .eq('author_id', 1)
      .gt('year', 1968)
      .order('year', { ascending: false })
    t.equal(error, null)
    t.equal(status, 200)
    t.same(data, [
      { id: 3, title: 'The Dispossessed' },
      { id: 2, title: 'The Left Hand of Darkness' },
    ])
    const more = await anon.from('books').select('id').in('id', [1, 4, 9]).like('title', '%a%').order('id')
    t.same(more.data, [{ id: 1 }, { id: 4 }])
    const nulls = await anon.from('books').select('id').is('price', null).order('id', { ascending: true })
    t.same(nulls.data, [{ id: 5 }, { id: 7 }])
    const arr = await anon.from('books').select('id').contains('tags', ['sf', 'classic']).order('id')
    t.same(arr.data, [{ id: 2 }, { id: 4 }])
    const or = await anon.from('books').select('id').or('year.lt.1962,title.ilike.*kindred*').order('id')
    t.same(or.data, [{ id: 4 }, { id: 6 }])
    const notF = await anon.from('authors').select('id').not('country', 'is', null).neq('country', 'US')
    t.same(notF.data, [{ id: 2 }])
    const fts = await anon.from('books').select('id').textSearch('body', 'planet', { config: 'english' }).order('id')
    t.same(fts.data, [{ id: 2 }, { id: 4 }])
    const json = await anon.from('authors').select('name, stats:profile->stats').eq('profile->>alias', 'UKL')
    t.same(json.data, [{ name: 'Ursula Le Guin', stats: { books: 23 } }])
  })

  t.test('range and count', async (t) => {
    const { data, count, status } = await anon.from('books').select('id', { count: 'exact' }).order('id').range(2, 4)
    t.same(data, [{ id: 3 }, { id: 4 }, { id: 5 }])
    t.equal(count, 7)
    t.equal(status, 206)
    const head = await anon.from('books').select('*', { count: 'exact', head: true }).eq('author_id', 2)
    t.same([head.count, head.data], [2, null])
    const limited = await anon.from('books').select('id').order('id').limit(2)
    t.same(limited.data, [{ id: 1 }, { id: 2 }])
  })

  t.test('embedding', async (t) => {
    const { data, error } = await anon.from('books').select('title, authors(name), tags(name)').eq('id', 2)
    t.equal(error, null)
    t.same(data, [
      {
        title: 'The Left Hand of Darkness',
        authors: { name: 'Ursula Le Guin' },
        tags: [{ name: 'classic' }, { name: 'award' }],
      },
    ])
    const inner = await anon.from('authors').select('name, books!inner(title)').eq('books.year', 1979)
    t.same(inner.data, [{ name: 'Octavia Butler', books: [{ title: 'Kindred' }] }])
    const hinted = await anon
      .from('messages')
      .select('body, sender:people!messages_sender_fkey(name)')
      .order('id')
      .limit(1)
    t.same(hinted.data, [{ body: 'hi', sender: { name: 'Ann' } }])
    const scoped = await anon
      .from('authors')
      .select('name, books(title)')
      .eq('id', 1)
      .order('year', { referencedTable: 'books', ascending: false })
      .limit(1, { referencedTable: 'books' })
    t.same(scoped.data, [{ name: 'Ursula Le Guin', books: [{ title: 'The Dispossessed' }] }])
  })

  t.test('single() and maybeSingle()', async (t) => {
    const one = await anon.from('books').select('id,title').eq('id', 4).single()
    t.same([one.data, one.error], [{ id: 4, title: 'Solaris' }, null])
    const many = await anon.from('books').select('id').single()
    t.equal(many.data, null)
    t.equal(many.error?.code, 'PGRST116')
    t.equal(many.status, 406)
    const none = await anon.from('books').select('id').eq('id', 99).maybeSingle()
    t.same([none.data, none.error], [null, null])
  })

  t.test('RLS: the signed-in user sees only her rows, anon nothing', async (t) => {
    const mine = await alice.from('notes').select('id, body').order('id')
    t.same(mine.data, [
      { id: 1, body: 'alice one' },
      { id: 2, body: 'alice two' },
    ])
    const nobody = await anon.from('notes').select('id')
    t.same([nobody.data, nobody.error], [[], null])
  })

  t.test('errors reach the client', async (t) => {
    const missing = await anon.from('secrets').select('*')
    t.equal(missing.status, 404)
    t.ok(missing.error)
    const bad = await anon.from('books').select('nope')
    t.equal(bad.status, 400)
    t.equal(bad.error?.code, '42703')
  })
})

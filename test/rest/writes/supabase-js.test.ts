// supabase-js against the whole REST path: the gateway (keys, re-signed tokens,
// the refusal rewriter) in front of our REST engine, both on 127.0.0.1:0, with a real
// provisioned tenant whose REST upstream points at the engine. insert, insert().select(),
// select().single() after insert, upsert, update, delete, rpc (POST and GET), counts,
// errors as supabase-js reports them, and the return=representation RLS rule end to end.
import type { AddressInfo } from 'node:net'
import { randomBytes } from 'node:crypto'
import t from 'tap'
import type { FastifyInstance } from 'fastify'
import { createClient, type SupabaseClient } from '@supabase/supabase-js'
import { loadConfig } from '../../../src/config/index.js'
import { buildGateway, createRefusalRewriter } from '../../../src/gateway/index.js'
import { buildRestEngine } from '../../../src/rest/index.js'
import { signHS256 } from '../../../src/shared/index.js'
import { tenantIssuer, type Tenant } from '../../../src/tenants/index.js'
import { createTestTenant, withClient } from '../../helpers/tenants.js'
import { ALICE, FIXTURE_SQL } from '../../helpers/rest-fixture.js'
import { RPC_SQL } from '../../helpers/rest-rpc.js'
import { WRITE_SQL } from '../../helpers/rest-writes.js'

const PUBLIC_URL = 'http://gatehouse.test'

async function listen(t: { teardown(fn: () => unknown): void }, app: FastifyInstance): Promise<string> {
  await app.listen({ port: 0, host: '127.0.0.1' })
  t.teardown(() => app.close())
  return `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`
}

t.test('supabase-js through the gateway', async (t) => {
  const config = loadConfig({
    env: {},
    overrides: {
      public_url: PUBLIC_URL,
      log: { level: 'silent' },
      gateway: { port: 0 },
      rest: { port: 0, pool_per_tenant: 3 },
    },
  })
  const tenants = new Map<string, Tenant>()
  const lookup = { get: async (db: string) => tenants.get(db) ?? null }
  const restUrl = await listen(t, buildRestEngine({ config, tenants: lookup }))
  const rewriter = createRefusalRewriter()
  t.teardown(() => rewriter.close())
  const gatewayUrl = await listen(t, buildGateway({ config, tenants: lookup, rewriteError: rewriter }))

  const database = `tenant_${randomBytes(5).toString('hex')}`
  const x = await createTestTenant(t, {
    database,
    upstreams: { auth: `${restUrl}/unused`, rest: `${restUrl}/${database}` },
  })
  tenants.set(database, x.tenant)
  await withClient(x.ownerUrl, (c) => c.query(FIXTURE_SQL + WRITE_SQL + RPC_SQL))
  const owner = (sql: string): Promise<Array<Record<string, unknown>>> =>
    withClient(x.ownerUrl, async (c) => (await c.query(sql)).rows)

  const client = (accessToken?: string): SupabaseClient =>
    createClient(`${gatewayUrl}/${database}`, x.file.keys.public, {
      auth: { persistSession: false, autoRefreshToken: false, detectSessionInUrl: false },
      ...(accessToken !== undefined ? { global: { headers: { Authorization: `Bearer ${accessToken}` } } } : {}),
    })
  const anon = client()
  const aliceToken = await signHS256(
    { role: 'authenticated', aud: x.tenant.jwt.aud },
    {
      secret: x.file.jwt.secret,
      expiresInSeconds: 600,
      issuer: tenantIssuer(x.tenant, PUBLIC_URL),
      subject: ALICE,
    },
  )
  const alice = client(aliceToken)

  t.test('insert, insert().select(), select().single()', async (t) => {
    const plain = await anon.from('items').insert({ name: 'sb plain' })
    t.equal(plain.error, null)
    t.equal(plain.status, 201)
    t.equal(plain.data, null)

    const many = await anon
      .from('items')
      .insert([
        { name: 'sb one', qty: 2 },
        { name: 'sb two', qty: 3 },
      ])
      .select('name, qty')
    t.equal(many.error, null)
    t.equal(many.status, 201)
    t.same(many.data, [
      { name: 'sb one', qty: 2 },
      { name: 'sb two', qty: 3 },
    ])

    const single = await anon
      .from('items')
      .insert({ name: 'sb single', author_id: 2 })
      .select('id, name, author:authors(name)')
      .single()
    t.equal(single.error, null)
    t.equal(single.status, 201)
    t.match(single.data, { name: 'sb single', author: { name: 'Stanislaw Lem' } })
    t.type(single.data!.id, 'number')

    const read = await anon.from('items').select('name').eq('id', single.data!.id).single()
    t.same(read.data, { name: 'sb single' }, 'and reads back')

    const counted = await anon.from('items').insert([{ name: 'c1' }, { name: 'c2' }], { count: 'exact' })
    t.equal(counted.count, 2)

    const defaults = await anon
      .from('items')
      .insert([{ name: 'd1', qty: 5 }, { name: 'd2' }], { defaultToNull: false })
      .select('name, qty')
    t.same(
      defaults.data,
      [
        { name: 'd1', qty: 5 },
        { name: 'd2', qty: 1 },
      ],
      'defaultToNull: false sends missing=default',
    )

    const nulls = await anon.from('items').insert([{ name: 'n1', qty: 5 }, { name: 'n2' }])
    t.equal(nulls.status, 400, 'by default a key another row has is NULL here: NOT NULL fails')
    t.equal(nulls.error?.code, '23502')
  })

  t.test('upsert', async (t) => {
    const first = await anon.from('kv').upsert({ k: 'sb', v: 'one' }).select()
    t.equal(first.status, 201)
    t.same(first.data, [{ k: 'sb', v: 'one', n: 0 }])
    const again = await anon.from('kv').upsert({ k: 'sb', v: 'two' }).select()
    t.equal(again.status, 200, 'an update: 200')
    t.same(again.data, [{ k: 'sb', v: 'two', n: 0 }])
    const ignored = await anon.from('kv').upsert({ k: 'sb', v: 'three' }, { ignoreDuplicates: true }).select()
    t.equal(ignored.status, 201)
    t.same(ignored.data, [])
    const onConflict = await anon
      .from('uniq')
      .upsert(
        [
          { code: 'U1', v: 'a' },
          { code: 'U1b', v: 'b' },
        ],
        { onConflict: 'code' },
      )
      .select('code, v')
    t.equal(onConflict.error, null)
    const repeat = await anon
      .from('uniq')
      .upsert({ code: 'U1', v: 'a2' }, { onConflict: 'code' })
      .select('code, v')
      .single()
    t.same(repeat.data, { code: 'U1', v: 'a2' })
    t.same(await owner("SELECT v FROM kv WHERE k = 'sb'"), [{ v: 'two' }])
  })

  t.test('update and delete', async (t) => {
    await owner("INSERT INTO items (id, name, qty) VALUES (9001, 'upd1', 1), (9002, 'upd2', 1), (9003, 'del', 1)")
    const upd = await anon.from('items').update({ qty: 7 }).in('id', [9001, 9002]).select('id, qty').order('id')
    t.equal(upd.error, null)
    t.equal(upd.status, 200)
    t.same(upd.data, [
      { id: 9001, qty: 7 },
      { id: 9002, qty: 7 },
    ])
    const quiet = await anon.from('items').update({ qty: 8 }).eq('id', 9001)
    t.equal(quiet.status, 204)
    const del = await anon.from('items').delete().eq('id', 9003).select('name').single()
    t.same(del.data, { name: 'del' })
    const gone = await anon.from('items').delete().eq('id', 9002)
    t.equal(gone.status, 204)
    t.same(await owner('SELECT id, qty FROM items WHERE id BETWEEN 9001 AND 9003'), [{ id: 9001, qty: 8 }])
    const bad = await anon.from('items').update({ nope: 1 }).eq('id', 9001)
    t.equal(bad.status, 400)
    t.equal(bad.error?.code, 'PGRST204')
  })

  t.test('rpc', async (t) => {
    const sum = await anon.rpc('add_them', { a: 20, b: 22 })
    t.equal(sum.error, null)
    t.equal(sum.data, 42)
    const get = await anon.rpc('hello', { name: 'Ada' }, { get: true })
    t.equal(get.data, 'Hello, Ada')
    const set = await anon
      .rpc('books_by', { author: 1 })
      .select('title')
      .gt('year', 1968)
      .order('year', { ascending: false })
      .limit(1)
    t.same(set.data, [{ title: 'The Dispossessed' }])
    const counted = await anon.rpc('numbers', { n: 7 }, { count: 'exact' }).range(0, 2)
    t.same(counted.data, [1, 2, 3])
    t.equal(counted.count, 7)
    const one = await anon.rpc('author_row', { author_id: 3 }).select('name').single()
    t.same(one.data, { name: 'Octavia Butler' })
    const write = await anon.rpc('add_item', { item_name: 'via rpc' }).select('name, qty').single()
    t.same(write.data, { name: 'via rpc', qty: 1 })
    const fail = await anon.rpc('fail_plain')
    t.same(fail.error, { code: 'P0001', message: 'plain failure', details: 'some detail', hint: 'some hint' })
    t.equal(fail.status, 400)
    const missing = await anon.rpc('does_not_exist')
    t.equal(missing.status, 404)
    t.equal(missing.error?.code, 'PGRST202')
    const whoami = await alice.rpc('whoami')
    t.same(whoami.data, { uid: ALICE, method: 'POST', path: '/rpc/whoami' })
  })

  t.test('the RLS rule: the row is written, the client gets rls_refusal and does not retry', async (t) => {
    const r = await anon.from('posts').insert({ id: 777, body: 'anon post' }).select()
    t.equal(r.data, null)
    t.equal(r.error?.code, 'rls_refusal', "the gateway rewrote the engine's row_written 42501")
    t.match(r.error?.message, /written/)
    t.match(r.error?.hint, /Do not retry/)
    t.same(
      await owner('SELECT id, body FROM posts WHERE id = 777'),
      [{ id: 777, body: 'anon post' }],
      'present afterwards',
    )

    const minimal = await anon.from('posts').insert({ id: 778, body: 'plain' })
    t.equal(minimal.error, null)
    t.equal(minimal.status, 201)

    const own = await alice.from('posts').insert({ id: 779, owner_id: ALICE, body: 'mine' }).select('id, body').single()
    t.equal(own.error, null)
    t.same(own.data, { id: 779, body: 'mine' })

    const check = await alice.from('posts').insert({ id: 780, owner_id: ALICE, body: 'forbidden' }).select()
    t.equal(check.error?.code, 'permission_denied', 'a WITH CHECK refusal: nothing written')
    t.same(await owner('SELECT id FROM posts WHERE id = 780'), [])
  })
})

// Upsert (docs/rest-protocol.md §3.3-3.4): POST with Prefer resolution=merge-duplicates |
// ignore-duplicates and on_conflict=, the 201/200 rule on real inserts, missing=default on
// conflict, tables without a key; PUT with its primary-key checks (PGRST105/114/115) and
// statuses. Real Postgres, fastify inject.
import t from 'tap'
import { createWriteFixture } from '../../helpers/rest-writes.js'

t.test('upsert', async (t) => {
  const fx = await createWriteFixture(t)
  const rows = (sql: string): Promise<Array<Record<string, unknown>>> => fx.ownerSql(sql)
  const merge = 'resolution=merge-duplicates, return=representation'
  await fx.ownerSql("INSERT INTO kv (k, v, n) VALUES ('a', 'old a', 5), ('b', 'old b', 6)")

  t.test('merge-duplicates: 201 when a row is new, 200 when every row was an update', async (t) => {
    const mixed = await fx.call('POST', '/kv', {
      body: [
        { k: 'a', v: 'new a' },
        { k: 'c', v: 'new c' },
      ],
      headers: { prefer: merge },
    })
    t.equal(mixed.status, 201)
    t.equal(mixed.headers['preference-applied'], 'resolution=merge-duplicates, return=representation')
    t.same(
      mixed.json(),
      [
        { k: 'a', v: 'new a', n: 5 },
        { k: 'c', v: 'new c', n: 0 },
      ],
      'columns not in the body keep their value on update',
    )

    const updates = await fx.call('POST', '/kv', {
      body: [
        { k: 'a', v: 'newer a' },
        { k: 'b', v: 'newer b' },
      ],
      headers: { prefer: merge },
    })
    t.equal(updates.status, 200)
    t.same(updates.json(), [
      { k: 'a', v: 'newer a', n: 5 },
      { k: 'b', v: 'newer b', n: 6 },
    ])

    const minimal = await fx.call('POST', '/kv', {
      body: { k: 'a', v: 'minimal a' },
      headers: { prefer: 'resolution=merge-duplicates' },
    })
    t.equal(minimal.status, 200, 'also with return=minimal')
    t.equal(minimal.body, '')
    t.equal(minimal.headers['content-range'], '*/*')
    t.same(await rows("SELECT v FROM kv WHERE k = 'a'"), [{ v: 'minimal a' }])

    const empty = await fx.call('POST', '/kv', { body: [], headers: { prefer: merge } })
    t.equal(empty.status, 200, 'no row at all: 200')
  })

  t.test('ignore-duplicates: existing rows untouched, always 201, the representation has only new rows', async (t) => {
    const r = await fx.call('POST', '/kv', {
      body: [
        { k: 'b', v: 'ignored' },
        { k: 'd', v: 'new d' },
      ],
      headers: { prefer: 'resolution=ignore-duplicates, return=representation' },
    })
    t.equal(r.status, 201)
    t.equal(r.headers['preference-applied'], 'resolution=ignore-duplicates, return=representation')
    t.same(r.json(), [{ k: 'd', v: 'new d', n: 0 }])
    t.same(await rows("SELECT v FROM kv WHERE k = 'b'"), [{ v: 'newer b' }])
    const all = await fx.call('POST', '/kv', {
      body: [{ k: 'b', v: 'x' }],
      headers: { prefer: 'resolution=ignore-duplicates' },
    })
    t.equal(all.status, 201)
  })

  t.test('on_conflict= names a unique column other than the key', async (t) => {
    await fx.ownerSql("INSERT INTO uniq (code, v) VALUES ('X1', 'first')")
    const r = await fx.call('POST', '/uniq?on_conflict=code&select=code,v', {
      body: [
        { code: 'X1', v: 'second' },
        { code: 'X2', v: 'other' },
      ],
      headers: { prefer: merge },
    })
    t.equal(r.status, 201)
    t.same(r.json(), [
      { code: 'X1', v: 'second' },
      { code: 'X2', v: 'other' },
    ])
    t.same(await rows('SELECT code, v FROM uniq ORDER BY code'), [
      { code: 'X1', v: 'second' },
      { code: 'X2', v: 'other' },
    ])
    const bad = await fx.call('POST', '/uniq?on_conflict=v', {
      body: [{ code: 'X3', v: 'second' }],
      headers: { prefer: merge },
    })
    t.equal(bad.status, 400, 'a column without a unique constraint: Postgres refuses')
    t.equal(bad.json().code, '42P10')
    const dup = await fx.call('POST', '/uniq', { body: { code: 'X1', v: 'dup' } })
    t.equal(dup.status, 409, 'without resolution a duplicate is a conflict')
    t.equal(dup.json().code, '23505')
  })

  t.test('a table without a primary key and no on_conflict: a plain insert, resolution not echoed', async (t) => {
    const r = await fx.call('POST', '/nopk', {
      body: [
        { x: 1, y: 'a' },
        { x: 1, y: 'a' },
      ],
      headers: { prefer: merge },
    })
    t.equal(r.status, 201)
    t.equal(r.headers['preference-applied'], 'return=representation')
    t.same(r.json(), [
      { x: 1, y: 'a' },
      { x: 1, y: 'a' },
    ])
  })

  t.test('composite keys, and missing=default resets listed columns the row lacks on update', async (t) => {
    await fx.ownerSql("INSERT INTO pairs VALUES (1, 1, 'one-one')")
    const r = await fx.call('POST', '/pairs', {
      body: [
        { a: 1, b: 1, v: 'upd' },
        { a: 1, b: 2, v: 'new' },
      ],
      headers: { prefer: merge },
    })
    t.equal(r.status, 201)
    t.same(r.json(), [
      { a: 1, b: 1, v: 'upd' },
      { a: 1, b: 2, v: 'new' },
    ])

    const d = await fx.call('POST', '/kv?columns=k,v,n', {
      body: [{ k: 'a', v: 'dflt' }],
      headers: { prefer: 'resolution=merge-duplicates, missing=default, return=representation' },
    })
    t.equal(d.status, 200)
    t.equal(d.headers['preference-applied'], 'resolution=merge-duplicates, missing=default, return=representation')
    t.same(d.json(), [{ k: 'a', v: 'dflt', n: 0 }], 'n went back to its DEFAULT')

    const nulls = await fx.call('POST', '/kv?columns=k,v,n', { body: [{ k: 'b', n: 3 }], headers: { prefer: merge } })
    t.same(nulls.json(), [{ k: 'b', v: null, n: 3 }], 'without missing=default a listed absent key becomes NULL')
  })

  t.test('PUT: insert (201) or replace (200) one row by its full primary key', async (t) => {
    const ins = await fx.call('PUT', '/kv?k=eq.p1', {
      body: { k: 'p1', v: 'put' },
      headers: { prefer: 'return=representation' },
    })
    t.equal(ins.status, 201)
    t.equal(ins.headers['content-range'], undefined, 'no Content-Range on PUT')
    t.same(ins.json(), [{ k: 'p1', v: 'put', n: 0 }])
    const upd = await fx.call('PUT', '/kv?k=eq.p1', {
      body: { k: 'p1', v: 'put again' },
      headers: { prefer: 'return=representation' },
    })
    t.equal(upd.status, 200)
    t.same(upd.json(), [{ k: 'p1', v: 'put again', n: 0 }])
    const min = await fx.call('PUT', '/kv?k=eq.p1', { body: { k: 'p1', v: 'quiet' } })
    t.equal(min.status, 204)
    t.equal(min.body, '')
    const single = await fx.call('PUT', '/pairs?a=eq.5&b=eq.6', {
      body: { a: 5, b: 6, v: 'obj' },
      headers: { prefer: 'return=representation', accept: 'application/vnd.pgrst.object+json' },
    })
    t.equal(single.status, 201)
    t.same(single.json(), { a: 5, b: 6, v: 'obj' }, 'a composite key, as an object')
    const hdr = await fx.call('PUT', '/kv?k=eq.p2', { body: { k: 'p2' }, headers: { prefer: 'return=headers-only' } })
    t.equal(hdr.status, 204, 'headers-only behaves like minimal on PUT')
    t.same(await rows("SELECT k, v FROM kv WHERE k IN ('p1', 'p2') ORDER BY k"), [
      { k: 'p1', v: 'quiet' },
      { k: 'p2', v: null },
    ])
  })

  t.test('PUT refusals: PGRST105, PGRST114, PGRST115; nothing written', async (t) => {
    const e105 = {
      code: 'PGRST105',
      message: "Filters must include all and only primary key columns with 'eq' operators",
      details: null,
      hint: null,
    }
    for (const q of ['', '?v=eq.x', '?k=gt.a', '?k=not.eq.a', '?k=eq.a&v=eq.b', '?or=(k.eq.a)', '?k=eq.a&k=eq.b']) {
      const r = await fx.call('PUT', `/kv${q}`, { body: { k: 'a', v: 'z' } })
      t.equal(r.status, 405, `PUT /kv${q}`)
      t.same(r.json(), e105)
    }
    const part = await fx.call('PUT', '/pairs?a=eq.1', { body: { a: 1, b: 1 } })
    t.equal(part.status, 405, 'part of a composite key')
    const nopk = await fx.call('PUT', '/nopk?x=eq.1', { body: { x: 1 } })
    t.equal(nopk.status, 405, 'no primary key')

    const lim = await fx.call('PUT', '/kv?k=eq.a&limit=1', { body: { k: 'a' } })
    t.equal(lim.status, 400)
    t.same(lim.json(), {
      code: 'PGRST114',
      message: 'limit/offset querystring parameters are not allowed for PUT',
      details: null,
      hint: null,
    })

    const mismatch = await fx.call('PUT', '/kv?k=eq.zz', { body: { k: 'other', v: 'no' } })
    t.equal(mismatch.status, 400)
    t.same(mismatch.json(), {
      code: 'PGRST115',
      message: 'Payload values do not match URL in primary key column(s)',
      details: null,
      hint: null,
    })
    const lacking = await fx.call('PUT', '/kv?k=eq.zz', { body: { v: 'no key' } })
    t.equal(lacking.status, 400, 'a body without the key does not match either')
    t.equal(lacking.json().code, 'PGRST115')
    t.same(await rows("SELECT k FROM kv WHERE k IN ('zz', 'other')"), [])
  })
})

// PATCH and DELETE (docs/rest-protocol.md §3.5-3.6, §3.8): filters and logic trees, limit/offset
// not read (PostgREST 14), order of the representation, Prefer max-affected (PGRST124, strict only), return
// preferences with their statuses and Content-Range, count, singular, missing=default,
// an empty body, embedding in the representation. Real Postgres, fastify inject.
import t from 'tap'
import { createWriteFixture } from '../../helpers/rest-writes.js'

t.test('PATCH and DELETE', async (t) => {
  const fx = await createWriteFixture(t)
  const rows = (sql: string): Promise<Array<Record<string, unknown>>> => fx.ownerSql(sql)
  const reset = async (): Promise<void> => {
    await fx.ownerSql('DELETE FROM items')
    await fx.ownerSql(`INSERT INTO items (id, name, qty, author_id, note) VALUES
      (1, 'a', 1, 1, 'x'), (2, 'b', 2, 1, 'x'), (3, 'c', 3, 2, 'y'), (4, 'd', 4, null, 'y'), (5, 'e', 5, 3, 'z')`)
  }

  t.test('PATCH with filters: 204 and Content-Range 0-(n-1)/*; representation 200; count', async (t) => {
    await reset()
    const r = await fx.call('PATCH', '/items?qty=lte.2', { body: { note: 'small' } })
    t.equal(r.status, 204)
    t.equal(r.body, '')
    t.equal(r.headers['content-range'], '0-1/*')
    t.equal(r.headers['content-type'], undefined)
    t.same(await rows("SELECT id FROM items WHERE note = 'small' ORDER BY id"), [{ id: 1 }, { id: 2 }])

    const rep = await fx.call('PATCH', '/items?or=(id.eq.3,name.eq.e)&select=id,note,author:authors(name)', {
      body: { note: 'logic' },
      headers: { prefer: 'return=representation, count=exact' },
    })
    t.equal(rep.status, 200)
    t.equal(rep.headers['content-type'], 'application/json; charset=utf-8')
    t.equal(rep.headers['content-range'], '0-1/2')
    t.equal(rep.headers['preference-applied'], 'return=representation, count=exact')
    t.same(
      rep.json().sort((a: any, b: any) => a.id - b.id),
      [
        { id: 3, note: 'logic', author: { name: 'Stanislaw Lem' } },
        { id: 5, note: 'logic', author: { name: 'Octavia Butler' } },
      ],
      "the representation embeds through the written rows' foreign keys",
    )

    const none = await fx.call('PATCH', '/items?id=eq.999', { body: { note: 'none' } })
    t.equal(none.status, 204)
    t.equal(none.headers['content-range'], '*/*', 'nothing matched')
    const noneRep = await fx.call('PATCH', '/items?id=eq.999', {
      body: { note: 'none' },
      headers: { prefer: 'return=representation' },
    })
    t.equal(noneRep.status, 200)
    t.same(noneRep.json(), [])
  })

  t.test('PATCH {} updates nothing; no filter updates every row', async (t) => {
    await reset()
    const empty = await fx.call('PATCH', '/items?id=eq.1', { body: {}, headers: { prefer: 'return=representation' } })
    t.equal(empty.status, 200)
    t.same(empty.json(), [])
    const all = await fx.call('PATCH', '/items', { body: { qty: 9 } })
    t.equal(all.status, 204)
    t.equal(all.headers['content-range'], '0-4/*')
    t.same(await rows('SELECT DISTINCT qty FROM items'), [{ qty: 9 }])
  })

  t.test('PATCH with columns= and missing=default sets listed absent columns to their DEFAULT', async (t) => {
    await reset()
    const r = await fx.call('PATCH', '/items?id=eq.1&columns=name,note&select=id,name,note', {
      body: { name: 'renamed' },
      headers: { prefer: 'return=representation, missing=default' },
    })
    t.equal(r.status, 200)
    t.equal(r.headers['preference-applied'], 'missing=default, return=representation')
    t.same(r.json(), [{ id: 1, name: 'renamed', note: 'none' }])
    const n = await fx.call('PATCH', '/items?id=eq.2&columns=name,note&select=id,name,note', {
      body: { name: 'renamed 2' },
      headers: { prefer: 'return=representation' },
    })
    t.same(n.json(), [{ id: 2, name: 'renamed 2', note: null }], 'without missing=default: NULL')
  })

  t.test('limit and offset do not narrow a write (PostgREST 14); order sorts the representation', async (t) => {
    await reset()
    const r = await fx.call('PATCH', '/items?qty=gt.1&order=id.desc&limit=2&offset=1&select=id', {
      body: { note: 'top' },
      headers: { prefer: 'return=representation' },
    })
    t.equal(r.status, 200)
    t.same(r.json(), [{ id: 5 }, { id: 4 }, { id: 3 }, { id: 2 }], 'every matching row, in the order asked')
    t.same(await rows("SELECT id FROM items WHERE note = 'top' ORDER BY id"), [
      { id: 2 },
      { id: 3 },
      { id: 4 },
      { id: 5 },
    ])

    const plain = await fx.call('PATCH', '/items?limit=1', { body: { note: 'all' } })
    t.same(
      [plain.status, plain.headers['content-range']],
      [204, '0-4/*'],
      'limit without order: no PGRST109, every row',
    )

    const del = await fx.call('DELETE', '/items?author_id=not.is.null&order=id.desc&limit=1&select=id', {
      headers: { prefer: 'return=representation' },
    })
    t.equal(del.status, 200)
    t.same(del.json(), [{ id: 5 }, { id: 3 }, { id: 2 }, { id: 1 }])
    t.same(await rows('SELECT id FROM items ORDER BY id'), [{ id: 4 }])

    const negative = await fx.call('DELETE', '/items?limit=-1')
    t.same([negative.status, negative.json().code], [416, 'PGRST103'], 'a negative limit is still refused')
    t.same(await rows('SELECT id FROM items ORDER BY id'), [{ id: 4 }])
  })

  t.test('max-affected with handling=strict: PGRST124 and nothing changes; ignored when lenient', async (t) => {
    await reset()
    const r = await fx.call('PATCH', '/items?qty=gt.2', {
      body: { note: 'capped' },
      headers: { prefer: 'handling=strict, max-affected=2' },
    })
    t.equal(r.status, 400)
    t.same(r.json(), {
      code: 'PGRST124',
      message: 'Query result exceeds max-affected preference constraint',
      details: 'The query affects 3 rows',
      hint: null,
    })
    t.same(await rows("SELECT id FROM items WHERE note = 'capped'"), [])
    const ok = await fx.call('PATCH', '/items?qty=gt.3', {
      body: { note: 'capped' },
      headers: { prefer: 'handling=strict, max-affected=2' },
    })
    t.equal(ok.status, 204)
    t.equal(ok.headers['preference-applied'], 'handling=strict, max-affected=2')
    const lenient = await fx.call('DELETE', '/items?qty=gt.0', { headers: { prefer: 'max-affected=1, tx=rollback' } })
    t.equal(lenient.status, 204, 'lenient: not enforced')
    t.equal(lenient.headers['preference-applied'], 'tx=rollback', 'and not echoed')
    const del = await fx.call('DELETE', '/items?qty=gt.0', { headers: { prefer: 'handling=strict, max-affected=4' } })
    t.equal(del.status, 400)
    t.equal(del.json().details, 'The query affects 5 rows')
    t.same(await rows('SELECT count(*)::int AS n FROM items'), [{ n: 5 }])
  })

  t.test('singular: exactly one row or 406 and rollback', async (t) => {
    await reset()
    const one = await fx.call('PATCH', '/items?id=eq.1&select=id,qty', {
      body: { qty: 10 },
      headers: { prefer: 'return=representation', accept: 'application/vnd.pgrst.object+json' },
    })
    t.equal(one.status, 200)
    t.equal(one.headers['content-type'], 'application/vnd.pgrst.object+json; charset=utf-8')
    t.same(one.json(), { id: 1, qty: 10 })
    const two = await fx.call('PATCH', '/items?id=in.(2,3)', {
      body: { qty: 11 },
      headers: { accept: 'application/vnd.pgrst.object+json' },
    })
    t.equal(two.status, 406)
    t.equal(two.json().code, 'PGRST116')
    t.same(await rows('SELECT id FROM items WHERE qty = 11'), [], 'rolled back')
    const gone = await fx.call('DELETE', '/items?id=eq.999', {
      headers: { accept: 'application/vnd.pgrst.object+json' },
    })
    t.equal(gone.status, 406)
    t.equal(gone.json().details, 'The result contains 0 rows')
  })

  t.test('DELETE: 204 with Content-Range */*; representation 200; count */N', async (t) => {
    await reset()
    const r = await fx.call('DELETE', '/items?id=eq.1')
    t.equal(r.status, 204)
    t.equal(r.body, '')
    t.equal(r.headers['content-range'], '*/*')
    const rep = await fx.call('DELETE', '/items?note=eq.y&select=id,name', {
      headers: { prefer: 'return=representation, count=exact' },
    })
    t.equal(rep.status, 200)
    t.equal(rep.headers['content-range'], '*/2')
    t.same(
      rep.json().sort((a: any, b: any) => a.id - b.id),
      [
        { id: 3, name: 'c' },
        { id: 4, name: 'd' },
      ],
    )
    const cnt = await fx.call('DELETE', '/items?id=eq.2', { headers: { prefer: 'count=exact' } })
    t.equal(cnt.headers['content-range'], '*/1')
    const hdr = await fx.call('DELETE', '/items?id=eq.5', { headers: { prefer: 'return=headers-only' } })
    t.equal(hdr.status, 204, 'headers-only is minimal on DELETE')
    t.same(await rows('SELECT count(*)::int AS n FROM items'), [{ n: 0 }])
    const all = await fx.call('DELETE', '/kv')
    t.equal(all.status, 204, 'no filter: every row (here none)')
  })

  t.test('errors of PATCH/DELETE', async (t) => {
    await reset()
    const col = await fx.call('PATCH', '/items?id=eq.1', { body: { nope: 1 } })
    t.equal(col.status, 400)
    t.same(col.json(), {
      code: 'PGRST204',
      message: "Could not find the 'nope' column of 'items' in the schema cache",
      details: null,
      hint: null,
    })
    const type = await fx.call('PATCH', '/items?id=eq.1', { body: { qty: 'many' } })
    t.equal(type.status, 400)
    t.equal(type.json().code, '22P02')
    const filter = await fx.call('DELETE', '/items?nope=eq.1')
    t.equal(filter.status, 400, 'an unknown filter column: Postgres says so')
    t.equal(filter.json().code, '42703')
    const fk = await fx.call('DELETE', '/authors?id=eq.1', { role: 'svc' })
    t.equal(fk.status, 409, 'a foreign key still refers to it')
    t.equal(fk.json().code, '23503')
    const arr = await fx.call('PATCH', '/items?id=eq.1', { body: [{ qty: 1 }, { qty: 1 }] })
    t.same(
      [arr.status, arr.headers['content-range']],
      [204, '0-0/*'],
      'an array body: UPDATE ... FROM its rows, as PostgREST',
    )
    t.same(await rows('SELECT count(*)::int AS n FROM items'), [{ n: 5 }])
    const mixed = await fx.call('PATCH', '/items?id=eq.1', { body: [{ qty: 1 }, { note: 'x' }] })
    t.same([mixed.status, mixed.json().message], [400, 'All object keys must match'])
  })
})

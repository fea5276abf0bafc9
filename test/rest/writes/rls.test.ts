// The rule of docs/service.md §6-§7: an insert with Prefer: return=representation whose row
// the SELECT policy hides is KEPT and answered with an RLS refusal (42501, 401 for anon and
// 403 otherwise) whose message says the row was written, and `row_written: true` in its
// body: the gateway's rewriter reads that field only, no header of ours. Same for PATCH. With
// return=minimal the write succeeds plainly; a WITH CHECK refusal writes nothing.
// Real Postgres, fastify inject; the rows are checked through the owner's connection.
import t from 'tap'
import { ALICE, BOB } from '../../helpers/rest-fixture.js'
import { createWriteFixture } from '../../helpers/rest-writes.js'

t.test('return=representation and the SELECT policy', async (t) => {
  const fx = await createWriteFixture(t)
  const rows = (sql: string): Promise<Array<Record<string, unknown>>> => fx.ownerSql(sql)
  const repr = { prefer: 'return=representation' }
  const alice = { role: 'auth' as const, claims: { sub: ALICE } }

  t.test('anon: the row is written, the answer is 401 42501 that says so', async (t) => {
    const r = await fx.call('POST', '/posts', { body: { id: 1, body: 'by anon' }, headers: repr })
    t.equal(r.status, 401)
    t.notOk(
      Object.keys(r.headers).some((h) => h.startsWith('x-gatehouse-')),
      'no header of ours: the body field is the marker',
    )
    t.equal(r.headers['www-authenticate'], 'Bearer')
    t.equal(r.headers['proxy-status'], 'PostgREST; error=42501')
    const body = r.json()
    t.same(Object.keys(body).sort(), ['code', 'details', 'hint', 'message', 'row_written'])
    t.equal(body.code, '42501')
    t.equal(body.message, 'new row was written but the SELECT policy hides it from role anon')
    t.equal(body.row_written, true)
    t.match(body.details, /1 row was written to public\.posts and committed/)
    t.match(body.details, /Do not retry/)
    t.match(body.hint, /return=minimal/)
    t.same(
      await rows('SELECT id, owner_id, body FROM posts WHERE id = 1'),
      [{ id: 1, owner_id: null, body: 'by anon' }],
      'the row is there',
    )
    const again = await fx.get('/posts?id=eq.1')
    t.same(again.json(), [], 'and anon still cannot read it')
  })

  t.test(
    'a signed-in user: own row comes back (201); a row for someone else is kept and refused with 403',
    async (t) => {
      const own = await fx.call('POST', '/posts', {
        body: { id: 10, owner_id: ALICE, body: 'mine' },
        headers: repr,
        ...alice,
      })
      t.equal(own.status, 201)
      t.same(own.json(), [{ id: 10, owner_id: ALICE, body: 'mine' }])

      const other = await fx.call('POST', '/posts', {
        body: { id: 11, owner_id: BOB, body: 'for bob' },
        headers: repr,
        ...alice,
      })
      t.equal(other.status, 403)
      t.equal(other.json().message, 'new row was written but the SELECT policy hides it from role authenticated')
      t.equal(other.json().row_written, true)
      t.equal(other.headers['www-authenticate'], undefined)
      t.same(await rows('SELECT owner_id FROM posts WHERE id = 11'), [{ owner_id: BOB }])

      const bulk = await fx.call('POST', '/posts', {
        body: [
          { id: 12, owner_id: ALICE, body: 'a' },
          { id: 13, owner_id: BOB, body: 'b' },
        ],
        headers: repr,
        ...alice,
      })
      t.equal(bulk.status, 403, 'one hidden row refuses the representation of all')
      t.match(bulk.json().details, /^2 rows were written/)
      t.same(
        await rows('SELECT id FROM posts WHERE id IN (12, 13) ORDER BY id'),
        [{ id: 12 }, { id: 13 }],
        'both written',
      )
    },
  )

  t.test('return=minimal succeeds plainly; headers-only is refused like representation', async (t) => {
    const m = await fx.call('POST', '/posts', { body: { id: 20, body: 'minimal' } })
    t.equal(m.status, 201)
    t.equal(m.body, '')
    t.same(await rows('SELECT id FROM posts WHERE id = 20'), [{ id: 20 }])
    const h = await fx.call('POST', '/posts', {
      body: { id: 21, body: 'headers' },
      headers: { prefer: 'return=headers-only' },
    })
    t.equal(h.status, 401)
    t.equal(h.json().row_written, true)
    t.equal(h.headers.location, undefined)
    t.same(await rows('SELECT id FROM posts WHERE id = 21'), [{ id: 21 }])
  })

  t.test("a WITH CHECK refusal: Postgres' 42501, nothing written, with any return preference", async (t) => {
    for (const prefer of ['return=representation', 'return=minimal', 'return=headers-only']) {
      const r = await fx.call('POST', '/posts', { body: { id: 30, body: 'forbidden' }, headers: { prefer } })
      t.equal(r.status, 401, prefer)
      t.same(
        r.json(),
        {
          code: '42501',
          message: 'new row violates row-level security policy for table "posts"',
          details: null,
          hint: null,
        },
        prefer,
      )
      t.equal(r.json().row_written, undefined)
    }
    const signedIn = await fx.call('POST', '/posts', {
      body: { id: 30, owner_id: ALICE, body: 'forbidden' },
      headers: repr,
      ...alice,
    })
    t.equal(signedIn.status, 403)
    t.same(await rows('SELECT id FROM posts WHERE id = 30'), [])
  })

  t.test('tx=rollback: nothing is kept, so nothing is claimed written', async (t) => {
    const r = await fx.call('POST', '/posts', {
      body: { id: 40, body: 'rolled back' },
      headers: { prefer: 'return=representation, tx=rollback' },
    })
    t.equal(r.status, 401)
    t.equal(r.json().message, 'new row violates row-level security policy for table "posts"')
    t.equal(r.json().row_written, undefined)
    t.same(await rows('SELECT id FROM posts WHERE id = 40'), [])
  })

  t.test('PATCH: an update the SELECT policy hides is kept and refused the same way', async (t) => {
    await fx.ownerSql('DELETE FROM posts')
    await fx.ownerSql(
      `INSERT INTO posts (id, owner_id, body) VALUES (50, '${BOB}', 'bob one'), (51, '${ALICE}', 'alice one'), (52, '${ALICE}', 'alice two')`,
    )
    // RETURNING reads the rows, so the SELECT policy also limits which rows are updated:
    // anon sees none and updates none.
    const anon = await fx.call('PATCH', '/posts', { body: { body: 'edited' }, headers: repr })
    t.equal(anon.status, 200)
    t.same(anon.json(), [])
    t.same(await rows("SELECT count(*)::int AS n FROM posts WHERE body = 'edited'"), [{ n: 0 }])

    const own = await fx.call('PATCH', '/posts?id=eq.51&select=id,body', {
      body: { body: 'alice edit' },
      headers: repr,
      ...alice,
    })
    t.equal(own.status, 200)
    t.same(own.json(), [{ id: 51, body: 'alice edit' }])

    // No filter: the write itself reads no column, so it passes as return=minimal would make
    // it; only its representation meets the SELECT policy. Kept, and refused with 403.
    const give = await fx.call('PATCH', '/posts', {
      body: { body: 'given away', owner_id: BOB },
      headers: repr,
      ...alice,
    })
    t.equal(give.status, 403)
    t.equal(give.json().message, 'new row was written but the SELECT policy hides it from role authenticated')
    t.equal(give.json().row_written, true)
    t.match(give.json().details, /^3 rows were written to public\.posts and committed/)
    t.same(
      await rows('SELECT id, owner_id, body FROM posts ORDER BY id'),
      [
        { id: 50, owner_id: BOB, body: 'given away' },
        { id: 51, owner_id: BOB, body: 'given away' },
        { id: 52, owner_id: BOB, body: 'given away' },
      ],
      'written as return=minimal writes it',
    )

    // A filter reads columns: Postgres then checks the new row against the SELECT policy even
    // for return=minimal and refuses the statement: nothing is written (docs/rest-protocol.md §7.5).
    await fx.ownerSql(`UPDATE posts SET owner_id = '${ALICE}' WHERE id = 51`)
    const away = await fx.call('PATCH', '/posts?id=eq.51', { body: { owner_id: BOB }, ...alice })
    t.equal(away.status, 403)
    t.equal(away.json().message, 'new row violates row-level security policy for table "posts"')
    const awayRepr = await fx.call('PATCH', '/posts?id=eq.51', { body: { owner_id: BOB }, headers: repr, ...alice })
    t.equal(awayRepr.status, 403)
    t.equal(awayRepr.json().row_written, undefined, 'the minimal retry failed too: not written, not claimed')
    t.same(await rows('SELECT owner_id FROM posts WHERE id = 51'), [{ owner_id: ALICE }])
  })

  t.test('upserts meet the SELECT policy even with return=minimal (Postgres): refused, nothing written', async (t) => {
    const r = await fx.call('POST', '/posts', {
      body: { id: 60, body: 'upsert' },
      headers: { prefer: 'resolution=merge-duplicates, return=representation' },
    })
    t.equal(r.status, 401)
    t.equal(r.json().row_written, undefined)
    t.same(await rows('SELECT id FROM posts WHERE id = 60'), [])
  })
})

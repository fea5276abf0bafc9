import t from 'tap'
import pg from 'pg'
t.test('postgres is reachable', async (t) => {
  const c = new pg.Client(process.env.DATABASE_URL)
  await c.connect()
  const r = await c.query('select 1 as x')
  t.equal(r.rows[0].x, 1)
  await c.end()
})

// preparedRow on a real Postgres: the first row's fields as the text Postgres sent (null for
// SQL NULL, null for no row), the statement prepared once per connection and again on a new
// one, the driver's errors (code and severity) with the connection still usable afterwards,
// inside a transaction on a pool client, and the pools' facade releasing its connection.
import t from 'tap'
import pg from 'pg'
import { preparedRow } from '../../src/shared/prepared-row.js'
import { TenantPools } from '../../src/shared/tenant-pools.js'
import { createTestDatabase } from '../helpers/db.js'

const ECHO = 'SELECT $1::text AS a, NULL::text AS b, $2::int + 1 AS c, $3::json AS d'

async function client(t: { teardown(fn: () => unknown): void }, url: string): Promise<pg.Client> {
  const c = new pg.Client({ connectionString: url })
  await c.connect()
  t.teardown(() => c.end())
  return c
}

const preparedCount = async (c: pg.Client, name: string): Promise<number> =>
  Number((await c.query('SELECT count(*)::int AS n FROM pg_prepared_statements WHERE name = $1', [name])).rows[0].n)

t.test('the first row as text, NULL as null, no row as null; prepared once per connection', async (t) => {
  const db = await createTestDatabase(t, 'prow')
  const c = await client(t, db.url)
  t.same(await preparedRow(c, 'prow_echo', ECHO, ['x', '41', '{"k": [1, 2]}']), ['x', null, '42', '{"k": [1, 2]}'])
  t.same(await preparedRow(c, 'prow_echo', ECHO, ['é\u{1F600}', '0', 'null']), ['é\u{1F600}', null, '1', 'null'])
  t.equal(await preparedRow(c, 'prow_none', 'SELECT 1 WHERE $1::text IS NULL', ['set']), null)
  t.same(await preparedRow(c, 'prow_many', 'SELECT g::text FROM generate_series(1, 3) g WHERE $1::int > 0', ['1']), [
    '1',
  ])
  t.equal(await preparedCount(c, 'prow_echo'), 1, 'prepared on this connection, once')
  const other = await client(t, db.url)
  t.same(await preparedRow(other, 'prow_echo', ECHO, ['y', '1', '2']), ['y', null, '2', '2'], 'prepared on another')
  // pg's own named queries and preparedRow share the connection's record of prepared statements.
  await c.query({ name: 'prow_shared', text: 'SELECT $1::text AS v', values: ['a'] })
  t.same(await preparedRow(c, 'prow_shared', 'SELECT $1::text AS v', ['b']), ['b'])
  await t.rejects(preparedRow(c, 'prow_shared', 'SELECT $1::text AS other', ['c']), /used for a different statement/)
  t.same(await preparedRow(c, 'prow_echo', ECHO, ['z', '2', '3']), ['z', null, '3', '3'], 'the connection goes on')
})

t.test("the driver's errors, and the connection stays usable", async (t) => {
  const db = await createTestDatabase(t, 'prow')
  const c = await client(t, db.url)
  await c.query('CREATE TABLE one (id int PRIMARY KEY)')
  const insert = 'INSERT INTO one VALUES ($1::int) RETURNING id::text'
  t.same(await preparedRow(c, 'prow_insert', insert, ['1']), ['1'])
  const err = await preparedRow(c, 'prow_insert', insert, ['1']).catch((e: unknown) => e)
  t.match(err, { code: '23505', severity: 'ERROR' }, 'unique violation as a DatabaseError')
  t.match(await preparedRow(c, 'prow_bad', 'SELECT nosuchcolumn FROM one WHERE id = $1', ['1']).catch((e) => e), {
    code: '42703',
  })
  t.match(await preparedRow(c, 'prow_cast', 'SELECT $1::int::text', ['nope']).catch((e) => e), { code: '22P02' })
  t.same(await preparedRow(c, 'prow_insert', insert, ['2']), ['2'], 'the next statement runs')
  t.same(
    await preparedRow(c, 'prow_bad', 'SELECT id::text FROM one WHERE id = $1', ['2']),
    ['2'],
    'a statement Postgres refused to parse is not taken for prepared',
  )
})

t.test('inside a transaction on a pool client, and through the pools facade', async (t) => {
  const db = await createTestDatabase(t, 'prow')
  const pools = new TenantPools({
    budget: 2,
    perTenant: 1,
    idleMs: 60_000,
    acquireTimeoutMs: 5_000,
    connectTimeoutMs: 5_000,
    applicationName: 'gatehouse-test',
  })
  t.teardown(() => pools.close())
  const facade = pools.pool('a', db.url)
  await facade.query('CREATE TABLE n (v int)')
  const tx = await facade.connect()
  await tx.query('BEGIN')
  t.same(await preparedRow(tx, 'prow_n', 'INSERT INTO n VALUES ($1::int) RETURNING v::text', ['7']), ['7'])
  await tx.query('ROLLBACK')
  tx.release()
  t.equal((await facade.query('SELECT count(*)::int AS c FROM n')).rows[0].c, 0, 'rolled back with the transaction')
  // One connection per tenant: each call must give it back, or the next ones would wait.
  for (let i = 0; i < 5; i++) t.same(await preparedRow(facade, 'prow_n2', 'SELECT $1::text', [String(i)]), [String(i)])
  t.match(await preparedRow(facade, 'prow_n3', 'SELECT 1/$1::int', ['0']).catch((e) => e), { code: '22012' })
  t.same(await preparedRow(facade, 'prow_n2', 'SELECT $1::text', ['after']), ['after'])
})

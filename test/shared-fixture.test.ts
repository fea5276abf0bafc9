// The shared fixture tenants of test/helpers/shared-fixture.ts (docs/development.md, "Shared
// fixtures"): made once, reused, their tenant file kept in the database's comment, and older
// versions of the same fixture dropped when a new one is made. Uses a fixture no other test
// reads (test/fixtures/fixture-selftest.sql).
import t from 'tap'
import { quoteIdent } from '../src/shared/index.js'
import { adminQuery } from './helpers/db.js'
import { sharedFixtureTenant } from './helpers/shared-fixture.js'
import { withClient } from './helpers/tenants.js'

const STALE = 'fx_fixture_selftest_00000000'

t.test('a fixture is made once, older versions of it are dropped', async (t) => {
  await adminQuery(`CREATE DATABASE ${quoteIdent(STALE)}`)
  const a = await sharedFixtureTenant('fixture-selftest')
  t.match(a.database, /^fx_fixture_selftest_[0-9a-f]{8}$/)
  t.not(a.database, STALE)
  const stale = await adminQuery('SELECT 1 FROM pg_database WHERE datname = $1', [STALE])
  t.equal(stale.rowCount, 0, 'the older version was dropped when this one was made')

  const rows = await withClient(a.ownerUrl, async (c) => (await c.query('SELECT id FROM marker')).rows)
  t.same(rows, [{ id: 1 }], "the fixture's SQL ran as the owner")
  const note = await adminQuery<{ note: string }>(
    "SELECT shobj_description(oid, 'pg_database') AS note FROM pg_database WHERE datname = $1",
    [a.database],
  )
  t.same(JSON.parse(note.rows[0].note).file, a.file, 'the tenant file is kept in the comment, for other processes')

  const b = await sharedFixtureTenant('fixture-selftest', { rest: { max_rows: 5 } })
  t.equal(b.database, a.database, 'the same database again')
  t.equal(b.file.rest.max_rows, 5, "the caller's rest settings in its own copy")
  t.not(a.file.rest.max_rows, 5, 'not in the first copy')
})

// Writes to a view the role holds column privileges on (PostgREST's InsertSpec, "table with
// limited privileges"): the columns it may select come back; a representation that selects
// another column is Postgres' 42501 "permission denied for view ...", 401 with
// `WWW-Authenticate: Bearer` for the anonymous role, and nothing is written.
import t from 'tap'
import { createWriteFixture } from '../../helpers/rest-writes.js'

const SQL = `
CREATE SCHEMA hidden;
CREATE TABLE hidden.stars (article_id int NOT NULL, user_id int NOT NULL, created_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (article_id, user_id));
CREATE VIEW limited_stars AS SELECT article_id, user_id, created_at FROM hidden.stars;
DO $$ BEGIN
  EXECUTE format('GRANT SELECT (article_id, user_id), INSERT (article_id, user_id), UPDATE (article_id, user_id) ON limited_stars TO %I', platform.role('anon'));
END $$;
`

t.test('insert into a view with column privileges', async (t) => {
  const fx = await createWriteFixture(t, { sql: SQL })
  const rep = { prefer: 'return=representation' }

  const ok = await fx.call('POST', '/limited_stars?select=article_id,user_id', {
    headers: rep,
    body: { article_id: 2, user_id: 1 },
  })
  t.equal(ok.status, 201)
  t.same(ok.json(), [{ article_id: 2, user_id: 1 }])

  for (const path of ['/limited_stars?select=article_id,user_id,created_at', '/limited_stars']) {
    const denied = await fx.call('POST', path, { headers: rep, body: { article_id: 3, user_id: 1 } })
    t.equal(denied.status, 401, path)
    t.same(
      denied.json(),
      { code: '42501', message: 'permission denied for view limited_stars', details: null, hint: null },
      path,
    )
    t.equal(denied.headers['www-authenticate'], 'Bearer', path)
  }
  t.same(
    await fx.ownerSql('SELECT article_id, user_id FROM hidden.stars ORDER BY 1, 2'),
    [{ article_id: 2, user_id: 1 }],
    'nothing else was written',
  )
})

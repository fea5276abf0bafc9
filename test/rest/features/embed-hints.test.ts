// PGRST200's hint when the origin's only relationships go through a junction outside the
// exposed schemas (PostgREST's EmbedDisambiguationSpec, "doesn't work if the junction is only
// internal"): PostgREST keeps the origin in its relationship map with an empty list, so the
// origin counts as found and nothing is suggested; an origin with no relationship at all still
// gets the closest origin of the schema.
import t from 'tap'
import { createRestFixture } from '../../helpers/rest-fixture.js'

const SQL = `
CREATE SCHEMA hidden;
CREATE TABLE end_1 (id int PRIMARY KEY, name text);
CREATE TABLE end_2 (id int PRIMARY KEY, name text);
CREATE TABLE hidden.junction (
  end_1_id int NOT NULL REFERENCES end_1(id),
  end_2_id int NOT NULL REFERENCES end_2(id),
  PRIMARY KEY (end_1_id, end_2_id)
);
-- An origin named close to end_1 that has a relationship in the schema.
CREATE TABLE end_10 (id int PRIMARY KEY, end_2_id int REFERENCES end_2(id));
-- An origin with no relationship at all, named close to end_10.
CREATE TABLE end_101 (id int PRIMARY KEY);
GRANT SELECT ON end_1, end_2, end_10, end_101 TO PUBLIC;
`

t.test('PGRST200 hints around a junction outside the exposed schemas', async (t) => {
  const fx = await createRestFixture(t, { sql: SQL })

  const internal = await fx.get('/end_1?select=end_2(*)')
  t.equal(internal.status, 400)
  t.same(
    internal.json(),
    {
      code: 'PGRST200',
      message: "Could not find a relationship between 'end_1' and 'end_2' in the schema cache",
      details:
        "Searched for a foreign key relationship between 'end_1' and 'end_2' in the schema 'public', but no matches were found.",
      hint: null,
    },
    'the internal junction makes end_1 an origin: no suggestion',
  )

  const lone = await fx.get('/end_101?select=end_2(*)')
  t.equal(lone.status, 400)
  t.equal(
    lone.json().hint,
    "Perhaps you meant 'end_10' instead of 'end_101'.",
    'an origin without relationships: the closest origin',
  )

  const embedded = await fx.get('/end_10?select=id,end_2(id)')
  t.equal(embedded.status, 200, 'relationships in the schema still embed')
})

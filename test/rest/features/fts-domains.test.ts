// Full-text search on a column whose type is a domain over a domain over tsvector: the
// operator applies to the column as it is, as PostgREST 14 answers its spec cases
// QuerySpec "works when the column type is a recursive tsvector domain" and RpcSpec's
// `get_tsearch_to_tsvector?...=fts(simple).impossible` (the same column through a function
// returning SETOF the table). A domain over tsvector (one level) is the control.
import t from 'tap'
import { startRestGateway } from '../../helpers/rest-gateway.js'

const SQL = `
CREATE DOMAIN doc_vector AS tsvector CHECK (VALUE IS NOT NULL);
CREATE DOMAIN filled_doc_vector AS doc_vector CHECK (VALUE <> '');
CREATE TABLE notes (
  id int PRIMARY KEY,
  body_vector doc_vector,
  body_filled filled_doc_vector
);
INSERT INTO notes VALUES
  (1, to_tsvector('simple', 'walk the dog'), to_tsvector('simple', 'walk the dog')),
  (2, to_tsvector('simple', 'feed the cat'), to_tsvector('simple', 'feed the cat'));
CREATE FUNCTION all_notes() RETURNS SETOF notes LANGUAGE sql STABLE AS $$ SELECT * FROM notes $$;
SELECT platform.grant('SELECT', 'notes', 'anon');
`

t.test('fts on a domain over a domain over tsvector', async (t) => {
  const stack = await startRestGateway(t, { sql: SQL })
  const get = async (path: string) => {
    const r = await fetch(`${stack.gatewayUrl}/${stack.database}/rest/v1${path}`, {
      headers: { apikey: stack.tenant.file.keys.public },
    })
    return { status: r.status, body: (await r.json()) as unknown }
  }
  const want = [{ id: 2, body_filled: "'cat':3 'feed':1 'the':2" }]

  const recursive = await get('/notes?select=id,body_filled&body_filled=fts(simple).cat')
  t.same(recursive, { status: 200, body: want }, 'the column, no to_tsvector over it')
  const plain = await get('/notes?select=id&body_vector=fts(simple).dog')
  t.same(plain, { status: 200, body: [{ id: 1 }] }, 'a domain over tsvector, as before')
  const rpc = await get('/rpc/all_notes?select=id,body_filled&body_filled=fts(simple).cat')
  t.same(rpc, { status: 200, body: want }, 'through a function returning SETOF the table')
  const phrase = await get('/notes?select=id&body_filled=phfts(simple).feed%20the')
  t.same(phrase, { status: 200, body: [{ id: 2 }] }, 'the other fts operators too')
})

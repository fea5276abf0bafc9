// Bad request bodies (docs/rest-protocol.md §3.1): invalid or empty JSON, mismatched keys,
// wrong types, unknown columns, CSV with uneven lines, unsupported content types and
// oversize payloads each get a clear JSON error with a fitting status, and nothing is
// written: the statement is all or nothing. Real Postgres, fastify inject.
import t from 'tap'
import { createWriteFixture } from '../../helpers/rest-writes.js'

t.test('bad bodies write nothing', async (t) => {
  const fx = await createWriteFixture(t, { config: { max_body_bytes: 4096 } })
  const count = async (): Promise<number> => Number((await fx.ownerSql('SELECT count(*) AS n FROM items'))[0].n)
  await fx.ownerSql("INSERT INTO items (id, name) VALUES (1000, 'existing')")
  const json = { 'content-type': 'application/json' }

  const cases: Array<{
    name: string
    method?: string
    path?: string
    body: string | Buffer
    headers?: Record<string, string>
    status: number
    error: Record<string, unknown>
  }> = [
    {
      name: 'invalid JSON',
      body: '{"name": "x",',
      headers: json,
      status: 400,
      error: { code: 'PGRST102', message: 'Empty or invalid json', details: null, hint: null },
    },
    {
      name: 'an empty body',
      body: '',
      headers: json,
      status: 400,
      error: { code: 'PGRST102', message: 'Empty or invalid json', details: null, hint: null },
    },
    {
      name: 'whitespace only',
      body: '  \n',
      headers: json,
      status: 400,
      error: { code: 'PGRST102', message: 'Empty or invalid json' },
    },
    {
      name: 'array rows with different keys',
      body: '[{"name":"a"},{"name":"b","qty":2}]',
      headers: json,
      status: 400,
      error: { code: 'PGRST102', message: 'All object keys must match', details: null, hint: null },
    },
    {
      name: 'an array item that is not an object',
      body: '[{"name":"a"}, 3]',
      headers: json,
      status: 400,
      error: { code: 'PGRST102', message: 'All object keys must match' },
    },
    {
      name: 'an unknown column',
      body: '{"name":"a","colour":"red"}',
      headers: json,
      status: 400,
      error: {
        code: 'PGRST204',
        message: "Could not find the 'colour' column of 'items' in the schema cache",
        details: null,
        hint: null,
      },
    },
    {
      name: 'an unknown column in columns=',
      path: '/items?columns=name,colour',
      body: '{"name":"a"}',
      headers: json,
      status: 400,
      error: { code: 'PGRST204', message: "Could not find the 'colour' column of 'items' in the schema cache" },
    },
    {
      name: 'a malformed columns=',
      path: '/items?columns=name,',
      body: '{"name":"a"}',
      headers: json,
      status: 400,
      error: { code: 'PGRST100' },
    },
    {
      name: 'a wrong type',
      body: '{"name":"a","qty":"many"}',
      headers: json,
      status: 400,
      error: { code: '22P02', message: 'invalid input syntax for type integer: "many"' },
    },
    {
      name: 'a wrong type in the third row of a bulk insert',
      body: '[{"name":"a","qty":1},{"name":"b","qty":2},{"name":"c","qty":2.5}]',
      headers: json,
      status: 400,
      error: { code: '22P02' },
    },
    {
      name: 'a NOT NULL column left null in one row',
      body: '[{"name":"a"},{"name":null}]',
      headers: json,
      status: 400,
      error: { code: '23502' },
    },
    {
      name: 'a duplicate key against an existing row',
      body: '[{"id":2000,"name":"a"},{"id":1000,"name":"b"}]',
      headers: json,
      status: 409,
      error: { code: '23505' },
    },
    {
      name: 'a duplicate key inside the body',
      body: '[{"id":3000,"name":"a"},{"id":3000,"name":"b"}]',
      headers: json,
      status: 409,
      error: { code: '23505' },
    },
    {
      name: 'a foreign key to nothing',
      body: '{"name":"a","author_id":999}',
      headers: json,
      status: 409,
      error: { code: '23503' },
    },
    {
      name: 'a JSON object for an array column',
      body: '{"name":"a","tags":{"x":1}}',
      headers: json,
      status: 400,
      error: {},
    },
    {
      name: 'CSV lines of different lengths',
      body: 'name,qty\na,1\nb\n',
      headers: { 'content-type': 'text/csv' },
      status: 400,
      error: { code: 'PGRST102', message: 'All lines must have same number of fields' },
    },
    {
      name: 'CSV with text after a closing quote',
      body: 'name\n"open"x\n',
      headers: { 'content-type': 'text/csv' },
      status: 400,
      error: { code: 'PGRST102', message: 'parse error (string) at "x\\n"' },
    },
    {
      name: 'an unsupported content type',
      body: '<item/>',
      headers: { 'content-type': 'application/xml' },
      status: 400,
      error: { code: 'PGRST102', message: 'Content-Type not acceptable: application/xml', details: null, hint: null },
    },
    {
      name: 'a payload over rest.max_body_bytes',
      body: JSON.stringify([{ name: 'x'.repeat(5000) }]),
      headers: json,
      status: 413,
      error: { code: 'payload_too_large' },
    },
    {
      name: 'PATCH: invalid JSON',
      method: 'PATCH',
      path: '/items?id=eq.1000',
      body: 'nope',
      headers: json,
      status: 400,
      error: { code: 'PGRST102', message: 'Empty or invalid json' },
    },
    {
      name: 'PATCH: a wrong type',
      method: 'PATCH',
      path: '/items?id=eq.1000',
      body: '{"qty":[1]}',
      headers: json,
      status: 400,
      error: {},
    },
    {
      name: 'PATCH: oversize',
      method: 'PATCH',
      path: '/items?id=eq.1000',
      body: JSON.stringify({ name: 'y'.repeat(5000) }),
      headers: json,
      status: 413,
      error: { code: 'payload_too_large' },
    },
  ]

  for (const c of cases) {
    const before = await count()
    const r = await fx.call(c.method ?? 'POST', c.path ?? '/items', { body: c.body, headers: c.headers })
    t.equal(r.status, c.status, `${c.name}: status`)
    t.match(r.headers['content-type'], /^application\/json/, `${c.name}: a JSON error`)
    const body = r.json()
    t.match(body, c.error, `${c.name}: body`)
    t.ok(
      typeof body.code === 'string' && typeof body.message === 'string' && 'details' in body && 'hint' in body,
      `${c.name}: the error shape`,
    )
    t.notMatch(r.body, /INSERT|SELECT|pgrst_|\bat .*\.ts/, `${c.name}: no SQL text or stack`)
    t.equal(await count(), before, `${c.name}: nothing written`)
  }
  t.same(
    await fx.ownerSql('SELECT id, name FROM items'),
    [{ id: 1000, name: 'existing' }],
    'the existing row is untouched',
  )

  // The engine keeps serving after all of these.
  const ok = await fx.call('POST', '/items', { body: { name: 'fine' } })
  t.equal(ok.status, 201)
})

// Hostile input on the write and RPC paths: JSON keys, columns=, on_conflict=,
// PUT key values, RPC names, argument names and values, CSV headers and Prefer values never
// become SQL text: each is refused (PGRST1xx/2xx), quoted as an identifier, or bound as a
// value. A canary table must survive every request. Real Postgres, fastify inject.
import t from 'tap'
import { createWriteFixture } from '../../helpers/rest-writes.js'
import { RPC_SQL } from '../../helpers/rest-rpc.js'

t.test('writes and RPC: hostile input stays data', async (t) => {
  const fx = await createWriteFixture(t, {
    sql:
      RPC_SQL +
      "CREATE TABLE canary (id int); INSERT INTO canary VALUES (1); SELECT platform.grant('SELECT', 'canary', 'anon');",
  })
  const drop = 'x"; DROP TABLE canary; --'
  const json = { 'content-type': 'application/json' }
  const cases: Array<{
    name: string
    method: string
    path: string
    body?: string
    headers?: Record<string, string>
    statuses: number[]
  }> = [
    {
      name: 'a JSON key',
      method: 'POST',
      path: '/items',
      body: JSON.stringify({ [drop]: 1 }),
      headers: json,
      statuses: [400],
    },
    {
      name: 'a JSON value',
      method: 'POST',
      path: '/items',
      body: JSON.stringify({ name: "'); DROP TABLE canary; --" }),
      headers: json,
      statuses: [201],
    },
    {
      name: 'columns=',
      method: 'POST',
      path: `/items?columns=${encodeURIComponent('"' + drop.replace(/"/g, '\\"') + '"')}`,
      body: '{"name":"a"}',
      headers: json,
      statuses: [400],
    },
    {
      name: 'on_conflict=',
      method: 'POST',
      path: `/items?on_conflict=${encodeURIComponent('"' + drop.replace(/"/g, '\\"') + '"')}`,
      body: '{"name":"a"}',
      headers: { ...json, prefer: 'resolution=merge-duplicates' },
      statuses: [400],
    },
    {
      name: 'a PUT key value',
      method: 'PUT',
      path: `/kv?k=eq.${encodeURIComponent("a'; DROP TABLE canary; --")}`,
      body: JSON.stringify({ k: "a'; DROP TABLE canary; --" }),
      headers: json,
      statuses: [204],
    },
    {
      name: 'a PATCH filter value',
      method: 'PATCH',
      path: `/items?name=eq.${encodeURIComponent("'; DROP TABLE canary; --")}`,
      body: '{"qty":2}',
      headers: json,
      statuses: [204],
    },
    {
      name: 'a PATCH order column (ordering the representation)',
      method: 'PATCH',
      path: `/items?name=eq.none&order=${encodeURIComponent('"' + drop.replace(/"/g, '\\"') + '"')}`,
      body: '{"qty":2}',
      headers: { ...json, prefer: 'return=representation' },
      statuses: [400],
    },
    {
      name: 'a CSV header',
      method: 'POST',
      path: '/items',
      body: `"${drop.replace(/"/g, '""')}"\n1\n`,
      headers: { 'content-type': 'text/csv' },
      statuses: [400],
    },
    {
      name: 'a select in the representation',
      method: 'POST',
      path: `/items?select=${encodeURIComponent('"' + drop.replace(/"/g, '\\"') + '"')}`,
      body: '{"name":"b"}',
      headers: { ...json, prefer: 'return=representation' },
      statuses: [400],
    },
    {
      name: 'an RPC name',
      method: 'POST',
      path: `/rpc/${encodeURIComponent(drop)}`,
      body: '{}',
      headers: json,
      statuses: [404],
    },
    {
      name: 'an RPC argument name',
      method: 'POST',
      path: '/rpc/add_them',
      body: JSON.stringify({ a: 1, b: 2, [drop]: 3 }),
      headers: json,
      statuses: [404],
    },
    {
      name: 'an RPC argument value (GET)',
      method: 'GET',
      path: `/rpc/hello?name=${encodeURIComponent("'); DROP TABLE canary; --")}`,
      statuses: [200],
    },
    {
      name: 'an RPC argument value (JSON)',
      method: 'POST',
      path: '/rpc/hello',
      body: JSON.stringify({ name: "'); DROP TABLE canary; --" }),
      headers: json,
      statuses: [200],
    },
    {
      name: 'an RPC text body',
      method: 'POST',
      path: '/rpc/shout',
      body: "'); DROP TABLE canary; --",
      headers: { 'content-type': 'text/plain' },
      statuses: [200],
    },
    {
      name: 'a Prefer timezone',
      method: 'POST',
      path: '/items',
      body: '{"name":"tz"}',
      headers: { ...json, prefer: "timezone=UTC'; DROP TABLE canary; --" },
      statuses: [201, 400],
    },
    {
      name: 'a Prefer max-affected (not an integer: ignored, as PostgREST 14)',
      method: 'DELETE',
      path: '/items?id=eq.0',
      headers: { prefer: 'handling=strict, max-affected=1; DROP TABLE canary' },
      statuses: [204],
    },
  ]
  for (const c of cases) {
    const r = await fx.call(c.method, c.path, { body: c.body, headers: c.headers })
    t.ok(c.statuses.includes(r.status), `${c.name}: ${r.status} ${r.body.slice(0, 200)}`)
    if (r.status >= 400) t.match(r.json(), { code: String, message: String }, `${c.name}: a JSON error`)
    t.same(await fx.ownerSql('SELECT id FROM canary'), [{ id: 1 }], `${c.name}: the canary lives`)
  }
  const hello = await fx.call('GET', `/rpc/hello?name=${encodeURIComponent("'); DROP TABLE canary; --")}`)
  t.equal(hello.json(), "Hello, '); DROP TABLE canary; --", 'the value came back as data')
  t.same(
    await fx.ownerSql("SELECT name FROM items WHERE name LIKE '%DROP TABLE%'"),
    [{ name: "'); DROP TABLE canary; --" }],
    'stored as data',
  )
})

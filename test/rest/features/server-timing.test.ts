// Server-Timing (PostgREST's server-timing-enabled, its ServerTimingSpec): with the setting on,
// every answer says how long each stage took (jwt, parse, plan, transaction, response; an
// OPTIONS only jwt, parse, response), through the gateway; off by default.
import t from 'tap'
import { startRestGateway } from '../../helpers/rest-gateway.js'

const SQL = `
CREATE TABLE organizations (id int PRIMARY KEY, name text);
INSERT INTO organizations VALUES (6, 'Oscorp');
SELECT platform.grant('SELECT, INSERT', 'public.organizations', 'anon');
`
const has = (header: string | null, stage: string): boolean =>
  header !== null && new RegExp(`(^|, )${stage};dur=\\d+\\.\\d+(,|$)`).test(header)

t.test('Server-Timing with the setting on', async (t) => {
  const stack = await startRestGateway(t, { sql: SQL, rest: { server_timing_enabled: true } })
  const base = `${stack.gatewayUrl}/${stack.database}/rest/v1`
  const headers = { apikey: stack.tenant.file.keys.public }
  const all = ['jwt', 'parse', 'plan', 'transaction', 'response']

  let r = await fetch(`${base}/organizations?id=eq.6`, { headers })
  t.equal(r.status, 200)
  t.same(await r.json(), [{ id: 6, name: 'Oscorp' }])
  const timing = r.headers.get('server-timing')
  for (const s of all) t.ok(has(timing, s), `GET: ${s} in ${timing}`)
  t.match(
    timing,
    /^jwt;dur=[\d.]+, parse;dur=[\d.]+, plan;dur=[\d.]+, transaction;dur=[\d.]+, response;dur=[\d.]+$/,
    "in PostgREST's order",
  )

  r = await fetch(`${base}/organizations?id=eq.6`, { headers })
  for (const s of all) t.ok(has(r.headers.get('server-timing'), s), `GET from the plan cache: ${s}`)

  r = await fetch(`${base}/organizations`, {
    method: 'POST',
    headers: { ...headers, 'content-type': 'application/json', prefer: 'return=minimal' },
    body: '{"id":7,"name":"John"}',
  })
  t.equal(r.status, 201)
  for (const s of all) t.ok(has(r.headers.get('server-timing'), s), `POST: ${s}`)

  r = await fetch(`${base}/organizations`, { method: 'OPTIONS', headers })
  const options = r.headers.get('server-timing')
  t.match(options, /^jwt;dur=[\d.]+, parse;dur=[\d.]+, response;dur=[\d.]+$/, 'OPTIONS: jwt, parse and response only')
})

t.test('no Server-Timing by default', async (t) => {
  const stack = await startRestGateway(t, { sql: SQL })
  const r = await fetch(`${stack.gatewayUrl}/${stack.database}/rest/v1/organizations`, {
    headers: { apikey: stack.tenant.file.keys.public },
  })
  t.equal(r.status, 200)
  t.equal(r.headers.get('server-timing'), null)
})

// Requests built to hurt the REST engine's parsers, sent through the gateway to a listening
// engine over real sockets, real Postgres: JSON nested deeper than rest.max_json_depth and a
// select= wider than Postgres's target list are the client's mistakes (400 naming the
// limit), never a 500, and nothing is written.
import t from 'tap'
import type { AddressInfo } from 'node:net'
import { createWriteFixture } from '../../helpers/rest-writes.js'
import { lookupOf, startGateway, request, testConfig, type TestTenant } from '../../helpers/gateway.js'

async function stack(
  tap: Parameters<typeof createWriteFixture>[0],
  config: Parameters<typeof createWriteFixture>[1] = {},
) {
  const fx = await createWriteFixture(tap, config)
  await fx.app.listen({ port: 0, host: '127.0.0.1' })
  const engine = `http://127.0.0.1:${(fx.app.server.address() as AddressInfo).port}`
  const tenant = { ...fx.tenant, upstreams: { ...fx.tenant.upstreams, rest: `${engine}/${fx.database}` } }
  const tt: TestTenant = { file: fx.t.file, tenant }
  const gw = await startGateway(tap, { tenants: lookupOf(tt), config: testConfig() })
  const headers = { apikey: fx.t.file.keys.public, 'content-type': 'application/json' }
  const rest = `${gw.url}/${fx.database}/rest/v1`
  const count = async (): Promise<number> => Number((await fx.ownerSql('SELECT count(*) AS n FROM items'))[0].n)
  return { fx, rest, headers, count }
}

function nested(depth: number): string {
  return '['.repeat(depth) + ']'.repeat(depth)
}

t.test('JSON nested deeper than rest.max_json_depth: 400 naming the limit, nothing written', async (t) => {
  const { rest, headers, count } = await stack(t, { config: { max_json_depth: 100 } })

  for (const depth of [101, 50_000]) {
    const body = `{"name":"deep","data":${nested(depth - 1)}}`
    const r = await request(`${rest}/items`, { method: 'POST', headers, body })
    t.equal(r.status, 400, `depth ${depth}: 400, not 500`)
    t.equal(r.json().code, 'PGRST102')
    t.match(r.json().message, /nested deeper than 100 levels/, 'the message names the limit')
    t.equal(await count(), 0, `depth ${depth}: nothing written`)
  }

  // Brackets inside strings do not count; the limit itself is accepted.
  const ok = await request(`${rest}/items`, {
    method: 'POST',
    headers: { ...headers, prefer: 'return=minimal' },
    body: `{"name":"${'['.repeat(500)}","data":${nested(99)}}`,
  })
  t.equal(ok.status, 201, ok.body)
  t.equal(await count(), 1, 'a document at the limit is written')

  // PATCH and RPC bodies go through the same check.
  const patch = await request(`${rest}/items?name=eq.x`, { method: 'PATCH', headers, body: `{"data":${nested(200)}}` })
  t.equal(patch.status, 400)
  t.equal(patch.json().code, 'PGRST102')
})

t.test('select= with more columns than Postgres allows: 400 PGRST100 naming the limit', async (t) => {
  const { rest, headers } = await stack(t)
  const cols = Array.from({ length: 2000 }, () => 'id').join(',')
  let r = await request(`${rest}/items?select=${cols}`, { headers })
  t.equal(r.status, 400, 'not 500')
  t.equal(r.json().code, 'PGRST100')
  t.match(r.json().message, /failed to parse select parameter/)
  t.match(r.json().details, /2000 columns; Postgres allows at most 1664/)
  t.ok(r.body.length < 2000, 'the error does not echo the whole parameter')

  // Spread columns join their parent's list; an embedded list is a list of its own.
  const spread = Array.from({ length: 1000 }, () => 'id').join(',')
  r = await request(`${rest}/items?select=${spread},...authors(${spread})`, { headers })
  t.equal(r.status, 400, 'a spread counts into its parent list')
  t.match(r.json().details, /2000 columns/)

  const wide = Array.from({ length: 1664 }, () => 'id').join(',')
  r = await request(`${rest}/items?select=${wide}`, { headers })
  t.equal(r.status, 200, `1664 columns are fine: ${r.body.slice(0, 200)}`)
})

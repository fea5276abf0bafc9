// Relation names that need quoting in the path, as PostgREST serves them (QuerySpec "Escap3e;"):
// through the engine and through the gateway.
import t from 'tap'
import { startRestGateway } from '../../helpers/rest-gateway.js'

t.test('a table whose name ends with a semicolon is served', async (t) => {
  const stack = await startRestGateway(t, { shared: 'path-names' })
  const r = await fetch(`${stack.gatewayUrl}/${stack.database}/rest/v1/Escap3e;`, {
    headers: { apikey: stack.tenant.file.keys.public },
  })
  const body = await r.text()
  t.equal(r.status, 200, body)
  t.same(JSON.parse(body), [{ so6meIncvalid: 1 }, { so6meIncvalid: 2 }])
  const q = await fetch(
    `${stack.gatewayUrl}/${stack.database}/rest/v1/Escap3e;?select=so6meIncvalid&so6meIncvalid=eq.2`,
    { headers: { apikey: stack.tenant.file.keys.public } },
  )
  t.equal(q.status, 200)
  t.same(await q.json(), [{ so6meIncvalid: 2 }])
})

t.test('a ";" anywhere else in the path is still refused', async (t) => {
  const stack = await startRestGateway(t, { shared: 'path-names' })
  const key = { apikey: stack.tenant.file.keys.public }
  for (const p of [
    `/${stack.database};x/rest/v1/plain`,
    `/${stack.database}/rest;x/v1/plain`,
    `/${stack.database}/rest/v1;x/plain`,
    `/${stack.database}/auth/v1/user;x`,
  ]) {
    const r = await fetch(`${stack.gatewayUrl}${p}`, { headers: key })
    const body = (await r.json()) as { code: string; message: string }
    t.equal(r.status, 400, p)
    t.equal(body.code, 'invalid_path', p)
    t.match(body.message, '";" in path')
  }
})

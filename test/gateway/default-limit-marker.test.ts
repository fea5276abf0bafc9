// The gateway tells the REST upstream which limit it added (x-gatehouse-default-limit), so
// the engine can report a result cut by a limit the caller did not give; a client cannot
// forge the marker, and a caller's own limit carries none.
import t from 'tap'
import { makeTenant, lookupOf, startUpstream, startGateway, request } from '../helpers/gateway.js'

t.test('the default-limit marker reaches the engine only when the gateway added the limit', async (t) => {
  const rest = await startUpstream(t)
  const acme = makeTenant('acme', { auth: rest.url, rest: rest.url })
  const gw = await startGateway(t, { tenants: lookupOf(acme) })
  const headers = { apikey: acme.file.keys.public }

  await request(`${gw.url}/acme/rest/v1/todos?select=*`, { headers })
  t.equal(rest.last().headers['x-gatehouse-default-limit'], '1000', 'the limit the gateway added is marked')

  await request(`${gw.url}/acme/rest/v1/todos?select=*&limit=5`, {
    headers: { ...headers, 'x-gatehouse-default-limit': '5' },
  })
  t.equal(
    rest.last().headers['x-gatehouse-default-limit'],
    undefined,
    "a client-sent marker is stripped; the caller's limit is unmarked",
  )
})

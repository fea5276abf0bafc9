// Supabase services Gatehouse does not offer (Storage, Edge Functions, GraphQL, Realtime) are
// answered with a JSON error that says so (404 service_not_offered), over HTTP and for a
// WebSocket upgrade (supabase-js's Realtime client), instead of a bare 404 or a dropped socket.
import t from 'tap'
import http from 'node:http'
import { gatewayCall, startStack, type Stack, type StackTenant } from '../helpers/panel-stack.js'

let stack: Stack
let x: StackTenant

t.before(async () => {
  stack = await startStack(t)
  x = await stack.addTenant()
})

const SERVICES = [
  ['/storage/v1/object/list/avatars', 'Storage', '/storage/v1', 'POST'],
  ['/functions/v1/hello', 'Edge Functions', '/functions/v1', 'POST'],
  ['/graphql/v1', 'GraphQL', '/graphql/v1', 'POST'],
  ['/realtime/v1/api/broadcast', 'Realtime', '/realtime/v1', 'POST'],
  ['/storage/v1/bucket', 'Storage', '/storage/v1', 'GET'],
] as const

t.test('each unoffered service path answers service_not_offered', async (t) => {
  for (const [path, name, prefix, method] of SERVICES) {
    const r = await gatewayCall(stack, x, path, { method, body: method === 'POST' ? {} : undefined })
    t.equal(r.status, 404, path)
    t.equal(r.headers.get('x-gatehouse-error-code'), 'service_not_offered')
    t.match(
      r.body,
      {
        code: 'service_not_offered',
        message: `Gatehouse does not offer Supabase ${name} (${prefix}): it serves Auth (/auth/v1) and REST (/rest/v1) only`,
        hint: /docs\/supabase\.md/,
      },
      path,
    )
  }
  const other = await gatewayCall(stack, x, '/nothing/v1/here')
  t.match([other.status, other.body.code], [404, 'not_found'], 'any other path stays not_found')
})

t.test('supabase-js storage sees the message', async (t) => {
  const { error } = await stack.supabase(x).storage.from('avatars').list()
  t.match(error?.message, /does not offer Supabase Storage/)
})

t.test('a Realtime WebSocket upgrade gets the JSON error, not a dropped connection', async (t) => {
  const url = new URL(`${stack.gatewayUrl}/${x.database}/realtime/v1/websocket?apikey=${x.file.keys.public}&vsn=1.0.0`)
  const res = await new Promise<{ status: number; body: string; upgraded: boolean }>((resolve, reject) => {
    const req = http.request(url, {
      headers: {
        connection: 'Upgrade',
        upgrade: 'websocket',
        'sec-websocket-version': '13',
        'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZQ==',
      },
    })
    req.on('upgrade', () => resolve({ status: 101, body: '', upgraded: true }))
    req.on('response', (r) => {
      let body = ''
      r.setEncoding('utf8')
        .on('data', (d: string) => {
          body += d
        })
        .on('end', () => resolve({ status: r.statusCode ?? 0, body, upgraded: false }))
    })
    req.on('error', reject)
    req.end()
  })
  t.equal(res.upgraded, false)
  t.equal(res.status, 404)
  t.match(JSON.parse(res.body), { code: 'service_not_offered', message: /Supabase Realtime/ })
})

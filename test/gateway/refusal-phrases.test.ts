// The HTTP reason phrase of a refusal the gateway rewrote: the standard one of the status
// sent (PostgREST's table), never the phrase the upstream chose for its own body. A raw
// http client reads statusMessage (supabase-js shows it as statusText). The upstream is
// scripted: it answers as PostgREST does for a RAISE with a status_text, which no fixture
// table can make the real engine answer for a 42501.
import t from 'tap'
import http from 'node:http'
import { makeTenant, lookupOf, startUpstream, startGateway, testConfig } from '../helpers/gateway.js'

function get(url: string, headers: Record<string, string>): Promise<{ status: number; phrase: string; body: string }> {
  return new Promise((resolve, reject) => {
    http
      .get(url, { headers, agent: false }, (res) => {
        const chunks: Buffer[] = []
        res.on('data', (c: Buffer) => chunks.push(c))
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            phrase: res.statusMessage ?? '',
            body: Buffer.concat(chunks).toString('utf8'),
          }),
        )
        res.on('error', reject)
      })
      .on('error', reject)
  })
}

t.test('a rewritten refusal carries the standard phrase of its status', async (t) => {
  const up = await startUpstream(t, (req, res) => {
    const json = { 'content-type': 'application/json; charset=utf-8' }
    const denied = JSON.stringify({
      code: '42501',
      message: 'permission denied for table todos',
      details: null,
      hint: null,
    })
    if (req.url!.startsWith('/acme/own-phrase')) {
      res.writeHead(403, 'Go Away', json)
      res.end(denied)
    } else if (req.url!.startsWith('/acme/anon')) {
      res.writeHead(401, 'Sign In First', { ...json, 'www-authenticate': 'Bearer' })
      res.end(denied)
    } else if (req.url!.startsWith('/acme/too-big')) {
      res.writeHead(400, 'Bad Request', json)
      res.end(JSON.stringify({ code: 'P0001', message: 'too big', details: null, hint: null }))
    } else {
      res.writeHead(409, 'Taken Already', json)
      res.end(
        JSON.stringify({
          code: '23505',
          message: 'duplicate key value violates unique constraint',
          details: null,
          hint: null,
        }),
      )
    }
  })
  const tt = makeTenant('acme', { auth: up.url, rest: up.url })
  const gw = await startGateway(t, {
    tenants: lookupOf(tt),
    config: testConfig(),
    rewriteError: (ctx) => {
      if (ctx.path === '/own-phrase')
        return { status: 403, body: { code: 'no_table_grant', message: 'no grant', details: null, hint: null } }
      if (ctx.path === '/anon')
        return { status: 404, body: { code: 'unknown_table', message: 'no table', details: null, hint: null } }
      if (ctx.path === '/too-big')
        return { status: 413, body: { code: 'payload_too_large', message: 'too big', details: null, hint: null } }
      return null
    },
  })
  const h = { apikey: tt.file.keys.public }

  // 1. Same status, new body: the upstream's own phrase described its body, not ours.
  let r = await get(`${gw.url}/acme/rest/v1/own-phrase`, h)
  t.same([r.status, r.phrase, JSON.parse(r.body).code], [403, 'Forbidden', 'no_table_grant'])
  // 2. A new status: its own phrase, not the 401's.
  r = await get(`${gw.url}/acme/rest/v1/anon`, h)
  t.same([r.status, r.phrase, JSON.parse(r.body).code], [404, 'Not Found', 'unknown_table'])
  // 3. Where Node's name differs from PostgREST's (RFC 7231's), PostgREST's.
  r = await get(`${gw.url}/acme/rest/v1/too-big`, h)
  t.same([r.status, r.phrase], [413, 'Request Entity Too Large'])
  // 4. Not rewritten: the upstream's phrase goes on with its body.
  r = await get(`${gw.url}/acme/rest/v1/other`, h)
  t.same([r.status, r.phrase, JSON.parse(r.body).code], [409, 'Taken Already', '23505'])
})

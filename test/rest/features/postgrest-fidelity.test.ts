// Answers compared with PostgREST 14 word for word: the Accept header read as PostgREST
// reads it (blanks removed, q then specificity order) and PGRST107 naming each type as
// PostgREST names it (the plan type with its for= and options), the Content-Type of the
// nulls=stripped types, Proxy-Status on errors, and the status line over a real socket.
import t from 'tap'
import { request } from 'node:http'
import type { AddressInfo } from 'node:net'
import { createWriteFixture } from '../../helpers/rest-writes.js'
import { RPC_SQL } from '../../helpers/rest-rpc.js'

/** One raw HTTP/1.1 request: status line and headers as sent on the wire. */
async function raw (base: string, path: string, headers: Record<string, string> = {}, method = 'GET', body?: string): Promise<{
  status: number
  statusText: string
  headers: Record<string, string | string[] | undefined>
  body: string
}> {
  return await new Promise((resolve, reject) => {
    const req = request(`${base}${path}`, { method, headers }, (res) => {
      const chunks: Buffer[] = []
      res.on('data', (c: Buffer) => chunks.push(c))
      res.on('end', () => resolve({ status: res.statusCode ?? 0, statusText: res.statusMessage ?? '', headers: res.headers, body: Buffer.concat(chunks).toString('utf8') }))
      res.on('error', reject)
    })
    req.on('error', reject)
    req.end(body)
  })
}

t.test('content negotiation and PGRST107', async (t) => {
  const fx = await createWriteFixture(t, { sql: RPC_SQL })
  const unavailable = async (accept: string, path = '/authors'): Promise<unknown> => {
    const r = await fx.get(path, { accept })
    t.equal(r.status, 406, `${accept}: 406`)
    t.equal(r.headers['proxy-status'], 'PostgREST; error=PGRST107')
    return r.json()
  }
  const body = (list: string) => ({ code: 'PGRST107', message: `None of these media types are available: ${list}`, details: null, hint: null })

  t.test('the plan media type (not offered) as PostgREST names it', async (t) => {
    // postgrest-js .explain({ analyze: true, verbose: true }) sends this Accept.
    t.same(await unavailable('application/vnd.pgrst.plan+text; for="application/json"; options=analyze|verbose;'),
      body('application/vnd.pgrst.plan+text; for="application/json"; options=analyze|verbose'))
    t.same(await unavailable('application/vnd.pgrst.plan'), body('application/vnd.pgrst.plan+text; for="application/json"'))
    t.same(await unavailable('application/vnd.pgrst.plan+json;for="application/vnd.pgrst.object";options=wal|analyze|nope'),
      body('application/vnd.pgrst.plan+json; for="application/vnd.pgrst.object+json"; options=analyze|wal'))
  })

  t.test('order: q-value, then specificity; other types as written', async (t) => {
    t.same(await unavailable('text/Unknown;q=0.9, application/vnd.pgrst.plan+json;for="text/csv"'),
      body('application/vnd.pgrst.plan+json; for="text/csv", text/Unknown'))
    t.same(await unavailable('text/foo, image/png; x=1'), body('image/png;x=1, text/foo'), 'more parameters first')
    t.same(await unavailable('image/png;q=0.5;level=1, */x'), body('*/x, image/png'), '`;q=` cuts the entry')
  })

  t.test('wildcard subtypes are not offered', async (t) => {
    t.same(await unavailable('application/*'), body('application/*'))
    t.same(await unavailable('text/*'), body('text/*'))
    t.same(await unavailable('text/*', '/'), body('text/*'), 'the OpenAPI root')
  })

  t.test('a more specific type wins at equal q', async (t) => {
    const r = await fx.get('/authors?id=eq.4', { accept: '*/*, application/vnd.pgrst.object+json;nulls=stripped' })
    t.equal(r.status, 200)
    t.equal(r.headers['content-type'], 'application/vnd.pgrst.object+json;nulls=stripped; charset=utf-8')
    t.same(r.json(), { id: 4, name: 'Nobody' })
    const csv = await fx.get('/authors?select=id&id=eq.1', { accept: '*/*, text/csv' })
    t.same([csv.headers['content-type'], csv.body], ['text/csv; charset=utf-8', 'id\n1'])
  })

  t.test('nulls=stripped Content-Types', async (t) => {
    const arr = await fx.get('/authors?id=eq.4', { accept: 'application/vnd.pgrst.array+json;nulls=stripped' })
    t.equal(arr.headers['content-type'], 'application/vnd.pgrst.array+json;nulls=stripped; charset=utf-8')
    t.same(arr.json(), [{ id: 4, name: 'Nobody' }])
  })
})

t.test('a plan type for a type not produced is passed over', async (t) => {
  const fx = await createWriteFixture(t, { rest: { plan_enabled: true } })
  const r = await fx.get('/authors?select=id&id=eq.1', { accept: 'application/vnd.pgrst.plan; for="text/unknown", application/json' })
  t.same([r.status, r.headers['content-type'], r.json()], [200, 'application/json; charset=utf-8', [{ id: 1 }]])
  const none = await fx.get('/authors', { accept: 'application/vnd.pgrst.plan; for="text/unknown"' })
  t.same([none.status, none.json().message], [406, 'None of these media types are available: application/vnd.pgrst.plan+text; for="text/unknown"'])
})

t.test('Proxy-Status and the status line on a real socket', async (t) => {
  const fx = await createWriteFixture(t, { sql: RPC_SQL })
  await fx.app.listen({ port: 0, host: '127.0.0.1' })
  const base = `http://127.0.0.1:${(fx.app.server.address() as AddressInfo).port}/${fx.database}`
  const notFound = await raw(base, '/nope')
  t.same([notFound.status, notFound.statusText], [404, 'Not Found'])
  t.equal(notFound.headers['proxy-status'], 'PostgREST; error=PGRST205')
  t.equal(notFound.headers['content-type'], 'application/json; charset=utf-8')
  t.equal(notFound.headers['content-length'], String(Buffer.byteLength(notFound.body)))
  const pg = await raw(base, '/authors?id=eq.x')
  t.same([pg.status, pg.statusText, pg.headers['proxy-status']], [400, 'Bad Request', 'PostgREST; error=22P02'])
  const unacceptable = await raw(base, '/authors', { accept: 'image/png' })
  t.same([unacceptable.status, unacceptable.statusText, unacceptable.headers['proxy-status']], [406, 'Not Acceptable', 'PostgREST; error=PGRST107'])
  const tenant = await raw(base.replace(fx.database, 'no_such_db'), '/authors')
  t.same([tenant.status, tenant.headers['proxy-status']], [404, 'gatehouse; error=tenant_not_found'], "the engine's own codes name Gatehouse")
})

// The default limit is the gateway's alone (docs/architecture.md, "Contracts with the
// engines"): in front of an upstream that sends only what PostgREST 14 sends, the gateway
// adds `limit`, tells the upstream nothing of ours, and reads from the upstream's
// Content-Range whether the page is full at its limit (X-Gatehouse-Limit-Applied). The
// upstream here pages a table of known size as PostgREST does: limit/offset, Range on GET,
// Prefer: count=exact, and nothing else.
import t from 'tap'
import type { IncomingMessage, ServerResponse } from 'node:http'
import { gatewayOverUpstream, request } from '../helpers/gateway.js'

const SIZES: Record<string, number> = { '/acme/big': 1500, '/acme/exact': 1000, '/acme/small': 20, '/acme/rpc/f': 1000 }

/** PostgREST's paging of a table of SIZES[path] rows, answered with its Content-Range. */
function postgrestLike(req: IncomingMessage, res: ServerResponse): void {
  const url = new URL(req.url ?? '/', 'http://upstream')
  const size = SIZES[url.pathname] ?? 0
  let from = Number(url.searchParams.get('offset') ?? 0)
  let count = url.searchParams.has('limit') ? Number(url.searchParams.get('limit')) : Infinity
  const range = req.method === 'GET' ? /^(\d+)-(\d+)$/.exec(String(req.headers.range ?? '')) : null
  if (range !== null) {
    const end = Math.min(from + count, Number(range[2]) + 1)
    from = Math.max(from, Number(range[1]))
    count = Math.max(0, end - from)
  }
  const rows = Math.max(0, Math.min(count, size - from))
  const exact = /count=exact/.test(String(req.headers.prefer ?? ''))
  const total = exact ? String(size) : '*'
  res.writeHead(exact && rows < size ? 206 : 200, {
    'content-type': 'application/json; charset=utf-8',
    'content-range': rows === 0 ? `*/${total}` : `${from}-${from + rows - 1}/${total}`,
  })
  res.end(
    req.method === 'HEAD' ? undefined : JSON.stringify(Array.from({ length: rows }, (_, i) => ({ id: from + i }))),
  )
}

t.test('the limit notice comes from Content-Range, in front of a plain upstream', async (t) => {
  const { upstream: rest, acme, gw } = await gatewayOverUpstream(t, { handler: postgrestLike })
  const get = async (path: string, headers: Record<string, string> = {}, method = 'GET') => {
    const r = await request(`${gw.url}/acme/rest/v1${path}`, {
      method,
      headers: { apikey: acme.file.keys.public, ...headers },
    })
    const sent = rest.last()
    t.same(
      Object.keys(sent.headers).filter((h) => h.startsWith('x-gatehouse-')),
      [],
      `${method} ${path}: nothing of ours reaches the upstream`,
    )
    return [r.status, r.headers['x-gatehouse-default-limit'], r.headers['x-gatehouse-limit-applied']]
  }

  t.same(await get('/big?select=id'), [200, '1000', '1000'], 'cut at the default limit: said')
  t.same(await get('/small?select=id'), [200, '1000', undefined], 'everything fitted')
  t.same(await get('/big?select=id&offset=100'), [200, '1000', '1000'], 'an offset of the caller: still our limit')
  t.same(await get('/big?select=id&offset=1000'), [200, '1000', undefined], 'the last 500 rows')
  t.same(await get('/big?select=id', {}, 'HEAD'), [200, '1000', '1000'], 'HEAD')
  t.same(await get('/big?select=id&limit=1000'), [200, undefined, undefined], "the caller's own limit is no cut")
  t.same(await get('/big?select=id&limit=1200'), [200, undefined, undefined])
  t.same(await get('/big?select=id', { range: '0-999' }), [200, '1000', undefined], "the caller's Range chose 1000")
  t.same(await get('/big?select=id', { range: '0-1999' }), [200, '1000', '1000'], 'a larger Range is cut')
  t.same(await get('/big?select=id', { prefer: 'count=exact' }), [206, '1000', '1000'], 'counted: 1000 of 1500')
  t.same(await get('/exact?select=id', { prefer: 'count=exact' }), [200, '1000', undefined], 'counted: all 1000')
  // Without a count, exactly the limit's rows read the same as a cut (PostgREST/postgrest#2776).
  t.same(await get('/exact?select=id'), [200, '1000', '1000'], 'exactly 1000 rows: may have been cut')
  t.same(await get('/rpc/f'), [200, undefined, undefined], 'RPC reads get no limit and no notice')
})

t.test("an upstream's own x-gatehouse-* headers never reach the client", async (t) => {
  const {
    upstream: rest,
    acme,
    gw,
  } = await gatewayOverUpstream(t, {
    handler: (_req, res) => {
      res.writeHead(200, {
        'content-type': 'application/json',
        'content-range': '0-1/*',
        'x-gatehouse-limit-applied': '2',
        'x-gatehouse-default-limit': '2',
      })
      res.end('[{"id":1},{"id":2}]')
    },
  })
  const headers = { apikey: acme.file.keys.public, 'x-gatehouse-default-limit': '2' }
  const r = await request(`${gw.url}/acme/rest/v1/rpc/f`, { headers })
  t.equal(rest.last().headers['x-gatehouse-default-limit'], undefined, "a client's copy is stripped")
  t.same(
    Object.keys(r.headers).filter((h) => h.startsWith('x-gatehouse-')),
    [],
    "a function's headers cannot speak for the gateway",
  )
})

// The engine's response head as the client gets it: every name (its case kept) and value
// (latin1 bytes as sent) read once from undici's raw header list (proxy/headers.ts reads a
// head that arrived in one chunk with one decode, and one in several chunks header by
// header), hop-by-hop and Connection-listed headers left out, ours added.
import t from 'tap'
import http from 'node:http'
import net from 'node:net'
import type { AddressInfo } from 'node:net'
import { latin1Strings } from '../../../src/gateway/proxy/headers.js'
import { makeTenant, lookupOf, startGateway } from '../../helpers/gateway.js'

t.test('latin1Strings: views of one chunk and separate Buffers read the same', async (t) => {
  const text = 'HTTP/1.1 200 OK\r\nX-Name: caf\u00e9\r\nContent-Type: text/plain\r\nETag: "a"\r\n\r\nbody'
  const chunk = Buffer.from(text, 'latin1')
  // Views of the chunk where each name and value is, as undici's parser hands them over.
  const views: Buffer[] = []
  for (const m of text.matchAll(/\r\n([^:\r\n]+): ([^\r\n]*)/g)) {
    const name = m.index + 2
    const value = name + m[1]!.length + 2
    views.push(chunk.subarray(name, name + m[1]!.length), chunk.subarray(value, value + m[2]!.length))
  }
  const expected = ['X-Name', 'caf\u00e9', 'Content-Type', 'text/plain', 'ETag', '"a"']
  t.same(latin1Strings(views), expected, 'one chunk')
  const copies = views.map((v) => Buffer.from(v))
  t.same(latin1Strings(copies), expected, 'separate Buffers')
  t.same(latin1Strings([views[0]!, copies[1]!, ...views.slice(2)]), expected, 'mixed')
  t.same(latin1Strings([]), [], 'no headers')
})

/** An engine that writes `head` in the given pieces, each after the last was flushed, then `body`. */
async function pieceByPieceUpstream(
  t: { teardown(fn: () => unknown): void },
  pieces: Buffer[],
  body: string,
): Promise<string> {
  const server = net.createServer((socket) => {
    socket.setNoDelay(true)
    socket.once('data', () => {
      void (async () => {
        for (const p of pieces) {
          await new Promise<void>((resolve) => socket.write(p, () => setImmediate(resolve)))
        }
        socket.end(body)
      })()
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())))
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`
}

function rawGet(
  url: string,
  headers: Record<string, string>,
): Promise<{ status: number; raw: string[]; body: string }> {
  return new Promise((resolve, reject) => {
    http
      .get(url, { headers, agent: false }, (res) => {
        const chunks: Buffer[] = []
        res.on('data', (c: Buffer) => chunks.push(c))
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, raw: res.rawHeaders, body: Buffer.concat(chunks).toString() }),
        )
      })
      .on('error', reject)
  })
}

const HEAD =
  'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Note: na\u00efve \u00e9t\u00e9\r\n' +
  'Content-Range: 0-0/*\r\nConnection: keep-alive, X-Hop\r\nX-Hop: dropped\r\nPreference-Applied: count=none\r\n' +
  'Content-Length: 2\r\n\r\n'

for (const [name, split] of [
  ['one chunk', [HEAD.length]],
  ['several chunks, split inside names and values', [20, 49, 60, 75, 130, HEAD.length]],
] as const) {
  t.test(`the engine's head reaches the client as sent: ${name}`, async (t) => {
    const bytes = Buffer.from(HEAD, 'latin1')
    const pieces: Buffer[] = []
    let from = 0
    for (const to of split) {
      pieces.push(bytes.subarray(from, to))
      from = to
    }
    const upstream = await pieceByPieceUpstream(t, pieces, '[]')
    const tt = makeTenant('heads', { auth: upstream, rest: upstream })
    const gw = await startGateway(t, { tenants: lookupOf(tt) })
    const r = await rawGet(`${gw.url}/heads/rest/v1/todos?limit=1`, { apikey: tt.file.keys.public })
    t.equal(r.status, 200)
    t.equal(r.body, '[]')
    const pairs: [string, string][] = []
    for (let i = 0; i < r.raw.length; i += 2) pairs.push([r.raw[i]!, r.raw[i + 1]!])
    const engine = pairs.filter(([k]) => !/^(x-request-id|date|connection|keep-alive)$/i.test(k))
    t.same(engine, [
      ['Content-Type', 'application/json'],
      ['X-Note', 'na\u00efve \u00e9t\u00e9'],
      ['Content-Range', '0-0/*'],
      ['Preference-Applied', 'count=none'],
      ['Content-Length', '2'],
    ])
    t.ok(
      pairs.some(([k]) => k === 'x-request-id'),
      'our request id added',
    )
  })
}

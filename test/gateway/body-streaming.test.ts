// Large request bodies stream to the upstream as they arrive, over real sockets, with the
// body limits enforced on the way: the upstream sees the first bytes before the client has
// sent the rest; a body that passes the limit or stalls is cut there, the upstream request
// is aborted mid-body (the upstream never gets a complete body) and the client gets its
// 413 / 408. Bodies up to gateway.buffer_body_bytes (64 KiB here) are read whole first
// (body-limits.test.ts, slow-clients.test.ts).
import t from 'tap'
import http from 'node:http'
import net from 'node:net'
import type { AddressInfo } from 'node:net'
import { lookupOf, makeTenant, startGateway, testConfig } from '../helpers/gateway.js'

/** gateway.buffer_body_bytes of these gateways: larger bodies stream. */
const BUFFER = 64 * 1024

interface Seen {
  url: string
  bytes: number
  complete: boolean
}

/** An upstream that reports the first bytes of each body and how each request ended. */
async function recordingUpstream(t: { teardown(fn: () => unknown): void }) {
  const seen: Seen[] = []
  let firstBytes: () => void = () => {}
  const gotFirstBytes = new Promise<void>((resolve) => {
    firstBytes = resolve
  })
  const ended: Array<(s: Seen) => void> = []
  const next = (): Promise<Seen> => new Promise((resolve) => ended.push(resolve))
  const server = http.createServer((req, res) => {
    const s: Seen = { url: req.url ?? '', bytes: 0, complete: false }
    seen.push(s)
    req.on('data', (c: Buffer) => {
      s.bytes += c.length
      firstBytes()
    })
    req.on('end', () => {
      s.complete = true
      res.writeHead(200, { 'content-type': 'application/json' })
      res.end(JSON.stringify({ bytes: s.bytes }))
    })
    req.on('close', () => ended.shift()?.(s))
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(
    () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      }),
  )
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, seen, gotFirstBytes, next }
}

/** A raw POST: writes the head and `first`, then whatever `more()` gives; resolves with the raw answer. */
function rawPost(
  port: number,
  path: string,
  headers: string[],
  first: Buffer,
  more: (socket: net.Socket) => Promise<void>,
): Promise<string> {
  return new Promise((resolve) => {
    const socket = net.connect({ port, host: '127.0.0.1' })
    let got = ''
    socket.setEncoding('utf8')
    socket.on('data', (c: string) => {
      got += c
    })
    socket.on('error', () => {})
    socket.on('close', () => resolve(got))
    socket.write([`POST ${path} HTTP/1.1`, 'Host: x', ...headers, '', ''].join('\r\n'))
    socket.write(first)
    void more(socket)
  })
}

t.test('a large upload streams: the upstream reads its first bytes before the client has sent the rest', async (t) => {
  const up = await recordingUpstream(t)
  const tt = makeTenant('acme', { auth: up.url, rest: up.url })
  const gw = await startGateway(t, {
    tenants: lookupOf(tt),
    config: testConfig({ gateway: { buffer_body_bytes: BUFFER } }),
  })
  const size = 512 * 1024
  const half = Buffer.alloc(size / 2, 'a')
  // The second half is sent only once the upstream has seen bytes of the first: a gateway
  // that read the whole body first would wait here forever.
  const answer = await rawPost(
    gw.port,
    '/acme/rest/v1/blobs',
    [`apikey: ${tt.file.keys.public}`, `content-length: ${size}`, 'connection: close'],
    half,
    async (socket) => {
      await up.gotFirstBytes
      socket.write(Buffer.alloc(size / 2, 'b'))
    },
  )
  t.match(answer, /^HTTP\/1\.1 200 /)
  t.match(answer, new RegExp(`"bytes":${size}`), 'the whole body arrived')
  t.equal(up.seen.length, 1)
  t.ok(up.seen[0]!.complete)
})

t.test(
  'a large chunked upload over the limit: the upstream request is cut mid-body, the client gets 413',
  async (t) => {
    const up = await recordingUpstream(t)
    const tt = makeTenant('acme', { auth: up.url, rest: up.url })
    const gw = await startGateway(t, {
      tenants: lookupOf(tt),
      config: testConfig({ gateway: { rest_max_body_bytes: 256 * 1024, buffer_body_bytes: BUFFER } }),
    })
    const ended = up.next()
    const piece = Buffer.alloc(64 * 1024, 'c')
    const chunk = Buffer.concat([Buffer.from(`${piece.length.toString(16)}\r\n`), piece, Buffer.from('\r\n')])
    const answer = await rawPost(
      gw.port,
      '/acme/rest/v1/blobs',
      [`apikey: ${tt.file.keys.public}`, 'transfer-encoding: chunked'],
      Buffer.concat([chunk, chunk]),
      async (socket) => {
        await up.gotFirstBytes
        // Four more pieces: 384 KiB in all, over the 256 KiB limit; never the final chunk.
        for (let i = 0; i < 4 && !socket.destroyed; i++) socket.write(chunk)
      },
    )
    t.match(answer, /^HTTP\/1\.1 413 /, 'the client gets 413')
    t.match(answer, /"code":"payload_too_large"/)
    t.match(answer, /connection: close/i)
    const s = await ended
    t.equal(s.complete, false, 'the upstream request was cut before its body was complete')
    t.ok(s.bytes <= 256 * 1024, 'the upstream got no more than the limit')
  },
)

t.test('a large upload that stalls: the upstream request is cut, the client gets 408', async (t) => {
  const up = await recordingUpstream(t)
  const tt = makeTenant('acme', { auth: up.url, rest: up.url })
  const gw = await startGateway(t, {
    tenants: lookupOf(tt),
    config: testConfig({ gateway: { body_idle_timeout_ms: 300, buffer_body_bytes: BUFFER } }),
  })
  const ended = up.next()
  const answer = await rawPost(
    gw.port,
    '/acme/rest/v1/blobs',
    [`apikey: ${tt.file.keys.public}`, `content-length: ${1024 * 1024}`],
    Buffer.alloc(128 * 1024, 'd'),
    async () => {},
  )
  t.match(answer, /^HTTP\/1\.1 408 /, 'the client gets 408')
  t.match(answer, /no part of the body arrived for 300 ms/)
  const s = await ended
  t.equal(s.complete, false, 'the upstream request was cut before its body was complete')
  t.ok(s.bytes > 0, 'the upstream had the first bytes (the body was streaming)')
})

t.test('a large upload slower than the minimum rate: the upstream request is cut, the client gets 408', async (t) => {
  const up = await recordingUpstream(t)
  const tt = makeTenant('acme', { auth: up.url, rest: up.url })
  const gw = await startGateway(t, {
    tenants: lookupOf(tt),
    config: testConfig({
      gateway: {
        buffer_body_bytes: BUFFER,
        min_body_bytes_per_second: 1000,
        body_rate_window_ms: 200,
        body_idle_timeout_ms: 60_000,
      },
    }),
  })
  const ended = up.next()
  let drip: NodeJS.Timeout | undefined
  t.teardown(() => clearInterval(drip))
  const answer = await rawPost(
    gw.port,
    '/acme/rest/v1/blobs',
    [`apikey: ${tt.file.keys.public}`, `content-length: ${1024 * 1024}`],
    Buffer.alloc(128 * 1024, 'e'),
    async (socket) => {
      // Never idle, but 50 bytes per second once the first 128 KiB are in.
      drip = setInterval(() => {
        if (!socket.destroyed) socket.write('e')
      }, 20)
    },
  )
  clearInterval(drip)
  t.match(answer, /^HTTP\/1\.1 408 /, 'the client gets 408')
  t.match(answer, /slower than 1000 bytes per second over 200 ms/)
  const s = await ended
  t.equal(s.complete, false, 'the upstream request was cut before its body was complete')
  t.ok(s.bytes > 0, 'the upstream had the first bytes (the body was streaming)')
})

// A part that is shutting down (app.close(): its listener is closed, a request is still in
// flight) answers a request that still arrives on a kept-alive connection with 503
// shutting_down, Retry-After and Connection: close, in the part's own error shape (PostgREST's
// for the REST engine, GoTrue's for the auth engine, the panel's) rather than fastify's
// `{"error":"Service Unavailable",...}` (what a gateway's kept-alive socket got in the
// development stack's shutdown). The request still arriving is pipelined behind one in flight.
import t, { type Test } from 'tap'
import net from 'node:net'
import type { AddressInfo } from 'node:net'
import type { FastifyInstance } from 'fastify'
import { loadConfig } from '../../src/config/index.js'
import { buildRestEngine } from '../../src/rest/index.js'
import { buildAuthEngine } from '../../src/auth/index.js'
import { buildPanel } from '../../src/panel/index.js'
import { createMemoryStore, createTenantCache } from '../../src/tenants/index.js'
import { until } from '../helpers/eventually.js'

const config = loadConfig({
  env: {},
  overrides: { log: { level: 'silent' }, panel: { session_secret: 'closing-test-panel-secret-0123456789abcdef' } },
})

function connect(port: number): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const s = net.connect(port, '127.0.0.1', () => resolve(s))
    s.once('error', reject)
  })
}

/** The responses read on `s` until `count` are complete (each with a Content-Length). */
function responses(s: net.Socket, count: number): Promise<string[]> {
  return new Promise((resolve) => {
    let text = ''
    const out: string[] = []
    const onData = (d: Buffer): void => {
      text += d.toString('utf8')
      for (;;) {
        const head = text.indexOf('\r\n\r\n')
        const len = /content-length: (\d+)/i.exec(text.slice(0, head))
        if (head < 0 || !len || text.length < head + 4 + Number(len[1])) break
        out.push(text.slice(0, head + 4 + Number(len[1])))
        text = text.slice(head + 4 + Number(len[1]))
      }
      if (out.length < count) return
      s.off('data', onData)
      resolve(out)
    }
    s.on('data', onData)
  })
}

/**
 * A request in flight while close() begins (its body has not all arrived, so close() waits for
 * it), then the rest of its body and a second request pipelined behind it: the second is read
 * while the part is closing.
 */
async function closing(t: Test, app: FastifyInstance, path: string): Promise<{ head: string; body: any }> {
  let started = 0
  app.addHook('onRequest', async () => {
    started++
  })
  await app.listen({ port: 0, host: '127.0.0.1' })
  const port = (app.server.address() as AddressInfo).port
  const s = await connect(port)
  t.teardown(() => s.destroy())
  const body = JSON.stringify({ a: 'x'.repeat(92) })
  s.write(
    `POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`,
  )
  s.write(body.slice(0, 1))
  const answers = responses(s, 2)
  await until(async () => started === 1, 'the first request is in flight')
  const closed = app.close()
  s.write(body.slice(1) + `GET ${path} HTTP/1.1\r\nHost: x\r\n\r\n`)
  const [, second] = await answers
  await closed
  const head = second!.slice(0, second!.indexOf('\r\n\r\n'))
  return { head, body: JSON.parse(second!.slice(head.length + 4)) }
}

const noTenants = { get: async () => null }

t.test('the REST engine: PostgREST shape', async (t) => {
  const { head, body } = await closing(t, buildRestEngine({ config, tenants: noTenants }), '/acme/todos')
  t.match(head, /^HTTP\/1\.1 503 /)
  t.match(head, /\r\nretry-after: 1\r\n/i)
  t.match(head, /\r\nconnection: close\r\n/i)
  t.match(body, { code: 'shutting_down', message: 'This server is shutting down; retry the request' })
})

t.test("the auth engine: GoTrue's shape", async (t) => {
  const { head, body } = await closing(t, buildAuthEngine({ config, tenants: noTenants }), '/acme/settings')
  t.match(head, /^HTTP\/1\.1 503 /)
  t.match(head, /\r\nretry-after: 1\r\n/i)
  t.match(body, { code: 503, error_code: 'shutting_down' })
})

t.test("the panel: the panel's shape", async (t) => {
  const store = createMemoryStore()
  const cache = createTenantCache(store)
  t.teardown(async () => {
    cache.close()
    await store.close()
  })
  const { head, body } = await closing(
    t,
    buildPanel({ config, tenants: cache, store }),
    '/organizations/o/databases/d/api/auth-settings',
  )
  t.match(head, /^HTTP\/1\.1 503 /)
  t.match(head, /\r\nretry-after: 1\r\n/i)
  t.match(body, { code: 'shutting_down' })
})

t.test('a kept-alive connection whose request was in flight when close() began is ended with its answer', async (t) => {
  const app = buildRestEngine({ config, tenants: noTenants })
  let started = 0
  app.addHook('onRequest', async () => {
    started++
  })
  await app.listen({ port: 0, host: '127.0.0.1' })
  const s = await connect((app.server.address() as AddressInfo).port)
  t.teardown(() => s.destroy())
  let serverClosedSocket = false
  s.on('end', () => (serverClosedSocket = true))
  const body = JSON.stringify({ a: 'x' })
  s.write(
    `POST /acme/todos HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`,
  )
  s.write(body.slice(0, 1))
  const answer = responses(s, 1)
  await until(async () => started === 1, 'the request is in flight')
  let closed = false
  const closing = app.close().then(() => (closed = true))
  s.write(body.slice(1))
  const [first] = await answer
  t.match(first!, /^HTTP\/1\.1 /, 'the request in flight is answered')
  // The client keeps its end open (as a kept-alive upstream socket does): the server ends it.
  await until(async () => serverClosedSocket && closed, 'the part closed the socket and close() resolved')
  await closing
})

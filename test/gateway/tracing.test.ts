// OpenTelemetry tracing over real sockets: a client's `traceparent` is continued by the
// gateway's span, the REST engine receives the gateway's span as its parent (the engine
// shows what it received through `request.headers`), and both parts export their spans
// to an OTLP/HTTP receiver. With tracing off the client's `traceparent` goes on unchanged
// and nothing is exported.
import t from 'tap'
import { startReceiver } from '../helpers/otlp.js'
import { startRestGateway } from '../helpers/rest-gateway.js'
import { startPartTracing, type PartTracer } from '../../src/shared/index.js'
import { loadConfig } from '../../src/config/index.js'
import { createStoreAndCache, startPart } from '../../src/serve.js'
import { mkdtempSync, rmSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'

const CLIENT_TRACE = '4bf92f3577b34da6a3ce929d0e0e4736'
const CLIENT_SPAN = '00f067aa0ba902b7'
const CLIENT_TRACEPARENT = `00-${CLIENT_TRACE}-${CLIENT_SPAN}-01`

async function callRpc(
  gatewayUrl: string,
  database: string,
  key: string,
  headers: Record<string, string>,
): Promise<{ status: number; body: unknown }> {
  const res = await fetch(`${gatewayUrl}/${database}/rest/v1/rpc/seen_traceparent`, {
    headers: { apikey: key, ...headers },
  })
  return { status: res.status, body: await res.json() }
}

t.test('the standard OTEL_EXPORTER_OTLP_ENDPOINT turns tracing on; unset, it is off', async (t) => {
  t.equal(
    loadConfig({ env: { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' } }).tracing.otlp_endpoint,
    'http://collector:4318',
  )
  t.equal(
    loadConfig({ env: { GATEHOUSE_TRACING_OTLP_ENDPOINT: 'http://c2:4318' } }).tracing.otlp_endpoint,
    'http://c2:4318',
  )
  t.equal(loadConfig({ env: {} }).tracing.otlp_endpoint, undefined)
})

t.test('tracing on: the engine is a child of the gateway, which continues the client', async (t) => {
  const receiver = await startReceiver(t)
  const tracers: { gateway: PartTracer; rest: PartTracer } = {
    gateway: await startPartTracing({ endpoint: receiver.endpoint, part: 'gateway' }),
    rest: await startPartTracing({ endpoint: `${receiver.endpoint}/`, part: 'rest' }),
  }
  const stack = await startRestGateway(t, { shared: 'tracing', tracers })
  const r = await callRpc(stack.gatewayUrl, stack.database, stack.tenant.file.keys.public, {
    traceparent: CLIENT_TRACEPARENT,
  })
  t.equal(r.status, 200)
  const seen = String(r.body)
  const m = /^00-([0-9a-f]{32})-([0-9a-f]{16})-01$/.exec(seen)
  t.ok(m, `the engine received a well-formed traceparent (${seen})`)
  t.equal(m?.[1], CLIENT_TRACE, 'same trace id as the client')
  t.not(m?.[2], CLIENT_SPAN, 'its parent is the gateway span, not the client')

  // Shutting the tracers down exports what they buffered.
  await tracers.gateway.shutdown()
  await tracers.rest.shutdown()
  t.ok(receiver.posts.length > 0, 'spans were posted')
  t.ok(
    receiver.posts.every((p) => p.contentType.startsWith('application/json')),
    'as OTLP JSON',
  )
  const ours = receiver.spans.filter((s) => s.traceId === CLIENT_TRACE)
  const gw = ours.filter((s) => s.service === 'gatehouse-gateway')
  const rest = ours.filter((s) => s.service === 'gatehouse-rest')
  t.equal(gw.length, 1, 'one gateway span in the client trace')
  t.equal(rest.length, 1, 'one rest span in the client trace')
  t.equal(gw[0]?.parentSpanId, CLIENT_SPAN, 'the gateway span continues the client span')
  t.equal(gw[0]?.spanId, m?.[2], 'the traceparent sent upstream is the gateway span')
  t.equal(rest[0]?.parentSpanId, gw[0]?.spanId, 'the rest span is a child of the gateway span')
  t.equal(gw[0]?.kind, 2, 'server span')
  t.equal(rest[0]?.kind, 2, 'server span')
})

t.test('a part started with tracing.otlp_endpoint traces its requests and flushes them when it closes', async (t) => {
  const receiver = await startReceiver(t)
  const dir = mkdtempSync(path.join(os.tmpdir(), 'gatehouse-tracing-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const config = loadConfig({
    env: {},
    overrides: {
      log: { level: 'silent' },
      tenants: { dir },
      gateway: { port: 0, admin_port: 0 },
      tracing: { otlp_endpoint: receiver.endpoint },
    },
  })
  const deps = createStoreAndCache(config)
  t.teardown(async () => {
    deps.tenants.close()
    await deps.store.close()
  })
  const part = await startPart('gateway', { config, ...deps }, { admin: false })
  let closed = false
  t.teardown(async () => {
    if (!closed) await part.app.close()
  })
  const res = await fetch(`${part.url}/nosuchdb/rest/v1/todos`, {
    headers: { apikey: 'pk_whatever_key_123', traceparent: CLIENT_TRACEPARENT },
  })
  t.equal(res.status, 404)
  await res.arrayBuffer()
  await part.app.close()
  closed = true
  const spans = receiver.spans.filter((s) => s.traceId === CLIENT_TRACE)
  t.equal(spans.length, 1, 'the span was exported on close')
  t.equal(spans[0]?.service, 'gatehouse-gateway')
  t.equal(spans[0]?.parentSpanId, CLIENT_SPAN)
  t.match(spans[0]?.name, /^GET /)
})

t.test('tracing off: the client traceparent reaches the engine unchanged, nothing is exported', async (t) => {
  const receiver = await startReceiver(t)
  const stack = await startRestGateway(t, { shared: 'tracing' })
  const r = await callRpc(stack.gatewayUrl, stack.database, stack.tenant.file.keys.public, {
    traceparent: CLIENT_TRACEPARENT,
  })
  t.equal(r.status, 200)
  t.equal(r.body, CLIENT_TRACEPARENT)
  const r2 = await callRpc(stack.gatewayUrl, stack.database, stack.tenant.file.keys.public, {})
  t.equal(r2.body, null, 'no traceparent is made up')
  t.equal(receiver.posts.length, 0)
})

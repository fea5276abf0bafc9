// Observability conventions: the OpenTelemetry resource variables (OTEL_SERVICE_NAME,
// OTEL_RESOURCE_ATTRIBUTES) name the exported spans; the log lines of a traced request carry
// its trace_id and span_id (the fast path's and fastify's); one request counter for every part,
// gatehouse_requests_total{part,tenant,status} with the status code, whose tenant label
// metrics.tenant_label switches off; gatehouse_build_info. The gateway runs as `serve gateway`
// in a child process (its stdout is the log), ports from the kernel.
import t from 'tap'
import { spawn } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { createRequire } from 'node:module'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { startReceiver } from '../helpers/otlp.js'
import { shellEnv } from '../helpers/shell-env.js'
import { loadConfig } from '../../src/config/index.js'
import { parseResourceAttributes, partResource, packageVersion } from '../../src/shared/index.js'
import { createStoreAndCache, startPart } from '../../src/serve.js'
import { eventually } from '../helpers/eventually.js'

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..')
const TSX = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href
const TRACE = '0af7651916cd43dd8448eb211c80319c'
const PARENT = 'b7ad6b7169203331'

t.test('the resource: OTEL_SERVICE_NAME wins, OTEL_RESOURCE_ATTRIBUTES adds, values percent-decoded', async (t) => {
  const cfg = loadConfig({
    env: { OTEL_SERVICE_NAME: 'shop', OTEL_RESOURCE_ATTRIBUTES: 'service.name=ignored,team=core%2Cdata' },
  })
  t.same([cfg.tracing.service_name, cfg.tracing.resource_attributes], ['shop', 'service.name=ignored,team=core%2Cdata'])
  t.same(parseResourceAttributes('a=1, b = two%20words ,bad,=x,c=%zz'), { a: '1', b: 'two words' })
  t.same(partResource({ endpoint: 'x', part: 'rest', resourceAttributes: 'service.name=mine,k=v', version: '1.2.3' }), {
    'service.name': 'mine',
    k: 'v',
    'service.version': '1.2.3',
    'gatehouse.part': 'rest',
  })
  t.same(
    partResource({ endpoint: 'x', part: 'auth', serviceName: 'a', resourceAttributes: 'service.name=b' })[
      'service.name'
    ],
    'a',
  )
  t.equal(partResource({ endpoint: 'x', part: 'auth' })['service.name'], 'gatehouse-auth')
})

t.test('serve gateway: named spans, trace ids on its log lines, one request counter, build info', async (t) => {
  const receiver = await startReceiver(t)
  const dir = mkdtempSync(path.join(os.tmpdir(), 'gatehouse-otel-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const child = spawn(process.execPath, ['--import', TSX, path.join(root, 'src/cli.ts'), 'serve', 'gateway'], {
    cwd: dir,
    env: shellEnv({
      GATEHOUSE_GATEWAY_PORT: '0',
      GATEHOUSE_GATEWAY_ADMIN_PORT: '0',
      GATEHOUSE_TENANTS_DIR: dir,
      GATEHOUSE_LOG_LEVEL: 'info',
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint,
      OTEL_SERVICE_NAME: 'shop-gateway',
      OTEL_RESOURCE_ATTRIBUTES: 'deployment.environment=staging,team=core%2Cdata',
    }),
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let out = ''
  let err = ''
  child.stdout.setEncoding('utf8').on('data', (d: string) => {
    out += d
  })
  child.stderr.setEncoding('utf8').on('data', (d: string) => {
    err += d
  })
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)))
  t.teardown(() => {
    if (child.exitCode === null) child.kill('SIGKILL')
  })
  const lines = (): Array<Record<string, any>> =>
    out.split('\n').flatMap((l) => {
      try {
        return [JSON.parse(l)]
      } catch {
        return []
      }
    })
  await eventually(() => child.exitCode !== null || lines().some((l) => l.msg === 'listening'), 60_000).catch(() => {})
  const listening = lines().find((l) => l.msg === 'listening')
  if (listening === undefined) throw new Error(`serve gateway did not start: ${out} ${err}`)

  // 1. A traced request on the fast path, and one fastify takes (a percent-encoded path).
  const traceparent = `00-${TRACE}-${PARENT}-01`
  for (const p of ['/nosuchdb/rest/v1/todos', '/nosuch%64b/rest/v1/todos']) {
    const r = await fetch(`${listening.url}${p}`, { headers: { apikey: 'pk_whatever_key_123', traceparent } })
    t.equal(r.status, 404)
    await r.arrayBuffer()
  }
  const m = await (await fetch(`${listening.admin}/metrics`)).text()
  t.match(
    m,
    /^gatehouse_requests_total\{part="gateway",tenant="_unknown",status="404"\} 2$/m,
    'one counter, the status code',
  )
  t.notMatch(m, /gatehouse_gateway_requests_total|status_class/, 'no second request counter, no status classes')
  t.match(
    m,
    new RegExp(
      `^gatehouse_build_info\\{part="gateway",version="${packageVersion().replace(/\./g, '\\.')}",node_version="${process.versions.node.replace(/\./g, '\\.')}"\\} 1$`,
      'm',
    ),
  )

  // 2. Stopped: its spans are flushed; each log line of a traced request names its span.
  child.kill('SIGTERM')
  t.equal(await exited, 0, err)
  const spans = receiver.spans.filter((s) => s.traceId === TRACE)
  t.equal(spans.length, 2, 'both requests traced')
  for (const s of spans) {
    t.match(s.resource, {
      'service.name': 'shop-gateway',
      'deployment.environment': 'staging',
      team: 'core,data',
      'gatehouse.part': 'gateway',
      'service.version': packageVersion(),
    })
  }
  const completed = lines().filter((l) => l.msg === 'request completed')
  t.equal(completed.length, 2)
  t.same(
    completed.map((l) => l.trace_id),
    [TRACE, TRACE],
    'trace_id on each completion line',
  )
  t.same(completed.map((l) => l.span_id).sort(), spans.map((s) => s.spanId).sort(), "span_id is the request's own span")
})

t.test('metrics.tenant_label off: request series per part and status only', async (t) => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'gatehouse-nolabel-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const config = loadConfig({
    env: { GATEHOUSE_METRICS_TENANT_LABEL: 'false' },
    overrides: {
      log: { level: 'silent' },
      tenants: { dir },
      gateway: { port: 0, admin_port: 0 },
      rest: { port: 0, admin_port: 0 },
    },
  })
  t.equal(config.metrics.tenant_label, false)
  const deps = createStoreAndCache(config)
  t.teardown(async () => {
    deps.tenants.close()
    await deps.store.close()
  })
  for (const name of ['gateway', 'rest'] as const) {
    const part = await startPart(name, { config, ...deps })
    t.teardown(() => part.app.close())
    const path = name === 'gateway' ? '/nosuchdb/rest/v1/todos' : '/nosuchdb/todos'
    await (await fetch(`${part.url}${path}`, { headers: { apikey: 'pk_whatever_key_123' } })).arrayBuffer()
    const m = await (await fetch(`${part.adminUrl}/metrics`)).text()
    t.match(
      m,
      new RegExp(`^gatehouse_requests_total\\{part="${name}",status="404"\\} 1$`, 'm'),
      `${name}: no tenant label`,
    )
    t.notMatch(m, /tenant="/, `${name}: no tenant label anywhere in its request metrics`)
  }
})

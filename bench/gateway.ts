// Gateway overhead, in one process: the same GET to one trivial upstream, (1) directly,
// (2) through a bare http-proxy-3 passthrough with the same keep-alive agent, (3) through
// the gateway with a signed-in user's token (tenant, verified token and upstream token all
// cached; one info log line per request to /dev/null; metrics on). Target: (3) >= 0.8x (2).
// Knobs: BENCH_SECONDS (10), BENCH_ROUNDS (3), BENCH_CONNECTIONS (32), BENCH_LOG_LEVEL
// (info), BENCH_ONLY=gateway|bare-proxy (one scenario, for profiling; nothing written).
import http from 'node:http'
import { randomBytes } from 'node:crypto'
import type { AddressInfo } from 'node:net'
import { pathToFileURL } from 'node:url'
import { ProxyServer } from 'http-proxy-3'
import { SignJWT } from 'jose'
import { loadConfig } from '../src/config/index.js'
import { parseTenantFile, toTenant, tenantIssuer } from '../src/tenants/index.js'
import { buildGateway } from '../src/gateway/index.js'
import { benchSeconds, devNullLogger, cpuRatio, environment, formatReport, measure, ratio, writeResult, type BenchReport, type BenchScenario } from './lib.js'

const BODY = JSON.stringify([{ id: 1, title: 'a todo', done: false }])

async function listen (server: http.Server): Promise<number> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return (server.address() as AddressInfo).port
}

export async function run (): Promise<BenchReport> {
  const seconds = benchSeconds()
  const connections = Number(process.env.BENCH_CONNECTIONS ?? 32)
  const startedAt = new Date().toISOString()

  // The trivial upstream: a fixed JSON body, keep-alive (Node's default 5 s idle timeout,
  // longer than the proxies' 4 s agent idle timeout).
  const upstream = http.createServer((req, res) => {
    req.resume()
    res.writeHead(200, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(BODY), 'content-range': '0-0/*' })
    res.end(BODY)
  })
  const upPort = await listen(upstream)
  const upUrl = `http://127.0.0.1:${upPort}`

  const config = loadConfig({ env: {}, overrides: { public_url: 'http://127.0.0.1:8000', log: { level: process.env.BENCH_LOG_LEVEL ?? 'info' }, gateway: { port: 0 } } })

  // The bare passthrough: one ProxyServer, one keep-alive agent like the gateway's.
  const agent = new http.Agent({ keepAlive: true, keepAliveMsecs: 1000, timeout: config.gateway.upstream_keepalive_ms, maxSockets: 512, maxFreeSockets: 256, scheduling: 'lifo' })
  const proxy = new ProxyServer({ target: upUrl, agent })
  const bare = http.createServer((req, res) => {
    proxy.web(req, res, {}, (err) => {
      if (!res.headersSent) { res.writeHead(502); res.end() } else res.destroy(err)
    })
  })
  const barePort = await listen(bare)

  // The gateway, with its production logger (info, one line per request) to /dev/null.
  const file = parseTenantFile({
    database: 'bench',
    organization: 'org_bench',
    postgres: 'postgres://owner:pw@127.0.0.1:5432/bench',
    roles: { anon: 't_bench_anon', auth: 't_bench_auth', svc: 't_bench_svc' },
    jwt: { secret: randomBytes(32).toString('base64url'), upstream_secret: randomBytes(32).toString('base64url') },
    keys: { public: `pk_bench_${randomBytes(12).toString('hex')}`, secret: `sk_bench_${randomBytes(12).toString('hex')}` },
    upstreams: { auth: `${upUrl}/bench`, rest: `${upUrl}/bench` },
    auth: {}
  }, 'bench.yaml', {})
  const tenant = toTenant(file)
  const { logger, close: closeLog } = devNullLogger(config.log)
  const gateway = buildGateway({ config, tenants: { get: async (db) => (db === 'bench' ? tenant : null) }, logger: logger as never })
  await gateway.listen({ port: 0, host: '127.0.0.1' })
  const gwPort = (gateway.server.address() as AddressInfo).port
  const now = Math.floor(Date.now() / 1000)
  const token = await new SignJWT({ sub: randomBytes(8).toString('hex'), role: 'authenticated', email: 'bench@example.com', session_id: randomBytes(8).toString('hex') })
    .setProtectedHeader({ alg: 'HS256', typ: 'JWT' }).setIssuer(tenantIssuer(tenant, config.public_url)).setAudience('authenticated')
    .setIssuedAt(now).setExpirationTime(now + 3600).sign(new TextEncoder().encode(file.jwt.secret))

  const path = '/todos?select=id,title,done&order=id'
  const notes: string[] = []
  try {
    const only = process.env.BENCH_ONLY
    if (only === 'gateway' || only === 'bare-proxy') {
      // Profiling aid: one scenario only, no report written.
      const url = only === 'gateway' ? `http://127.0.0.1:${gwPort}/bench/rest/v1${path}` : `http://127.0.0.1:${barePort}/bench${path}`
      const s = await measure(only, only, { url, seconds, connections, headers: { apikey: file.keys.public, authorization: `Bearer ${token}` } })
      return { name: 'gateway-only', title: only, startedAt, secondsPerScenario: seconds, connections, scenarios: [s], ratios: [], notes: [], environment: environment() }
    }
    const rounds = Math.max(1, Number(process.env.BENCH_ROUNDS ?? 3))
    const gwHeaders = { apikey: file.keys.public, authorization: `Bearer ${token}`, 'x-client-info': 'supabase-js/2' }
    // The same request everywhere: the bare proxy and the upstream get the client's
    // apikey and Authorization headers too (they just do not look at them).
    const direct = await measure('direct', 'the upstream without any proxy (reference)', { url: `${upUrl}/bench${path}`, seconds, connections, headers: gwHeaders })
    // Bare proxy and gateway alternate, `rounds` times each; the best round of each counts
    // (interference from other processes only ever slows a round down).
    const bareRuns: BenchScenario[] = []
    const gwRuns: BenchScenario[] = []
    for (let i = 0; i < rounds; i++) {
      bareRuns.push(await measure('bare-proxy', 'http-proxy-3 passthrough, keep-alive agent, nothing else', { url: `http://127.0.0.1:${barePort}/bench${path}`, seconds, connections, headers: gwHeaders }))
      gwRuns.push(await measure('gateway', 'gateway: apikey + signed-in user JWT, re-signed upstream token, limit rewrite, header hygiene, metrics, info log line', {
        url: `http://127.0.0.1:${gwPort}/bench/rest/v1${path}`, seconds, connections, headers: gwHeaders
      }))
    }
    const best = (runs: BenchScenario[]): BenchScenario => runs.reduce((a, b) => (b.requestsPerSec > a.requestsPerSec ? b : a))
    const bareS = best(bareRuns)
    const gw = best(gwRuns)
    // CPU per request: the least disturbed round of each (interference only adds CPU).
    const leastCpu = (runs: BenchScenario[]): BenchScenario => runs.reduce((a, b) => ((b.cpuUsPerRequest ?? Infinity) < (a.cpuUsPerRequest ?? Infinity) ? b : a))
    notes.push(`bare-proxy rounds: ${bareRuns.map((r) => `${r.requestsPerSec} req/s, ${r.cpuUsPerRequest} µs CPU/req`).join('; ')}`)
    notes.push(`gateway rounds: ${gwRuns.map((r) => `${r.requestsPerSec} req/s, ${r.cpuUsPerRequest} µs CPU/req`).join('; ')}`)
    for (const s of [direct, bareS, gw]) {
      if (s.errors + s.timeouts + s.non2xx > 0) notes.push(`${s.name}: ${s.errors} errors, ${s.timeouts} timeouts, ${s.non2xx} non-2xx answers`)
    }
    notes.push('The upstream, the bare proxy and the gateway share one process and one event loop; autocannon runs in a child process. Absolute numbers depend on the machine and its load; the ratios are the point. CPU µs/req is this process\'s CPU time per request (upstream included): a busy machine distorts it far less than req/s.')
    const report: BenchReport = {
      name: 'gateway',
      title: 'Gateway overhead against a bare http-proxy-3 passthrough',
      startedAt,
      secondsPerScenario: seconds,
      connections,
      scenarios: [direct, bareS, gw],
      ratios: [
        ratio('gateway / bare-proxy', 'req/s of the gateway over the bare passthrough', gw, bareS, 0.8),
        cpuRatio('gateway / bare-proxy (CPU)', 'least CPU per request of the bare passthrough over the gateway\'s (all rounds): the req/s ratio on a machine with nothing else running', leastCpu(gwRuns), leastCpu(bareRuns), 0.8),
        ratio('bare-proxy / direct', 'req/s of the bare passthrough over the upstream alone', bareS, direct)
      ],
      notes,
      environment: environment()
    }
    writeResult(report)
    return report
  } finally {
    await gateway.close()
    closeLog()
    bare.closeAllConnections()
    await new Promise<void>((resolve) => bare.close(() => resolve()))
    agent.destroy()
    upstream.closeAllConnections()
    await new Promise<void>((resolve) => upstream.close(() => resolve()))
  }
}

// `node --import tsx bench/gateway.ts` runs this bench alone.
if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const r = await run()
  process.stdout.write(formatReport(r))
}

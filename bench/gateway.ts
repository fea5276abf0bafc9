// Gateway overhead: the same GET to one trivial upstream (in this process), (1) directly,
// then through proxies each in a process of its own: (2) bare http-proxy-3 on its classic
// path (node:http, keep-alive http.Agent), (3) bare http-proxy-3 on its fetch path over an
// undici Agent (keep-alive pool per upstream), (4) a bare undici Pool.dispatch()
// passthrough, (5) the gateway with a signed-in user's token (tenant, verified token and
// upstream token all cached; one info log line per request to /dev/null; metrics on),
// served by its node:http fast path, (6) the same gateway with the fast path off, every
// request through fastify's routing and route (what the fast path saves).
// Goal: gateway vs bare http-proxy-3 >= 0.9 in CPU per request (the proxy process's CPU
// per request, against the cheaper of http-proxy-3's two paths).
// Knobs: BENCH_SECONDS (10), BENCH_ROUNDS (3), BENCH_CONNECTIONS (32), BENCH_LOG_LEVEL
// (info), BENCH_ONLY=<scenario> (one scenario, for profiling with BENCH_GATEWAY_PROF;
// nothing written).
import http from 'node:http'
import { randomBytes } from 'node:crypto'
import type { AddressInfo } from 'node:net'
import { pathToFileURL } from 'node:url'
import { SignJWT } from 'jose'
import { loadConfig } from '../src/config/index.js'
import { parseTenantFile, toTenant, tenantIssuer } from '../src/tenants/index.js'
import {
  atLeast,
  atMost,
  benchSeconds,
  environment,
  formatReport,
  measure,
  ratio,
  writeResult,
  type BenchRatio,
  type BenchReport,
  type BenchScenario,
} from './lib.js'
import { forkGateway, type ForkedGateway } from './support/fork-gateway.js'
import { BARE_DESCRIPTIONS, type BareKind } from './support/bare-proxies.js'

const BARE_KINDS: BareKind[] = ['classic', 'fetch', 'undici']

/** `den`'s CPU per request in its proxy process over `num`'s. */
function cpuOwnRatio(name: string, description: string, num: BenchScenario, den: BenchScenario): BenchRatio {
  const a = num.otherCpuUsPerRequest ?? 0
  return { name, description, value: a === 0 ? 0 : Math.round(((den.otherCpuUsPerRequest ?? 0) / a) * 1000) / 1000 }
}

const BODY = JSON.stringify([{ id: 1, title: 'a todo', done: false }])
/** The POST scenarios' request body: one small row, as an app inserts it. */
const POST_BODY = JSON.stringify({ title: 'a new todo', done: false, tags: ['home', 'weekend'] })

/** The method and body a scenario sends (GET with none unless it says). */
function bodyOf(sc: { method?: string; body?: string }): { method?: string; body?: string } {
  return sc.method === undefined ? {} : { method: sc.method, body: sc.body }
}

async function listen(server: http.Server): Promise<number> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return (server.address() as AddressInfo).port
}

export async function run(): Promise<BenchReport> {
  const seconds = benchSeconds()
  const connections = Number(process.env.BENCH_CONNECTIONS ?? 32)
  const startedAt = new Date().toISOString()

  // The trivial upstream: a fixed JSON body, keep-alive (Node's default 5 s idle timeout,
  // longer than the proxies' 4 s agent idle timeout).
  const upstream = http.createServer((req, res) => {
    req.resume()
    res.writeHead(200, {
      'content-type': 'application/json; charset=utf-8',
      'content-length': Buffer.byteLength(BODY),
      'content-range': '0-0/*',
    })
    res.end(BODY)
  })
  const upPort = await listen(upstream)
  const upUrl = `http://127.0.0.1:${upPort}`

  const config = loadConfig({
    env: {},
    overrides: {
      public_url: 'http://127.0.0.1:8000',
      log: { level: process.env.BENCH_LOG_LEVEL ?? 'info' },
      gateway: { port: 0, client_max_inflight_share: 1 },
    },
  })

  // The gateway, with its production logger (info, one line per request) to /dev/null.
  const tenantFile = {
    database: 'bench',
    organization: 'org_bench',
    postgres: 'postgres://owner:pw@127.0.0.1:5432/bench',
    roles: { anon: 't_bench_anon', auth: 't_bench_auth', svc: 't_bench_svc' },
    jwt: { secret: randomBytes(32).toString('base64url'), upstream_secret: randomBytes(32).toString('base64url') },
    keys: {
      public: `pk_bench_${randomBytes(12).toString('hex')}`,
      secret: `sk_bench_${randomBytes(12).toString('hex')}`,
    },
    upstreams: { auth: `${upUrl}/bench`, rest: `${upUrl}/bench` },
    auth: {},
  }
  const file = parseTenantFile(tenantFile, 'bench.yaml', {})
  const tenant = toTenant(file)
  const now = Math.floor(Date.now() / 1000)
  const token = await new SignJWT({
    sub: randomBytes(8).toString('hex'),
    role: 'authenticated',
    email: 'bench@example.com',
    session_id: randomBytes(8).toString('hex'),
  })
    .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
    .setIssuer(tenantIssuer(tenant, config.public_url))
    .setAudience('authenticated')
    .setIssuedAt(now)
    .setExpirationTime(now + 3600)
    .sign(new TextEncoder().encode(file.jwt.secret))

  const path = '/todos?select=id,title,done&order=id'
  const notes: string[] = []
  // Every proxy in a process of its own (as deployed): its CPU time is read directly.
  const keepAliveMs = config.gateway.upstream_keepalive_ms
  const procs: ForkedGateway[] = []
  try {
    const bares = {} as Record<BareKind, ForkedGateway>
    for (const kind of BARE_KINDS) {
      bares[kind] = await forkGateway({}, [], { kind, target: upUrl, keepAliveMs })
      procs.push(bares[kind])
    }
    const gwOverrides = {
      public_url: config.public_url,
      log: { level: process.env.BENCH_LOG_LEVEL ?? 'info' },
      gateway: { port: 0, client_max_inflight_share: 1 },
    }
    const gw = await forkGateway(gwOverrides, [tenantFile])
    procs.push(gw)
    const gwRouted = await forkGateway(gwOverrides, [tenantFile], undefined, false)
    procs.push(gwRouted)
    // The same gateway with request buffering off (gateway.buffer_body_bytes 0: every body
    // streams to the engine as it arrives): the POST scenarios measure what reading a small
    // body whole before taking a slot costs (docs/edge.md).
    const gwStreamed = await forkGateway(
      { ...gwOverrides, gateway: { ...gwOverrides.gateway, buffer_body_bytes: 0 } },
      [tenantFile],
    )
    procs.push(gwStreamed)
    const post = { method: 'POST', body: POST_BODY }
    const gwHeaders = { apikey: file.keys.public, authorization: `Bearer ${token}`, 'x-client-info': 'supabase-js/2' }
    // The same request everywhere: the bare proxies and the upstream get the client's
    // apikey and Authorization headers too (they just do not look at them).
    const scenarios: Array<{
      name: string
      description: string
      url: string
      proc: ForkedGateway
      method?: string
      body?: string
    }> = [
      ...BARE_KINDS.map((kind) => ({
        name: `bare-${kind}`,
        description: BARE_DESCRIPTIONS[kind],
        url: `http://127.0.0.1:${bares[kind].port}/bench${path}`,
        proc: bares[kind],
      })),
      {
        name: 'gateway',
        description:
          'gateway: apikey + signed-in user JWT, re-signed upstream token, limit rewrite, header hygiene, metrics, info log line',
        url: `http://127.0.0.1:${gw.port}/bench/rest/v1${path}`,
        proc: gw,
      },
      {
        name: 'gateway-post',
        description:
          'the gateway, POST of a small JSON body: the body read whole before the request takes a slot and an upstream socket',
        url: `http://127.0.0.1:${gw.port}/bench/rest/v1/todos`,
        proc: gw,
        ...post,
      },
      {
        name: 'gateway-post-streamed',
        description:
          'the same POST through a gateway with gateway.buffer_body_bytes 0 (the body streams to the engine)',
        url: `http://127.0.0.1:${gwStreamed.port}/bench/rest/v1/todos`,
        proc: gwStreamed,
        ...post,
      },
      {
        name: 'gateway-routed',
        description:
          "the same gateway with its node:http fast path off: every request through fastify's routing, request/reply objects and route",
        url: `http://127.0.0.1:${gwRouted.port}/bench/rest/v1${path}`,
        proc: gwRouted,
      },
    ]
    const only = process.env.BENCH_ONLY
    if (only !== undefined) {
      // Profiling aid: one scenario only, no report written.
      const sc = scenarios.find((x) => x.name === only)
      if (sc === undefined) throw new Error(`BENCH_ONLY: one of ${scenarios.map((x) => x.name).join(', ')}`)
      const s = await measure(sc.name, sc.description, {
        ...bodyOf(sc),
        url: sc.url,
        seconds,
        connections,
        headers: gwHeaders,
        otherCpu: [sc.proc.cpu],
      })
      return {
        name: 'gateway-only',
        title: only,
        startedAt,
        secondsPerScenario: seconds,
        connections,
        scenarios: [s],
        ratios: [],
        notes: [],
        environment: environment(),
      }
    }
    const rounds = Math.max(1, Number(process.env.BENCH_ROUNDS ?? 3))
    const direct = await measure('direct', 'the upstream without any proxy (reference)', {
      url: `${upUrl}/bench${path}`,
      seconds,
      connections,
      headers: gwHeaders,
    })
    // The proxies alternate, `rounds` times each: interference from other processes only
    // ever slows a round down and adds CPU, so the best round of each counts.
    const runs = new Map<string, BenchScenario[]>(scenarios.map((x) => [x.name, []]))
    for (let i = 0; i < rounds; i++) {
      for (const sc of scenarios) {
        runs.get(sc.name)!.push(
          await measure(sc.name, sc.description, {
            ...bodyOf(sc),
            url: sc.url,
            seconds,
            connections,
            headers: gwHeaders,
            otherCpu: [sc.proc.cpu],
          }),
        )
      }
    }
    const own = (x: BenchScenario): number => x.otherCpuUsPerRequest ?? Infinity
    const leastCpu = (name: string): BenchScenario => runs.get(name)!.reduce((a, b) => (own(b) < own(a) ? b : a))
    const best = (name: string): BenchScenario =>
      runs.get(name)!.reduce((a, b) => (b.requestsPerSec > a.requestsPerSec ? b : a))
    for (const [n, r] of runs)
      notes.push(
        `${n} rounds: ${r.map((x) => `${x.requestsPerSec} req/s, ${own(x)} µs CPU/req in the proxy process (${x.otherSystemUsPerRequest ?? 0} µs of it system time)`).join('; ')}`,
      )
    const [classic, viaFetch, viaUndici, gwS, gwR] = [
      'bare-classic',
      'bare-fetch',
      'bare-undici',
      'gateway',
      'gateway-routed',
    ].map(leastCpu) as [BenchScenario, BenchScenario, BenchScenario, BenchScenario, BenchScenario]
    // The cheaper of http-proxy-3's two paths is the one the goal is measured against.
    const bareHp3 = own(classic) <= own(viaFetch) ? classic : viaFetch
    for (const s of [direct, ...scenarios.map((x) => best(x.name))]) {
      if (s.errors + s.timeouts + s.non2xx > 0)
        notes.push(`${s.name}: ${s.errors} errors, ${s.timeouts} timeouts, ${s.non2xx} non-2xx answers`)
    }
    notes.push(
      "Each proxy runs in a process of its own; the upstream runs in this one and autocannon in another. CPU µs/req is the CPU of this process and the proxy's per request; the figure in brackets is the proxy process alone (its own CPU per proxied request), from the round where it was least. Absolute numbers depend on the machine and its load; the ratios are the point.",
    )
    notes.push(`The goal is measured against the cheaper of http-proxy-3's two paths (${bareHp3.name}).`)
    const report: BenchReport = {
      name: 'gateway',
      title: 'Gateway overhead against bare passthrough proxies',
      startedAt,
      secondsPerScenario: seconds,
      connections,
      scenarios: [direct, ...scenarios.map((x) => leastCpu(x.name))],
      ratios: [
        atLeast(
          'gateway vs bare http-proxy-3 >= 0.9 in CPU per request',
          `the bare http-proxy-3 process's CPU per request (${bareHp3.name}, ${own(bareHp3)} µs) over the gateway process's (${own(gwS)} µs)`,
          own(bareHp3) / own(gwS),
          0.9,
        ),
        cpuOwnRatio(
          'bare-fetch vs bare-classic (CPU)',
          "http-proxy-3's classic path CPU per request over its fetch path's (above 1: fetch is cheaper)",
          viaFetch,
          classic,
        ),
        cpuOwnRatio(
          'bare-undici vs bare-classic (CPU)',
          "http-proxy-3's classic path CPU per request over undici Pool.dispatch()'s (above 1: undici is cheaper)",
          viaUndici,
          classic,
        ),
        cpuOwnRatio(
          'gateway vs bare-undici (CPU)',
          "the bare undici passthrough CPU per request over the gateway's: what the gateway's own work costs on top of its client",
          gwS,
          viaUndici,
        ),
        atMost(
          'gateway POST buffered vs streamed (CPU) <= 1.1',
          "the gateway process's CPU per small POST with the body read whole first over the same POST streamed (gateway.buffer_body_bytes 0): the cost of request buffering",
          own(leastCpu('gateway-post')) / own(leastCpu('gateway-post-streamed')),
          1.1,
        ),
        cpuOwnRatio(
          'gateway vs gateway-routed (CPU)',
          "the gateway's CPU per request with every request through fastify over the fast path's (above 1: the fast path is cheaper)",
          gwS,
          gwR,
        ),
        ratio(
          'gateway / bare-classic (req/s)',
          'req/s of the gateway over the bare http-proxy-3 classic passthrough (best rounds)',
          best('gateway'),
          best('bare-classic'),
        ),
      ],
      notes,
      environment: environment(),
    }
    writeResult(report)
    return report
  } finally {
    for (const p of procs) await p.close()
    upstream.closeAllConnections()
    await new Promise<void>((resolve) => upstream.close(() => resolve()))
  }
}

// `node --import tsx bench/gateway.ts` runs this bench alone.
if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const r = await run()
  process.stdout.write(formatReport(r))
}

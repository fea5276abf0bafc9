// One tenant's REST reads while another tenant takes a flood of wrong-password sign-ins,
// with the gateway, the REST engine and the auth engine in this one process (as `npm start`
// runs them) and bcrypt at the default cost. Tenant A's rate limits are raised so that the
// whole flood reaches password hashing (the worst case; with GoTrue's defaults a client gets
// 30 tries and then 429). Scenarios: (1) B's reads alone, (2) A's flood alone, with the event
// loop's delay histogram (perf_hooks monitorEventLoopDelay) and its busy time per sign-in,
// (3) B's reads during A's flood. Targets: B's median read under the flood <= 2x its idle
// median (medians in microseconds, from a reader process of its own: autocannon's whole
// milliseconds flap around a ~1 ms median); the event loop stalled < 5 ms per sign-in: the p99 of the delay histogram during
// the flood over the same window with nothing running (a loaded machine delays an idle loop
// too), with the main thread's own CPU time per sign-in (process.threadCpuUsage) beside it.
// Knobs: BENCH_SECONDS, BENCH_FLOOD_CONNECTIONS (80), BENCH_CONNECTIONS (8 readers).
import { randomBytes } from 'node:crypto'
import type { AddressInfo } from 'node:net'
import { monitorEventLoopDelay, performance } from 'node:perf_hooks'
import { pathToFileURL } from 'node:url'
import pg from 'pg'
import { loadConfig } from '../src/config/index.js'
import { buildAuthEngine } from '../src/auth/index.js'
import { buildRestEngine } from '../src/rest/index.js'
import { buildGateway } from '../src/gateway/index.js'
import { provisionTenant, dropTenant } from '../src/platform/index.js'
import { toTenant, type Tenant, type TenantFile } from '../src/tenants/index.js'
import { readLatencies } from './support/latency-reader.js'
import {
  autocannonProcess,
  benchSeconds,
  devNullLogger,
  type AutocannonResult,
  environment,
  formatReport,
  measure,
  writeResult,
  type BenchReport,
  type BenchScenario,
} from './lib.js'

/** The flood: autocannon in a child process posting wrong passwords for `seconds`. */
function flood(
  url: string,
  apikey: string,
  body: string,
  connections: number,
  seconds: number,
): Promise<AutocannonResult> {
  return autocannonProcess(
    { url, connections, method: 'POST', headers: { 'content-type': 'application/json', apikey }, body },
    seconds,
  )
}

const ROOMY = { capacity: 1_000_000, rate: 1_000_000, interval_seconds: 1 }

export async function run(): Promise<BenchReport> {
  const adminUrl = process.env.DATABASE_URL
  if (!adminUrl) throw new Error('DATABASE_URL is not set: run through `npm run bench` (scripts/with-services.mjs)')
  const seconds = benchSeconds()
  const readers = Number(process.env.BENCH_CONNECTIONS ?? 8)
  const flooders = Number(process.env.BENCH_FLOOD_CONNECTIONS ?? 80)
  const startedAt = new Date().toISOString()
  const config = loadConfig({
    env: {},
    overrides: {
      public_url: 'http://127.0.0.1:8000',
      log: { level: 'info' },
      gateway: { port: 0, client_max_inflight_share: 1 },
      rest: { port: 0 },
      auth: { port: 0 },
    },
  })
  const { logger, close: closeLog } = devNullLogger(config.log)
  const tenants = new Map<string, Tenant>()
  const lookup = { get: async (db: string) => tenants.get(db) ?? null }
  const rest = buildRestEngine({ config, tenants: lookup, logger: logger as never })
  const auth = buildAuthEngine({ config, tenants: lookup, logger: logger as never })
  const gateway = buildGateway({ config, tenants: lookup, logger: logger as never })
  const port = async (app: typeof rest) => {
    await app.listen({ port: 0, host: '127.0.0.1' })
    return (app.server.address() as AddressInfo).port
  }
  const restPort = await port(rest)
  const authPort = await port(auth)
  const gwPort = await port(gateway)
  const gw = `http://127.0.0.1:${gwPort}`

  const made: Array<{ file: TenantFile; roles: Record<string, string>; database: string }> = []
  const notes: string[] = []
  try {
    const make = async (prefix: string, rateLimits?: unknown) => {
      const database = `${prefix}_${randomBytes(4).toString('hex')}`
      const p = await provisionTenant({
        adminUrl,
        database,
        organization: 'org_bench',
        publicUrl: config.public_url,
        upstreams: {
          auth: `http://127.0.0.1:${authPort}/${database}`,
          rest: `http://127.0.0.1:${restPort}/${database}`,
        },
        auth: rateLimits ? { rate_limits: rateLimits as never } : {},
      })
      made.push({ file: p.file, roles: p.roles as unknown as Record<string, string>, database })
      tenants.set(database, toTenant(p.file))
      return { ...p, database }
    }
    const a = await make('bench_flood', { sign_in_sign_up: ROOMY, token_refresh: ROOMY, verify: ROOMY, otp: ROOMY })
    const b = await make('bench_quiet')
    const owner = new pg.Client({ connectionString: b.ownerUrl })
    await owner.connect()
    await owner.query(`CREATE TABLE items (id int PRIMARY KEY, name text NOT NULL);
      INSERT INTO items SELECT i, 'item ' || i FROM generate_series(1, 100) i;
      SELECT platform.grant('SELECT', 'items', 'anon');`)
    await owner.end()

    // A's victim account (the flood guesses its password).
    const signup = await fetch(`${gw}/${a.database}/auth/v1/signup`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', apikey: a.file.keys.public },
      body: JSON.stringify({ email: 'victim@example.com', password: 'the-right-password' }),
    })
    if (!signup.ok) throw new Error(`sign-up at the flooded tenant: ${signup.status} ${await signup.text()}`)

    const readUrl = `${gw}/${b.database}/rest/v1/items?select=id,name&id=lte.10`
    const read = (name: string, description: string) =>
      measure(name, description, {
        url: readUrl,
        connections: readers,
        seconds,
        headers: { apikey: b.file.keys.public },
      })
    const floodUrl = `${gw}/${a.database}/auth/v1/token?grant_type=password`
    const floodBody = JSON.stringify({ email: 'victim@example.com', password: 'a-wrong-password' })

    const idle = await read(
      'rest-read-idle',
      `tenant B: GET /rest/v1/items (10 rows) through the gateway, ${readers} connections, nothing else running`,
    )
    const latencyJob = { url: readUrl, headers: { apikey: b.file.keys.public }, connections: readers, seconds }
    const idleUs = await readLatencies(latencyJob)

    // The event loop with nothing running, then during the flood alone.
    const ms = (ns: number) => Math.round(ns / 1e4) / 100
    const quiet = monitorEventLoopDelay({ resolution: 1 })
    quiet.enable()
    await new Promise((resolve) => setTimeout(resolve, seconds * 1000))
    quiet.disable()
    await flood(floodUrl, a.file.keys.public, floodBody, flooders, 2) // warm-up
    const h = monitorEventLoopDelay({ resolution: 1 })
    const elu0 = performance.eventLoopUtilization()
    const thread = process as unknown as { threadCpuUsage?: (prev?: NodeJS.CpuUsage) => NodeJS.CpuUsage }
    const main0 = thread.threadCpuUsage?.()
    h.enable()
    const f = await flood(floodUrl, a.file.keys.public, floodBody, flooders, seconds)
    h.disable()
    const main = main0 ? thread.threadCpuUsage!(main0) : null
    const elu = performance.eventLoopUtilization(elu0)
    const signIns = f.requests.total
    const stallP99 = Math.max(0, Math.round((h.percentile(99) - quiet.percentile(99)) / 1e4) / 100)
    const floodScenario: BenchScenario = {
      name: 'wrong-password-flood',
      description: `tenant A: POST /auth/v1/token?grant_type=password with a wrong password, ${flooders} connections, bcrypt cost ${config.auth.bcrypt_cost}`,
      requestsPerSec: Math.round(f.requests.average),
      p50Ms: f.latency.p50,
      p99Ms: f.latency.p99,
      requests: signIns,
      errors: f.errors,
      timeouts: f.timeouts,
      // Every answer is the expected 400 invalid_credentials; anything else is counted.
      non2xx: signIns - (f.statusCodeStats?.['400']?.count ?? 0),
      mainThreadUsPerRequest: signIns > 0 ? Math.round((elu.active * 1000) / signIns) : 0,
      ...(main && signIns > 0 ? { cpuUsPerRequest: Math.round((main.user + main.system) / signIns) } : {}),
    }
    notes.push(
      `Event-loop delay with nothing running: p99 ${ms(quiet.percentile(99))} ms, max ${ms(quiet.max)} ms; during the flood alone: ` +
        `p50 ${ms(h.percentile(50))} ms, p99 ${ms(h.percentile(99))} ms, max ${ms(h.max)} ms (the flood's own share of the p99: ${stallP99} ms).`,
    )
    if (main && signIns > 0) {
      notes.push(
        `Main-thread CPU per sign-in: ${floodScenario.cpuUsPerRequest} µs (process.threadCpuUsage; bcrypt itself runs on libuv's thread pool, so this is the time a sign-in holds the event loop, whatever the machine's load).`,
      )
    }

    // B's reads while A is flooded.
    const flooding = flood(floodUrl, a.file.keys.public, floodBody, flooders, seconds + 4)
    await new Promise((resolve) => setTimeout(resolve, 1000))
    const busy = await read(
      'rest-read-during-flood',
      `the same reads of tenant B while tenant A takes the flood (${flooders} connections of wrong passwords)`,
    )
    await flooding
    const floodingAgain = flood(floodUrl, a.file.keys.public, floodBody, flooders, seconds + 4)
    await new Promise((resolve) => setTimeout(resolve, 1000))
    const busyUs = await readLatencies(latencyJob)
    await floodingAgain

    const medianRatio = busyUs.p50Us > 0 ? Math.round(((2 * idleUs.p50Us) / busyUs.p50Us) * 1000) / 1000 : 0
    notes.push(
      `Tenant B's median read in microseconds (reader process, ${readers} connections): ${idleUs.p50Us} µs alone (p99 ${idleUs.p99Us} µs, ${idleUs.requests} reads), ${busyUs.p50Us} µs during the flood (p99 ${busyUs.p99Us} µs, ${busyUs.requests} reads); ${idleUs.non2xx + busyUs.non2xx} non-2xx, ${idleUs.errors + busyUs.errors} errors.`,
    )
    const stallRatio = Math.round((5 / Math.max(stallP99, 0.01)) * 1000) / 1000
    notes.push(
      `Tenant B's median read: ${idle.p50Ms} ms alone, ${busy.p50Ms} ms during the flood (${idle.p50Ms > 0 ? Math.round((busy.p50Ms / idle.p50Ms) * 100) / 100 : '-'}x).`,
    )
    if (signIns === 0)
      notes.push(
        `No sign-in of the flood finished within the ${seconds} s window (bcrypt at cost ${config.auth.bcrypt_cost}, ${config.auth.hash_concurrency || 'cores - 1'} at once, ${flooders} waiting): the machine was too loaded to hash faster.`,
      )
    notes.push(
      'Gateway, REST engine and auth engine share this process and its event loop, as under `npm start`; autocannon runs in child processes; Postgres and everything else share the machine.',
    )
    const report: BenchReport = {
      name: 'auth-flood',
      title: "One tenant's REST reads while another takes a wrong-password flood",
      startedAt,
      secondsPerScenario: seconds,
      connections: readers,
      scenarios: [idle, floodScenario, busy],
      ratios: [
        {
          name: '2 x idle median / median under flood',
          description: "tenant B's read median (microseconds) may at most double while tenant A is flooded",
          value: medianRatio,
          target: 1,
          ok: medianRatio >= 1,
        },
        {
          name: '5 ms / event-loop stall p99',
          description:
            "the flood's share of the event loop's delay (p99 of monitorEventLoopDelay, flood minus quiet), against 5 ms per sign-in",
          value: stallRatio,
          target: 1,
          ok: stallRatio >= 1,
        },
      ],
      notes,
      environment: environment(),
    }
    writeResult(report)
    return report
  } finally {
    await gateway.close()
    await auth.close()
    await rest.close()
    closeLog()
    for (const m of made)
      await dropTenant({ adminUrl, database: m.database, roles: Object.values(m.roles) }).catch(() => {})
  }
}

// `node scripts/with-services.mjs node --import tsx bench/auth-flood.ts` runs this bench alone.
if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const r = await run()
  process.stdout.write(formatReport(r))
}

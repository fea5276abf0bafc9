// Scale: many tenants on one cluster and one REST engine, many tenant records in Redis.
// - BENCH_TENANTS tenant databases (default 1,000; BENCH_QUICK=1: 100) provisioned through
//   the real provisioning path on a kept embedded cluster (bench/support/tenant-cluster.ts:
//   made once, reused by later runs), their records in Redis through the real tenant store.
// - A REST engine in its own process (--expose-gc) reading tenants from Redis:
//   cold first request of every tenant one at a time (tenant record, pool connection,
//   schema cache, plan; with the Postgres sessions and transactions it took, from
//   pg_stat_database), the engine's heap per warm tenant (after gc, N warm vs 1), warm
//   requests (round robin over all tenants, and over a few within the pool budget); the same
//   concurrent traffic (BENCH_TENANT_CLIENTS clients, BENCH_SPREAD_SECONDS) on 20 tenants and
//   spread over all (requests/s side by side, Postgres sessions opened per request), Postgres
//   memory (PSS) with every tenant warm; then every tenant at once for BENCH_ALL_SECONDS
//   under the pool budget (errors, per-tenant served, when each tenant had its first answer).
// - BENCH_TENANT_RECORDS records (default 10,000; quick: 2,000) in Redis: a tenant cache
//   over the Redis store in a child process: heap per cached record, warm look-up time;
//   then changes written through the store while 4 processes hold the record: time from
//   the write until every process resolves the new record.
// Knobs: BENCH_TENANTS, BENCH_TENANT_RECORDS, BENCH_QUICK, BENCH_ALL_SECONDS (all-at-once
// duration, default 30), BENCH_TENANT_CLIENTS (default 8), BENCH_SPREAD_SECONDS (default 15),
// BENCH_TENANTS_DIR (the kept cluster).
import http from 'node:http'
import { fork, type ChildProcess } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { readdirSync, readFileSync } from 'node:fs'
import path from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { Redis } from 'ioredis'
import pg from 'pg'
import { createRedisStore, toTenant, type Tenant } from '../src/tenants/index.js'
import { signHS256 } from '../src/shared/index.js'
import { openBenchCluster, type BenchCluster } from './support/tenant-cluster.js'
import type { ChildMessage, ChildReply, HeapNumbers, PoolNumbers, RecordNumbers } from './support/tenant-child.js'
import {
  atLeast,
  BENCH_DIR,
  environment,
  formatReport,
  writeResult,
  type BenchGoal,
  type BenchRatio,
  type BenchReport,
  type BenchScenario,
} from './lib.js'

const CHILD = path.join(path.dirname(fileURLToPath(import.meta.url)), 'support', 'tenant-child.ts')
/**
 * The engine's pool_idle_ms for the run: a tenant unused this long gives up its pool and
 * schema cache, and the phases must not make warm tenants cold.
 */
const IDLE_MS = 15 * 60_000
/** A read with an embedded to-one relation, 10 rows. */
const QUERY = '/items?select=id,name,price,categories(name)&order=id&limit=10'

function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return 0
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))] as number
}

function summary(values: readonly number[]): { p50: number; p99: number; max: number; mean: number } {
  const s = [...values].sort((a, b) => a - b)
  return {
    p50: percentile(s, 50),
    p99: percentile(s, 99),
    max: s[s.length - 1] ?? 0,
    mean: s.length ? s.reduce((a, b) => a + b, 0) / s.length : 0,
  }
}

const r1 = (x: number): number => Math.round(x * 10) / 10
const r3 = (x: number): number => Math.round(x * 1000) / 1000

interface Child {
  proc: ChildProcess
  next<T extends ChildReply['type']>(type: T, timeoutMs?: number): Promise<Extract<ChildReply, { type: T }>>
  send(m: ChildMessage): void
  close(): Promise<void>
}

function forkChild(): Child {
  const proc = fork(CHILD, [], {
    execArgv: ['--expose-gc', '--import', 'tsx'],
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  })
  return {
    proc,
    next(type, timeoutMs = 600_000) {
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => {
          cleanup()
          reject(new Error(`bench child: no ${type} after ${timeoutMs} ms`))
        }, timeoutMs)
        const onMessage = (m: ChildReply): void => {
          if (m.type === 'error') {
            cleanup()
            reject(new Error(`bench child: ${m.message}`))
          } else if (m.type === type) {
            cleanup()
            resolve(m as never)
          }
        }
        const onExit = (code: number | null): void => {
          cleanup()
          reject(new Error(`bench child exited with ${String(code)}`))
        }
        const cleanup = (): void => {
          clearTimeout(timer)
          proc.off('message', onMessage)
          proc.off('exit', onExit)
        }
        proc.on('message', onMessage)
        proc.on('exit', onExit)
      })
    },
    send(m) {
      proc.send(m)
    },
    async close() {
      if (proc.exitCode !== null || proc.signalCode !== null) return
      const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()))
      proc.send({ type: 'close' } satisfies ChildMessage)
      const timer = setTimeout(() => proc.kill('SIGKILL'), 20_000)
      await exited
      clearTimeout(timer)
    },
  }
}

interface Answer {
  status: number
  body: string
  ms: number
}

function get(agent: http.Agent, port: number, urlPath: string, headers: Record<string, string>): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now()
    const req = http.request({ host: '127.0.0.1', port, path: urlPath, method: 'GET', headers, agent }, (res) => {
      const chunks: Buffer[] = []
      res.on('data', (c: Buffer) => chunks.push(c))
      res.on('end', () =>
        resolve({
          status: res.statusCode ?? 0,
          body: Buffer.concat(chunks).toString('utf8'),
          ms: performance.now() - t0,
        }),
      )
      res.on('error', reject)
    })
    req.on('error', reject)
    req.end()
  })
}

function rowsOf(a: Answer): number {
  try {
    const v = JSON.parse(a.body) as unknown
    return Array.isArray(v) ? v.length : -1
  } catch {
    return -1
  }
}

function scenario(
  name: string,
  description: string,
  ms: number[],
  wallMs: number,
  errors: number,
  non2xx: number,
): BenchScenario {
  const s = summary(ms)
  return {
    name,
    description,
    requestsPerSec: wallMs > 0 ? Math.round((ms.length / wallMs) * 1000) : 0,
    p50Ms: r1(s.p50),
    p99Ms: r1(s.p99),
    requests: ms.length,
    errors,
    timeouts: 0,
    non2xx,
  }
}

const kb = (bytes: number): string => `${r1(bytes / 1024)} KB`

/** CPU time (user + system) of the postmaster, its reaped children and its live children (backends), µs; null off Linux. */
function postgresCpu(postmaster: number | undefined): number | null {
  if (postmaster === undefined || process.platform !== 'linux') return null
  const fields = (pid: number | string): string[] => {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')
  }
  // Fields after the command: state ppid ... utime(11) stime(12) cutime(13) cstime(14), in clock ticks (USER_HZ 100).
  const own = fields(postmaster)
  let ticks = Number(own[11]) + Number(own[12]) + Number(own[13]) + Number(own[14])
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue
    try {
      const f = fields(name)
      if (Number(f[1]) === postmaster) ticks += Number(f[11]) + Number(f[12])
    } catch {
      /* gone meanwhile */
    }
  }
  return ticks * 10_000
}

interface PgWork {
  sessions: number
  transactions: number
}

/** Sessions and transactions of `databases` (pg_stat_database) so far. */
async function pgWork(adminUrl: string, databases: readonly string[]): Promise<PgWork> {
  const c = new pg.Client({ connectionString: adminUrl })
  await c.connect()
  try {
    const r = await c.query<{ sessions: string; transactions: string }>(
      'SELECT coalesce(sum(sessions), 0) AS sessions, coalesce(sum(xact_commit + xact_rollback), 0) AS transactions FROM pg_stat_database WHERE datname = ANY ($1)',
      [databases],
    )
    return { sessions: Number(r.rows[0]!.sessions), transactions: Number(r.rows[0]!.transactions) }
  } finally {
    await c.end()
  }
}

/**
 * Counts the Postgres sessions and transactions of `databases` between two calls, per
 * request. Backends report their numbers when idle, at most every 10 s: the second call
 * waits until two reads a second apart agree (at most 15 s). Null when they cannot be read.
 */
async function pgStatMeter(
  adminUrl: string,
  databases: readonly string[],
): Promise<(requests: number) => Promise<PgWork | null>> {
  const before = await pgWork(adminUrl, databases).catch(() => null)
  return async (requests) => {
    if (before === null) return null
    let last = await pgWork(adminUrl, databases)
    for (let i = 0; i < 15; i++) {
      await new Promise((resolve) => setTimeout(resolve, 1000))
      const now = await pgWork(adminUrl, databases)
      const settled = now.sessions === last.sessions && now.transactions === last.transactions
      last = now
      if (settled && i >= 1) break
    }
    const n = Math.max(1, requests)
    return {
      sessions: (last.sessions - before.sessions) / n,
      transactions: (last.transactions - before.transactions) / n,
    }
  }
}

interface PgMemory {
  processes: number
  /** Proportional set size of all: private pages plus each one's share of the shared pages. */
  pssBytes: number
  /** Private pages (Private_Clean + Private_Dirty) of all. */
  privateBytes: number
}

/** The postmaster's child processes (backends and helpers) and their memory (Linux /proc; null elsewhere). */
function postgresMemory(postmaster: number | undefined): PgMemory | null {
  if (postmaster === undefined || process.platform !== 'linux') return null
  const out: PgMemory = { processes: 0, pssBytes: 0, privateBytes: 0 }
  const kB = (text: string, field: string): number =>
    Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(text)?.[1] ?? 0) * 1024
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8')
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1])
      if (ppid !== postmaster) continue
      const rollup = readFileSync(`/proc/${name}/smaps_rollup`, 'utf8')
      out.processes++
      out.pssBytes += kB(rollup, 'Pss')
      out.privateBytes += kB(rollup, 'Private_Clean') + kB(rollup, 'Private_Dirty')
    } catch {
      /* gone meanwhile */
    }
  }
  return out
}

export async function run(): Promise<BenchReport> {
  const redisUrl = process.env.REDIS_URL
  if (!redisUrl) throw new Error('REDIS_URL is not set: run through `npm run bench` (scripts/with-services.mjs)')
  const quick = process.env.BENCH_QUICK === '1'
  const count = Math.max(2, Number(process.env.BENCH_TENANTS ?? (quick ? 100 : 1000)))
  const recordCount = Math.max(100, Number(process.env.BENCH_TENANT_RECORDS ?? (quick ? 2000 : 10_000)))
  // Every tenant at once runs long enough for requests that time out (10 s acquire timeout)
  // to come back and be served: shorter, an overloaded pool could not show its fairness.
  const allSeconds = Math.max(1, Number(process.env.BENCH_ALL_SECONDS ?? 30))
  const dir = process.env.BENCH_TENANTS_DIR ?? path.join(BENCH_DIR, '..', '.gatehouse', 'bench-tenants')
  const startedAt = new Date().toISOString()
  const t0 = performance.now()
  const log = (line: string): void => {
    process.stdout.write(`  ${line}\n`)
  }
  const notes: string[] = []
  const goals: BenchGoal[] = []
  const scenarios: BenchScenario[] = []

  // The engine's budget (rest.pool_budget 0) is half of what the cluster takes: room for a
  // warm connection per tenant, and for the bench's own.
  const maxConnections = 2 * count + 200
  const cluster: BenchCluster = await openBenchCluster({ dir, count, maxConnections, log })
  const ratios: BenchRatio[] = []
  const prefix = `gatehouse-bench:${randomBytes(4).toString('hex')}:`
  const store = createRedisStore({ url: redisUrl, prefix })
  const children: Child[] = []
  const agent = new http.Agent({ keepAlive: true, maxSockets: Infinity })
  try {
    if (cluster.provisionedNow > 0) {
      notes.push(
        `This run provisioned ${cluster.provisionedNow} tenant databases in ${r1(cluster.provisionWallMs / 1000)} s (2 at a time); the others were kept from an earlier run in ${cluster.dir}.`,
      )
    } else {
      notes.push(
        `All ${count} tenant databases were kept from an earlier run (${cluster.dir}); provisioning is not part of this run's time.`,
      )
    }
    const prov = summary(cluster.tenants.map((t) => t.provisionMs))
    notes.push(
      `Provisioning one tenant (provisionTenant: database, 6 roles, grants, platform + auth migrations; then 3 tables, a view, a policy, 55 rows, grants), as measured when each was made: p50 ${Math.round(prov.p50)} ms, p99 ${Math.round(prov.p99)} ms.`,
    )

    // ---- the tenants' records in Redis, the engine reading them --------------------------
    const tenants: Tenant[] = cluster.tenants.map((t) => toTenant(t.file))
    for (let i = 0; i < tenants.length; i += 500) await store.putAll(tenants.slice(i, i + 500))
    const tokens = await Promise.all(
      tenants.map((t) => signHS256({ role: t.roles.anon }, { secret: t.jwt.upstream_secret, expiresInSeconds: 3600 })),
    )
    const engine = forkChild()
    children.push(engine)
    const listening = engine.next('listening')
    engine.send({
      type: 'start',
      role: 'engine',
      redisUrl,
      prefix,
      overrides: {
        log: { level: 'info' },
        rest: { port: 0, pool_idle_ms: IDLE_MS, pool_max_tenants: Math.max(1000, count) },
      },
    })
    const { port } = await listening
    const heapOf = async (): Promise<HeapNumbers> => {
      const p = engine.next('heap')
      engine.send({ type: 'heap' })
      return (await p).heap
    }
    const engineCpu = async (): Promise<number> => {
      const p = engine.next('cpu')
      engine.send({ type: 'cpu' })
      return (await p).us
    }
    /** CPU of the engine and of Postgres between two calls, per request, µs. */
    const cpuMeter = async (): Promise<(requests: number) => Promise<{ engine: number; postgres: number | null }>> => {
      const e0 = await engineCpu()
      const p0 = postgresCpu(cluster.pid)
      return async (requests) => {
        const e1 = await engineCpu()
        const p1 = postgresCpu(cluster.pid)
        const n = Math.max(1, requests)
        return {
          engine: Math.round((e1 - e0) / n),
          postgres: p0 === null || p1 === null ? null : Math.round((p1 - p0) / n),
        }
      }
    }
    const withCpu = (s: BenchScenario, c: { engine: number; postgres: number | null }): BenchScenario => ({
      ...s,
      cpuUsPerRequest: c.engine + (c.postgres ?? 0),
    })
    const cpuText = (c: { engine: number; postgres: number | null }): string =>
      `engine ${r1(c.engine / 1000)} ms${c.postgres === null ? '' : ` + Postgres ${r1(c.postgres / 1000)} ms`} CPU per request`
    const poolsOf = async (): Promise<PoolNumbers> => {
      const p = engine.next('pools')
      engine.send({ type: 'pools' })
      return (await p).pools
    }
    const request = (i: number): Promise<Answer> =>
      get(agent, port, `/${tenants[i]!.database}${QUERY}`, { authorization: `Bearer ${tokens[i]!}` })
    const checked = (a: Answer, bad: { errors: number; non2xx: number; firstError: string | null }): void => {
      if (a.status !== 200 || rowsOf(a) !== 10) {
        if (a.status === 200) bad.errors++
        else bad.non2xx++
        bad.firstError ??= `${a.status} ${a.body.slice(0, 300)}`
      }
    }

    // Tenant 0 warms the engine's code paths; the heap baseline is one warm tenant.
    for (let k = 0; k < 3; k++) await request(0)
    const heap0 = await heapOf()

    // ---- cold: the first request of every other tenant, one at a time --------------------
    const cold: number[] = []
    const coldBad = { errors: 0, non2xx: 0, firstError: null as string | null }
    const coldStats = await pgStatMeter(
      cluster.adminUrl,
      tenants.slice(1).map((t) => t.database),
    )
    const coldCpu = await cpuMeter()
    const coldStart = performance.now()
    for (let i = 1; i < count; i++) {
      const a = await request(i)
      checked(a, coldBad)
      cold.push(a.ms)
    }
    const coldWall = performance.now() - coldStart
    const coldC = await coldCpu(count - 1)
    const coldS = withCpu(
      scenario(
        'cold first request',
        `first request of each of ${count - 1} tenants, one at a time: tenant record from Redis, pool connection, schema cache (catalog queries), token, plan, transaction`,
        cold,
        coldWall,
        coldBad.errors,
        coldBad.non2xx,
      ),
      coldC,
    )
    scenarios.push(coldS)
    const coldWork = await coldStats(count - 1)
    notes.push(
      `Cold first request: ${cpuText(coldC)}${coldWork === null ? '' : ` and ${r1(coldWork.sessions)} Postgres sessions, ${r1(coldWork.transactions)} transactions per tenant (pg_stat_database)`}: one pool connection (its log-in; the first connection to a database after Postgres started also rebuilds its relation cache file), the catalog queries in one round trip, the request's transaction in one more (it reads the schema version and, on a connection's first, says LISTEN pgrst); that connection is closed after the request (a backend that read the catalogs holds twice the memory) and the tenant's second request opens the one it keeps. p50 ${coldS.p50Ms} ms, p99 ${coldS.p99Ms} ms, max ${r1(summary(cold).max)} ms.`,
    )
    if (coldBad.firstError !== null) notes.push(`cold: first failure: ${coldBad.firstError}`)
    const poolsAfterCold = await poolsOf()
    const pgMem = postgresMemory(cluster.pid)
    const heapN = await heapOf()
    const perTenant = (heapN.heapUsed - heap0.heapUsed) / (count - 1)
    const perTenantExternal = (heapN.external - heap0.external) / (count - 1)
    const perTenantRss = (heapN.rss - heap0.rss) / (count - 1)
    goals.push({
      name: 'cold first request p99',
      goal: '< 150 ms',
      value: `${coldS.p99Ms} ms`,
      met: coldS.p99Ms < 150 && coldBad.errors + coldBad.non2xx === 0,
    })
    goals.push({
      name: 'REST engine heap per warm tenant',
      goal: '< 200 KB',
      value: kb(perTenant),
      met: perTenant < 200 * 1024,
    })
    notes.push(
      `Engine heap after gc: ${r1(heap0.heapUsed / 1048576)} MB with 1 warm tenant, ${r1(heapN.heapUsed / 1048576)} MB with ${count} (${kb(perTenant)} per tenant); off-heap (external) ${kb(perTenantExternal)} per tenant; RSS ${kb(perTenantRss)} per tenant. A warm tenant holds its cached record, schema cache, plan and token cache entries; ${poolsAfterCold.open} pool connections were open (budget ${poolsAfterCold.budget}) over ${poolsAfterCold.pools} tenant pools.`,
    )
    if (pgMem !== null)
      notes.push(
        `Postgres after the cold phase: ${pgMem.processes} server processes (the pool's connections and Postgres' own), ${r1(pgMem.pssBytes / 1048576)} MB proportional set size in all.`,
      )

    // ---- warm: every tenant again, round robin -------------------------------------------
    const warmAll: number[] = []
    const warmBad = { errors: 0, non2xx: 0, firstError: null as string | null }
    const warmCpu = await cpuMeter()
    let wallStart = performance.now()
    for (let i = 0; i < count; i++) {
      const a = await request(i)
      checked(a, warmBad)
      warmAll.push(a.ms)
    }
    const warmC = await warmCpu(count)
    scenarios.push(
      withCpu(
        scenario(
          'warm, round robin',
          `second request of each of ${count} tenants, one at a time (record, schema cache, plan, token and connection kept: budget ${poolsAfterCold.budget})`,
          warmAll,
          performance.now() - wallStart,
          warmBad.errors,
          warmBad.non2xx,
        ),
        warmC,
      ),
    )
    notes.push(`Warm, round robin: ${cpuText(warmC)}.`)

    // ---- warm within the budget: a few tenants, connections kept -------------------------
    const few = Math.min(count, 20)
    const warmFew: number[] = []
    for (let i = 0; i < few; i++) await request(i)
    wallStart = performance.now()
    for (let pass = 0; pass < 10; pass++) {
      for (let i = 0; i < few; i++) {
        const a = await request(i)
        checked(a, warmBad)
        warmFew.push(a.ms)
      }
    }
    const warmFewS = scenario(
      'warm, within budget',
      `${few} tenants round robin, 10 passes, one request at a time: their connections stay open`,
      warmFew,
      performance.now() - wallStart,
      0,
      0,
    )
    scenarios.push(warmFewS)
    if (warmBad.firstError !== null) notes.push(`warm: first failure: ${warmBad.firstError}`)
    goals.push({
      name: 'warm request p99 (within the pool budget)',
      goal: 'measured',
      value: `${warmFewS.p99Ms} ms`,
      met: warmBad.errors + warmBad.non2xx === 0,
    })

    await spreadPhase(
      { count, few, request, checked, cpuMeter, cpuText, withCpu, poolsOf, cluster, tenants },
      {
        scenarios,
        ratios,
        goals,
        notes,
      },
    )

    // ---- every tenant at once, under the pool budget ---------------------------------------
    const served = new Array<number>(count).fill(0)
    const failed = new Array<number>(count).fill(0)
    /** Each tenant's first answer of the phase, ms after its start. */
    const firstAnswer = new Array<number>(count).fill(Number.NaN)
    const allMs: number[] = []
    const allBad = { errors: 0, non2xx: 0, firstError: null as string | null }
    let maxOpen = 0
    let maxWaiting = 0
    const poller = setInterval(() => {
      poolsOf().then(
        (p) => {
          maxOpen = Math.max(maxOpen, p.open)
          maxWaiting = Math.max(maxWaiting, p.waiting)
        },
        () => {},
      )
    }, 250)
    const allCpu = await cpuMeter()
    const deadline = performance.now() + allSeconds * 1000
    wallStart = performance.now()
    await Promise.all(
      tenants.map(async (_t, i) => {
        while (performance.now() < deadline) {
          let a: Answer
          try {
            a = await request(i)
          } catch (err) {
            allBad.errors++
            failed[i]!++
            allBad.firstError ??= (err as Error).message
            continue
          }
          allMs.push(a.ms)
          if (Number.isNaN(firstAnswer[i])) firstAnswer[i] = performance.now() - wallStart
          if (a.status === 200 && rowsOf(a) === 10) served[i]!++
          else {
            failed[i]!++
            checked(a, allBad)
          }
        }
      }),
    )
    const allWall = performance.now() - wallStart
    clearInterval(poller)
    const poolsAfterAll = await poolsOf()
    const perTenantServed = [...served].sort((a, b) => a - b)
    const starved = served.filter((n) => n === 0).length
    const allC = await allCpu(served.reduce((a, b) => a + b, 0))
    const allS = withCpu(
      scenario(
        'all tenants at once',
        `${count} tenants, one client each, requests back to back for ${allSeconds} s (pool budget ${poolsAfterAll.budget} connections)`,
        allMs,
        allWall,
        allBad.errors,
        allBad.non2xx,
      ),
      allC,
    )
    scenarios.push(allS)
    const perReqCpu = allC.engine + (allC.postgres ?? 0)
    if (perReqCpu > 0) {
      const idleRate = 2e6 / perReqCpu
      notes.push(
        `All at once: ${cpuText(allC)}. On 2 otherwise idle cores that is about ${Math.round(idleRate)} requests/s (the load generator excluded): one request of every tenant in about ${r1(count / idleRate)} s, against the pool's 10 s acquire timeout.`,
      )
    }
    const firsts = summary(firstAnswer.filter((ms) => !Number.isNaN(ms)))
    const minS = perTenantServed[0] ?? 0
    const medS = percentile(perTenantServed, 50)
    const maxS = perTenantServed[perTenantServed.length - 1] ?? 0
    goals.push({
      name: `${count} tenants at once: failed requests`,
      goal: '0',
      value: String(allBad.errors + allBad.non2xx),
      met: allBad.errors + allBad.non2xx === 0,
    })
    goals.push({
      name: `${count} tenants at once: starved tenants (none served)`,
      goal: '0',
      value: `${starved} (served per tenant min ${minS} / median ${medS} / max ${maxS})`,
      met: starved === 0,
    })
    goals.push({
      name: `${count} tenants at once: open connections`,
      goal: `<= budget ${poolsAfterAll.budget}`,
      value: String(maxOpen),
      met: maxOpen <= poolsAfterAll.budget,
    })
    notes.push(
      `All at once: ${allMs.length} requests in ${r1(allWall / 1000)} s (${served.reduce((a, b) => a + b, 0)} served, ${allBad.errors + allBad.non2xx} failed), served per tenant min ${minS}, median ${medS}, max ${maxS}; latency p50 ${allS.p50Ms} ms, p99 ${allS.p99Ms} ms, max ${r1(summary(allMs).max)} ms; every tenant's first answer: p50 ${r1(firsts.p50)} ms, the last ${r1(firsts.max)} ms after the start; most connections open ${maxOpen}, most requests waiting ${maxWaiting}.`,
    )
    if (allBad.firstError !== null) notes.push(`all at once: first failure: ${allBad.firstError}`)
    const logs = Object.entries(poolsAfterAll.logs).filter(([, n]) => n > 0)
    notes.push(
      `Engine log lines during the run: ${logs.length === 0 ? 'none' : logs.map(([m, n]) => `"${m}" x${n}`).join(', ')}.`,
    )
    await engine.close()

    // ---- records in Redis: memory per cached record, warm look-ups -------------------------
    const base = tenants
    const synth: Tenant[] = []
    for (let i = 0; i < recordCount; i++) {
      const b = base[i % base.length] as Tenant
      const file = cluster.tenants[i % base.length]!.file
      synth.push(
        toTenant({
          ...file,
          database: `br_${String(i).padStart(5, '0')}`,
          jwt: {
            ...file.jwt,
            secret: randomBytes(32).toString('base64url'),
            upstream_secret: randomBytes(32).toString('base64url'),
          },
          keys: {
            public: `pk_${randomBytes(24).toString('base64url')}`,
            secret: `sk_${randomBytes(24).toString('base64url')}`,
          },
          roles: b.roles,
        }),
      )
    }
    const writeStart = performance.now()
    for (let i = 0; i < synth.length; i += 1000) await store.putAll(synth.slice(i, i + 1000))
    const writeMs = performance.now() - writeStart
    const recordsChild = forkChild()
    children.push(recordsChild)
    const recordsDone = recordsChild.next('records')
    recordsChild.send({
      type: 'start',
      role: 'records',
      redisUrl,
      prefix,
      databases: synth.map((t) => t.database),
      passes: 3,
    })
    const rec: RecordNumbers = (await recordsDone).result
    await recordsChild.close()
    const perRecord = (rec.heapAfter.heapUsed - rec.heapBefore.heapUsed) / rec.records
    const look = summary(rec.lookupsUs)
    scenarios.push({
      name: 'tenant resolve, warm',
      description: `cache.get() of ${rec.records} cached records, one at a time, 3 passes (process.hrtime)`,
      requestsPerSec: look.mean > 0 ? Math.round(1e6 / look.mean) : 0,
      p50Ms: r3(look.p50 / 1000),
      p99Ms: r3(look.p99 / 1000),
      requests: rec.lookupsUs.length,
      errors: 0,
      timeouts: 0,
      non2xx: 0,
    })
    goals.push({
      name: `warm resolve p99 (${rec.records} records)`,
      goal: '< 0.2 ms',
      value: `${r3(look.p99 / 1000)} ms (${r1(look.p99)} µs)`,
      met: look.p99 < 200,
    })
    goals.push({ name: 'heap per cached tenant record', goal: '< 4 KB', value: kb(perRecord), met: perRecord < 4096 })
    const recordJson = JSON.stringify(synth[0])
    notes.push(
      `Records: ${synth.length} written through the Redis store (putAll, 1000 per call) in ${r1(writeMs / 1000)} s; one record is ${recordJson.length} bytes of JSON. Tenant cache heap after gc: ${r1(rec.heapBefore.heapUsed / 1048576)} MB empty, ${r1(rec.heapAfter.heapUsed / 1048576)} MB with ${rec.records} records (${kb(perRecord)} each). Warm resolve p50 ${r1(look.p50)} µs, p99 ${r1(look.p99)} µs, max ${r1(look.max)} µs.`,
    )

    // ---- invalidation: a write seen by every process -------------------------------------
    const listenerCount = 4
    const watched = synth.slice(0, 20)
    const listeners: Child[] = []
    for (let k = 0; k < listenerCount; k++) {
      const c = forkChild()
      children.push(c)
      listeners.push(c)
      const ready = c.next('ready')
      c.send({ type: 'start', role: 'listener', redisUrl, prefix, databases: watched.map((t) => t.database) })
      await ready
    }
    const updates = quick ? 100 : 300
    const inval: number[] = []
    let missed = 0
    for (let i = 0; i < updates; i++) {
      const t = watched[i % watched.length] as Tenant
      const limit = 2000 + i
      const changed: Tenant = { ...t, rest: { ...t.rest, default_limit: limit } }
      const seen = listeners.map(
        (c) =>
          new Promise<number>((resolve, reject) => {
            const timer = setTimeout(() => {
              c.proc.off('message', on)
              reject(new Error('not seen within 5 s'))
            }, 5000)
            const on = (m: ChildReply): void => {
              if (m.type === 'seen' && m.database === t.database && m.limit === limit) {
                clearTimeout(timer)
                c.proc.off('message', on)
                resolve(m.at)
              }
            }
            c.proc.on('message', on)
          }),
      )
      const at0 = performance.timeOrigin + performance.now()
      await store.putAll([changed])
      try {
        const ats = await Promise.all(seen)
        inval.push(Math.max(...ats) - at0)
      } catch {
        missed++
      }
      await new Promise((resolve) => setTimeout(resolve, 5))
    }
    await Promise.all(listeners.map((c) => c.close()))
    const inv = summary(inval)
    scenarios.push({
      name: 'invalidation, all processes',
      description: `${updates} record changes written through the store; time until each of ${listenerCount} processes resolved the new record`,
      requestsPerSec: 0,
      p50Ms: r3(inv.p50),
      p99Ms: r3(inv.p99),
      requests: inval.length,
      errors: missed,
      timeouts: 0,
      non2xx: 0,
    })
    goals.push({
      name: `invalidation to all ${listenerCount} processes p99`,
      goal: 'measured; none missed',
      value: `${r3(inv.p99)} ms (p50 ${r3(inv.p50)} ms, ${missed} missed)`,
      met: missed === 0,
    })
    notes.push(
      `Invalidation: putAll writes the hash (MULTI) and publishes on the change channel; each process's cache drops its copy on the message and the next get() reads Redis. Times are wall-clock (performance.timeOrigin + now()) across processes on one machine.`,
    )
    notes.push(
      `Engine: the process config's defaults (pool_budget 0: half of the cluster's connections, pool_per_tenant) but pool_idle_ms ${IDLE_MS / 60_000} min (so no tenant goes idle between the phases) and pool_max_tenants ${Math.max(1000, count)}, tenants from Redis through the tenant cache, in a child process with --expose-gc; requests over HTTP with the tenant's upstream token (anon role), GET ${QUERY}. Postgres (max_connections ${maxConnections}), Redis, the engine and this process share the machine.`,
    )
    notes.push(
      `Run time without provisioning: ${r1((performance.now() - t0 - cluster.provisionWallMs) / 1000)} s (${count} tenants, ${recordCount} records).`,
    )
  } finally {
    agent.destroy()
    for (const c of children) await c.close().catch(() => {})
    await cleanupRedis(redisUrl, prefix).catch(() => {})
    await store.close()
    await cluster.stop()
  }
  const report: BenchReport = {
    name: 'tenants',
    title: `Scale: ${count} tenant databases on one cluster, ${recordCount} tenant records in Redis`,
    startedAt,
    secondsPerScenario: allSeconds,
    connections: count,
    scenarios,
    ratios,
    goals,
    notes,
    environment: environment(),
  }
  writeResult(report)
  return report
}

interface SpreadDeps {
  count: number
  /** Tenants inside the budget's comparison: 0..few-1. */
  few: number
  request(i: number): Promise<Answer>
  checked(a: Answer, bad: { errors: number; non2xx: number; firstError: string | null }): void
  cpuMeter(): Promise<(requests: number) => Promise<{ engine: number; postgres: number | null }>>
  cpuText(c: { engine: number; postgres: number | null }): string
  withCpu(s: BenchScenario, c: { engine: number; postgres: number | null }): BenchScenario
  poolsOf(): Promise<PoolNumbers>
  cluster: BenchCluster
  tenants: readonly Tenant[]
}

interface Out {
  scenarios: BenchScenario[]
  ratios: BenchRatio[]
  goals: BenchGoal[]
  notes: string[]
}

/** `clients` clients back to back for `seconds`, the n-th request going to tenant pick(n). */
async function closedLoop(
  d: SpreadDeps,
  clients: number,
  seconds: number,
  pick: (n: number) => number,
): Promise<{ ms: number[]; wallMs: number; bad: { errors: number; non2xx: number; firstError: string | null } }> {
  const ms: number[] = []
  const bad = { errors: 0, non2xx: 0, firstError: null as string | null }
  let n = 0
  const start = performance.now()
  const deadline = start + seconds * 1000
  await Promise.all(
    Array.from({ length: clients }, async () => {
      while (performance.now() < deadline) {
        try {
          const a = await d.request(pick(n++))
          d.checked(a, bad)
          ms.push(a.ms)
        } catch (err) {
          bad.errors++
          bad.firstError ??= (err as Error).message
        }
      }
    }),
  )
  return { ms, wallMs: performance.now() - start, bad }
}

/**
 * The same concurrent traffic on `few` tenants (inside any budget) and spread over all:
 * requests/s side by side, Postgres sessions opened per spread request, and Postgres memory
 * with every tenant warm.
 */
async function spreadPhase(d: SpreadDeps, out: Out): Promise<void> {
  const clients = Math.max(1, Number(process.env.BENCH_TENANT_CLIENTS ?? 8))
  const seconds = Math.max(1, Number(process.env.BENCH_SPREAD_SECONDS ?? 15))
  const inside = await closedLoop(d, clients, seconds, (n) => n % d.few)
  const insideS = scenario(
    'inside the budget, concurrent',
    `${clients} clients back to back for ${seconds} s, round robin over ${d.few} tenants`,
    inside.ms,
    inside.wallMs,
    inside.bad.errors,
    inside.bad.non2xx,
  )
  out.scenarios.push(insideS)
  const databases = d.tenants.map((t) => t.database)
  const sessions = await pgStatMeter(d.cluster.adminUrl, databases)
  const cpu = await d.cpuMeter()
  const spread = await closedLoop(d, clients, seconds, (n) => n % d.count)
  const spreadC = await cpu(spread.ms.length)
  const work = await sessions(spread.ms.length)
  const spreadS = d.withCpu(
    scenario(
      `spread over ${d.count} tenants, concurrent`,
      `the same ${clients} clients for ${seconds} s, round robin over all ${d.count} tenants`,
      spread.ms,
      spread.wallMs,
      spread.bad.errors,
      spread.bad.non2xx,
    ),
    spreadC,
  )
  out.scenarios.push(spreadS)
  const ratio = insideS.requestsPerSec > 0 ? spreadS.requestsPerSec / insideS.requestsPerSec : 0
  out.ratios.push(
    atLeast(
      'spread / inside the budget',
      `requests/s of the same concurrent traffic spread over ${d.count} tenants, against on ${d.few}`,
      ratio,
      0.5,
    ),
  )
  const failed = spread.bad.errors + spread.bad.non2xx + inside.bad.errors + inside.bad.non2xx
  out.goals.push({
    name: 'spread and inside the budget: failed requests',
    goal: '0',
    value: String(failed),
    met: failed === 0,
  })
  if (work !== null)
    out.goals.push({
      name: 'connections opened per request, steady spread traffic',
      goal: '<= 0.05',
      value: String(r3(work.sessions)),
      met: work.sessions <= 0.05,
    })
  const pools = await d.poolsOf()
  const mem = postgresMemory(d.cluster.pid)
  out.notes.push(
    `Spread vs inside the budget (${clients} clients): ${spreadS.requestsPerSec} vs ${insideS.requestsPerSec} requests/s (p99 ${spreadS.p99Ms} vs ${insideS.p99Ms} ms); spread: ${d.cpuText(spreadC)}${work === null ? '' : `, ${r3(work.sessions)} Postgres sessions opened per request (pg_stat_database)`}; ${pools.open} engine connections open over ${pools.pools} tenant pools (budget ${pools.budget}).`,
  )
  if (spread.bad.firstError !== null) out.notes.push(`spread: first failure: ${spread.bad.firstError}`)
  if (mem === null) return
  // Shared pages (shared_buffers, other shared memory) are counted once in all; each warm
  // tenant adds its backend's private pages. 1,000 tenants: the shared part as measured plus
  // 1,000 backends' private pages.
  const shared = mem.pssBytes - mem.privateBytes
  const privatePerTenant = mem.privateBytes / d.count
  const at1000 = d.count >= 1000 ? mem.pssBytes : shared + privatePerTenant * 1000
  const gb = (b: number): string => `${r1((b / 1024 ** 3) * 10) / 10} GB`
  out.goals.push({
    name: `Postgres PSS with ${d.count} warm tenants`,
    goal: '<= 4 GB for 1,000',
    value: `${r1(mem.pssBytes / 1048576)} MB (${r1(privatePerTenant / 1048576)} MB private per tenant; ${d.count >= 1000 ? '' : 'projected '}${gb(at1000)} for 1,000)`,
    met: at1000 <= 4 * 1024 ** 3,
  })
  out.notes.push(
    `Postgres with every tenant warm: ${mem.processes} server processes, ${r1(mem.pssBytes / 1048576)} MB proportional set size in all: ${r1(mem.privateBytes / 1048576)} MB private pages (${r1(privatePerTenant / 1048576)} MB per tenant) and ${r1(shared / 1048576)} MB of shared pages (shared_buffers and the rest of Postgres' shared memory, counted once).`,
  )
}

/** Removes this run's keys (the records and the marker) from Redis. */
async function cleanupRedis(url: string, prefix: string): Promise<void> {
  const r = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 1 })
  await r.connect()
  try {
    let cursor = '0'
    do {
      const [next, keys] = await r.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000)
      cursor = next
      if (keys.length > 0) await r.unlink(...keys)
    } while (cursor !== '0')
  } finally {
    r.disconnect()
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const r = await run()
  process.stdout.write(formatReport(r))
  process.exit(0)
}

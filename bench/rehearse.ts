// `npm run rehearse`: the daily events of a platform under a steady mixed load, on loopback
// only (docs/operating.md, "Rehearsal"). Starts two Postgres clusters (tenants on each), Redis
// with two replicas and three Sentinels (the tenant store, written with WAIT 1), every part as
// `gatehouse serve <part> --workers 2`, and the load of bench/support/rehearsal-load.ts; then in
// turn: a rolling reload of every part (SIGHUP), a Redis failover (SENTINEL FAILOVER), cluster b
// stopped and started, an engine worker killed. Reports per event the requests failed, the time
// until everything was served again, and at the end the panel changes and inserts lost; writes
// bench/results/rehearsal.json and docs/rehearsal.svg. Every wait is bounded in time and count.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { createWriteStream, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { createRequire } from 'node:module'
import { fileURLToPath, pathToFileURL } from 'node:url'
import pg from 'pg'
import { stringify as toYaml } from 'yaml'
import { startEmbeddedPostgres, type EmbeddedPostgres } from '../src/dev/index.js'
import { provisionTenant } from '../src/platform/index.js'
import { signHS256 } from '../src/shared/index.js'
import { Redis } from 'ioredis'
import { startSentinelGroup, type SentinelGroup } from '../test/helpers/sentinel.js'
import { Load, type RehearsalTenant } from './support/rehearsal-load.js'
import { renderTimeline, summarize, type EventSpan } from './support/rehearsal-report.js'
import { closedPort } from '../test/helpers/ports.js'

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')
const PARTS = ['gateway', 'rest', 'auth', 'panel'] as const
type Part = (typeof PARTS)[number]
const TSX = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href
const cleanups: Array<() => unknown> = []
const scratch = mkdtempSync(path.join(os.tmpdir(), 'gatehouse-rehearsal-'))
const sessionSecret = randomBytes(32).toString('hex')

/** Polls `check` every 100 ms until it is true; throws after `ms`. */
async function until(what: string, check: () => Promise<boolean> | boolean, ms = 60_000): Promise<void> {
  const end = Date.now() + ms
  for (let i = 0; Date.now() < end && i < ms / 50; i++) {
    if (
      await Promise.resolve()
        .then(check)
        .catch(() => false)
    )
      return
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  throw new Error(`rehearsal: timed out waiting until ${what}`)
}

const pause = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms))

function cluster(name: string, port = 0): Promise<EmbeddedPostgres> {
  return startEmbeddedPostgres({
    dir: path.join(scratch, `pg-${name}`),
    port,
    persistent: true,
    password: 'rehearsal',
    initdbFlags: ['--nosync'],
    settings: { fsync: 'off', max_connections: '200', reserved_connections: '20' },
  })
}

async function tenantOn(adminUrl: string, clusterName: string, ports: Record<Part, number>): Promise<RehearsalTenant> {
  const database = `rehearse_${clusterName}_${randomBytes(3).toString('hex')}`
  const { file, ownerUrl } = await provisionTenant({
    adminUrl,
    database,
    organization: 'org_rehearse',
    upstreams: {
      rest: `http://127.0.0.1:${ports.rest}/${database}`,
      auth: `http://127.0.0.1:${ports.auth}/${database}`,
    },
    auth: {
      rate_limits: Object.fromEntries(
        ['sign_in_sign_up', 'token_refresh'].map((k) => [k, { capacity: 100_000, rate: 100_000, interval_seconds: 1 }]),
      ) as never,
    },
  })
  const c = new pg.Client({ connectionString: ownerUrl })
  await c.connect()
  await c.query(
    "CREATE TABLE items (id int PRIMARY KEY); SELECT platform.grant('SELECT', 'items', 'anon'); SELECT platform.grant('INSERT', 'items', 'anon')",
  )
  await c.end()
  writeFileSync(path.join(scratch, 'tenants', `${database}.yaml`), toYaml(file))
  return {
    database,
    organization: 'org_rehearse',
    cluster: clusterName,
    publicKey: file.keys.public,
    ownerUrl,
    email: `user-${database.replace(/_/g, '-')}@example.com`,
    password: 'rehearsal-password-1',
  }
}

function cli(args: string[], env: Record<string, string>): ChildProcess {
  return spawn(process.execPath, ['--import', TSX, path.join(root, 'src/cli.ts'), ...args], {
    cwd: scratch,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
}

function workersOf(pid: number): number[] {
  try {
    // The primary's other children (tsx's esbuild service) are not workers.
    return execFileSync('ps', ['-o', 'pid=,args=', '--ppid', String(pid)], { encoding: 'utf8' })
      .split('\n')
      .filter((line) => line.includes('src/cli.ts'))
      .map((line) => Number(line.trim().split(/\s+/)[0]))
      .filter((n) => n > 0)
  } catch {
    return []
  }
}

async function ready(adminPort: number): Promise<boolean> {
  const r = await fetch(`http://127.0.0.1:${adminPort}/readyz`)
  return r.status === 200
}

async function startParts(config: string, admin: Record<Part, number>): Promise<Record<Part, ChildProcess>> {
  const procs = {} as Record<Part, ChildProcess>
  for (const part of PARTS) {
    const child = cli(['serve', part, '--workers', '2'], { GATEHOUSE_CONFIG: config })
    // REHEARSE_LOGS=<dir>: each part's log (warnings and errors) kept in <dir>/<part>.log.
    const logs = process.env.REHEARSE_LOGS
    const out = logs !== undefined ? createWriteStream(path.join(logs, `${part}.log`)) : null
    for (const stream of [child.stdout!, child.stderr!]) {
      if (out !== null) stream.pipe(out, { end: false })
      else stream.resume()
    }
    cleanups.push(() => {
      for (const w of workersOf(child.pid!)) process.kill(w, 'SIGKILL')
      child.kill('SIGKILL')
    })
    procs[part] = child
  }
  for (const part of PARTS) await until(`${part} is ready`, () => ready(admin[part]))
  return procs
}

function writeConfig(
  ports: Record<Part, number>,
  admin: Record<Part, number>,
  pgUrl: string,
  sentinels: unknown,
): string {
  const listen = (p: Part) => ({ host: '127.0.0.1', port: ports[p], admin_host: '127.0.0.1', admin_port: admin[p] })
  const config = {
    public_url: `http://127.0.0.1:${ports.gateway}`,
    log: { level: 'warn' },
    tenants: { source: 'redis', cache_ttl_seconds: 5 },
    // A write waits up to 10 s for a replica (the load's client timeout is 10 s too).
    redis: { sentinels, name: 'gatehouse', write_replicas: 1, write_replicas_timeout_ms: 10_000 },
    postgres: { url: pgUrl },
    gateway: listen('gateway'),
    rest: listen('rest'),
    auth: { ...listen('auth'), bcrypt_cost: 4 },
    panel: { ...listen('panel'), session_secret: sessionSecret },
  }
  const file = path.join(scratch, 'gatehouse.yaml')
  writeFileSync(file, toYaml(config))
  return file
}

/** A rolling reload of every part, one after another: SIGHUP, then until every worker is new. */
async function reloadAll(procs: Record<Part, ChildProcess>): Promise<void> {
  for (const part of PARTS) {
    const pid = procs[part].pid!
    const before = new Set(workersOf(pid))
    process.kill(pid, 'SIGHUP')
    await until(
      `${part} reloaded`,
      () => {
        const now = workersOf(pid)
        return now.length === 2 && now.every((w) => !before.has(w))
      },
      180_000,
    )
  }
}

async function signUp(gateway: string, x: RehearsalTenant): Promise<void> {
  const r = await fetch(`${gateway}/${x.database}/auth/v1/signup`, {
    method: 'POST',
    headers: { apikey: x.publicKey, 'content-type': 'application/json' },
    body: JSON.stringify({ email: x.email, password: x.password }),
  })
  if (r.status !== 200) throw new Error(`rehearsal: signup on ${x.database}: ${r.status} ${await r.text()}`)
}

async function lostWrites(load: Load, tenants: RehearsalTenant[]): Promise<number> {
  let lost = 0
  for (const x of tenants) {
    const c = new pg.Client({ connectionString: x.ownerUrl })
    await c.connect()
    const have = new Set((await c.query<{ id: number }>('SELECT id FROM items')).rows.map((r) => r.id))
    await c.end()
    lost += (load.result.written.get(x.database) ?? []).filter((id) => !have.has(id)).length
  }
  return lost
}

/** Panel changes acknowledged but not in the store (read from the primary the sentinels name). */
async function lostPanelChanges(
  load: Load,
  tenants: RehearsalTenant[],
  sentinels: SentinelGroup['sentinels'],
): Promise<number> {
  const redis = new Redis({ sentinels, name: 'gatehouse', maxRetriesPerRequest: 3 })
  let lost = 0
  try {
    for (const x of tenants) {
      const record = await redis.hget(`gatehouse:tenant:${x.database}`, 'record')
      const site = (JSON.parse(record ?? '{}') as { auth?: { site_url?: string } }).auth?.site_url ?? ''
      const st = load.result.panel.get(x.database)!
      if (st.acked !== null && site !== st.acked && !st.after.includes(site)) lost++
    }
  } finally {
    redis.disconnect()
  }
  return lost
}

async function events(
  load: Load,
  procs: Record<Part, ChildProcess>,
  group: SentinelGroup,
  b: { server: EmbeddedPostgres },
): Promise<EventSpan[]> {
  const spans: EventSpan[] = []
  const run = async (name: EventSpan['name'], fn: () => Promise<void>): Promise<void> => {
    const start = load.now()
    await fn()
    spans.push({ name, start, end: load.now() })
    await pause(4_000)
  }
  await pause(5_000)
  await run('rolling reload', () => reloadAll(procs))
  await run('redis failover', async () => void (await group.failover()))
  await run('cluster b stopped', async () => {
    const port = b.server.port
    await b.server.stop()
    await pause(5_000)
    b.server = await cluster('b', port)
  })
  await run('engine worker killed', async () => {
    const worker = workersOf(procs.rest.pid!)[0]
    if (worker !== undefined) process.kill(worker, 'SIGKILL')
  })
  return spans
}

async function main(): Promise<void> {
  const t = { teardown: (fn: () => unknown) => void cleanups.push(fn) }
  mkdirSync(path.join(scratch, 'tenants'))
  const a = await cluster('a')
  const b = { server: await cluster('b') }
  cleanups.push(
    () => a.stop(),
    () => b.server.stop(),
  )
  // Two replicas: the one not promoted confirms writes to the new primary (docs/operating.md).
  const group = await startSentinelGroup(t, 'gatehouse', { replicas: 2 })
  const ports = Object.fromEntries(await Promise.all(PARTS.map(async (p) => [p, await closedPort()]))) as Record<
    Part,
    number
  >
  const admin = Object.fromEntries(await Promise.all(PARTS.map(async (p) => [p, await closedPort()]))) as Record<
    Part,
    number
  >
  const tenants = [
    await tenantOn(a.url, 'a', ports),
    await tenantOn(a.url, 'a', ports),
    await tenantOn(b.server.url, 'b', ports),
    await tenantOn(b.server.url, 'b', ports),
  ]
  const config = writeConfig(ports, admin, a.url, group.sentinels)
  const apply = cli(['tenants', 'apply', path.join(scratch, 'tenants')], { GATEHOUSE_CONFIG: config })
  apply.stdout!.resume()
  apply.stderr!.pipe(process.stderr)
  const code = await new Promise((resolve) => apply.on('exit', resolve))
  if (code !== 0) throw new Error(`rehearsal: tenants apply exited ${String(code)}`)
  const procs = await startParts(config, admin)
  const gateway = `http://127.0.0.1:${ports.gateway}`
  const panel = `http://127.0.0.1:${ports.panel}`
  for (const x of tenants) await signUp(gateway, x)
  const session = await signHS256(
    { orgs: ['org_rehearse'], email: 'ops@example.com' },
    { secret: sessionSecret, expiresInSeconds: 3600, subject: 'rehearsal' },
  )
  const load = new Load(gateway, panel, session)
  load.start(tenants)
  const spans = await events(load, procs, group, b)
  await load.stop()
  const report = summarize(load.result.samples, spans, {
    writesLost: await lostWrites(load, tenants),
    panelLost: await lostPanelChanges(load, tenants, group.sentinels),
    writes: [...load.result.written.values()].reduce((n, ids) => n + ids.length, 0),
    loadavg: os.loadavg(),
  })
  mkdirSync(path.join(root, 'bench/results'), { recursive: true })
  writeFileSync(path.join(root, 'bench/results/rehearsal.json'), JSON.stringify(report, null, 2) + '\n')
  writeFileSync(path.join(root, 'docs/rehearsal.svg'), renderTimeline(load.result.samples, spans))
  process.stdout.write(report.markdown + '\n')
}

try {
  await main()
} finally {
  for (const fn of cleanups.reverse()) await Promise.resolve(fn()).catch(() => {})
  rmSync(scratch, { recursive: true, force: true })
}
process.exit(0)

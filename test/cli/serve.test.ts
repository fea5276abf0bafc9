// `gatehouse serve <part>` as production runs it: the real CLI in a child process, Node
// cluster workers sharing one port, the primary's admin listener (/healthz, /readyz of every
// worker, passing its ?exclude and ?verbose on; /metrics merged across workers; 404 on the
// public port), a JSON 404 for an unknown database, a clean exit on SIGTERM, and the engines'
// cluster-sized pool budget split among the workers (docs/operating.md "Sizing for many
// tenants"). Every port is the kernel's choice (port 0; cluster workers share the one the
// primary got), read from the processes' log lines, and the command runs outside the
// checkout, as a server would.
import t from 'tap'
import http from 'node:http'
import net from 'node:net'
import { spawn, spawnSync } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { shellEnv } from '../helpers/shell-env.js'
import { eventually } from '../helpers/eventually.js'
import { createTestTenant, withClient } from '../helpers/tenants.js'
import { signHS256 } from '../../src/shared/index.js'
import { stringify as toYaml } from 'yaml'

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..')
// The tsx loader by absolute URL: the working directory has no node_modules.
const TSX = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href
const cli = ['--import', TSX, path.join(root, 'src/cli.ts')]

/** A GET on a new connection (cluster workers take new connections in turn). */
function getFresh(url: string, headers: Record<string, string> = {}): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    http
      .get(url, { agent: false, headers }, (res) => {
        let body = ''
        res.setEncoding('utf8')
        res.on('data', (c: string) => {
          body += c
        })
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }))
      })
      .on('error', reject)
  })
}

/** Log records (pino JSON lines) of `text` with the message `msg`. */
function records(text: string, msg: string): Array<Record<string, unknown>> {
  const out: Array<Record<string, unknown>> = []
  for (const line of text.split('\n')) {
    try {
      const r = JSON.parse(line) as Record<string, unknown>
      if (r.msg === msg) out.push(r)
    } catch {}
  }
  return out
}

t.test('serve gateway --workers 2 answers and stops on SIGTERM', async (t) => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'gatehouse-serve-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const child = spawn(process.execPath, [...cli, 'serve', 'gateway', '--workers', '2'], {
    cwd: dir,
    env: shellEnv({
      GATEHOUSE_GATEWAY_PORT: '0',
      GATEHOUSE_GATEWAY_ADMIN_PORT: '0',
      GATEHOUSE_TENANTS_DIR: dir,
      GATEHOUSE_LOG_LEVEL: 'info',
    }),
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let stdout = ''
  let stderr = ''
  child.stdout.setEncoding('utf8').on('data', (c: string) => {
    stdout += c
  })
  child.stderr.setEncoding('utf8').on('data', (c: string) => {
    stderr += c
  })
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)))
  t.teardown(() => {
    if (child.exitCode === null) child.kill('SIGKILL')
  })

  // Both workers listening (on the same port) and the primary's admin listener.
  const started = (): boolean =>
    records(stdout, 'listening').length >= 2 && records(stdout, 'admin listening (metrics of every worker)').length >= 1
  await eventually(() => started() || child.exitCode !== null, 60_000).catch(() => {})
  const workers = records(stdout, 'listening').map((r) => String(r.url))
  const admins = records(stdout, 'admin listening (metrics of every worker)').map((r) => String(r.admin))
  t.equal(workers.length, 2, `two workers listen: ${stdout} ${stderr}`)
  t.equal(new Set(workers).size, 1, 'on one port')
  const pub = workers[0]!
  const admin = admins[0]!
  t.notOk(/:0$/.test(pub) || /:0$/.test(admin), 'the ports the kernel chose')

  const health = await getFresh(`${admin}/healthz`)
  t.equal(health.status, 200, 'the admin port answers /healthz')
  // Both workers answer readiness.
  let ready: { checks?: Array<{ name: string }> } = {}
  await eventually(async () => {
    const r = await getFresh(`${admin}/readyz`)
    if (r.status === 200) ready = JSON.parse(r.body)
    return (ready.checks ?? []).length >= 2
  }, 10_000).catch(() => {})
  t.same(
    (ready.checks ?? []).map((c) => /^worker \d+$/.test(c.name)),
    [true, true],
    'readyz answers for both workers',
  )
  t.equal((await getFresh(`${pub}/healthz`)).status, 404, 'the public port does not answer /healthz')
  t.equal((await getFresh(`${pub}/metrics`)).status, 404, 'nor /metrics')

  for (let i = 0; i < 6; i++) {
    const res = await getFresh(`${pub}/nosuchdb/rest/v1/todos`, { apikey: 'pk_whatever_key_123' })
    t.equal(res.status, 404)
    t.match(JSON.parse(res.body), { code: 'tenant_not_found' })
  }
  const m = await getFresh(`${admin}/metrics`)
  t.equal(m.status, 200)
  t.match(
    m.body,
    /gatehouse_requests_total\{part="gateway",tenant="_unknown",status="404"\} 6\b/,
    'the requests of both workers are counted together',
  )
  t.match(m.body, /process_cpu_user_seconds_total/, 'process metrics')

  child.kill('SIGTERM')
  t.equal(await exited, 0, stderr)
  await t.rejects(fetch(`${pub}/healthz`), 'the port is closed afterwards')
  await t.rejects(fetch(`${admin}/healthz`), 'and the admin port')
})

t.test('serve --workers 2: /readyz passes ?exclude and ?verbose on to every worker', async (t) => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'gatehouse-serve-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  // Redis that does not answer (a port bound, then closed): the tenant store is unreachable.
  const deadPort = await new Promise<number>((resolve) => {
    const srv = net.createServer().listen(0, '127.0.0.1', () => {
      const port = (srv.address() as net.AddressInfo).port
      srv.close(() => resolve(port))
    })
  })
  const child = spawn(process.execPath, [...cli, 'serve', 'gateway', '--workers', '2'], {
    cwd: dir,
    env: shellEnv({
      GATEHOUSE_GATEWAY_PORT: '0',
      GATEHOUSE_GATEWAY_ADMIN_PORT: '0',
      GATEHOUSE_TENANTS_SOURCE: 'redis',
      GATEHOUSE_REDIS_URL: `redis://127.0.0.1:${deadPort}`,
      GATEHOUSE_LOG_LEVEL: 'info',
    }),
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let stdout = ''
  child.stdout.setEncoding('utf8').on('data', (c: string) => {
    stdout += c
  })
  child.stderr.resume()
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)))
  t.teardown(() => {
    if (child.exitCode === null) child.kill('SIGKILL')
  })
  const started = (): boolean =>
    records(stdout, 'listening').length >= 2 && records(stdout, 'admin listening (metrics of every worker)').length >= 1
  await eventually(() => started() || child.exitCode !== null, 60_000).catch(() => {})
  t.ok(started(), `two workers and the admin listener: ${stdout}`)
  const admin = String(records(stdout, 'admin listening (metrics of every worker)')[0]?.admin)

  // Every worker answers (its own `worker <pid>` check), each naming its Redis check.
  let r = { status: 0, body: '' }
  await eventually(async () => {
    r = await getFresh(`${admin}/readyz`)
    return (JSON.parse(r.body).failing ?? []).length >= 2
  }, 15_000).catch(() => {})
  t.equal(r.status, 503, `not ready while Redis is down: ${r.body}`)
  const failing = JSON.parse(r.body).failing as string[]
  t.same(
    failing.map((n) => /^worker \d+: redis$/.test(n)),
    [true, true],
    'each worker fails on redis',
  )

  r = await getFresh(`${admin}/readyz?exclude=redis`)
  t.equal(r.status, 200, `?exclude=redis reaches the workers: ${r.body}`)
  const body = JSON.parse(r.body) as { checks: Array<{ name: string; ok: boolean }>; excluded: string[] }
  t.same(
    body.checks.map((c) => /^worker \d+$/.test(c.name) && c.ok),
    [true, true],
    'both workers ready, no redis check run',
  )
  t.same(body.excluded, ['redis'])

  r = await getFresh(`${admin}/readyz?verbose&exclude=redis&exclude=nope`)
  t.equal(r.status, 200)
  const lines = r.body.trimEnd().split('\n')
  t.equal(lines.filter((l) => /^\[\+\]worker \d+ ok$/.test(l)).length, 2, r.body)
  t.ok(lines.includes('[+]redis excluded: ok'))
  t.ok(lines.includes('warn: some health checks cannot be excluded: no matches for "nope"'))
  t.equal(lines.at(-1), 'readyz check passed')

  child.kill('SIGTERM')
  t.equal(await exited, 0, 'exits on SIGTERM')
})

t.test('serve rest --workers 2: the workers split the cluster share of the pool budget', async (t) => {
  const tt = await createTestTenant(t)
  const usable = await withClient(tt.ownerUrl, async (c) => {
    const r = await c.query<{ n: number }>(
      `SELECT current_setting('max_connections')::int - current_setting('superuser_reserved_connections')::int AS n`,
    )
    return r.rows[0]!.n
  })
  const dir = mkdtempSync(path.join(os.tmpdir(), 'gatehouse-serve-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  writeFileSync(path.join(dir, `${tt.database}.yaml`), toYaml(tt.file, { lineWidth: 0 }))
  // Small enough that a budget sized from the cluster is below the provisional 40.
  const share = 0.02
  const child = spawn(process.execPath, [...cli, 'serve', 'rest', '--workers', '2'], {
    cwd: dir,
    env: shellEnv({
      GATEHOUSE_REST_PORT: '0',
      GATEHOUSE_REST_ADMIN_PORT: '0',
      GATEHOUSE_REST_POOL_CLUSTER_SHARE: String(share),
      GATEHOUSE_TENANTS_DIR: dir,
      GATEHOUSE_LOG_LEVEL: 'info',
    }),
    stdio: ['ignore', 'pipe', 'ignore'],
  })
  let stdout = ''
  child.stdout.setEncoding('utf8').on('data', (c: string) => {
    stdout += c
  })
  t.teardown(() => {
    if (child.exitCode === null) child.kill('SIGKILL')
  })
  await eventually(
    () =>
      records(stdout, 'listening').length >= 2 &&
      records(stdout, 'admin listening (metrics of every worker)').length >= 1,
    60_000,
  )
  const pub = String(records(stdout, 'listening')[0]!.url)
  const admin = String(records(stdout, 'admin listening (metrics of every worker)')[0]!.admin)
  const token = await signHS256(
    { role: tt.tenant.roles.anon },
    { secret: tt.file.jwt.upstream_secret, expiresInSeconds: 60 },
  )
  // Each worker sizes its budget on its first connection (40 each until then); workers take
  // new client connections in turn, so requests on fresh connections reach both.
  let budget = NaN
  await eventually(async () => {
    await getFresh(`${pub}/${tt.database}/`, { authorization: `Bearer ${token}` })
    const m = await getFresh(`${admin}/metrics`)
    budget = Number(/^gatehouse_pool_budget\{part="rest"\} (\d+)$/m.exec(m.body)?.[1])
    return budget < 40
  }, 30_000)
  t.equal(budget, 2 * Math.floor((usable * share) / 2), `both workers' budgets together (${usable} usable connections)`)
  child.kill('SIGTERM')
})

t.test('serve refuses an unknown part with a clear message', async (t) => {
  const r = spawnSync(process.execPath, [...cli, 'serve', 'proxy'], { cwd: os.tmpdir(), encoding: 'utf8' })
  t.equal(r.status, 1)
  t.match(r.stderr, /unknown part "proxy": expected one of gateway, rest, auth, panel/)
  t.notMatch(r.stderr, /at .*\.ts:\d+/, 'no stack')
})

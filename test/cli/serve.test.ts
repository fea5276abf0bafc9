// `gatehouse serve <part>` as production runs it: the real CLI in a child process, Node
// cluster workers sharing one port, the primary's admin listener (/healthz, /readyz of every
// worker, /metrics merged across workers; 404 on the public port), a JSON 404 for an
// unknown database, and a clean exit on SIGTERM. Ports 18140-18141 are this file's.
import t from 'tap'
import http from 'node:http'
import { spawn, spawnSync } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..')
const cli = ['--import', 'tsx', path.join(root, 'src/cli.ts')]

async function waitFor (url: string, ms: number): Promise<Response> {
  const until = Date.now() + ms
  for (;;) {
    try { return await fetch(url) } catch (err) {
      if (Date.now() > until) throw err
      await new Promise((r) => setTimeout(r, 200))
    }
  }
}

/** A GET on a new connection (cluster workers take new connections in turn). */
function getFresh (url: string, headers: Record<string, string> = {}): Promise<{ status: number, body: string }> {
  return new Promise((resolve, reject) => {
    http.get(url, { agent: false, headers }, (res) => {
      let body = ''
      res.setEncoding('utf8')
      res.on('data', (c: string) => { body += c })
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }))
    }).on('error', reject)
  })
}

t.test('serve gateway --workers 2 answers and stops on SIGTERM', async (t) => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'gatehouse-serve-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const child = spawn(process.execPath, [...cli, 'serve', 'gateway', '--workers', '2'], {
    cwd: root,
    env: { ...process.env, GATEHOUSE_GATEWAY_PORT: '18140', GATEHOUSE_GATEWAY_ADMIN_PORT: '18141', GATEHOUSE_TENANTS_DIR: dir, GATEHOUSE_LOG_LEVEL: 'warn', DATABASE_URL: '', REDIS_URL: '' },
    stdio: ['ignore', 'pipe', 'pipe']
  })
  let stderr = ''
  child.stderr.on('data', (c: Buffer) => { stderr += c.toString() })
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)))
  t.teardown(() => { if (child.exitCode === null) child.kill('SIGKILL') })

  const health = await waitFor('http://127.0.0.1:18141/healthz', 60_000)
  t.equal(health.status, 200, 'the admin port answers /healthz')
  // Both workers listen once readiness lists them.
  let ready: { checks?: Array<{ name: string }> } = {}
  for (let i = 0; i < 100 && (ready.checks ?? []).length < 2; i++) {
    await new Promise((r) => setTimeout(r, 100))
    const r = await getFresh('http://127.0.0.1:18141/readyz')
    if (r.status === 200) ready = JSON.parse(r.body)
  }
  t.same((ready.checks ?? []).map((c) => /^worker \d+$/.test(c.name)), [true, true], 'readyz answers for both workers')
  const pub = await waitFor('http://127.0.0.1:18140/healthz', 10_000)
  t.equal(pub.status, 404, 'the public port does not answer /healthz')
  t.equal((await getFresh('http://127.0.0.1:18140/metrics')).status, 404, 'nor /metrics')

  for (let i = 0; i < 6; i++) {
    const res = await getFresh('http://127.0.0.1:18140/nosuchdb/rest/v1/todos', { apikey: 'pk_whatever_key_123' })
    t.equal(res.status, 404)
    t.match(JSON.parse(res.body), { code: 'tenant_not_found' })
  }
  const m = await getFresh('http://127.0.0.1:18141/metrics')
  t.equal(m.status, 200)
  t.match(m.body, /gatehouse_gateway_requests_total\{tenant="_unknown",service="none",status_class="4xx"\} 6\b/,
    'the requests of both workers are counted together')
  t.match(m.body, /process_cpu_user_seconds_total/, 'process metrics')

  child.kill('SIGTERM')
  t.equal(await exited, 0, stderr)
  await t.rejects(fetch('http://127.0.0.1:18140/healthz'), 'the port is closed afterwards')
  await t.rejects(fetch('http://127.0.0.1:18141/healthz'), 'and the admin port')
})

t.test('serve refuses an unknown part with a clear message', async (t) => {
  const r = spawnSync(process.execPath, [...cli, 'serve', 'proxy'], { cwd: root, encoding: 'utf8' })
  t.equal(r.status, 1)
  t.match(r.stderr, /unknown part "proxy": expected one of gateway, rest, auth, panel/)
  t.notMatch(r.stderr, /at .*\.ts:\d+/, 'no stack')
})

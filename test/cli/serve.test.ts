// `gatehouse serve <part>` as production runs it: the real CLI in a child process, Node
// cluster workers sharing one port, /healthz, a JSON 404 for an unknown database, and a
// clean exit on SIGTERM. Ports 18140-18141 are this file's.
import t from 'tap'
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

t.test('serve gateway --workers 2 answers and stops on SIGTERM', async (t) => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'gatehouse-serve-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const child = spawn(process.execPath, [...cli, 'serve', 'gateway', '--workers', '2'], {
    cwd: root,
    env: { ...process.env, GATEHOUSE_GATEWAY_PORT: '18140', GATEHOUSE_TENANTS_DIR: dir, GATEHOUSE_LOG_LEVEL: 'warn', DATABASE_URL: '', REDIS_URL: '' },
    stdio: ['ignore', 'pipe', 'pipe']
  })
  let stderr = ''
  child.stderr.on('data', (c: Buffer) => { stderr += c.toString() })
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)))
  t.teardown(() => { if (child.exitCode === null) child.kill('SIGKILL') })

  const health = await waitFor('http://127.0.0.1:18140/healthz', 60_000)
  t.equal(health.status, 200)
  const res = await fetch('http://127.0.0.1:18140/nosuchdb/rest/v1/todos', { headers: { apikey: 'pk_whatever_key_123' } })
  t.equal(res.status, 404)
  t.match(await res.json(), { code: 'tenant_not_found' })

  child.kill('SIGTERM')
  t.equal(await exited, 0, stderr)
  await t.rejects(fetch('http://127.0.0.1:18140/healthz'), 'the port is closed afterwards')
})

t.test('serve refuses an unknown part with a clear message', async (t) => {
  const r = spawnSync(process.execPath, [...cli, 'serve', 'proxy'], { cwd: root, encoding: 'utf8' })
  t.equal(r.status, 1)
  t.match(r.stderr, /unknown part "proxy": expected one of gateway, rest, auth, panel/)
  t.notMatch(r.stderr, /at .*\.ts:\d+/, 'no stack')
})

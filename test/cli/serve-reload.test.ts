// Reloads drop nothing (docs/operating.md, "Deploys and reloads"): `gatehouse serve <part>
// --workers N` replaces its workers one by one on SIGHUP, a new one listening before an old one
// drains, while clients with kept-alive connections keep sending; and with --reuse-port, several
// processes of a part share its port, so one can be replaced while the others serve. The real CLI
// in child processes, ports from the kernel, the command run outside the checkout.
import t from 'tap'
import http from 'node:http'
import { spawn, type ChildProcess } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { createRequire } from 'node:module'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { shellEnv } from '../helpers/shell-env.js'
import { eventually } from '../helpers/eventually.js'
import { closedPort } from '../helpers/ports.js'

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..')
const TSX = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href
const cli = ['--import', TSX, path.join(root, 'src/cli.ts')]

interface Served {
  child: ChildProcess
  records(msg: string): Array<Record<string, unknown>>
  exited: Promise<number | null>
}

function start(t: { teardown(fn: () => unknown): void }, args: string[], env: Record<string, string>): Served {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'gatehouse-reload-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const child = spawn(process.execPath, [...cli, 'serve', 'gateway', ...args], {
    cwd: dir,
    env: shellEnv({ GATEHOUSE_TENANTS_DIR: dir, GATEHOUSE_LOG_LEVEL: 'info', ...env }),
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let stdout = ''
  child.stdout!.setEncoding('utf8').on('data', (c: string) => {
    stdout += c
  })
  child.stderr!.resume()
  t.teardown(() => {
    if (child.exitCode === null) child.kill('SIGKILL')
  })
  return {
    child,
    exited: new Promise((resolve) => child.on('exit', (code) => resolve(code))),
    records: (msg) =>
      stdout
        .split('\n')
        .flatMap((line) => {
          try {
            return [JSON.parse(line) as Record<string, unknown>]
          } catch {
            return []
          }
        })
        .filter((r) => r.msg === msg),
  }
}

/** Clients sending one request after another on kept-alive connections until stopped; counts answers and failures. */
function steadyLoad(url: string, clients: number) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: clients })
  const tally = { answered: 0, failed: [] as string[] }
  let running = true
  const one = (): Promise<void> =>
    new Promise((resolve) => {
      http
        .get(url, { agent, headers: { apikey: 'pk_whatever_key_123' } }, (res) => {
          res.resume()
          res.on('end', () => {
            if (res.statusCode === 404) tally.answered++
            else tally.failed.push(`status ${res.statusCode}`)
            resolve()
          })
        })
        .on('error', (err) => {
          tally.failed.push(err.message)
          resolve()
        })
    })
  const loops = Array.from({ length: clients }, async () => {
    while (running) await one()
  })
  return {
    tally,
    async stop() {
      running = false
      await Promise.all(loops)
      agent.destroy()
    },
  }
}

t.test('SIGHUP replaces every worker one by one; kept-alive clients see no failure', async (t) => {
  const s = start(t, ['--workers', '2'], { GATEHOUSE_GATEWAY_PORT: '0', GATEHOUSE_GATEWAY_ADMIN_PORT: '0' })
  await eventually(() => s.records('listening').length >= 2, 60_000)
  const first = s.records('listening').map((r) => Number(r.pid))
  const url = `${String(s.records('listening')[0]!.url)}/nosuchdb/rest/v1/todos`
  const load = steadyLoad(url, 4)
  await eventually(() => load.tally.answered >= 50, 30_000)

  s.child.kill('SIGHUP')
  await eventually(() => s.records('reload done').length === 1, 60_000)
  const before = load.tally.answered
  await eventually(() => load.tally.answered >= before + 50, 30_000)
  await load.stop()

  t.same(load.tally.failed, [], `no request failed (${load.tally.answered} answered)`)
  const replaced = s.records('worker replaced')
  t.equal(replaced.length, 2, 'both workers replaced')
  t.same(replaced.map((r) => Number(r.old)).sort(), [...first].sort(), 'the old workers are the ones retired')
  const now = s.records('listening').map((r) => Number(r.pid))
  t.equal(now.length, 4, 'two new workers listened')
  t.notOk(
    replaced.some((r) => first.includes(Number(r.new))),
    'the new workers are new processes',
  )
  s.child.kill('SIGTERM')
  t.equal(await s.exited, 0)
})

t.test('SIGTERM during a reload stops every worker and starts no other', async (t) => {
  const s = start(t, ['--workers', '2'], { GATEHOUSE_GATEWAY_PORT: '0', GATEHOUSE_GATEWAY_ADMIN_PORT: '0' })
  await eventually(() => s.records('listening').length >= 2, 60_000)
  s.child.kill('SIGHUP')
  // The first old worker drains (a second at least): the reload waits for it to exit.
  const draining = 'shutting down: readyz is 503, draining in-flight requests'
  await eventually(() => s.records(draining).some((r) => r.reason === 'reload'), 60_000)
  s.child.kill('SIGTERM')
  await eventually(() => s.child.exitCode !== null, 30_000)
  t.equal(s.child.exitCode, 0, 'the primary exited')
  t.equal(s.records('listening').length, 3, 'no worker was started after the SIGTERM (2 + the first new one)')
  t.equal(s.records('reload done').length, 0, 'the reload stopped')
})

t.test('--reuse-port: two processes share the ports; one stops, the other goes on serving', async (t) => {
  const env = {
    GATEHOUSE_GATEWAY_PORT: String(await closedPort()),
    GATEHOUSE_GATEWAY_ADMIN_PORT: String(await closedPort()),
  }
  const a = start(t, ['--reuse-port'], env)
  await eventually(() => a.records('listening').length === 1 || a.child.exitCode !== null, 60_000)
  const b = start(t, ['--reuse-port'], env)
  await eventually(() => b.records('listening').length === 1 || b.child.exitCode !== null, 60_000)
  t.equal(a.records('listening')[0]?.url, b.records('listening')[0]?.url, 'both listen on the same port')

  const url = `${String(a.records('listening')[0]!.url)}/nosuchdb/rest/v1/todos`
  const load = steadyLoad(url, 2)
  await eventually(() => load.tally.answered >= 20, 30_000)
  a.child.kill('SIGTERM')
  t.equal(await a.exited, 0, 'the first process drained and exited')
  const after = load.tally.answered
  await eventually(() => load.tally.answered >= after + 20, 30_000)
  await load.stop()
  t.same(load.tally.failed, [], `no request failed (${load.tally.answered} answered)`)
  b.child.kill('SIGTERM')
  t.equal(await b.exited, 0)
})

// scripts/with-services.mjs (what `npm test` and `npm run bench` run under): whatever the
// command does (ends, crashes, is interrupted), the Postgres and Redis it started are
// stopped and the files it made (the cluster, the command's TMPDIR) are gone.
import t, { type Test } from 'tap'
import { spawn } from 'node:child_process'
import { existsSync } from 'node:fs'
import path from 'node:path'
import { portOpen } from '../../src/dev/process-probes.js'
import { REPO_ROOT } from '../helpers/e2e-stack.js'

const WRAPPER = path.join(REPO_ROOT, 'scripts', 'with-services.mjs')

/** The environment without the outer run's services, so the wrapper starts its own. */
function ownServicesEnv(): NodeJS.ProcessEnv {
  const env = { ...process.env }
  delete env.DATABASE_URL
  delete env.REDIS_URL
  return env
}

// The command: prints what the wrapper gave it, then does what the test asks.
const REPORT =
  "console.log(JSON.stringify({ db: process.env.DATABASE_URL, redis: process.env.REDIS_URL, tmp: process.env.TMPDIR, tmpdir: require('os').tmpdir() }));"

interface Run {
  code: number | null
  signal: NodeJS.Signals | null
  report: { db: string; redis: string; tmp: string; tmpdir: string }
}

function runWrapped(then: string, onReport?: (child: ReturnType<typeof spawn>) => void): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [WRAPPER, process.execPath, '-e', REPORT + then], {
      cwd: REPO_ROOT,
      env: ownServicesEnv(),
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let out = ''
    let err = ''
    let reported = false
    child.stdout!.setEncoding('utf8').on('data', (d: string) => {
      out += d
      if (!reported && out.includes('\n')) {
        reported = true
        onReport?.(child)
      }
    })
    child.stderr!.setEncoding('utf8').on('data', (d: string) => {
      err += d
    })
    child.once('error', reject)
    child.once('close', (code, signal) => {
      const line = out.split('\n').find((l) => l.startsWith('{'))
      if (line === undefined) return reject(new Error(`the command printed nothing: ${out} ${err}`))
      resolve({ code, signal, report: JSON.parse(line) })
    })
  })
}

async function nothingLeft(t: Test, r: Run): Promise<void> {
  const db = new URL(r.report.db)
  const redis = new URL(r.report.redis)
  t.notOk(await portOpen(Number(db.port)), `Postgres on ${db.port} is stopped`)
  t.notOk(await portOpen(Number(redis.port)), `Redis on ${redis.port} is stopped`)
  t.equal(r.report.tmpdir, r.report.tmp, "the command's temporary directory is the private one")
  t.notOk(existsSync(r.report.tmp), "the command's temporary directory is removed")
  t.notOk(existsSync(path.dirname(r.report.tmp)), 'and so is everything else of the run')
}

t.test('the command ends: its exit code, nothing left', async (t) => {
  const r = await runWrapped('process.exit(3)')
  t.equal(r.code, 3)
  t.not(new URL(r.report.db).password, 'postgres', 'a generated superuser password')
  await nothingLeft(t, r)
})

t.test('the command crashes: nothing left', async (t) => {
  const r = await runWrapped("process.kill(process.pid, 'SIGKILL')")
  t.equal(r.code, 1)
  await nothingLeft(t, r)
})

t.test('the wrapper is interrupted (Ctrl-C): nothing left', async (t) => {
  const r = await runWrapped('setInterval(() => {}, 1000)', (child) => {
    child.kill('SIGINT')
  })
  t.not(r.code, 0)
  await nothingLeft(t, r)
})

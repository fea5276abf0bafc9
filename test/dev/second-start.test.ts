// The development stack owns only what it started. A second `npm start` in the same checkout
// says that one runs (its pid and URLs) and exits without touching it: the first stack's own
// Postgres keeps running and its gateway keeps answering. When that Postgres dies, the stack
// says so in its log and `gatehouse status` says so too (exit status 4). `gatehouse dev --reset`
// is refused while it runs and afterwards removes .gatehouse/ and the cluster wherever it lived.
// The stack here starts its own embedded Postgres (no DATABASE_URL). Every port, Postgres's
// too, is the kernel's choice (dev.json says which).
import t from 'tap'
import { spawn, type ChildProcess } from 'node:child_process'
import { existsSync, readFileSync, rmSync } from 'node:fs'
import path from 'node:path'
import pg from 'pg'
import { createWorkingCopy, REPO_ROOT } from '../helpers/e2e-stack.js'
import { KERNEL_PORTS_ENV, shellEnv } from '../helpers/shell-env.js'
import { until } from '../helpers/eventually.js'

// A whole development stack with a fresh cluster (initdb): minutes on a loaded machine.
t.setTimeout(300_000)

const BIN = path.join(REPO_ROOT, 'node_modules', '.bin', 'gatehouse')

interface Run {
  child: ChildProcess
  out(): string
  err(): string
  exited: Promise<number | null>
}

function start(cwd: string, args: string[], env: NodeJS.ProcessEnv): Run {
  const child = spawn(BIN, args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] })
  let out = ''
  let err = ''
  child.stdout!.setEncoding('utf8').on('data', (d: string) => {
    out += d
  })
  child.stderr!.setEncoding('utf8').on('data', (d: string) => {
    err += d
  })
  const exited = new Promise<number | null>((resolve) => child.once('close', (code) => resolve(code)))
  return { child, out: () => out, err: () => err, exited }
}

async function untilDone(what: string, check: () => boolean | Promise<boolean>, seconds = 240): Promise<void> {
  await until(check, what, seconds * 1000)
}

async function pgAnswers(url: string): Promise<boolean> {
  const c = new pg.Client({ connectionString: url, connectionTimeoutMillis: 3000 })
  c.on('error', () => {})
  try {
    await c.connect()
    await c.query('select 1')
    return true
  } catch {
    return false
  } finally {
    await c.end().catch(() => {})
  }
}

t.test('a second start leaves the running stack alone; a dead Postgres is reported', async (t) => {
  const copy = createWorkingCopy(t, 'twice')
  const env = shellEnv({
    ...KERNEL_PORTS_ENV,
    GATEHOUSE_LOG_LEVEL: 'warn',
    GATEHOUSE_AUTH_BCRYPT_COST: '4',
  })
  const stateDir = path.join(copy.root, '.gatehouse')
  // As root the cluster may live outside the checkout (.gatehouse/pg/LOCATION names it).
  t.teardown(() => {
    const location = path.join(stateDir, 'pg', 'LOCATION')
    if (existsSync(location)) rmSync(readFileSync(location, 'utf8').trim(), { recursive: true, force: true })
  })

  // 1. The first stack, with its own Postgres.
  const first = start(copy.root, ['dev'], env)
  t.teardown(async () => {
    if (first.child.exitCode === null && first.child.signalCode === null) {
      first.child.kill('SIGINT')
      await first.exited
    }
  })
  await untilDone('the first stack is ready', () => {
    if (first.child.exitCode !== null) throw new Error(`gatehouse dev exited: ${first.out()} ${first.err()}`)
    return first.out().includes('Ctrl-C stops everything')
  })
  const info = JSON.parse(readFileSync(path.join(stateDir, 'dev.json'), 'utf8'))
  const lock = JSON.parse(readFileSync(path.join(stateDir, 'dev.lock'), 'utf8'))
  t.equal(lock.pid, info.pid, "the lock names the stack's process")
  t.type(lock.started_at, 'string')
  const location = path.join(stateDir, 'pg', 'LOCATION')
  const clusterDir = existsSync(location) ? readFileSync(location, 'utf8').trim() : path.join(stateDir, 'pg')
  const postmaster = Number(readFileSync(path.join(clusterDir, 'data', 'postmaster.pid'), 'utf8').split('\n')[0])
  t.ok(postmaster > 0, 'its Postgres runs')

  // 2. A second start in the same checkout: refused, naming the running one; nothing touched.
  const second = start(copy.root, ['dev'], env)
  t.equal(await second.exited, 1, 'the second start exits 1')
  t.match(
    second.err(),
    new RegExp(`a development stack is already running in this checkout \\(pid ${info.pid}, started `),
  )
  t.match(second.err(), info.gateway_url, "it names the running stack's gateway")
  t.match(second.err(), 'Nothing was started or stopped')
  t.notMatch(second.out(), /Gatehouse is running/)
  t.ok(await pgAnswers(info.postgres_admin_url), "the first stack's Postgres still answers")
  let alive = true
  try {
    process.kill(postmaster, 0)
  } catch {
    alive = false
  }
  t.ok(alive, 'the same postmaster')
  const demo = info.databases[0]
  const signup = await fetch(`${demo.url}/auth/v1/signup`, {
    method: 'POST',
    headers: { apikey: demo.public_key, 'content-type': 'application/json' },
    body: JSON.stringify({ email: 'still@example.com', password: 'a fine password' }),
  })
  t.equal(signup.status, 200, 'the first stack still serves requests that need its database')
  t.same(JSON.parse(readFileSync(path.join(stateDir, 'dev.json'), 'utf8')), info, "dev.json is the first stack's")
  t.equal(first.child.exitCode, null, 'the first stack runs on')

  // 3. Its Postgres dies: the stack's log says so, and `gatehouse status` too.
  process.kill(postmaster, 'SIGKILL')
  await untilDone(
    'the stack reports its Postgres gone',
    () => /the development Postgres .* exited unexpectedly/.test(first.out() + first.err()),
    60,
  )
  const status = start(copy.root, ['status'], env)
  t.equal(await status.exited, 4, 'status exits 4: running with a problem')
  t.match(status.out(), /Gatehouse is running, BUT:/)
  t.match(status.out(), /the development Postgres .* exited unexpectedly/)

  // 4. --reset is refused while the stack runs; Ctrl-C stops it and releases the lock.
  const early = start(copy.root, ['dev', '--reset'], env)
  t.equal(await early.exited, 1)
  t.match(early.err(), /already running/)
  t.ok(existsSync(clusterDir), 'the cluster stays')
  first.child.kill('SIGINT')
  t.equal(await first.exited, 0)
  t.notOk(existsSync(path.join(stateDir, 'dev.lock')), 'the lock is gone with its owner')

  // 5. --reset removes the state and the cluster, wherever it lived.
  const reset = start(copy.root, ['dev', '--reset'], env)
  t.equal(await reset.exited, 0, reset.err())
  t.notOk(existsSync(clusterDir), `the cluster is gone (${clusterDir})`)
  t.notOk(existsSync(stateDir), '.gatehouse is gone')
})

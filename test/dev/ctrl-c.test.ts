// Ctrl-C in the terminal running `npm start` signals the whole foreground process group: the
// stack and everything it spawned. A request in flight at that moment still gets its answer:
// the stack's own Postgres runs in its own process group, so it is stopped by the stack after
// the parts have drained, not by the terminal's SIGINT in the middle of a query (it used to
// answer 503 and log "the development Postgres ... exited unexpectedly"). Afterwards the
// postmaster is gone and the stack exited 0. The stack here starts its own embedded Postgres
// (no DATABASE_URL); every port is the kernel's choice.
import t from 'tap'
import { spawn } from 'node:child_process'
import { existsSync, readFileSync, rmSync } from 'node:fs'
import path from 'node:path'
import pg from 'pg'
import { createWorkingCopy, REPO_ROOT } from '../helpers/e2e-stack.js'
import { KERNEL_PORTS_ENV, shellEnv } from '../helpers/shell-env.js'
import { until } from '../helpers/eventually.js'
import type { DevInfo } from '../../src/dev/index.js'

// A whole development stack with a fresh cluster (initdb): minutes on a loaded machine.
t.setTimeout(300_000)

const BIN = path.join(REPO_ROOT, 'node_modules', '.bin', 'gatehouse')

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

async function adminQuery(url: string, sql: string): Promise<pg.QueryResult> {
  const c = new pg.Client({ connectionString: url })
  await c.connect()
  try {
    return await c.query(sql)
  } finally {
    await c.end()
  }
}

t.test('Ctrl-C lets a request in flight finish, then stops Postgres', async (t) => {
  const copy = createWorkingCopy(t, 'ctrlc')
  const env = shellEnv({ ...KERNEL_PORTS_ENV, GATEHOUSE_LOG_LEVEL: 'warn', GATEHOUSE_AUTH_BCRYPT_COST: '4' })
  const stateDir = path.join(copy.root, '.gatehouse')
  t.teardown(() => {
    const location = path.join(stateDir, 'pg', 'LOCATION')
    if (existsSync(location)) rmSync(readFileSync(location, 'utf8').trim(), { recursive: true, force: true })
  })
  // Its own process group, as a shell gives a foreground job: the terminal's Ctrl-C is a SIGINT to the group.
  const dev = spawn(BIN, ['dev'], { cwd: copy.root, env, stdio: ['ignore', 'pipe', 'pipe'], detached: true })
  let out = ''
  dev.stdout!.setEncoding('utf8').on('data', (d: string) => (out += d))
  dev.stderr!.setEncoding('utf8').on('data', (d: string) => (out += d))
  const exited = new Promise<number | null>((resolve) => dev.once('close', (code) => resolve(code)))
  let postmaster = 0
  t.teardown(async () => {
    if (dev.exitCode === null && dev.signalCode === null) {
      process.kill(-dev.pid!, 'SIGINT')
      await exited
    }
    if (postmaster > 0 && alive(postmaster)) process.kill(postmaster, 'SIGINT')
  })
  await until(
    () => {
      if (dev.exitCode !== null) throw new Error(`gatehouse dev exited: ${out}`)
      return out.includes('Ctrl-C stops everything')
    },
    'the stack is ready',
    240_000,
  )
  const info = JSON.parse(readFileSync(path.join(stateDir, 'dev.json'), 'utf8')) as DevInfo
  const location = path.join(stateDir, 'pg', 'LOCATION')
  const clusterDir = existsSync(location) ? readFileSync(location, 'utf8').trim() : path.join(stateDir, 'pg')
  postmaster = Number(readFileSync(path.join(clusterDir, 'data', 'postmaster.pid'), 'utf8').split('\n')[0])
  const demo = info.databases[0]!
  const demoAdmin = new URL(info.postgres_admin_url)
  demoAdmin.pathname = `/${demo.database}`
  await adminQuery(
    demoAdmin.href,
    `create function public.slow_answer() returns int language sql as $$ select 42 from pg_sleep(2) $$;
     grant execute on function public.slow_answer() to anon`,
  )

  const call = (): Promise<Response> =>
    fetch(`${demo.url}/rest/v1/rpc/slow_answer`, { method: 'POST', headers: { apikey: demo.public_key } })
  // The schema cache learns the function (the DDL's NOTIFY): one call answers before the test.
  t.equal((await call()).status, 200, 'the function answers while nothing stops')

  const pending = call()
  await until(
    async () =>
      (await adminQuery(info.postgres_admin_url, `select 1 from pg_stat_activity where wait_event = 'PgSleep'`))
        .rowCount! > 0,
    'the call runs in Postgres',
    60_000,
  )
  process.kill(-dev.pid!, 'SIGINT')
  const answer = await pending
  t.equal(answer.status, 200, 'the request in flight got its answer')
  t.equal(await answer.text(), '42')
  t.equal(await exited, 0, 'the stack exits 0')
  t.notOk(alive(postmaster), 'its Postgres was stopped')
  t.notMatch(out, /exited unexpectedly/, 'no unexpected exit was logged')
})

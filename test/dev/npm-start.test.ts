// `npm start` as a person runs it: the real `gatehouse dev` (node --import tsx src/cli.ts dev)
// as a child process in a working copy (config/tenants renamed so it never meets a developer's
// own stack on the shared cluster), every port the kernel's choice (GATEHOUSE_*_PORT=0: the
// stack binds them first and reports them in dev.json and its banner), DATABASE_URL set. It prints the URLs and keys, writes .gatehouse/dev.json, `gatehouse status --json`
// prints the same, a request works, Ctrl-C (SIGINT) stops everything (exit 0, ports free;
// `gatehouse status` then says the stack is not running),
// a second start finds the tenants provisioned and keeps what the owner created, and a
// kill -9 leaves no mail catcher behind.
import t, { type Test } from 'tap'
import { spawn, execFile, type ChildProcess } from 'node:child_process'
import { readFileSync } from 'node:fs'
import net from 'node:net'
import path from 'node:path'
import { pathToFileURL } from 'node:url'
import { createRequire } from 'node:module'
import { promisify } from 'node:util'
import pg from 'pg'
import { createWorkingCopy, REPO_ROOT, type WorkingCopy } from '../helpers/e2e-stack.js'
import { adminUrl } from '../helpers/db.js'
import { KERNEL_PORTS_ENV } from '../helpers/shell-env.js'
import { eventually } from '../helpers/eventually.js'

// Whole development stacks start here: on a loaded machine that takes minutes, not seconds.
t.setTimeout(300_000)

const CLI = path.join(REPO_ROOT, 'src', 'cli.ts')
// The tsx loader by absolute URL: the working copy has no node_modules of its own.
const TSX = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href

/** The environment of a developer's shell: no inherited GATEHOUSE_* and no REDIS_URL (tenant files). */
function devEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {}
  for (const [k, v] of Object.entries(process.env)) {
    if (k.startsWith('GATEHOUSE_') || k === 'REDIS_URL' || k.startsWith('TAP') || k === 'NODE_OPTIONS') continue
    env[k] = v
  }
  return {
    ...env,
    DATABASE_URL: adminUrl(),
    ...KERNEL_PORTS_ENV,
    GATEHOUSE_LOG_LEVEL: 'warn',
    GATEHOUSE_AUTH_BCRYPT_COST: '4',
  }
}

interface Running {
  child: ChildProcess
  stdout(): string
  stderr(): string
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>
  readyMs: number
}

/** Starts `gatehouse dev` in the working copy and waits for its banner. */
async function startDevProcess(t: Test, copy: WorkingCopy): Promise<Running> {
  const started = Date.now()
  const child = spawn(process.execPath, ['--import', TSX, CLI, 'dev'], {
    cwd: copy.root,
    env: devEnv(),
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let out = ''
  let err = ''
  child.stdout!.setEncoding('utf8').on('data', (d: string) => {
    out += d
  })
  child.stderr!.setEncoding('utf8').on('data', (d: string) => {
    err += d
  })
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.once('exit', (code, signal) => resolve({ code, signal }))
  })
  // Never leave the stack running when a test fails half-way: Ctrl-C, then a hard stop.
  t.teardown(async () => {
    if (child.exitCode !== null || child.signalCode !== null) return
    child.kill('SIGINT')
    const timer = setTimeout(() => child.kill('SIGKILL'), 15_000)
    await exited
    clearTimeout(timer)
  })
  const ready = await new Promise<boolean>((resolve) => {
    const check = setInterval(() => {
      if (out.includes('Ctrl-C stops everything')) {
        clearInterval(check)
        resolve(true)
      }
      if (child.exitCode !== null) {
        clearInterval(check)
        resolve(false)
      }
    }, 25)
  })
  if (!ready) throw new Error(`gatehouse dev exited before it was ready:\n${out}\n${err}`)
  return { child, stdout: () => out, stderr: () => err, exited, readyMs: Date.now() - started }
}

/** Whether nothing accepts a connection on the port (asked by connecting, never by taking it). */
function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect(port, '127.0.0.1')
    s.once('connect', () => {
      s.destroy()
      resolve(false)
    })
    s.once('error', () => resolve(true))
  })
}

/** Polls until nothing listens on the port (a killed process's children exit on their own). */
async function eventuallyFree(port: number): Promise<boolean> {
  return eventually(() => portFree(port), 10_000).catch(() => false)
}

interface Info {
  gateway_url: string
  panel_url: string
  mail_url: string
  rest_engine_url: string
  auth_engine_url: string
  admin_urls?: Record<string, string>
}

/** Every listener dev.json names, by name: the ports the kernel gave this start. */
function listeners(info: Info): Record<string, number> {
  const port = (url: string): number => Number(new URL(url).port)
  return {
    gateway: port(info.gateway_url),
    rest: port(info.rest_engine_url),
    auth: port(info.auth_engine_url),
    panel: port(info.panel_url),
    'mail web': port(info.mail_url),
    ...Object.fromEntries(Object.entries(info.admin_urls ?? {}).map(([k, v]) => [`${k} admin`, port(v)])),
  }
}

async function status(copy: WorkingCopy, ...args: string[]): Promise<{ stdout: string; stderr: string; code: number }> {
  try {
    const r = await promisify(execFile)(process.execPath, ['--import', TSX, CLI, 'status', ...args], {
      cwd: copy.root,
      env: devEnv(),
    })
    return { stdout: r.stdout, stderr: r.stderr, code: 0 }
  } catch (err) {
    const e = err as { stdout?: string; stderr?: string; code?: number }
    return { stdout: e.stdout ?? '', stderr: e.stderr ?? '', code: e.code ?? -1 }
  }
}

async function stopWithCtrlC(t: Test, run: Running, info: Info): Promise<void> {
  run.child.kill('SIGINT')
  const { code, signal } = await run.exited
  t.equal(code, 0, 'exit 0 after Ctrl-C')
  t.equal(signal, null)
  t.match(run.stdout(), /stopping/)
  t.notMatch(run.stderr(), /unexpected failure|Error:|at .*\.ts:\d+/, 'nothing alarming on stderr')
  for (const [name, port] of Object.entries(listeners(info)))
    t.ok(await portFree(port), `${name} port ${port} is free again`)
}

t.test('npm start: banner, dev.json, status --json, a working gateway, Ctrl-C stops everything', async (t) => {
  const copy = createWorkingCopy(t, 'npmstart')

  // 1. First start: provisions the two tenants of the working copy.
  const run = await startDevProcess(t, copy)
  t.comment(`first start ready in ${run.readyMs} ms (tenants provisioned, DATABASE_URL given)`)
  const out = run.stdout()
  const info = JSON.parse(readFileSync(path.join(copy.root, '.gatehouse', 'dev.json'), 'utf8'))

  // Ten listeners, each on its own port the kernel gave it.
  const ports = listeners(info)
  t.same(
    Object.keys(ports).sort(),
    ['auth', 'auth admin', 'gateway', 'gateway admin', 'mail web', 'panel', 'panel admin', 'rest', 'rest admin'].sort(),
  )
  t.ok(
    Object.values(ports).every((p) => Number.isInteger(p) && p > 0),
    `real ports, none 0: ${JSON.stringify(ports)}`,
  )
  t.equal(new Set(Object.values(ports)).size, Object.keys(ports).length, 'all different')
  for (const url of [info.gateway_url, info.panel_url, info.mail_url, info.rest_engine_url, info.auth_engine_url])
    t.match(url, /^http:\/\/127\.0\.0\.1:\d+$/)
  t.type(info.panel_session, 'string')
  t.same(info.databases.map((d: { database: string }) => d.database).sort(), copy.tenants.map((x) => x.database).sort())
  // The banner prints what dev.json holds.
  for (const s of [info.gateway_url, info.panel_url, info.mail_url, info.panel_session]) t.match(out, s)
  for (const d of info.databases) {
    t.equal(d.url, `${info.gateway_url}/${d.database}`)
    t.match(d.owner_url, new RegExp(`/${d.database}$`))
    for (const s of [d.database, d.url, d.public_key, d.secret_key, d.owner_url])
      t.match(out, s, `banner shows ${d.database}`)
  }
  t.equal(
    info.databases.find((d: { database: string }) => d.database === copy.byName('demo').database).organization,
    'org_demo',
  )
  // Each part's admin listener: printed, in dev.json, answering /healthz and /readyz.
  for (const part of ['gateway', 'rest', 'auth', 'panel']) {
    const url = info.admin_urls?.[part] as string
    t.match(url, /^http:\/\/127\.0\.0\.1:\d+$/, `dev.json names ${part}'s admin listener`)
    t.match(out, url, `the banner shows ${part}'s admin listener`)
    t.equal((await fetch(`${url}/readyz`)).status, 200, `${part} is ready`)
  }
  t.equal((await fetch(`${info.gateway_url}/metrics`)).status, 404, 'no metrics on the public gateway port')

  // 2. `gatehouse status --json` prints the same (each CLI start costs seconds on a loaded
  // machine, so the plain banner form is left to the output check above).
  const st = await status(copy, '--json')
  t.equal(st.code, 0)
  t.same(JSON.parse(st.stdout), info)

  // 3. Everything answers: the gateway (auth and REST), the panel, the mail UI.
  const demo = info.databases.find((d: { database: string }) => d.database === copy.byName('demo').database)
  const settings = await fetch(`${demo.url}/auth/v1/settings`, { headers: { apikey: demo.public_key } })
  t.equal(settings.status, 200)
  const signup = await fetch(`${demo.url}/auth/v1/signup`, {
    method: 'POST',
    headers: { apikey: demo.public_key, 'content-type': 'application/json' },
    body: JSON.stringify({ email: 'someone@example.com', password: 'a fine password' }),
  })
  t.equal(signup.status, 200)
  t.type(((await signup.json()) as { access_token?: string }).access_token, 'string')
  const rest = await fetch(`${demo.url}/rest/v1/kept`, { headers: { apikey: demo.public_key } })
  t.equal(rest.status, 404)
  t.equal(((await rest.json()) as { code: string }).code, 'unknown_table')
  const exchange = await fetch(`${info.panel_url}/organizations/org_demo/databases/${demo.database}/api/app-session`, {
    method: 'POST',
    headers: { authorization: `Bearer ${info.panel_session}` },
  })
  t.equal(exchange.status, 200, 'the printed panel session works')
  t.equal((await fetch(info.mail_url)).status, 200, 'the mail UI answers')

  // The owner makes a table between the two starts.
  const owner = new pg.Client({ connectionString: demo.owner_url })
  await owner.connect()
  await owner.query(
    "CREATE TABLE public.kept (id int PRIMARY KEY); INSERT INTO public.kept VALUES (7); SELECT platform.grant('SELECT', 'public.kept', 'anon')",
  )
  await owner.end()

  // 4. Ctrl-C. dev.json stays; `gatehouse status` says the stack is not running (exit 3).
  await stopWithCtrlC(t, run, info)
  const stopped = await status(copy)
  t.equal(stopped.code, 3, 'status exits 3 once the stack has stopped')
  t.match(stopped.stdout, /Gatehouse is NOT running/)
  t.notMatch(stopped.stdout, /Gatehouse is running/)
  t.match(stopped.stdout, info.gateway_url, 'and still shows the URLs and keys of its last start')

  // 5. Second start: nothing to provision; the same keys, the same panel secret, the data kept
  // (on other ports: the kernel's choice again).
  const again = await startDevProcess(t, copy)
  t.comment(`second start ready in ${again.readyMs} ms`)
  const info2 = JSON.parse(readFileSync(path.join(copy.root, '.gatehouse', 'dev.json'), 'utf8'))
  const withoutUrl = (dbs: Array<{ url: string }>) => dbs.map(({ url, ...rest }) => rest)
  t.same(withoutUrl(info2.databases), withoutUrl(info.databases))
  for (const d of info2.databases) t.equal(d.url, `${info2.gateway_url}/${d.database}`)
  const demo2 = info2.databases.find((d: { database: string }) => d.database === demo.database)
  const kept = await fetch(`${demo2.url}/rest/v1/kept?select=id`, { headers: { apikey: demo.public_key } })
  t.equal(kept.status, 200)
  t.same(await kept.json(), [{ id: 7 }])
  const signin = await fetch(`${demo2.url}/auth/v1/token?grant_type=password`, {
    method: 'POST',
    headers: { apikey: demo.public_key, 'content-type': 'application/json' },
    body: JSON.stringify({ email: 'someone@example.com', password: 'a fine password' }),
  })
  t.equal(signin.status, 200, 'the user of the first run signs in')
  const exchange2 = await fetch(
    `${info2.panel_url}/organizations/org_demo/databases/${demo.database}/api/app-session`,
    {
      method: 'POST',
      headers: { authorization: `Bearer ${info.panel_session}` },
    },
  )
  t.equal(exchange2.status, 200, "the first run's panel session still works (secret kept in .gatehouse)")

  // 6. Killed without a chance to clean up (a crash, kill -9): the mail catcher it started
  // goes too, so nothing holds the ports of the next start.
  again.child.kill('SIGKILL')
  t.equal((await again.exited).signal, 'SIGKILL')
  for (const [name, port] of Object.entries(listeners(info2)))
    t.ok(await eventuallyFree(port), `${name} port ${port} is free after kill -9`)

  const tenantsInCluster = new pg.Client({ connectionString: adminUrl() })
  await tenantsInCluster.connect()
  const dbs = await tenantsInCluster.query(
    'SELECT datname FROM pg_database WHERE datname = ANY($1::text[]) ORDER BY 1',
    [copy.tenants.map((x) => x.database)],
  )
  await tenantsInCluster.end()
  t.equal(dbs.rowCount, 2, "the databases stay after a stop (dropped by this test's teardown)")
})

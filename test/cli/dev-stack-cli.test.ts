// The CLI in a checkout where `npm start` runs (.gatehouse/dev.json of a live process) or ran:
// `gatehouse tenants apply` is refused with what to do instead (the stack applies
// config/tenants itself; an apply would write the files' default ports over its records),
// `--dry-run` still validates, and a store named explicitly passes the guard; `gatehouse
// status` says whether the stack that wrote dev.json still runs (exit 3 when it stopped).
// The "running stack" is this test process's pid in a dev.json: no stack is started.
import t from 'tap'
import { spawn } from 'node:child_process'
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { REPO_ROOT } from '../helpers/e2e-stack.js'
import { shellEnv } from '../helpers/shell-env.js'
import { tenantFile } from '../helpers/tenant-fixtures.js'
import { createRedisStore, parseTenantFile, toTenant } from '../../src/tenants/index.js'

const BIN = path.join(REPO_ROOT, 'node_modules', '.bin', 'gatehouse')

interface Result {
  code: number | null
  stdout: string
  stderr: string
}

function run(args: string[], cwd: string, env: NodeJS.ProcessEnv = shellEnv()): Promise<Result> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] })
    let stdout = ''
    let stderr = ''
    child.stdout.setEncoding('utf8').on('data', (d: string) => {
      stdout += d
    })
    child.stderr.setEncoding('utf8').on('data', (d: string) => {
      stderr += d
    })
    child.once('error', reject)
    child.once('close', (code) => resolve({ code, stdout, stderr }))
  })
}

/** A checkout with the demo tenant files and a dev.json naming `pid` as the stack's process. */
function checkout(
  t: { teardown(fn: () => void): void },
  pid: number,
  source: 'files' | 'redis',
  postgresUrl = process.env.DATABASE_URL ?? 'postgres://postgres:pw@127.0.0.1:1/postgres',
  extra: Record<string, unknown> = {},
): string {
  const root = mkdtempSync(path.join(os.tmpdir(), 'gatehouse-devcli-'))
  t.teardown(() => rmSync(root, { recursive: true, force: true }))
  mkdirSync(path.join(root, 'config', 'tenants'), { recursive: true })
  for (const f of ['demo.yaml', 'demo2.yaml'])
    copyFileSync(path.join(REPO_ROOT, 'config', 'tenants', f), path.join(root, 'config', 'tenants', f))
  mkdirSync(path.join(root, '.gatehouse'))
  writeFileSync(
    path.join(root, '.gatehouse', 'dev.json'),
    JSON.stringify({
      gateway_url: 'http://127.0.0.1:28500',
      panel_url: 'http://127.0.0.1:28501',
      panel_session: 'eyJ.session.x',
      mail_url: 'http://127.0.0.1:28580',
      rest_engine_url: 'http://127.0.0.1:28502',
      auth_engine_url: 'http://127.0.0.1:28503',
      databases: [
        {
          database: 'demo',
          organization: 'org_demo',
          url: 'http://127.0.0.1:28500/demo',
          public_key: 'pk_x',
          secret_key: 'sk_x',
          owner_url: 'postgres://o:p@127.0.0.1:1/demo',
        },
      ],
      pid,
      postgres_admin_url: postgresUrl,
      tenants_source: source,
      tenants_dir: path.join(root, 'config', 'tenants'),
      tenants_source_dir: path.join(root, 'config', 'tenants'),
      ...extra,
    }),
  )
  return root
}

t.test('tenants apply beside a running stack is refused with what to do instead', async (t) => {
  for (const source of ['files', 'redis'] as const) {
    const root = checkout(t, process.pid, source)
    const r = await run(['tenants', 'apply', 'config/tenants'], root)
    t.equal(r.code, 1, `${source}: refused`)
    t.match(
      r.stderr,
      new RegExp(
        `the development stack running here \\(npm start, pid ${process.pid}\\) applies config/tenants itself`,
      ),
      source,
    )
    t.match(r.stderr, /served within a second/)
    if (source === 'redis') t.match(r.stderr, /writes the record to its Redis/)
    t.match(r.stderr, /--dry-run/)
    t.notMatch(r.stderr, /unexpected failure|at .*\.ts:\d+/)

    const dry = await run(['tenants', 'apply', '--dry-run', 'config/tenants'], root)
    t.equal(dry.code, 0, `${source}: --dry-run still validates${dry.stderr ? ': ' + dry.stderr : ''}`)
    t.match(dry.stdout, /2 tenant file\(s\) valid: demo, demo2 \(dry run, nothing written\)/)
  }
  // A store named explicitly is the user's choice: the guard lets it through (here it then
  // fails to reach a Redis nobody runs, with its own message).
  const root = checkout(t, process.pid, 'files')
  const named = await run(
    ['tenants', 'apply', 'config/tenants'],
    root,
    shellEnv({ GATEHOUSE_TENANTS_SOURCE: 'redis', GATEHOUSE_REDIS_URL: 'redis://127.0.0.1:1' }),
  )
  t.notMatch(named.stderr, /applies config\/tenants itself/, 'an explicit store passes the guard')
})

t.test('beside a stack that runs with Redis, the tenants commands use its store', async (t) => {
  const url = process.env.REDIS_URL
  if (url === undefined) throw new Error('REDIS_URL is set by scripts/with-services.mjs')
  const prefix = `devcli-${process.pid}-${Date.now()}:`
  const store = createRedisStore({ url, prefix })
  t.teardown(() => store.close())
  // The store holds a record no tenant file has (as one the panel changed holds what the files
  // do not say): the CLI must show the store's.
  await store.putAll([toTenant(parseTenantFile(tenantFile('only_in_store'), 'only_in_store.yaml', {}))])
  const root = checkout(t, process.pid, 'redis', undefined, { redis_url: url, redis_key_prefix: prefix })
  const listed = await run(['tenants', 'list'], root)
  t.equal(listed.code, 0, listed.stderr)
  t.match(listed.stdout, /only_in_store/, "the store's record is listed")
  t.notMatch(listed.stdout, /demo2/, 'not the tenant files the stack merged')
  const keys = await run(['tenants', 'keys', 'list', 'only_in_store'], root)
  t.equal(keys.code, 0, keys.stderr)
  const shown = await run(['tenants', 'show', 'only_in_store'], root)
  t.equal(shown.code, 0, shown.stderr)
  t.match(shown.stdout, /only_in_store/)
  // A stack on tenant files keeps reading its files.
  const files = await run(['tenants', 'list'], checkout(t, process.pid, 'files'))
  t.match(files.stdout, /demo2/)
})

t.test("beside a running stack the CLI's public_url is the stack's gateway", async (t) => {
  const dump = await run(['config', 'dump'], checkout(t, process.pid, 'files'))
  t.equal(dump.code, 0, dump.stderr)
  t.match(
    dump.stdout,
    /^public_url = "http:\/\/127\.0\.0\.1:28500\/?"$/m,
    'so tenants create prints the URL the stack serves',
  )
})

t.test('gatehouse status tells a running stack from a stopped one', async (t) => {
  const live = await run(['status'], checkout(t, process.pid, 'files'))
  t.equal(live.code, 0)
  t.match(live.stdout, /Gatehouse is running\./)
  t.match(live.stdout, /http:\/\/127\.0\.0\.1:28500/)
  // Each value under its dev.json name.
  for (const [k, v] of Object.entries({
    gateway_url: 'http://127.0.0.1:28500',
    panel_url: 'http://127.0.0.1:28501',
    mail_url: 'http://127.0.0.1:28580',
    public_key: 'pk_x',
    secret_key: 'sk_x',
    owner_url: 'postgres://o:p@127.0.0.1:1/demo',
  })) {
    t.match(
      live.stdout,
      new RegExp(`^ +${k} +${v.replace(/[.]/g, '\\.')}`, 'm'),
      `the banner names ${k} as dev.json does`,
    )
  }
  t.match(live.stdout, /^ +panel_session \(Authorization: Bearer \.\.\.\):\n +eyJ\.session\.x$/m)

  // Running, but its Postgres does not answer: said, exit 4.
  const noPg = await run(['status'], checkout(t, process.pid, 'files', 'postgres://postgres:pw@127.0.0.1:1/postgres'))
  t.equal(noPg.code, 4, 'exit 4: running with a problem')
  t.match(
    noPg.stdout,
    /Gatehouse is running, BUT:\n {2}- postgres at 127\.0\.0\.1:1: .*requests that need a database fail/,
  )

  // A pid that is not alive: the stack stopped (dev.json stays).
  const gone = await new Promise<number>((resolve) => {
    const c = spawn(process.execPath, ['-e', ''], { stdio: 'ignore' })
    c.once('close', () => resolve(c.pid!))
  })
  const root = checkout(t, gone, 'files')
  const stopped = await run(['status'], root)
  t.equal(stopped.code, 3, 'exit 3')
  t.match(stopped.stdout, /Gatehouse is NOT running/)
  t.notMatch(stopped.stdout, /Gatehouse is running\./)
  t.match(stopped.stdout, /http:\/\/127\.0\.0\.1:28500/, 'the last URLs and keys are still shown')
  const json = await run(['status', '--json'], root)
  t.equal(json.code, 3)
  t.equal(JSON.parse(json.stdout).gateway_url, 'http://127.0.0.1:28500', 'the same JSON as dev.json')
  t.match(json.stderr, /not running/)

  // dev.json names a live pid, but the stack's lock says its owner is gone (killed, and the
  // pid reused since): not running.
  const reused = checkout(t, process.pid, 'files')
  writeFileSync(
    path.join(reused, '.gatehouse', 'dev.lock'),
    JSON.stringify({ pid: process.pid, started_at: '2026-01-01T00:00:00.000Z', proc_start: '1' }),
  )
  const stale = await run(['status'], reused)
  t.equal(stale.code, 3, 'a lock whose owner is not that process: not running')

  // Once stopped, tenants apply is no longer refused for it.
  const apply = await run(['tenants', 'apply', 'config/tenants'], root)
  t.notMatch(apply.stderr, /applies config\/tenants itself/)
})

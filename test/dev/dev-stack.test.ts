// `gatehouse dev` while it runs, with the `gatehouse` command in another shell of the same
// checkout: `tenants create` lands on the stack's cluster (no --postgres) and is served
// within moments, no restart; `tenants check` reads the databases the stack serves; an edit
// to a tenant file is picked up, a bad one is reported and the last good record kept; every
// log line names its part. Every port is the kernel's choice (dev.json says which).
import t from 'tap'
import { spawn, type ChildProcess } from 'node:child_process'
import { readFileSync, writeFileSync } from 'node:fs'
import path from 'node:path'
import { createWorkingCopy, REPO_ROOT } from '../helpers/e2e-stack.js'
import { adminUrl } from '../helpers/db.js'
import { dropTenant } from '../../src/platform/index.js'
import { KERNEL_PORTS_ENV, shellEnv } from '../helpers/shell-env.js'
import { until } from '../helpers/eventually.js'

// Whole development stacks start here: on a loaded machine that takes minutes, not seconds.
t.setTimeout(300_000)

const BIN = path.join(REPO_ROOT, 'node_modules', '.bin', 'gatehouse')
/** The running stack's gateway (dev.json's gateway_url). */
let GATEWAY = ''

function cli(cwd: string, args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(BIN, args, { cwd, env: shellEnv(), stdio: ['ignore', 'pipe', 'pipe'] })
    let stdout = ''
    let stderr = ''
    child.stdout!.setEncoding('utf8').on('data', (d: string) => {
      stdout += d
    })
    child.stderr!.setEncoding('utf8').on('data', (d: string) => {
      stderr += d
    })
    child.once('error', reject)
    child.once('close', (code) => resolve({ code, stdout, stderr }))
  })
}

/**
 * Polls `check` until it holds (the stack reacts to files asynchronously). The bound only
 * ends a hung run: a loaded machine may take long, nothing here measures speed.
 */
async function happened(what: string, check: () => Promise<boolean>, seconds = 60): Promise<boolean> {
  await until(check, what, seconds * 1000)
  return true
}

async function settings(database: string, key: string): Promise<number> {
  return (await fetch(`${GATEWAY}/${database}/auth/v1/settings`, { headers: { apikey: key } })).status
}

t.test('tenant files and the CLI while the stack runs', async (t) => {
  const copy = createWorkingCopy(t, 'devwatch')
  const env = shellEnv({
    DATABASE_URL: adminUrl(),
    ...KERNEL_PORTS_ENV,
    GATEHOUSE_LOG_LEVEL: 'info',
    GATEHOUSE_AUTH_BCRYPT_COST: '4',
  })
  const dev: ChildProcess = spawn(BIN, ['dev'], { cwd: copy.root, env, stdio: ['ignore', 'pipe', 'pipe'] })
  let out = ''
  let err = ''
  dev.stdout!.setEncoding('utf8').on('data', (d: string) => {
    out += d
  })
  dev.stderr!.setEncoding('utf8').on('data', (d: string) => {
    err += d
  })
  const exited = new Promise<number | null>((resolve) => dev.once('exit', (code) => resolve(code)))
  t.teardown(async () => {
    if (dev.exitCode === null && dev.signalCode === null) {
      dev.kill('SIGINT')
      await exited
    }
  })
  await happened(
    'the stack is ready',
    async () => {
      if (dev.exitCode !== null) throw new Error(`gatehouse dev exited: ${out} ${err}`)
      return out.includes('Ctrl-C stops everything')
    },
    110,
  )
  GATEWAY = (
    JSON.parse(readFileSync(path.join(copy.root, '.gatehouse', 'dev.json'), 'utf8')) as { gateway_url: string }
  ).gateway_url

  // 1. `tenants create` in another shell: no --postgres, no DATABASE_URL there.
  const database = `devwatch_${Math.random().toString(16).slice(2, 8)}`
  t.teardown(() => dropTenant({ adminUrl: adminUrl(), database }).catch(() => {}))
  const created = await cli(copy.root, ['tenants', 'create', database, '--org', 'org_demo'])
  t.equal(created.code, 0, created.stderr)
  t.match(created.stdout, new RegExp(`created database "${database}"`))
  t.match(created.stdout, new RegExp(`on .*:${new URL(adminUrl()).port}\\b`), "on the stack's cluster")
  const file = path.join(copy.root, 'config', 'tenants', `${database}.yaml`)
  const publicKey = /public key:\s+(\S+)/.exec(created.stdout)![1]!
  t.ok(
    await happened('the new database is served', async () => (await settings(database, publicKey)) === 200),
    'served without a restart',
  )
  const listed = async (): Promise<Array<{ database: string; public_key: string; url: string }>> => {
    const st = await cli(copy.root, ['status', '--json'])
    return (JSON.parse(st.stdout) as { databases: Array<{ database: string; public_key: string; url: string }> })
      .databases
  }
  t.match(
    (await listed()).find((d) => d.database === database),
    { public_key: publicKey, url: `${GATEWAY}/${database}` },
    '`gatehouse status` (dev.json) lists it as the banner lists the others',
  )

  // 2. `tenants check` reads the databases the stack serves (its cluster, not the committed URL).
  const demo = copy.byName('demo').database
  const check = await cli(copy.root, ['tenants', 'check', demo])
  t.notMatch(check.stderr, /cannot connect/, check.stderr)
  t.ok(check.code === 0 || check.code === 1, 'the check ran')
  t.match(check.stdout, demo)

  // 3. A bad edit: reported, and the last good record stays.
  const good = readFileSync(file, 'utf8')
  writeFileSync(file, good.replace(/^organization: .*$/m, 'organization: [not, a, string]'))
  t.ok(await happened('the bad file is reported', async () => out.includes(`${database}.yaml is not valid`)))
  t.match(out, new RegExp(`database ${database} keeps its last good record`))
  t.equal(await settings(database, publicKey), 200, 'still served with its last good record')

  // 4. A good edit (a new public key): picked up.
  const newKey = `pk_${'0123456789abcdef'.repeat(2)}${publicKey.slice(-16)}`
  writeFileSync(file, good.replace(publicKey, newKey))
  t.ok(await happened('the new key works', async () => (await settings(database, newKey)) === 200))
  t.not(await settings(database, publicKey), 200, 'the old key no longer does')
  t.equal((await listed()).find((d) => d.database === database)?.public_key, newKey, 'status shows the new key')

  // 5. Every log line names its part.
  const lines = out.split('\n').filter((l) => l.startsWith('{'))
  t.ok(lines.length > 0, 'there are log lines')
  const parts = new Set(['gateway', 'rest', 'auth', 'panel', 'tenants', 'dev'])
  const without = lines.filter((l) => !parts.has((JSON.parse(l) as { part?: string }).part ?? ''))
  t.same(without, [], 'no line without its part')

  dev.kill('SIGINT')
  t.equal(await exited, 0)
})

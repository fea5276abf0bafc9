// `gatehouse dev --port-offset N` moves every port of the development stack by N (gateway,
// engines, panel, their admin listeners, the mail catcher; the embedded Postgres too), so a
// second checkout's stack runs beside the first with one setting; GATEHOUSE_DEV_PORT_OFFSET
// says the same; `gatehouse dev --help` lists every GATEHOUSE_* variable the stack reads.
// The stack here uses the test run's cluster (DATABASE_URL). Its ports are the defaults moved
// by 10007 (18007, 13007, 20006, 18008, 19107-19110, 11032, 11087): this file's.
import t from 'tap'
import { spawn } from 'node:child_process'
import { readdirSync, readFileSync } from 'node:fs'
import path from 'node:path'
import { createWorkingCopy, REPO_ROOT } from '../helpers/e2e-stack.js'
import { adminUrl } from '../helpers/db.js'
import { shellEnv } from '../helpers/shell-env.js'
import { configEnvNames } from '../../src/config/index.js'
import { devPgPort, offsetPortOverrides } from '../../src/dev/index.js'
import { loadConfig } from '../../src/config/index.js'

t.setTimeout(300_000)

const BIN = path.join(REPO_ROOT, 'node_modules', '.bin', 'gatehouse')
const OFFSET = 10007

function run (cwd: string, args: string[], env: NodeJS.ProcessEnv, until?: (out: string) => boolean): Promise<{ code: number | null, stdout: string, stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(BIN, args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] })
    let stdout = ''
    let stderr = ''
    child.stdout!.setEncoding('utf8').on('data', (d: string) => {
      stdout += d
      if (until?.(stdout) === true) child.kill('SIGINT')
    })
    child.stderr!.setEncoding('utf8').on('data', (d: string) => { stderr += d })
    child.once('error', reject)
    child.once('close', (code) => resolve({ code, stdout, stderr }))
  })
}

t.test('--port-offset moves every port of the stack', async (t) => {
  const copy = createWorkingCopy(t, 'offset')
  const env = shellEnv({ DATABASE_URL: adminUrl(), GATEHOUSE_LOG_LEVEL: 'warn', GATEHOUSE_AUTH_BCRYPT_COST: '4' })
  let info: any
  const r = await run(copy.root, ['dev', '--port-offset', String(OFFSET)], env, (out) => {
    if (!out.includes('Ctrl-C stops everything')) return false
    info = JSON.parse(readFileSync(path.join(copy.root, '.gatehouse', 'dev.json'), 'utf8'))
    return true
  })
  t.equal(r.code, 0, r.stderr)
  const port = (url: string): number => Number(new URL(url).port)
  t.same({
    gateway: port(info.gateway_url),
    panel: port(info.panel_url),
    mail: port(info.mail_url),
    rest: port(info.rest_engine_url),
    auth: port(info.auth_engine_url),
    admin: Object.fromEntries(Object.entries(info.admin_urls as Record<string, string>).map(([k, v]) => [k, port(v)]))
  }, {
    gateway: 8000 + OFFSET,
    panel: 8001 + OFFSET,
    mail: 1080 + OFFSET,
    rest: 3000 + OFFSET,
    auth: 9999 + OFFSET,
    admin: { gateway: 9100 + OFFSET, rest: 9101 + OFFSET, auth: 9102 + OFFSET, panel: 9103 + OFFSET }
  })
  t.equal(info.databases[0].url, `http://127.0.0.1:${8000 + OFFSET}/${info.databases[0].database}`, 'database URLs on the moved gateway')
})

t.test('the offset of the embedded Postgres and of ports the environment set; 0 stays 0', async (t) => {
  t.equal(devPgPort({}, OFFSET), 54322 + OFFSET)
  t.equal(devPgPort({ GATEHOUSE_DEV_PG_PORT: '6000' }, 5), 6005)
  const cfg = loadConfig({ env: { GATEHOUSE_GATEWAY_PORT: '7000', GATEHOUSE_REST_ADMIN_PORT: '0' } })
  t.match(offsetPortOverrides(cfg, 3), { gateway: { port: 7003, admin_port: 9103 }, rest: { port: 3003, admin_port: 0 }, mail: { smtp_port: 1028, web_port: 1083 } })
  t.throws(() => offsetPortOverrides(cfg, 60000), /moves .* past 65535/)
})

t.test('GATEHOUSE_DEV_PORT_OFFSET is read; a bad value is refused before anything starts', async (t) => {
  const copy = createWorkingCopy(t, 'offsetenv')
  const r = await run(copy.root, ['dev'], shellEnv({ DATABASE_URL: adminUrl(), GATEHOUSE_DEV_PORT_OFFSET: 'ten' }))
  t.equal(r.code, 1)
  t.match(r.stderr, /GATEHOUSE_DEV_PORT_OFFSET must be a whole number/)
  t.notMatch(r.stderr, /unknown environment variable/)
  const flag = await run(copy.root, ['dev', '--port-offset', '-3'], shellEnv({ DATABASE_URL: adminUrl() }))
  t.match(flag.stderr, /--port-offset must be a whole number/)
})

t.test('gatehouse dev --help lists every GATEHOUSE_* variable the stack reads', async (t) => {
  const r = await run(REPO_ROOT, ['dev', '--help'], shellEnv())
  t.equal(r.code, 0)
  t.match(r.stdout, /--port-offset <n>/)
  t.match(r.stdout, /--reset/)
  const read = new Set(configEnvNames())
  for (const dir of ['src/dev', 'src']) {
    for (const f of readdirSync(path.join(REPO_ROOT, dir)).filter((f) => f.endsWith('.ts') && (dir === 'src/dev' || f === 'serve.ts'))) {
      for (const m of readFileSync(path.join(REPO_ROOT, dir, f), 'utf8').matchAll(/\bGATEHOUSE_[A-Z0-9_]*[A-Z0-9]\b/g)) read.add(m[0])
    }
  }
  for (const name of read) t.match(r.stdout, new RegExp(`\\b${name}\\b`), `lists ${name}`)
  t.match(r.stdout, /GATEHOUSE_GATEWAY_PORT +8000/, 'ports with their defaults')
})

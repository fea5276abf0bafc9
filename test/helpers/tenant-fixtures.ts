// Tenant test fixtures: valid tenant files (plaintext keys), temp directories of YAML
// files, and a redis-server of our own on a unix socket (to kill it for outage tests).
// Not a test file (only *.test.ts run).
import { spawn, type ChildProcess } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { stringify } from 'yaml'

interface Teardown {
  teardown(fn: () => unknown): void
}

/** A valid tenant file for `database` (plaintext keys derived from the name). */
export function tenantFile(database: string, over: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    database,
    organization: `org_${database}`,
    postgres: `postgres://owner:pw-${database}@127.0.0.1:5432/${database}`,
    roles: { anon: `t_${database}_anon`, auth: `t_${database}_auth`, svc: `t_${database}_svc` },
    jwt: {
      secret: `jwt-secret-of-${database}-0123456789abcdef0123`,
      upstream_secret: `upstream-secret-of-${database}-0123456789abcdef`,
    },
    keys: { public: `pk_test_${database}_0123456789`, secret: `sk_test_${database}_0123456789` },
    upstreams: { auth: `http://127.0.0.1:9999/${database}`, rest: `http://127.0.0.1:3000/${database}` },
    auth: { site_url: 'http://localhost:3000' },
    ...over,
  }
}

export function tempDir(t: Teardown): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'gh-tenants-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  return dir
}

/** Writes `name -> content` (objects as YAML, strings verbatim) into a fresh temp dir. */
export function writeTenantDir(t: Teardown, files: Record<string, unknown>): string {
  const dir = tempDir(t)
  for (const [name, content] of Object.entries(files)) {
    writeFileSync(path.join(dir, name), typeof content === 'string' ? content : stringify(content))
  }
  return dir
}

/**
 * A redis-server child listening only on a unix socket (no TCP port to race for).
 * stop() kills it (SIGKILL: an outage, not a shutdown); start() starts it again on the same socket.
 */
export async function spawnRedis(t: Teardown): Promise<{ url: string; stop(): Promise<void>; start(): Promise<void> }> {
  const dir = tempDir(t)
  const socket = path.join(dir, 'redis.sock')
  let child: ChildProcess | null = null
  const start = async () => {
    const c = spawn(
      'redis-server',
      ['--port', '0', '--unixsocket', socket, '--save', '', '--appendonly', 'no', '--dir', dir],
      { stdio: ['ignore', 'pipe', 'ignore'] },
    )
    child = c
    // Ready once it says so: its socket file exists from bind(), before it listens.
    await new Promise<void>((resolve, reject) => {
      let out = ''
      const onData = (chunk: Buffer): void => {
        out += chunk.toString('utf8')
        if (!/ready to accept connections/i.test(out)) return
        c.stdout!.off('data', onData)
        c.stdout!.resume()
        resolve()
      }
      c.stdout!.on('data', onData)
      c.once('exit', (code) =>
        reject(new Error(`redis-server exited (${code}) before it was ready: ${out.slice(-500)}`)),
      )
    })
  }
  const stop = async () => {
    const c = child
    if (!c || c.exitCode !== null) return
    await new Promise<void>((resolve) => {
      c.once('exit', () => resolve())
      c.kill('SIGKILL')
    })
    rmSync(socket, { force: true })
    child = null
  }
  // Stopped at teardown even when it never became ready (the wait then failed the test).
  t.teardown(stop)
  await start()
  return { url: socket, stop, start }
}

export { eventually } from './eventually.js'

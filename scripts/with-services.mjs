#!/usr/bin/env node
// Runs a command with real Postgres and Redis available, then stops them.
// Uses DATABASE_URL / REDIS_URL when they are set and reachable; otherwise starts an
// embedded Postgres (real binaries from npm, src/dev/postgres.ts) and a redis-server child on
// ports the kernel names (each started again on another when a process took its port first). Whatever happens to the command (it fails, crashes, or this wrapper gets
// SIGINT/SIGTERM/SIGHUP or an error of its own), both are stopped and every file made for
// the run is removed: the command's temporary files go to a private directory (TMPDIR)
// that is deleted at the end, so nothing is left in the system's temporary directory.
import { spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { chmodSync, mkdtempSync, rmSync } from 'node:fs'
import net from 'node:net'
import os from 'node:os'
import path from 'node:path'
import pg from 'pg'

const [cmd, ...args] = process.argv.slice(2)
if (!cmd) {
  console.error('usage: with-services.mjs <command> [args...]')
  process.exit(2)
}

function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer()
    srv.unref()
    srv.on('error', reject)
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address()
      srv.close(() => resolve(port))
    })
  })
}

async function reachablePostgres(url) {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 2000 })
  client.on('error', () => {})
  try {
    await client.connect()
    await client.end()
    return true
  } catch {
    return false
  }
}

function reachableRedis(url) {
  return new Promise((resolve) => {
    const u = new URL(url)
    const sock = net.connect(Number(u.port || 6379), u.hostname)
    const done = (ok) => {
      sock.destroy()
      resolve(ok)
    }
    sock.setTimeout(2000, () => done(false))
    sock.on('error', () => done(false))
    sock.on('connect', () => {
      sock.write('PING\r\n')
    })
    sock.on('data', (d) => done(d.toString().includes('PONG')))
  })
}

// Everything this run makes on disk lives below `scratch` (removed last). Traversable by
// others (not listable): as root, Postgres runs as another user and keeps its data here.
const scratch = mkdtempSync(path.join(os.tmpdir(), 'gatehouse-run-'))
chmodSync(scratch, 0o711)
// Temporary files of this process and of the command (tsx's cache, the tests' own) go here.
const childTmp = mkdtempSync(path.join(scratch, 'tmp-'))
process.env.TMPDIR = childTmp
const cleanups = [() => rmSync(scratch, { recursive: true, force: true })]
let stopping
function stopAll() {
  stopping ??= (async () => {
    while (cleanups.length) {
      const fn = cleanups.pop()
      try {
        await fn()
      } catch (err) {
        console.error('[with-services] cleanup:', err.message)
      }
    }
  })()
  return stopping
}

async function startPostgres() {
  if (process.env.DATABASE_URL && (await reachablePostgres(process.env.DATABASE_URL))) {
    return process.env.DATABASE_URL
  }
  const { tsImport } = await import('tsx/esm/api')
  const { startEmbeddedPostgres } = await tsImport('../src/dev/postgres.ts', import.meta.url)
  const server = await startEmbeddedPostgres({
    dir: path.join(scratch, 'pg'),
    fallbackBase: scratch,
    port: 0, // the kernel's choice (another one when taken before Postgres binds it)
    persistent: false,
    password: randomBytes(18).toString('base64url'),
    initdbFlags: ['--nosync'],
    settings: {
      fsync: 'off',
      synchronous_commit: 'off',
      full_page_writes: 'off',
      max_connections: '400',
      reserved_connections: '40',
      shared_buffers: '256MB',
    },
    onLog: (line) => {
      if (process.env.GATEHOUSE_DEBUG_PG) process.stderr.write(line)
    },
  })
  cleanups.push(() => server.stop())
  return server.url
}

let redisChild

/**
 * redis-server on `port`, once it listens (its URL); 'taken' when it could not bind the port (another
 * process took it after the kernel named it free).
 */
async function tryRedis(port) {
  const child = spawn(
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', scratch],
    { stdio: ['ignore', 'pipe', 'ignore'] },
  )
  redisChild = child
  let output = ''
  child.stdout.setEncoding('utf8').on('data', (d) => {
    output += d
  })
  const stop = () =>
    new Promise((resolve) => {
      if (child.exitCode !== null || child.signalCode !== null || child.pid === undefined) return resolve()
      child.once('exit', resolve)
      child.kill('SIGTERM')
    })
  cleanups.push(stop)
  await new Promise((resolve, reject) => {
    child.once('error', (err) =>
      reject(new Error(`cannot start redis-server (${err.message}); install it: apt-get install -y redis-server`)),
    )
    child.once('spawn', resolve)
  })
  // Its own log says when it listens (a PING could be answered by whoever took the port).
  return new Promise((resolve) => {
    const onData = () => {
      if (!/Ready to accept connections/.test(output)) return
      child.stdout.off('data', onData)
      child.off('exit', onExit)
      resolve(`redis://127.0.0.1:${port}`)
    }
    const onExit = () => {
      child.stdout.off('data', onData)
      resolve(/Address already in use/i.test(output) ? 'taken' : null)
    }
    child.stdout.on('data', onData)
    child.once('exit', onExit)
  })
}

async function startRedis() {
  if (process.env.REDIS_URL && (await reachableRedis(process.env.REDIS_URL))) return process.env.REDIS_URL
  for (let attempt = 1; attempt <= 5; attempt++) {
    const url = await tryRedis(await freePort())
    if (url === null) break
    if (url !== 'taken') return url
  }
  throw new Error('redis-server did not start (its ports were taken, or it exited)')
}

let child
let code = 1
// Signals: passed on to the command; if it is not running (yet), stop everything now.
for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
  process.on(sig, () => {
    if (child !== undefined && child.exitCode === null) child.kill(sig)
    else void stopAll().then(() => process.exit(130))
  })
}
// An error of this wrapper itself: nothing left behind either.
process.on('uncaughtException', (err) => {
  console.error('[with-services]', err.stack || err.message)
  if (child !== undefined && child.exitCode === null) child.kill('SIGTERM')
  void stopAll().then(() => process.exit(1))
})
// The last resort when the event loop cannot run the cleanup (process.exit elsewhere).
process.on('exit', () => {
  if (redisChild !== undefined && redisChild.exitCode === null) redisChild.kill('SIGKILL')
  rmSync(scratch, { recursive: true, force: true })
})

try {
  const [databaseUrl, redisUrl] = await Promise.all([startPostgres(), startRedis()])
  const env = {
    ...process.env,
    DATABASE_URL: databaseUrl,
    REDIS_URL: redisUrl,
    GATEHOUSE_TEST_SERVICES: '1',
    TMPDIR: childTmp,
  }
  child = spawn(cmd, args, { stdio: 'inherit', env, shell: false })
  code = await new Promise((resolve) => {
    child.once('error', (err) => {
      console.error(`[with-services] cannot run ${cmd}: ${err.message}`)
      resolve(127)
    })
    child.once('exit', (c, sig) => resolve(c ?? (sig ? 1 : 0)))
  })
} catch (err) {
  console.error('[with-services]', err.stack || err.message)
} finally {
  await stopAll()
}
process.exit(code)

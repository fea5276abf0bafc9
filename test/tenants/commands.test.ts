import t from 'tap'
import { execFile } from 'node:child_process'
import path from 'node:path'
import { createRedisStore } from '../../src/tenants/index.js'
import { createTestRedis } from '../helpers/redis.js'
import { tenantFile, writeTenantDir, eventually } from '../helpers/tenant-fixtures.js'

interface Run {
  code: number
  stdout: string
  stderr: string
}

// Each CLI start costs a core for a second or more (tsx compiles on the fly): at most two run
// at a time, whatever the callers ask for at once, so a loaded two-core machine runs them in
// turn instead of starving all of them past their timeout.
const CLI_SLOTS = 2
/** Per run, counted from its own start (not from the time it waited for a slot). */
const CLI_TIMEOUT_MS = 60_000
let running = 0
const waiting: Array<() => void> = []

async function inSlot<T>(run: () => Promise<T>): Promise<T> {
  if (running < CLI_SLOTS) running++
  else await new Promise<void>((resolve) => waiting.push(resolve)) // a finishing run hands its slot over
  try {
    return await run()
  } finally {
    const next = waiting.shift()
    if (next) next()
    else running--
  }
}

/** The real CLI, as an operator runs it. */
function cli(args: string[], env: Record<string, string>): Promise<Run> {
  const clean = Object.fromEntries(
    Object.entries(process.env).filter(([k]) => !k.startsWith('GATEHOUSE_') && k !== 'REDIS_URL'),
  )
  return inSlot(
    () =>
      new Promise((resolve) => {
        execFile(
          process.execPath,
          ['--import', 'tsx', 'src/cli.ts', ...args],
          { env: { ...clean, ...env }, timeout: CLI_TIMEOUT_MS },
          (err, stdout, stderr) =>
            resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stdout, stderr }),
        )
      }),
  )
}

// 20 runs, two at a time: more than tap's default per-file timeout allows on a busy machine.
t.setTimeout(600_000)

const hasStack = (r: Run) => /\n\s+at /.test(r.stderr)

t.test('tenants apply / list / show / delete against Redis', async (t) => {
  const { redis, prefix, url } = createTestRedis(t)
  const env = { GATEHOUSE_TENANTS_SOURCE: 'redis', GATEHOUSE_REDIS_URL: url, GATEHOUSE_REDIS_KEY_PREFIX: prefix }
  const watcher = createRedisStore({ url, prefix })
  t.teardown(() => watcher.close())
  const changes: string[] = []
  watcher.onChange((db) => changes.push(db))
  await watcher.subscribed()

  const good = writeTenantDir(t, { 'acme.yaml': tenantFile('acme'), 'beta.yaml': tenantFile('beta') })

  await t.test('apply with good files writes all, then publishes', async (t) => {
    const r = await cli(['tenants', 'apply', good], env)
    t.equal(r.code, 0, r.stderr)
    t.match(r.stdout, /applied 2 tenant\(s\): acme, beta/)
    t.same((await redis.smembers(`${prefix}tenants`)).sort(), ['acme', 'beta'])
    t.equal(await redis.hget(`${prefix}tenant:acme`, 'version'), '1')
    t.ok(await eventually(() => changes.length >= 2), 'invalidations published')
    t.same([...changes].sort(), ['acme', 'beta'])
  })

  await t.test('apply with one bad file writes nothing', async (t) => {
    const mixed = writeTenantDir(t, {
      'acme.yaml': tenantFile('acme', { organization: 'org_changed' }),
      'gamma.yaml': tenantFile('gamma'),
      'delta.yaml': tenantFile('delta', { jwt: { secret: 'too-short', upstream_secret: 'u'.repeat(40) } }),
    })
    const before = await redis.keys(`${prefix}*`)
    changes.length = 0
    const r = await cli(['tenants', 'apply', mixed], env)
    t.equal(r.code, 1)
    t.match(r.stderr, /^gatehouse: invalid tenant files/)
    t.match(r.stderr, `${path.join(mixed, 'delta.yaml')}: jwt.secret: must NOT have fewer than 32 characters`)
    t.notOk(hasStack(r), 'no stack trace')
    t.equal(r.stdout, '')
    t.same((await redis.keys(`${prefix}*`)).sort(), before.sort(), 'no key added')
    t.equal(await redis.exists(`${prefix}tenant:gamma`), 0, 'the good file of the set was not written either')
    t.equal(await redis.hget(`${prefix}tenant:acme`, 'version'), '1', 'acme untouched')
    t.notMatch((await redis.hget(`${prefix}tenant:acme`, 'record')) ?? '', /org_changed/)
    // Redis delivers a channel's messages in the order it took them: once a marker published
    // after the CLI exited has arrived, anything the CLI published would have arrived first.
    await redis.publish(`${prefix}tenants:changed`, 'marker')
    t.ok(await eventually(() => changes.includes('marker')), 'the marker arrived')
    t.same(changes, ['marker'], 'nothing published')
  })

  await t.test('list', async (t) => {
    const [r, j] = await Promise.all([cli(['tenants', 'list'], env), cli(['tenants', 'list', '--json'], env)])
    t.equal(r.code, 0, r.stderr)
    t.equal(r.stdout, 'acme\nbeta\n')
    t.same(JSON.parse(j.stdout), ['acme', 'beta'])
  })

  await t.test('show masks secrets', async (t) => {
    const [r, j, missing, bad] = await Promise.all([
      cli(['tenants', 'show', 'acme'], env),
      cli(['tenants', 'show', 'acme', '--json'], env),
      cli(['tenants', 'show', 'nope'], env),
      cli(['tenants', 'show', 'Bad/Name'], env),
    ])
    t.equal(r.code, 0, r.stderr)
    t.match(r.stdout, /^# acme: version 1, updated \d{4}-/)
    t.match(r.stdout, /organization: org_acme/)
    t.equal(j.code, 0, j.stderr)
    const shown = JSON.parse(j.stdout)
    t.equal(shown.database, 'acme')
    t.equal(shown.jwt.secret, '****')
    t.equal(shown.jwt.upstream_secret, '****')
    t.equal(shown.postgres, 'postgres://owner:****@127.0.0.1:5432/acme')
    const f = tenantFile('acme') as {
      jwt: { secret: string; upstream_secret: string }
      keys: { public: string; secret: string }
    }
    for (const out of [r.stdout, j.stdout]) {
      for (const secret of [f.jwt.secret, f.jwt.upstream_secret, f.keys.public, f.keys.secret, 'pw-acme']) {
        t.notOk(out.includes(secret), `no ${secret.slice(0, 6)}... in the output`)
      }
      t.notMatch(out, /sha256:[0-9a-f]{16}/, 'not even the key hashes')
    }
    t.equal(missing.code, 1)
    t.match(missing.stderr, /^gatehouse: no tenant "nope" in the store/)
    t.equal(bad.code, 1)
    t.match(bad.stderr, /is not a database name/)
  })

  await t.test('delete', async (t) => {
    changes.length = 0
    const r = await cli(['tenants', 'delete', 'beta'], env)
    t.equal(r.code, 0, r.stderr)
    t.match(r.stdout, /deleted beta/)
    t.same(await redis.smembers(`${prefix}tenants`), ['acme'])
    t.ok(await eventually(() => changes.includes('beta')), 'invalidation published')
    const again = await cli(['tenants', 'delete', 'beta'], env)
    t.equal(again.code, 1)
    t.match(again.stderr, /no tenant "beta"/)
  })
})

// Independent of each other and of Redis: asked for at once, run two at a time (inSlot).
t.test('without a reachable store', async (t) => {
  const dir = writeTenantDir(t, { 'acme.yaml': tenantFile('acme') })
  const files = { GATEHOUSE_TENANTS_SOURCE: 'files' }
  const down = { GATEHOUSE_TENANTS_SOURCE: 'redis', GATEHOUSE_REDIS_URL: path.join(dir, 'no-such.sock') }
  const [onFiles, dry, apply, list, ...helps] = await Promise.all([
    cli(['tenants', 'apply', dir], files),
    cli(['tenants', 'apply', '--dry-run', dir], files),
    cli(['tenants', 'apply', dir], down),
    cli(['tenants', 'list'], down),
    ...['apply', 'list', 'show', 'delete'].map((c) => cli(['tenants', c, '--help'], {})),
  ])

  t.test('apply against the files source explains that files are read directly', async (t) => {
    t.equal(onFiles.code, 1)
    t.match(onFiles.stderr, /tenants\.source is "files": every process reads the tenant files .* directly/)
    t.notOk(hasStack(onFiles), 'no stack trace')
    t.equal(dry.code, 0, dry.stderr)
    t.match(dry.stdout, /1 tenant file\(s\) valid: acme/)
  })

  t.test('Redis unreachable: a clear error, exit 1, no stack', async (t) => {
    for (const r of [apply, list]) {
      t.equal(r.code, 1)
      t.match(r.stderr, /^gatehouse: tenant store unreachable: redis at .*no-such\.sock/)
      t.notOk(hasStack(r), 'no stack trace')
    }
  })

  t.test('--help on every command', async (t) => {
    for (const r of helps) {
      t.equal(r.code, 0)
      t.match(r.stdout, /^Usage: gatehouse tenants \w+/)
    }
  })
})

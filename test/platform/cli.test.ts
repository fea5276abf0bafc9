// `gatehouse tenants create|drop|migrate` as a person runs them: a real child process of
// src/cli.ts for the round trip and for exit codes; the other refusals run the same
// commander tree in process (each process start costs seconds on a shared machine).
import t from 'tap'
import { execFileSync, spawn } from 'node:child_process'
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { createRequire } from 'node:module'
import { parse as parseYaml } from 'yaml'
import { parseTenantFile, createRedisStore, hashKey } from '../../src/tenants/index.js'
import { buildCli } from '../../src/cli.js'
import { dropTenant, provisionTenant } from '../../src/platform/index.js'
import { adminQuery, adminUrl, randomName } from '../helpers/db.js'
import { withClient } from '../helpers/tenants.js'
import { createTestRedis } from '../helpers/redis.js'

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..')
// The commands run in a directory of their own: in the checkout, a running `npm start` would
// lend them its cluster and gateway as defaults (what a person there wants, not this test).
// The tsx loader by absolute URL: that directory has no node_modules.
const TSX = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href
const cwd = mkdtempSync(path.join(os.tmpdir(), 'gatehouse-cli-cwd-'))
process.chdir(cwd)
t.teardown(() => {
  process.chdir(root)
  rmSync(cwd, { recursive: true, force: true })
})

interface Run {
  code: number | null
  stdout: string
  stderr: string
}

/** The real binary entry (src/cli.ts through tsx), stdin not a terminal. */
function gatehouse(args: string[], env: NodeJS.ProcessEnv = {}): Promise<Run> {
  return new Promise((resolve, reject) => {
    // No inherited GATEHOUSE_* / DATABASE_URL: the command gets what the test gives it.
    const clean = Object.fromEntries(
      Object.entries(process.env).filter(
        ([k]) => !k.startsWith('GATEHOUSE_') && k !== 'DATABASE_URL' && k !== 'REDIS_URL',
      ),
    )
    const child = spawn(process.execPath, ['--import', TSX, path.join(root, 'src/cli.ts'), ...args], {
      cwd,
      env: { ...clean, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (d) => {
      stdout += d
    })
    child.stderr.on('data', (d) => {
      stderr += d
    })
    child.on('error', reject)
    child.on('close', (code) => resolve({ code, stdout, stderr }))
  })
}

/** The same commands in process: resolves with what they print, or with the error they refuse with. */
async function inProcess(args: string[]): Promise<{ error?: Error & { code?: string }; stdout: string }> {
  const program = await buildCli(['node', 'gatehouse', ...args])
  program.exitOverride()
  let stdout = ''
  const write = process.stdout.write
  process.stdout.write = ((chunk: string | Uint8Array) => {
    stdout += String(chunk)
    return true
  }) as typeof process.stdout.write
  try {
    await program.parseAsync(['node', 'gatehouse', ...args])
    return { stdout }
  } catch (error) {
    return { error: error as Error, stdout }
  } finally {
    process.stdout.write = write
  }
}

t.test("tenants create --supabase-default-privileges opts in to Supabase's default privileges", async (t) => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'gatehouse-tenants-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const database = randomName('tenant')
  t.teardown(() => dropTenant({ adminUrl: adminUrl(), database }))
  const args = ['tenants', 'create', database, '--org', 'o', '--postgres', adminUrl(), '--dir', dir]
  const r = await inProcess([...args, '--supabase-default-privileges'])
  t.error(r.error)
  const file = path.join(dir, `${database}.yaml`)
  const parsed = parseTenantFile(parseYaml(readFileSync(file, 'utf8')), file, {})
  t.equal(parsed.rest.supabase_default_privileges, true, 'the file says it')
  const granted = await withClient(parsed.postgres, async (c) => {
    await c.query('CREATE TABLE public.todos (id int)')
    return (await c.query("SELECT has_table_privilege('anon', 'public.todos', 'INSERT') AS ok")).rows[0].ok
  })
  t.equal(granted, true, "the owner's new table is granted to anon")
})

t.test('tenants create / drop round trip', async (t) => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'gatehouse-tenants-'))
  const database = randomName('tenant')
  t.teardown(() => dropTenant({ adminUrl: adminUrl(), database }))
  const file = path.join(dir, `${database}.yaml`)
  // The tenant directory is in a git checkout, as config/tenants is.
  execFileSync('git', ['init', '-q'], { cwd: dir })

  const [created, bad, badAlg] = await Promise.all([
    gatehouse([
      'tenants',
      'create',
      database,
      '--org',
      'org_cli',
      '--postgres',
      adminUrl(),
      '--dir',
      dir,
      '--auth-upstream',
      `http://auth.internal:9999/${database}`,
      '--rest-upstream',
      `http://rest.internal:3000/${database}`,
    ]),
    gatehouse(['tenants', 'create', 'Bad Name', '--org', 'o', '--postgres', adminUrl(), '--dir', dir]),
    gatehouse([
      'tenants',
      'create',
      `${database}_x`,
      '--org',
      'o',
      '--postgres',
      adminUrl(),
      '--dir',
      dir,
      '--signing-algorithm',
      'HS512',
    ]),
  ])
  t.equal(created.code, 0, created.stderr)
  t.ok(existsSync(file), 'the tenant file is written')
  const parsed = parseTenantFile(parseYaml(readFileSync(file, 'utf8')), file, {})
  t.equal(parsed.organization, 'org_cli')
  t.match(
    created.stdout,
    `  url:         http://127.0.0.1:8000/${database}\n`,
    'the database URL (public_url) is printed',
  )
  t.same(parsed.upstreams, {
    auth: `http://auth.internal:9999/${database}`,
    rest: `http://rest.internal:3000/${database}`,
  })
  t.match(parsed.keys, { public: /^pk_/, secret: /^sk_/ })
  t.ok(
    created.stdout.includes(parsed.keys.public) && created.stdout.includes(parsed.keys.secret),
    'the keys are printed',
  )
  t.match(readFileSync(file, 'utf8'), /^# .*tenants create/, 'with a header comment')
  t.match(
    created.stdout,
    `  tenant file: ${file}; git ignores it (listed in ${path.join(dir, '.gitignore')}): it holds secrets`,
  )
  t.equal(
    execFileSync('git', ['status', '--porcelain', '--untracked-files=all'], { cwd: dir, encoding: 'utf8' }),
    '',
    'git sees nothing to commit: the new file with its secrets (and the .gitignore) are ignored',
  )
  t.equal(parsed.jwt.signing_algorithm, 'ES256', 'a new database signs with ES256')
  t.same(
    parsed.jwt.signing_keys.map((k) => k.alg),
    ['ES256'],
    'with the one key generated for it',
  )
  t.match(created.stdout, `signing:     ES256 (kid ${parsed.jwt.signing_keys[0]!.kid})`)
  t.equal(badAlg.code, 1)
  t.match(badAlg.stderr, /--signing-algorithm must be one of HS256, ES256, RS256/)
  t.notOk(existsSync(path.join(dir, `${database}_x.yaml`)), 'nothing made for a bad algorithm')
  const role = await withClient(
    parsed.postgres,
    async (c) => (await c.query("SELECT platform.role('auth') AS r")).rows[0].r,
  )
  t.equal(role, parsed.roles.auth, 'the owner login of the file works')
  t.equal(bad.code, 1, 'a refusal exits with 1')
  t.match(bad.stderr, /^gatehouse: invalid database name "Bad Name"/)
  t.notMatch(bad.stderr, /\n\s+at /, 'one line, no stack')

  const again = await inProcess([
    'tenants',
    'create',
    database,
    '--org',
    'org_cli',
    '--postgres',
    adminUrl(),
    '--dir',
    dir,
  ])
  t.match(again.error?.message, /already exists.*taken/, 'a taken name (file) is refused')
  const otherDir = mkdtempSync(path.join(os.tmpdir(), 'gatehouse-tenants-'))
  const onCluster = await inProcess([
    'tenants',
    'create',
    database,
    '--org',
    'org_cli',
    '--postgres',
    adminUrl(),
    '--dir',
    otherDir,
  ])
  t.match(onCluster.error, { code: 'database_exists' }, 'a taken name (cluster) is refused')
  t.notOk(existsSync(path.join(otherDir, `${database}.yaml`)), 'and writes no file')

  const noTty = await gatehouse(['tenants', 'drop', database, '--postgres', adminUrl(), '--dir', dir])
  t.equal(noTty.code, 1)
  t.match(noTty.stderr, /without --yes when not on a terminal/)
  t.ok(existsSync(file), 'nothing dropped')

  const dropped = await gatehouse(['tenants', 'drop', database, '--yes', '--postgres', adminUrl(), '--dir', dir])
  t.equal(dropped.code, 0, dropped.stderr)
  t.match(dropped.stdout, /dropped database/)
  t.notOk(existsSync(file), 'the tenant file is removed')
  t.notMatch(readFileSync(path.join(dir, '.gitignore'), 'utf8'), database, 'and its line in .gitignore')
  const left = await adminQuery(
    'SELECT (SELECT count(*)::int FROM pg_database WHERE datname = $1) AS db, (SELECT count(*)::int FROM pg_roles WHERE rolname = ANY ($2)) AS roles',
    [database, Object.values(parsed.roles)],
  )
  t.same(left.rows[0], { db: 0, roles: 0 }, 'database and roles are gone')

  const twice = await inProcess(['tenants', 'drop', database, '--yes', '--postgres', adminUrl(), '--dir', dir])
  t.equal(twice.error, undefined, 'dropping again is fine')
  t.match(twice.stdout, /nothing to drop/)
})

t.test('refusals and help', async (t) => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'gatehouse-tenants-'))
  const down = await inProcess([
    'tenants',
    'create',
    randomName('tenant'),
    '--org',
    'o',
    '--postgres',
    'postgres://postgres:secret@127.0.0.1:1/postgres',
    '--dir',
    dir,
  ])
  t.match(down.error, { code: 'cluster_unreachable' })
  t.match(down.error?.message, /cannot connect to the Postgres cluster at 127\.0\.0\.1:1/)
  t.notMatch(down.error?.message, /secret/, 'no password in the message')

  const saved = process.env.DATABASE_URL
  delete process.env.DATABASE_URL
  const noUrl = await inProcess(['tenants', 'create', randomName('tenant'), '--org', 'o', '--dir', dir])
  process.env.DATABASE_URL = saved
  t.match(noUrl.error?.message, /pass --postgres/)
  t.match(noUrl.error?.message, /where `npm start` runs/, 'names the development stack that lends its cluster')

  const half = await inProcess([
    'tenants',
    'create',
    randomName('tenant'),
    '--org',
    'o',
    '--postgres',
    adminUrl(),
    '--dir',
    dir,
    '--auth-upstream',
    'http://x/y',
  ])
  t.match(half.error?.message, /go together/)

  const migrate = await inProcess(['tenants', 'migrate', '--postgres', adminUrl()])
  t.match(migrate.error?.message, /name a database or pass --all/)
  const both = await inProcess(['tenants', 'migrate', 'abc', '--all', '--postgres', adminUrl()])
  t.match(both.error?.message, /not both/)
  const missing = await inProcess(['tenants', 'migrate', randomName('tenant'), '--postgres', adminUrl()])
  t.match(missing.error?.message, /does not exist/)

  // An existing file for the name is refused before anything is created on the cluster.
  const name = randomName('tenant')
  writeFileSync(path.join(dir, `${name}.yaml`), 'database: ' + name + '\n')
  const fileTaken = await inProcess(['tenants', 'create', name, '--org', 'o', '--postgres', adminUrl(), '--dir', dir])
  t.match(fileTaken.error?.message, /already exists/)
  const db = await adminQuery('SELECT count(*)::int AS n FROM pg_database WHERE datname = $1', [name])
  t.equal(db.rows[0].n, 0, 'no database was created')

  const tenants = (await buildCli(['node', 'gatehouse', 'tenants'])).commands.find((c) => c.name() === 'tenants')!
  for (const [cmd, flag] of [
    ['create', '--org <organization>'],
    ['drop', '--yes'],
    ['migrate', '--all'],
  ]) {
    const help = tenants.commands.find((c) => c.name() === cmd)?.helpInformation() ?? ''
    t.match(help, `Usage: gatehouse tenants ${cmd}`, `${cmd} --help`)
    t.match(help, flag)
  }
})

t.test('with tenants.source = redis, create and drop write the store too', async (t) => {
  const { prefix, url } = createTestRedis(t)
  const dir = mkdtempSync(path.join(os.tmpdir(), 'gatehouse-tenants-'))
  const database = randomName('tenant')
  t.teardown(() => dropTenant({ adminUrl: adminUrl(), database }))
  const store = createRedisStore({ url, prefix })
  t.teardown(() => store.close())
  const saved = { source: process.env.GATEHOUSE_TENANTS_SOURCE, prefix: process.env.GATEHOUSE_REDIS_KEY_PREFIX }
  process.env.GATEHOUSE_TENANTS_SOURCE = 'redis'
  process.env.GATEHOUSE_REDIS_KEY_PREFIX = prefix
  t.teardown(() => {
    for (const [k, v] of [
      ['GATEHOUSE_TENANTS_SOURCE', saved.source],
      ['GATEHOUSE_REDIS_KEY_PREFIX', saved.prefix],
    ] as const) {
      if (v === undefined) delete process.env[k]
      else process.env[k] = v
    }
  })
  const created = await inProcess([
    'tenants',
    'create',
    database,
    '--org',
    'org_r',
    '--postgres',
    adminUrl(),
    '--dir',
    dir,
  ])
  t.equal(created.error, undefined, String(created.error?.message ?? 'no error'))
  t.match(created.stdout, /and the Redis store/)
  const file = parseTenantFile(parseYaml(readFileSync(path.join(dir, `${database}.yaml`), 'utf8')), 'file', {})
  const stored = await store.get(database)
  t.equal(stored?.organization, 'org_r', 'the store holds the tenant')
  t.equal(stored?.keys.public, hashKey(file.keys.public), 'keys hashed, never plain')
  const dropped = await inProcess(['tenants', 'drop', database, '--yes', '--postgres', adminUrl(), '--dir', dir])
  t.equal(dropped.error, undefined)
  t.match(dropped.stdout, /Redis record removed/)
  t.equal(await store.get(database), null, 'and no longer after drop')
})

t.test('tenants migrate', async (t) => {
  const database = randomName('tenant')
  await provisionTenant({ adminUrl: adminUrl(), database, organization: 'o' })
  t.teardown(() => dropTenant({ adminUrl: adminUrl(), database }))
  // The admin URL from the environment (postgres.url <- DATABASE_URL) this time.
  const one = await gatehouse(['tenants', 'migrate', database], { DATABASE_URL: adminUrl() })
  t.equal(one.code, 0, one.stderr)
  t.match(one.stdout, new RegExp(`${database}: up to date \\(version \\d+\\)`))
  const all = await inProcess(['tenants', 'migrate', '--all', '--postgres', adminUrl()])
  t.equal(all.error, undefined, String(all.error?.message ?? 'no error'))
  t.match(all.stdout, new RegExp(`${database}: up to date`), '--all includes it')
})

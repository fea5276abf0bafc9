// `gatehouse tenants create|drop|migrate`: provisioning commands. `create`
// provisions a database and writes its tenant file (and the Redis store when configured),
// undoing everything when a step fails; `drop` asks first; `migrate` updates schemas.
import { existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs'
import path from 'node:path'
import { createInterface } from 'node:readline/promises'
import type { Command } from 'commander'
import { parse as parseYaml, stringify as toYaml } from 'yaml'
import type { Config } from '../config/index.js'
import { withDatabase, writeFileAtomic } from '../shared/index.js'
import {
  withTenantStore,
  declareCommands,
  out,
  toTenant,
  SIGNING_ALGORITHMS,
  currentSigningKey,
  type SigningAlgorithm,
  type TenantFile,
  fileValues,
} from '../tenants/index.js'
import { assertDatabaseName, dropTenant, provisionTenant } from './provision.js'
import { migrateAll, migrateDatabase } from './migrate.js'
import { connectionLimitsOf, databaseExists, describeUrl, withAdmin, type TenantRoleNames } from './roles.js'
import { PlatformCommandError } from './errors.js'

function adminUrlOf(flag: string | undefined, cfg: Config): string {
  const url = flag ?? cfg.postgres.url
  if (!url) {
    throw new PlatformCommandError(
      'no admin connection: run it where `npm start` runs (the development stack lends its cluster), or pass --postgres <url>, or set postgres.url (GATEHOUSE_POSTGRES_URL or DATABASE_URL)',
    )
  }
  try {
    new URL(url)
  } catch {
    throw new PlatformCommandError(
      '--postgres / postgres.url is not a URL (postgres://user:password@host:port/postgres)',
    )
  }
  return url
}

function fileOf(dir: string, database: string): string {
  return path.join(dir, `${database}.yaml`)
}

/** The tenant file as written by `tenants create`: a header, then the record. */
export function renderTenantFile(file: TenantFile): string {
  return [
    `# ${file.database}: tenant file written by \`gatehouse tenants create\`.`,
    '# Holds the keys, JWT secrets and database passwords in plain text: keep it private',
    '# (or replace values with ${ENV_NAME} references).',
    toYaml(fileValues(file), { lineWidth: 0 }),
  ].join('\n')
}

const IGNORE_HEADER =
  '# Written by `gatehouse tenants create`: the tenant files it writes hold keys, JWT secrets and\n' +
  '# database passwords, so git ignores them (and this file). See docs/tenant-state.md.\n.gitignore\n'

/**
 * Keeps a new tenant file out of git: its name in the directory's .gitignore (created, and
 * ignoring itself, when there is none). Returns that .gitignore's path.
 */
function ignoreInGit(dir: string, name: string): string {
  const file = path.join(dir, '.gitignore')
  let text = existsSync(file) ? readFileSync(file, 'utf8') : IGNORE_HEADER
  const lines = text.split('\n').map((l) => l.trim())
  if (!lines.includes(name) && !lines.includes(`/${name}`)) text = `${text.replace(/\n?$/, '\n')}/${name}\n`
  writeFileAtomic(file, text)
  return file
}

/** Takes a dropped tenant file's name out of the directory's .gitignore. */
function unignoreInGit(dir: string, name: string): void {
  const file = path.join(dir, '.gitignore')
  if (!existsSync(file)) return
  const text = readFileSync(file, 'utf8')
  const next = text
    .split('\n')
    .filter((l) => l.trim() !== `/${name}`)
    .join('\n')
  if (next !== text) writeFileAtomic(file, next)
}

/** Role names of a tenant file, read leniently (a file with unset ${ENV} still names its roles). */
function rolesInFile(file: string): string[] {
  try {
    const raw = parseYaml(readFileSync(file, 'utf8')) as { roles?: Record<string, unknown> } | null
    return Object.values(raw?.roles ?? {}).filter((v): v is string => typeof v === 'string')
  } catch {
    return []
  }
}

async function confirm(question: string, expected: string): Promise<boolean> {
  const rl = createInterface({ input: process.stdin, output: process.stderr })
  try {
    return (await rl.question(question)).trim() === expected
  } finally {
    rl.close()
  }
}

interface CreateFlags {
  org: string
  postgres?: string
  dir?: string
  authUpstream?: string
  restUpstream?: string
  signingAlgorithm?: string
  supabaseDefaultPrivileges?: boolean
}
interface DropFlags {
  yes?: boolean
  postgres?: string
  dir?: string
  keepFile?: boolean
}
interface MigrateFlags {
  all?: boolean
  postgres?: string
}

/** The checked create flags: the signing algorithm and the tenant's upstreams. */
function createPlan(
  cfg: Config,
  database: string,
  flags: CreateFlags,
): { signingAlgorithm: SigningAlgorithm; upstreams: { auth: string; rest: string } } {
  assertDatabaseName(database)
  const signingAlgorithm = flags.signingAlgorithm ?? 'ES256'
  if (!(SIGNING_ALGORITHMS as readonly string[]).includes(signingAlgorithm)) {
    throw new PlatformCommandError(`--signing-algorithm must be one of ${SIGNING_ALGORITHMS.join(', ')}`)
  }
  if (!flags.org.trim()) throw new PlatformCommandError('--org must not be empty')
  if (Boolean(flags.authUpstream) !== Boolean(flags.restUpstream)) {
    throw new PlatformCommandError('--auth-upstream and --rest-upstream go together: pass both or neither')
  }
  const upstreams =
    flags.authUpstream && flags.restUpstream
      ? { auth: flags.authUpstream, rest: flags.restUpstream }
      : {
          auth: `http://${cfg.auth.host}:${cfg.auth.port}/${database}`,
          rest: `http://${cfg.rest.host}:${cfg.rest.port}/${database}`,
        }
  return { signingAlgorithm: signingAlgorithm as SigningAlgorithm, upstreams }
}

/**
 * The new tenant's file (exclusive create: never overwrite someone's file), which git ignores,
 * and its Redis record when Redis is the source of truth. `done.ignored`: the .gitignore that lists it.
 */
async function recordNewTenant(
  cfg: Config,
  dir: string,
  target: string,
  file: TenantFile,
  done: { ignored: string },
): Promise<void> {
  mkdirSync(dir, { recursive: true })
  writeFileAtomic(target, renderTenantFile(file), { mode: 0o600, exclusive: true })
  done.ignored = ignoreInGit(dir, path.basename(target))
  if (cfg.tenants.source === 'redis') await withTenantStore(cfg, (store) => store.putAll([toTenant(file)]))
}

function createdReport(
  cfg: Config,
  adminUrl: string,
  target: string,
  ignored: string,
  file: TenantFile,
  roles: TenantRoleNames,
): string {
  const signing = currentSigningKey(file.jwt)
  return [
    `created database "${file.database}" (organization ${file.organization}) on ${describeUrl(adminUrl)}`,
    `  url:         ${cfg.public_url.replace(/\/+$/, '')}/${file.database}`,
    `  tenant file: ${target}${cfg.tenants.source === 'redis' ? ' (and the Redis store)' : ''}; git ignores it (listed in ${ignored}): it holds secrets`,
    `  roles:       ${roles.anon}, ${roles.auth}, ${roles.svc}`,
    `  public key:  ${file.keys.public}`,
    `  secret key:  ${file.keys.secret}`,
    `  signing:     ${file.jwt.signing_algorithm}${signing ? ` (kid ${signing.kid})` : ''}`,
    `  owner login: ${file.postgres}`,
    'The keys are shown once here; the tenant file holds them too. Keep the secret key private.',
  ].join('\n')
}

async function create(cfg: Config, database: string, flags: CreateFlags): Promise<void> {
  const { signingAlgorithm, upstreams } = createPlan(cfg, database, flags)
  const adminUrl = adminUrlOf(flags.postgres, cfg)
  const dir = flags.dir ?? cfg.tenants.dir
  const target = fileOf(dir, database)
  if (existsSync(target))
    throw new PlatformCommandError(`tenant file ${target} already exists: the name "${database}" is taken`)
  // 1. Provision (all or nothing on the cluster); 2. its file and record, or everything undone.
  const { file, roles } = await provisionTenant({
    adminUrl,
    database,
    organization: flags.org,
    upstreams,
    signingAlgorithm,
    connectionLimits: connectionLimitsOf(cfg),
    ...(flags.supabaseDefaultPrivileges === true ? { rest: { supabase_default_privileges: true } } : {}),
  })
  const done = { ignored: '' }
  try {
    await recordNewTenant(cfg, dir, target, file, done)
  } catch (err) {
    if (done.ignored !== '') unignoreInGit(dir, path.basename(target))
    rmSync(target, { force: true })
    await dropTenant({ adminUrl, database, roles: Object.values(roles) }).catch(() => {})
    throw err
  }
  out(createdReport(cfg, adminUrl, target, done.ignored, file, roles))
}

async function confirmDrop(database: string, adminUrl: string, flags: DropFlags): Promise<void> {
  if (flags.yes) return
  if (!process.stdin.isTTY)
    throw new PlatformCommandError(`refusing to drop "${database}" without --yes when not on a terminal`)
  const ok = await confirm(
    `Drop database "${database}" on ${describeUrl(adminUrl)} with all its data and roles? Type the database name to confirm: `,
    database,
  )
  if (!ok) throw new PlatformCommandError('not confirmed; nothing was dropped')
}

/** Removes the tenant's file (unless --keep-file) and its Redis record; says which went. */
async function forgetTenant(
  cfg: Config,
  database: string,
  target: string,
  keepFile: boolean,
): Promise<{ fileRemoved: boolean; storeRemoved: boolean }> {
  let fileRemoved = false
  if (!keepFile && existsSync(target)) {
    rmSync(target, { force: true })
    unignoreInGit(path.dirname(target), path.basename(target))
    fileRemoved = true
  }
  const storeRemoved = cfg.tenants.source === 'redis' && (await withTenantStore(cfg, (store) => store.delete(database)))
  return { fileRemoved, storeRemoved }
}

async function drop(cfg: Config, database: string, flags: DropFlags): Promise<void> {
  assertDatabaseName(database)
  const adminUrl = adminUrlOf(flags.postgres, cfg)
  const target = fileOf(flags.dir ?? cfg.tenants.dir, database)
  await confirmDrop(database, adminUrl, flags)
  const res = await dropTenant({ adminUrl, database, roles: existsSync(target) ? rolesInFile(target) : [] })
  const { fileRemoved, storeRemoved } = await forgetTenant(cfg, database, target, flags.keepFile === true)
  if (!res.databaseDropped && res.rolesDropped.length === 0 && !fileRemoved && !storeRemoved) {
    out(`nothing to drop: no database, roles, file or record for "${database}"`)
    return
  }
  out(
    [
      res.databaseDropped ? `dropped database "${database}"` : `database "${database}" did not exist`,
      `  roles dropped: ${res.rolesDropped.length ? res.rolesDropped.join(', ') : 'none'}`,
      fileRemoved ? `  tenant file removed: ${target}` : null,
      storeRemoved ? '  Redis record removed' : null,
    ]
      .filter((l): l is string => l !== null)
      .join('\n'),
  )
}

function migrated(r: { database: string; applied: string[]; version: number }): string {
  return r.applied.length
    ? `${r.database}: applied ${r.applied.join(', ')} (now at ${r.version})`
    : `${r.database}: up to date (version ${r.version})`
}

async function migrateOne(cfg: Config, adminUrl: string, database: string): Promise<void> {
  assertDatabaseName(database)
  if (!(await withAdmin(adminUrl, (admin) => databaseExists(admin, database))))
    throw new PlatformCommandError(`database "${database}" does not exist on ${describeUrl(adminUrl)}`)
  const r = await migrateDatabase(withDatabase(adminUrl, database), { connectionLimits: connectionLimitsOf(cfg) })
  out(migrated({ database, ...r }))
}

async function migrateEvery(cfg: Config, adminUrl: string): Promise<void> {
  const results = await migrateAll(adminUrl, { connectionLimits: connectionLimitsOf(cfg) })
  if (results.length === 0) {
    out(`no tenant databases on ${describeUrl(adminUrl)}`)
    return
  }
  for (const r of results) out(r.error ? `${r.database}: FAILED: ${r.error.message}` : migrated(r))
  const failed = results.filter((r) => r.error)
  if (failed.length)
    throw new PlatformCommandError(
      `${failed.length} of ${results.length} database(s) failed to migrate: ${failed.map((r) => r.database).join(', ')}`,
    )
}

async function migrate(cfg: Config, database: string | undefined, flags: MigrateFlags): Promise<void> {
  if (database && flags.all) throw new PlatformCommandError('name a database or pass --all, not both')
  if (!database && !flags.all) throw new PlatformCommandError('name a database or pass --all')
  const adminUrl = adminUrlOf(flags.postgres, cfg)
  if (database) await migrateOne(cfg, adminUrl, database)
  else await migrateEvery(cfg, adminUrl)
}

const POSTGRES_OPTION = ['--postgres <url>', 'admin (superuser) URL of the cluster; default postgres.url'] as const
const DIR_OPTION = ['--dir <dir>', 'directory of tenant files; default tenants.dir (config/tenants)'] as const

export function registerPlatformCommands(tenants: Command, config: () => Config): void {
  declareCommands(tenants, [
    {
      name: 'create',
      description:
        'provision a tenant: create the database, its roles, the platform and auth schemas, generate the JWT secrets and keys, and write <dir>/<database>.yaml (and the Redis store when tenants.source is redis). Prints the keys once.',
      args: [['<database>', 'database name, also the URL segment: ^[a-z][a-z0-9_-]{0,62}$']],
      required: [['--org <organization>', 'the panel organization that owns the database']],
      options: [
        POSTGRES_OPTION,
        DIR_OPTION,
        [
          '--auth-upstream <url>',
          'auth engine base URL of this tenant (with --rest-upstream); default our auth engine: http://<auth.host>:<auth.port>/<database>',
        ],
        [
          '--rest-upstream <url>',
          'REST engine base URL of this tenant (with --auth-upstream); default our REST engine: http://<rest.host>:<rest.port>/<database>',
        ],
        [
          '--signing-algorithm <alg>',
          'what signs access tokens: ES256 (default), RS256, or HS256 (the legacy secret; an ES256 key is generated all the same)',
        ],
        [
          '--supabase-default-privileges',
          'grant what the owner creates in public to anon, authenticated and service_role, as Supabase does (rest.supabase_default_privileges; new tables are then reachable with the public key until RLS is on: docs/supabase.md)',
        ],
      ],
      action: (database: string, flags: CreateFlags) => create(config(), database, flags),
    },
    {
      name: 'drop',
      description:
        'drop a tenant: its database (with every connection closed), its roles, its tenant file and its Redis record. Asks for the database name unless --yes.',
      args: [['<database>', 'the database name']],
      options: [
        ['-y, --yes', 'do not ask (required when not on a terminal)'],
        POSTGRES_OPTION,
        DIR_OPTION,
        ['--keep-file', 'leave the tenant file in place'],
      ],
      action: (database: string, flags: DropFlags) => drop(config(), database, flags),
    },
    {
      name: 'migrate',
      description:
        'apply pending platform/auth migrations to a tenant database, or to every tenant database of the cluster with --all; re-running is a no-op',
      args: [['[database]', 'the database name']],
      options: [
        ['--all', 'every tenant database on the cluster (those with platform.schema_migrations)'],
        POSTGRES_OPTION,
      ],
      action: (database: string | undefined, flags: MigrateFlags) => migrate(config(), database, flags),
    },
  ])
}

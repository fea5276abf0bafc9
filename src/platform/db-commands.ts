// `gatehouse db push | reset`: the Supabase CLI's migration workflow against a tenant database
// (docs/supabase.md, "Moving a Supabase project"). push applies supabase/migrations as the
// database's owner; reset (the development stack only) drops the database, provisions it again
// from its tenant file and pushes the migrations and the seed.
import path from 'node:path'
import type { Command } from 'commander'
import type { Config } from '../config/index.js'
import { DATABASE_NAME, loadTenantFiles, out, withTenantStore, type TenantFile } from '../tenants/index.js'
import { pushMigrations } from './db-push.js'
import { PlatformCommandError } from './errors.js'
import { dropTenant, ensureTenant } from './provision.js'

interface PushFlags {
  dir: string
  dryRun?: boolean
  includeSeed?: boolean
  includeAll?: boolean
  dbUrl?: string
}

/** The owner URL of a tenant database, from the tenant store. */
async function ownerUrl(database: string, config: () => Config): Promise<string> {
  if (!DATABASE_NAME.test(database))
    throw new PlatformCommandError(`"${database}" is not a database name (${DATABASE_NAME.source})`)
  const tenant = await withTenantStore(config(), (store) => store.get(database))
  if (tenant === null)
    throw new PlatformCommandError(
      `no tenant named "${database}" in the tenant store (is npm start running, or is the tenant applied?)`,
    )
  return tenant.postgres
}

/** supabase/seed.sql beside the migrations directory (supabase/migrations). */
const seedOf = (dir: string): string => path.join(path.dirname(path.resolve(dir)), 'seed.sql')

async function push(database: string | undefined, flags: PushFlags, config: () => Config): Promise<void> {
  if (database === undefined && flags.dbUrl === undefined)
    throw new PlatformCommandError('name a database (as in config/tenants/) or pass --db-url <owner url>')
  const url = flags.dbUrl ?? (await ownerUrl(database!, config))
  await pushMigrations({
    url,
    dir: flags.dir,
    dryRun: flags.dryRun,
    includeAll: flags.includeAll,
    seed: flags.includeSeed === true ? seedOf(flags.dir) : undefined,
    out,
  })
}

/** Starts a tenant database over: dropped, provisioned again from its tenant file, its migrations and seed pushed. */
export async function resetDatabase(opts: {
  adminUrl: string
  file: TenantFile
  dir: string
  out: (line: string) => void
}): Promise<string[]> {
  const { adminUrl, file } = opts
  opts.out(`Resetting database ${file.database}...`)
  await dropTenant({ adminUrl, database: file.database, roles: [file.roles.anon, file.roles.auth, file.roles.svc] })
  await ensureTenant({ adminUrl, file })
  return pushMigrations({ url: file.postgres, dir: opts.dir, seed: seedOf(opts.dir), out: opts.out })
}

async function reset(database: string, flags: { dir: string }, config: () => Config, devRunning: boolean) {
  if (!devRunning)
    throw new PlatformCommandError(
      'db reset starts a database over and is for the development stack only: run it in the checkout where npm start runs',
    )
  const cfg = config()
  const adminUrl = cfg.postgres.url
  if (adminUrl === undefined) throw new PlatformCommandError('no admin connection (postgres.url) for db reset')
  const file = loadTenantFiles(cfg.tenants.dir).find((f) => f.database === database)
  if (file === undefined) throw new PlatformCommandError(`no tenant file for "${database}" in ${cfg.tenants.dir}`)
  await resetDatabase({ adminUrl, file, dir: flags.dir, out })
}

/** Registers `db push` and `db reset`. `devRunning`: whether a development stack runs here. */
export function registerDbCommands(program: Command, config: () => Config, devRunning: () => boolean): void {
  const db = program.command('db').description("a Supabase project's migrations: push | reset")
  db.command('push')
    .description('apply the pending migration files to a database as its owner, as `supabase db push` does')
    .argument('[database]', 'the database name (its owner connection from the tenant store)')
    .option('--dir <dir>', 'the migrations directory', 'supabase/migrations')
    .option('--dry-run', 'print the migrations that would be applied, change nothing')
    .option('--include-seed', 'run supabase/seed.sql (beside the migrations directory) afterwards')
    .option('--include-all', 'also apply files older than the newest applied migration')
    .option('--db-url <url>', "the owner's Postgres URL instead of a tenant's")
    .action((database: string | undefined, flags: PushFlags) => push(database, flags, config))
  db.command('reset')
    .description('development stack only: start a database over from its migrations and supabase/seed.sql')
    .argument('<database>', 'the database name')
    .option('--dir <dir>', 'the migrations directory', 'supabase/migrations')
    .action((database: string, flags: { dir: string }) => reset(database, flags, config, devRunning()))
}

// `gatehouse db push`: a Supabase project's migrations (supabase/migrations/<version>_<name>.sql)
// applied to a database as its owner, as `supabase db push` applies them: pending files in
// version order, each in one transaction, recorded in supabase_migrations.schema_migrations
// (version, statements, name) as the Supabase CLI records them, so the history moves both ways;
// `--include-seed` then runs supabase/seed.sql once per content (supabase_migrations.seed_files).
// What is done to a statement first (the `postgres` role, Storage and Realtime, preinstalled
// extensions) is in sql-script.ts; docs/supabase.md, "Moving a Supabase project".
import { createHash } from 'node:crypto'
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import path from 'node:path'
import pg from 'pg'
import { inTransaction } from '../shared/index.js'
import { DbPushFailedError, PlatformCommandError } from './errors.js'
import {
  extensionOf,
  isTransactionControl,
  rewritePostgresRole,
  splitStatements,
  SUPABASE_PREINSTALLED,
  unofferedService,
  type Statement,
} from './sql-script.js'

const MIGRATION_FILE = /^([0-9]+)_(.*)\.sql$/

// The Supabase CLI's history tables (its pkg/migration history), created the way it creates them.
const HISTORY = [
  'CREATE SCHEMA IF NOT EXISTS supabase_migrations',
  'CREATE TABLE IF NOT EXISTS supabase_migrations.schema_migrations (version text NOT NULL PRIMARY KEY)',
  'ALTER TABLE supabase_migrations.schema_migrations ADD COLUMN IF NOT EXISTS statements text[]',
  'ALTER TABLE supabase_migrations.schema_migrations ADD COLUMN IF NOT EXISTS name text',
  'CREATE TABLE IF NOT EXISTS supabase_migrations.seed_files (path text NOT NULL PRIMARY KEY, hash text NOT NULL)',
]

interface MigrationFile {
  version: string
  name: string
  path: string
}

export interface PushOptions {
  /** The owner's connection URL. */
  url: string
  /** supabase/migrations */
  dir: string
  dryRun?: boolean
  /** Run the seed file after the migrations. */
  seed?: string
  /** Push files older than the newest applied one too (the CLI's --include-all). */
  includeAll?: boolean
  out: (line: string) => void
}

/** The migration files of a directory in version order; other names are reported and left out. */
function listMigrationFiles(dir: string, out: (line: string) => void = () => {}): MigrationFile[] {
  if (!existsSync(dir)) throw new PlatformCommandError(`migrations directory ${dir} does not exist`)
  const files: MigrationFile[] = []
  for (const name of readdirSync(dir).sort()) {
    const m = MIGRATION_FILE.exec(name)
    if (m === null) {
      if (name.endsWith('.sql'))
        out(`Skipping migration ${name}... (file name must match pattern "<timestamp>_name.sql")`)
      continue
    }
    files.push({ version: m[1]!, name: m[2]!, path: path.join(dir, name) })
  }
  return files.sort((a, b) => compareVersions(a.version, b.version))
}

function compareVersions(a: string, b: string): number {
  return a.length - b.length || (a < b ? -1 : a > b ? 1 : 0)
}

/** What the database says about itself that decides how a statement is run. */
interface Target {
  owner: string
  installed: Set<string>
  /** Extensions the owner may create (installed on the cluster, and trusted). */
  available: Set<string>
}

async function readTarget(client: pg.Client): Promise<Target> {
  const r = await client.query<{ owner: string; installed: string[]; available: string[] }>(
    `SELECT current_user AS owner,
            ARRAY(SELECT extname::text FROM pg_catalog.pg_extension) AS installed,
            ARRAY(SELECT v.name::text FROM pg_catalog.pg_available_extension_versions v
                   JOIN pg_catalog.pg_available_extensions a ON a.name = v.name AND a.default_version = v.version
                  WHERE v.trusted OR v.superuser IS FALSE) AS available`,
  )
  const row = r.rows[0]!
  return { owner: row.owner, installed: new Set(row.installed), available: new Set(row.available) }
}

/** The statement to run, or why it is skipped. */
function prepareStatement(text: string, target: Target): { run: string } | { skip: string } {
  if (isTransactionControl(text)) return { skip: 'the file already runs in one transaction' }
  const unoffered = unofferedService(text)
  if (unoffered !== null) return { skip: unoffered }
  const ext = extensionOf(text)
  if (ext !== null && SUPABASE_PREINSTALLED.has(ext)) {
    if (target.installed.has(ext)) return { skip: `extension ${ext} is installed already` }
    if (!target.available.has(ext)) return { skip: `extension ${ext} (preinstalled by Supabase) is not offered here` }
  }
  return { run: rewritePostgresRole(text, target.owner) }
}

function describeFailure(s: Statement, err: Error & { code?: string; position?: string }): string {
  let line = s.line
  if (err.position !== undefined) line += s.text.slice(0, Number(err.position) - 1).split('\n').length - 1
  const first = (s.text.split('\n').find((l) => !/^\s*(--.*)?$/.test(l)) ?? s.text).trim().slice(0, 120)
  return `line ${line}: ${err.message}${err.code ? ` (SQLSTATE ${err.code})` : ''}\n  at statement: ${first}`
}

/** Runs a file's statements on `client` (in the caller's transaction); returns the statements as written. */
async function runStatements(
  client: pg.Client,
  label: string,
  sql: string,
  target: Target,
  out: (line: string) => void,
): Promise<string[]> {
  const statements = splitStatements(sql)
  for (const s of statements) {
    const step = prepareStatement(s.text, target)
    if ('skip' in step) {
      out(`  skipped line ${s.at}: ${step.skip}`)
      continue
    }
    try {
      await client.query(step.run)
    } catch (err) {
      throw new DbPushFailedError(label, describeFailure(s, err as Error), { cause: err })
    }
  }
  return statements.map((s) => s.text)
}

async function appliedVersions(client: pg.Client): Promise<Set<string>> {
  const exists = await client.query(`SELECT to_regclass('supabase_migrations.schema_migrations') IS NOT NULL AS ok`)
  if (exists.rows[0]?.ok !== true) return new Set()
  const r = await client.query<{ version: string }>('SELECT version FROM supabase_migrations.schema_migrations')
  return new Set(r.rows.map((row) => row.version))
}

/** The pending files; refuses a history that names files not here, or (without includeAll) an older file after a newer one. */
function pendingFiles(files: MigrationFile[], applied: Set<string>, includeAll: boolean): MigrationFile[] {
  const local = new Set(files.map((f) => f.version))
  const remoteOnly = [...applied].filter((v) => !local.has(v))
  if (remoteOnly.length > 0)
    throw new PlatformCommandError(
      `the database's migration history has versions not found in the migrations directory: ${remoteOnly.join(', ')} ` +
        '(bring those files here, or remove their rows from supabase_migrations.schema_migrations)',
    )
  const pending = files.filter((f) => !applied.has(f.version))
  const newest = [...applied].sort(compareVersions).at(-1)
  const older = newest === undefined ? [] : pending.filter((f) => compareVersions(f.version, newest) < 0)
  if (older.length > 0 && !includeAll)
    throw new PlatformCommandError(
      `found local migration files to be inserted before the last migration on the database: ${older.map((f) => path.basename(f.path)).join(', ')} (rerun with --include-all)`,
    )
  return pending
}

async function pushFile(client: pg.Client, f: MigrationFile, target: Target, out: (line: string) => void) {
  const label = path.basename(f.path)
  out(`Applying migration ${label}...`)
  await inTransaction(client, async () => {
    const statements = await runStatements(client, label, readFileSync(f.path, 'utf8'), target, out)
    await client.query(
      'INSERT INTO supabase_migrations.schema_migrations (version, name, statements) VALUES ($1, $2, $3)',
      [f.version, f.name, statements],
    )
  })
}

async function pushSeed(client: pg.Client, seed: string, target: Target, out: (line: string) => void) {
  if (!existsSync(seed)) {
    out(`No seed file at ${seed}.`)
    return
  }
  const sql = readFileSync(seed, 'utf8')
  const hash = createHash('sha256').update(sql).digest('hex')
  const key = path.basename(seed)
  const seen = await client.query('SELECT 1 FROM supabase_migrations.seed_files WHERE path = $1 AND hash = $2', [
    key,
    hash,
  ])
  if (seen.rowCount === 1) {
    out(`Seed file ${key} is applied already.`)
    return
  }
  out(`Seeding data from ${key}...`)
  await inTransaction(client, async () => {
    await runStatements(client, key, sql, target, out)
    await client.query(
      `INSERT INTO supabase_migrations.seed_files (path, hash) VALUES ($1, $2)
       ON CONFLICT (path) DO UPDATE SET hash = EXCLUDED.hash`,
      [key, hash],
    )
  })
}

/** Applies the pending migrations (and the seed); returns the files applied. */
export async function pushMigrations(opts: PushOptions): Promise<string[]> {
  const files = listMigrationFiles(opts.dir, opts.out)
  const client = new pg.Client({ connectionString: opts.url, application_name: 'gatehouse-db-push' })
  client.on('error', () => {})
  await client.connect()
  try {
    const pending = pendingFiles(files, await appliedVersions(client), opts.includeAll === true)
    if (opts.dryRun === true) {
      opts.out('DRY RUN: migrations will *not* be pushed to the database.')
      opts.out(pending.length ? 'Would push these migrations:' : 'Remote database is up to date.')
      for (const f of pending) opts.out(` • ${path.basename(f.path)}`)
      if (opts.seed !== undefined) opts.out(`Would seed data from ${opts.seed}.`)
      return []
    }
    await inTransaction(client, async () => {
      for (const stmt of HISTORY) await client.query(stmt)
    })
    const target = await readTarget(client)
    if (pending.length === 0) opts.out('Remote database is up to date.')
    for (const f of pending) await pushFile(client, f, target, opts.out)
    if (opts.seed !== undefined) await pushSeed(client, opts.seed, target, opts.out)
    opts.out('Finished gatehouse db push.')
    return pending.map((f) => path.basename(f.path))
  } finally {
    await client.end().catch(() => {})
  }
}

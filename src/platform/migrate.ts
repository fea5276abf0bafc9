// The migration runner: numbered, forward-only SQL files (NNNN_name.sql), each applied in
// its own transaction and recorded in platform.schema_migrations. The files name no tenant:
// the runner puts this database's role names (platform.roles) in the transaction-local
// settings gatehouse.role_<kind>, which the files read with current_setting().
import { readdirSync, readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import path from 'node:path'
import type pg from 'pg'
import { inTransaction, withDatabase } from '../shared/index.js'
import {
  connectAdmin,
  ROLE_KINDS,
  syncConnectionLimits,
  withAdmin,
  type ConnectionLimits,
  type TenantRoleNames,
} from './roles.js'
import {
  MigrationFailedError,
  MigrationFileInvalidError,
  MigrationLockBusyError,
  RolesMismatchError,
  RolesNotRegisteredError,
} from './errors.js'

/** The bundled migrations: beside this module in src/ (tsx) and in dist/ (copied at build). */
export const MIGRATIONS_DIR = fileURLToPath(new URL('./migrations/', import.meta.url))

const FILE = /^(\d{4})_([a-z0-9_]+)\.sql$/
// One advisory lock key for "migrating this database" (databases do not share locks' effects).
const LOCK_KEY = 0x6761_7465 // 'gate'
// How long a runner waits for that lock by default: any session of the database may hold it
// (its owner's too), and `migrate --all` must go on with the other databases.
const LOCK_WAIT_MS = 30_000

export interface Migration {
  version: number
  name: string
  file: string
}

export interface MigrateOptions {
  /** Role names to register in platform.roles first (provisioning passes them). */
  roles?: TenantRoleNames
  /** Migrations directory; the bundled one by default. */
  dir?: string
  /** The logins' CONNECTION LIMITs (config `postgres.*_connection_limit`); sized from max_connections by default. */
  connectionLimits?: ConnectionLimits
  /** How long to wait for the database's migration lock before failing with migration_lock_busy (ms). */
  lockWaitMs?: number
}

export interface MigrateResult {
  /** Files applied by this call, in order. */
  applied: string[]
  /** Highest version recorded after the call (0 when none). */
  version: number
}

/** The migration files of a directory, sorted by version; malformed names are refused. */
export function listMigrations(dir = MIGRATIONS_DIR): Migration[] {
  const out: Migration[] = []
  const seen = new Map<number, string>()
  for (const file of readdirSync(dir).sort()) {
    if (!file.endsWith('.sql')) continue
    const m = FILE.exec(file)
    if (!m) throw new MigrationFileInvalidError(file, 'expected NNNN_name.sql (lower-case name)')
    const version = Number(m[1])
    if (version === 0) throw new MigrationFileInvalidError(file, 'versions start at 0001')
    const dup = seen.get(version)
    if (dup) throw new MigrationFileInvalidError(file, `version ${m[1]} is also used by ${dup}`)
    seen.set(version, file)
    out.push({ version, name: m[2], file: path.join(dir, file) })
  }
  return out.sort((a, b) => a.version - b.version)
}

// The runner's own tables. Created here (not in 0001) because the runner needs them
// before any file runs; 0001 onwards may rely on them.
const BOOTSTRAP = `
CREATE SCHEMA IF NOT EXISTS platform;
REVOKE ALL ON SCHEMA platform FROM PUBLIC;
CREATE TABLE IF NOT EXISTS platform.schema_migrations (
  version    integer     PRIMARY KEY,
  name       text        NOT NULL,
  applied_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS platform.roles (
  kind      text PRIMARY KEY CHECK (kind IN ('anon', 'auth', 'svc', 'rest', 'authn', 'owner')),
  role_name name NOT NULL UNIQUE
);
REVOKE ALL ON platform.schema_migrations, platform.roles FROM PUBLIC;
`

// The test-query logins (`<request role>_probe`, made by 0010_login_roles) log in with the
// REST engine login's password: every run copies its SCRAM verifier again, so re-running
// `tenants migrate` after a password change of the engine login fixes them.
const SYNC_TEST_QUERY_LOGINS = `
DO $do$
DECLARE
  verifier text;
  probe text;
BEGIN
  SELECT a.rolpassword INTO verifier FROM pg_catalog.pg_authid a
    JOIN platform.roles r ON r.role_name = a.rolname WHERE r.kind = 'rest';
  IF verifier IS NULL OR verifier NOT LIKE 'SCRAM-SHA-256$%' THEN RETURN; END IF;
  FOR probe IN SELECT r.role_name || '_probe' FROM platform.roles r WHERE r.kind IN ('anon', 'auth', 'svc') LOOP
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_roles x WHERE x.rolname = probe) THEN
      EXECUTE pg_catalog.format('ALTER ROLE %I PASSWORD %L', probe, verifier);
    END IF;
  END LOOP;
END
$do$`

// Auth tables a later migration adds are the owner's to read and write as the first ones are
// (0290_owner_auth_access): the function is re-run after every run, once it exists.
const OPEN_AUTH_TO_OWNER = `
DO $do$
BEGIN
  IF to_regprocedure('platform.open_auth_to_owner()') IS NOT NULL THEN PERFORM platform.open_auth_to_owner(); END IF;
END
$do$`

async function registerRoles(client: pg.Client, database: string, roles: TenantRoleNames): Promise<void> {
  await inTransaction(client, async () => {
    for (const kind of ROLE_KINDS) {
      const r = await client.query<{ role_name: string }>(
        `INSERT INTO platform.roles (kind, role_name) VALUES ($1, $2)
         ON CONFLICT (kind) DO UPDATE SET kind = EXCLUDED.kind RETURNING role_name`,
        [kind, roles[kind]],
      )
      if (r.rows[0].role_name !== roles[kind]) throw new RolesMismatchError(database, kind)
    }
  })
}

/** The database's role names by kind (platform.roles); every kind must be there. */
async function registeredRoles(client: pg.Client, database: string): Promise<Map<string, string>> {
  const rows = (await client.query<{ kind: string; role_name: string }>('SELECT kind, role_name FROM platform.roles'))
    .rows
  const roles = new Map(rows.map((r) => [r.kind, r.role_name]))
  const missing = ROLE_KINDS.filter((k) => !roles.has(k))
  if (missing.length) throw new RolesNotRegisteredError(database, missing.join(', '))
  return roles
}

/**
 * Applies `pending` in order, each in its own transaction with the tenant's role names in
 * gatehouse.role_<kind> (what the SQL files read); returns the file names applied.
 */
async function applyPending(client: pg.Client, database: string, pending: Migration[]): Promise<string[]> {
  if (pending.length === 0) return []
  const roles = await registeredRoles(client, database)
  const applied: string[] = []
  for (const m of pending) {
    const sql = readFileSync(m.file, 'utf8')
    const base = path.basename(m.file)
    try {
      await inTransaction(client, async () => {
        for (const kind of ROLE_KINDS)
          await client.query('SELECT set_config($1, $2, true)', [`gatehouse.role_${kind}`, roles.get(kind)])
        await client.query(sql)
        await client.query('RESET ROLE')
        await client.query('INSERT INTO platform.schema_migrations (version, name) VALUES ($1, $2)', [
          m.version,
          m.name,
        ])
      })
    } catch (err) {
      const e = err as Error & { code?: string }
      throw new MigrationFailedError(database, base, e.code ? `${e.message} (SQLSTATE ${e.code})` : e.message, {
        cause: err,
      })
    }
    applied.push(base)
  }
  return applied
}

/**
 * Takes the database's migration lock, waiting at most waitMs (lock_timeout bounds an advisory
 * lock's wait as any other); a session holding it longer fails the run with migration_lock_busy.
 */
async function takeMigrationLock(client: pg.Client, database: string, waitMs: number): Promise<void> {
  await client.query(`SET lock_timeout = ${Math.max(1, Math.floor(waitMs))}`)
  try {
    await client.query('SELECT pg_advisory_lock($1)', [LOCK_KEY])
  } catch (err) {
    if ((err as { code?: string }).code === '55P03') throw new MigrationLockBusyError(database, { cause: err })
    throw err
  }
  await client.query('RESET lock_timeout')
}

/**
 * Brings one database up to date. Needs a superuser connection (event triggers). Safe to
 * run concurrently on the same database (an advisory lock serialises runners) and to
 * re-run (a no-op once current).
 */
export async function migrateDatabase(url: string, opts: MigrateOptions = {}): Promise<MigrateResult> {
  const migrations = listMigrations(opts.dir)
  const client = await connectAdmin(url)
  const database = client.database ?? '?'
  try {
    await takeMigrationLock(client, database, opts.lockWaitMs ?? LOCK_WAIT_MS)
    const r = await client.query<{ ok: boolean }>(
      "SELECT to_regclass('platform.roles') IS NOT NULL AND to_regclass('platform.schema_migrations') IS NOT NULL AS ok",
    )
    if (!r.rows[0].ok) {
      // Only provisioning (which passes the roles) starts a database's history: never leave
      // a platform schema in a database that is not a tenant's.
      if (!opts.roles) throw new RolesNotRegisteredError(database, ROLE_KINDS.join(', '))
      await inTransaction(client, () => client.query(BOOTSTRAP))
    }
    if (opts.roles) await registerRoles(client, database, opts.roles)

    const done = new Set(
      (await client.query<{ version: number }>('SELECT version FROM platform.schema_migrations')).rows.map(
        (r) => r.version,
      ),
    )
    const applied = await applyPending(
      client,
      database,
      migrations.filter((m) => !done.has(m.version)),
    )
    await client.query(SYNC_TEST_QUERY_LOGINS)
    await syncConnectionLimits(client, opts.connectionLimits)
    await client.query(OPEN_AUTH_TO_OWNER)
    const v = await client.query<{ v: number | null }>('SELECT max(version) AS v FROM platform.schema_migrations')
    return { applied, version: v.rows[0].v ?? 0 }
  } finally {
    await client.query('SELECT pg_advisory_unlock_all()').catch(() => {})
    await client.end().catch(() => {})
  }
}

export interface MigrateAllResult {
  database: string
  applied: string[]
  version: number
  /** Set when this database could not be migrated (the others still were). */
  error?: Error
}

/**
 * Migrates every tenant database of a cluster: each database whose CONNECT is granted to
 * a tenant engine login and that has platform.schema_migrations. A database that vanishes meanwhile is skipped; a failing
 * one is reported in its entry and the others still run.
 */
export async function migrateAll(
  adminUrl: string,
  opts: Omit<MigrateOptions, 'roles'> = {},
): Promise<MigrateAllResult[]> {
  const names = await withAdmin(adminUrl, async (client) =>
    (
      await client.query<{ datname: string }>(
        // Only databases whose CONNECT goes to a tenant engine login: no connection is ever
        // opened to other databases (one may be a template someone is about to copy).
        `SELECT d.datname FROM pg_database d
        WHERE d.datallowconn AND NOT d.datistemplate
          AND EXISTS (SELECT 1 FROM aclexplode(d.datacl) a JOIN pg_roles r ON r.oid = a.grantee
                       WHERE r.rolname ~ '^t_[0-9a-f]{10}_rest$' AND a.privilege_type = 'CONNECT')
        ORDER BY d.datname`,
      )
    ).rows.map((r) => r.datname),
  )
  const out: MigrateAllResult[] = []
  for (const database of names) {
    const url = withDatabase(adminUrl, database)
    // Dropped meanwhile, not connectable or without a history: not a tenant we can see.
    const isTenant = await withAdmin(url, async (db) => {
      const r = await db.query<{ ok: boolean }>("SELECT to_regclass('platform.schema_migrations') IS NOT NULL AS ok")
      return r.rows[0].ok
    }).catch(() => false)
    if (!isTenant) continue
    try {
      const r = await migrateDatabase(url, opts)
      out.push({ database, ...r })
    } catch (err) {
      if (await gone(adminUrl, database)) continue // dropped meanwhile
      out.push({ database, applied: [], version: 0, error: err as Error })
    }
  }
  return out
}

/**
 * Whether a database was dropped while we worked on it. A connection attempt is the test,
 * not a pg_database look-up: DROP DATABASE ... WITH (FORCE) ends our session before its own
 * transaction commits, and a new connection waits on the database's lock until the drop is
 * done, then fails with 3D000 (or "invalid database" once the catalog marks it so).
 */
async function gone(adminUrl: string, database: string): Promise<boolean> {
  try {
    const db = await connectAdmin(withDatabase(adminUrl, database))
    await db.end().catch(() => {})
    return false
  } catch (err) {
    const e = ((err as Error).cause ?? err) as { code?: string; message?: string }
    return e.code === '3D000' || /invalid database/.test(e.message ?? '')
  }
}

// Provisioning of one tenant: its database, its six roles, the platform/auth schemas (by
// migration), and its generated secrets and keys, returned as a tenant file. A failure half
// way drops what this call created. dropTenant removes a tenant again, idempotently.
import { randomBytes } from 'node:crypto'
import type pg from 'pg'
import { quoteIdent, withCredentials, withDatabase, ConfigError } from '../shared/index.js'
import {
  DATABASE_NAME,
  validateTenantRecord,
  generateSigningKey,
  type AuthSettings,
  type TenantFile,
  type SigningAlgorithm,
  type SigningKeyFile,
} from '../tenants/index.js'
import {
  allTenantRoleNames,
  assertSuperuser,
  connectAdmin,
  createTenantRoles,
  databaseExists,
  ensureClusterRoles,
  newTenantId,
  tenantIdOf,
  tenantRoleNames,
  TENANT_ROLE,
  withAdmin,
  type ConnectionLimits,
  type TenantRoleNames,
} from './roles.js'
import { migrateDatabase, type MigrateOptions } from './migrate.js'
import { setSupabaseDefaultPrivileges } from './default-privileges.js'
import {
  DatabaseExistsError,
  DatabaseNameInvalidError,
  ProvisioningFailedError,
  TenantOptionsInvalidError,
  TenantRoleExistsError,
} from './errors.js'

const RESERVED = new Set(['postgres', 'template0', 'template1'])

export function assertDatabaseName(database: string): void {
  if (typeof database !== 'string' || !DATABASE_NAME.test(database) || RESERVED.has(database)) {
    throw new DatabaseNameInvalidError(String(database))
  }
}

export interface ProvisionOptions {
  /** Superuser connection URL of the cluster (any database; `postgres` usually). */
  adminUrl: string
  /** The new database, also the tenant's URL segment. */
  database: string
  /** The panel organization that owns it. */
  organization: string
  /** Engine base URLs; default our engines on their default ports: `http://127.0.0.1:9999/<db>`, `:3000/<db>`. */
  upstreams?: { auth: string; rest: string }
  /** When given, pins `jwt.issuer` to `<publicUrl>/<database>/auth/v1` (else derived at run time). */
  publicUrl?: string
  auth?: Partial<AuthSettings>
  rest?: Partial<TenantFile['rest']>
  /**
   * What signs the tenant's access tokens (default ES256, as current Supabase projects). An
   * asymmetric key is generated either way (RS256 for RS256, else ES256); HS256 keeps it unused.
   */
  signingAlgorithm?: SigningAlgorithm
  /** Tenant id `t_<10 hex>`; random by default. */
  id?: string
  /** Migrations directory (default: the bundled one). */
  migrationsDir?: string
  /** The logins' CONNECTION LIMITs (config `postgres.*_connection_limit`). */
  connectionLimits?: ConnectionLimits
}

export interface ProvisionResult {
  /** The tenant file, plaintext keys and secrets: write it as YAML, show the keys once. */
  file: TenantFile
  /** The customer's login (owner of `public`). Same as file.postgres. */
  ownerUrl: string
  /** All six role names. */
  roles: TenantRoleNames
}

function secret(bytes: number): string {
  return randomBytes(bytes).toString('base64url')
}

function describeError(err: unknown): string {
  const e = err as Error & { code?: string }
  if (e instanceof Error && 'status' in e) return e.message
  return e?.code ? `${e.message} (SQLSTATE ${e.code})` : String(e?.message ?? err)
}

/** Builds and validates the tenant file before anything exists on the cluster. */
function buildTenantFile(
  opts: ProvisionOptions,
  roles: TenantRoleNames,
  passwords: Record<'rest' | 'authn' | 'owner', string>,
  signingKey: SigningKeyFile,
): TenantFile {
  const dbUrl = withDatabase(opts.adminUrl, opts.database)
  const raw = {
    database: opts.database,
    organization: opts.organization,
    postgres: withCredentials(dbUrl, roles.owner, passwords.owner),
    roles: { anon: roles.anon, auth: roles.auth, svc: roles.svc },
    engines: {
      rest: withCredentials(dbUrl, roles.rest, passwords.rest),
      auth: withCredentials(dbUrl, roles.authn, passwords.authn),
    },
    jwt: {
      secret: secret(32),
      upstream_secret: secret(32),
      expiry: 3600,
      ...(opts.publicUrl ? { issuer: `${opts.publicUrl.replace(/\/+$/, '')}/${opts.database}/auth/v1` } : {}),
      aud: 'authenticated',
      signing_algorithm: opts.signingAlgorithm ?? 'ES256',
      signing_keys: [signingKey],
    },
    keys: { public: `pk_${secret(24)}`, secret: `sk_${secret(24)}` },
    upstreams: opts.upstreams ?? {
      auth: `http://127.0.0.1:9999/${opts.database}`,
      rest: `http://127.0.0.1:3000/${opts.database}`,
    },
    rest: { ...opts.rest },
    auth: { ...opts.auth },
  }
  try {
    // Generated values and options are literal: no ${ENV} is expanded in them.
    return validateTenantRecord(raw, `tenant ${opts.database}`)
  } catch (err) {
    if (err instanceof ConfigError) throw new TenantOptionsInvalidError(err.message, { cause: err })
    throw err
  }
}

/**
 * Creates a tenant: database, roles, `platform` and `auth` schemas, secrets and keys.
 * Refuses a taken or invalid name and an unreachable cluster; a failure after the
 * database exists drops the database and the roles this call created.
 */
export async function provisionTenant(opts: ProvisionOptions): Promise<ProvisionResult> {
  assertDatabaseName(opts.database)
  const id = opts.id ?? newTenantId()
  const roles = tenantRoleNames(id)
  const passwords = { rest: secret(24), authn: secret(24), owner: secret(24) }
  const signingKey = await generateSigningKey(opts.signingAlgorithm === 'RS256' ? 'RS256' : 'ES256')
  const file = buildTenantFile(opts, roles, passwords, signingKey)
  await createTenantObjects(opts.adminUrl, opts.database, id, passwords, {
    ...migrateOptions(opts),
    supabaseDefaults: file.rest.supabase_default_privileges === true,
  })
  return { file, ownerUrl: file.postgres, roles }
}

type Passwords = Record<'rest' | 'authn' | 'owner', string>

function migrateOptions(opts: { migrationsDir?: string; connectionLimits?: ConnectionLimits }): MigrateOptions {
  return { dir: opts.migrationsDir, connectionLimits: opts.connectionLimits }
}

/** Database, roles, migrations and the opted-in Supabase default privileges, all or nothing. */
async function createTenantObjects(
  adminUrl: string,
  database: string,
  id: string,
  passwords: Passwords,
  migrate: MigrateOptions & { supabaseDefaults: boolean },
): Promise<string[]> {
  const roles = tenantRoleNames(id)
  const client = await connectAdmin(adminUrl)
  let databaseCreated = false
  let rolesCreated = false
  let step = 'database'
  try {
    await assertSuperuser(client)
    await ensureClusterRoles(client)
    try {
      await client.query(`CREATE DATABASE ${quoteIdent(database)}`)
    } catch (err) {
      if ((err as { code?: string }).code === '42P04') throw new DatabaseExistsError(database)
      throw err
    }
    databaseCreated = true
    step = 'roles'
    try {
      await createTenantRoles(client, database, roles, passwords)
    } catch (err) {
      const code = (err as { code?: string }).code
      if (code === '42710' || code === '23505') throw new TenantRoleExistsError(id, { cause: err })
      throw err
    }
    rolesCreated = true
    step = 'migrations'
    const { supabaseDefaults, ...migrateOpts } = migrate
    const r = await migrateDatabase(withDatabase(adminUrl, database), { ...migrateOpts, roles })
    step = 'default privileges'
    // As the database's owner: an admin connection that SET ROLE to it.
    if (supabaseDefaults)
      await withAdmin(withDatabase(adminUrl, database), async (c) => {
        await c.query(`SET ROLE ${quoteIdent(roles.owner)}`)
        await setSupabaseDefaultPrivileges(c, true)
      })
    return r.applied
  } catch (err) {
    if (databaseCreated) await dropCreated(client, adminUrl, database, rolesCreated ? id : null).catch(() => {})
    // Refusals (and failures before anything existed) pass through as they are.
    if (!databaseCreated || err instanceof TenantRoleExistsError) throw err
    throw new ProvisioningFailedError(database, step, describeError(err), { cause: err })
  } finally {
    await client.end().catch(() => {})
  }
}

export interface EnsureTenantOptions {
  adminUrl: string
  /** An existing tenant file made by provisioning (role names `t_<hex>_<kind>`, engine URLs with passwords). */
  file: TenantFile
  migrationsDir?: string
  connectionLimits?: ConnectionLimits
}

/**
 * Makes the database of an existing tenant file real (the development stack's first
 * start): creates database and roles with the file's names and passwords when the
 * database is missing, and brings it up to date either way.
 */
export async function ensureTenant(opts: EnsureTenantOptions): Promise<{ created: boolean; applied: string[] }> {
  const { file } = opts
  assertDatabaseName(file.database)
  const id = tenantIdOf(file.roles.anon)
  if (!id || tenantIdOf(file.roles.auth) !== id || tenantIdOf(file.roles.svc) !== id) {
    throw new TenantOptionsInvalidError(`tenant ${file.database}: roles must be t_<10 hex>_anon/_auth/_svc of one id`)
  }
  const roles = tenantRoleNames(id)
  const passwordOf = (url: string | undefined, kind: 'rest' | 'authn' | 'owner', field: string): string => {
    let u: URL
    try {
      u = new URL(url ?? '')
    } catch {
      throw new TenantOptionsInvalidError(`tenant ${file.database}: ${field} is not a URL`)
    }
    if (decodeURIComponent(u.username) !== roles[kind] || !u.password) {
      throw new TenantOptionsInvalidError(
        `tenant ${file.database}: ${field} must log in as ${roles[kind]} with a password`,
      )
    }
    return decodeURIComponent(u.password)
  }
  const passwords: Passwords = {
    owner: passwordOf(file.postgres, 'owner', 'postgres'),
    rest: passwordOf(file.engines?.rest, 'rest', 'engines.rest'),
    authn: passwordOf(file.engines?.auth, 'authn', 'engines.auth'),
  }
  const exists = await withAdmin(opts.adminUrl, (client) => databaseExists(client, file.database))
  const migrated = async (): Promise<{ created: boolean; applied: string[] }> => {
    const r = await migrateDatabase(withDatabase(opts.adminUrl, file.database), { ...migrateOptions(opts), roles })
    return { created: false, applied: r.applied }
  }
  if (exists) return migrated()
  try {
    const applied = await createTenantObjects(opts.adminUrl, file.database, id, passwords, {
      ...migrateOptions(opts),
      supabaseDefaults: file.rest.supabase_default_privileges === true,
    })
    return { created: true, applied }
  } catch (err) {
    // Another process (a second `npm start`) won the race: fine when it made the same tenant.
    if (err instanceof DatabaseExistsError) return migrated()
    throw err
  }
}

/** Drops what createTenantObjects made: the database, and the roles of tenant `id` when it made them. */
async function dropCreated(client: pg.Client, adminUrl: string, database: string, id: string | null): Promise<void> {
  await client.query(`DROP DATABASE IF EXISTS ${quoteIdent(database)} WITH (FORCE)`)
  if (id !== null) await dropRoles(client, adminUrl, allTenantRoleNames(id))
}

/**
 * Drops those of `names` that exist (returned), first revoking what other databases of the
 * cluster at `adminUrl` still grant them (pg_shdepend).
 */
async function dropRoles(client: pg.Client, adminUrl: string, names: string[]): Promise<string[]> {
  const existing = (
    await client.query<{ rolname: string }>('SELECT rolname FROM pg_roles WHERE rolname = ANY ($1::text[])', [names])
  ).rows.map((r) => r.rolname)
  if (existing.length === 0) return existing
  const list = existing.map(quoteIdent).join(', ')
  // Grants or objects in other databases (e.g. another tenant's owner granted to one of
  // these roles) would make DROP ROLE fail: revoke them there first.
  const deps = await client.query<{ datname: string | null }>(
    `SELECT DISTINCT d.datname FROM pg_shdepend s LEFT JOIN pg_database d ON d.oid = s.dbid
      WHERE s.refclassid = 'pg_authid'::regclass
        AND s.refobjid IN (SELECT oid FROM pg_roles WHERE rolname = ANY ($1::text[]))`,
    [existing],
  )
  const here = client.database
  for (const { datname } of deps.rows) {
    if (datname === null || datname === here) {
      await client.query(`REASSIGN OWNED BY ${list} TO CURRENT_USER`)
      await client.query(`DROP OWNED BY ${list}`)
      continue
    }
    const other = await connectAdmin(withDatabase(adminUrl, datname)).catch(() => null)
    if (!other) continue
    try {
      await other.query(`REASSIGN OWNED BY ${list} TO CURRENT_USER`)
      await other.query(`DROP OWNED BY ${list}`)
    } catch {
      // The database may be going away concurrently; DROP ROLE below reports what is left.
    } finally {
      await other.end().catch(() => {})
    }
  }
  for (const name of existing) await client.query(`DROP ROLE IF EXISTS ${quoteIdent(name)}`)
  return existing
}

export interface DropOptions {
  adminUrl: string
  database: string
  /** The tenant's roles as in its file (or any of its role names); the six are derived. */
  roles?: Partial<Record<string, string>> | string[]
}

export interface DropResult {
  databaseDropped: boolean
  rolesDropped: string[]
}

/** The tenant ids a database's platform.roles names (none when it is not one of ours). */
async function recordedTenantIds(adminUrl: string, database: string): Promise<string[]> {
  return withAdmin(withDatabase(adminUrl, database), async (db) => {
    const r = await db.query<{ role_name: string }>('SELECT role_name FROM platform.roles')
    return r.rows.map((row) => tenantIdOf(row.role_name)).filter((id): id is string => Boolean(id))
  }).catch(() => []) // not one of ours (or gone): only the given names count
}

/**
 * Drops the database (WITH FORCE) and the tenant's roles. Idempotent. Role names come
 * from the options and from the database's platform.roles; only names of the form
 * `t_<10 hex>_<kind>` are ever dropped, so shared roles cannot be.
 */
export async function dropTenant(opts: DropOptions): Promise<DropResult> {
  assertDatabaseName(opts.database)
  const ids = new Set<string>()
  const given = Array.isArray(opts.roles) ? opts.roles : Object.values(opts.roles ?? {})
  for (const name of given) {
    const id = typeof name === 'string' ? tenantIdOf(name) : null
    if (id) ids.add(id)
  }
  return withAdmin(opts.adminUrl, async (client) => {
    const exists = await databaseExists(client, opts.database)
    if (exists) {
      for (const id of await recordedTenantIds(opts.adminUrl, opts.database)) ids.add(id)
      await client.query(`DROP DATABASE IF EXISTS ${quoteIdent(opts.database)} WITH (FORCE)`)
    }
    const names = [...ids].flatMap((id) => allTenantRoleNames(id)).filter((n) => TENANT_ROLE.test(n))
    return { databaseDropped: exists, rolesDropped: await dropRoles(client, opts.adminUrl, names) }
  })
}

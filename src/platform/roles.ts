// Cluster-level roles: the shared `anon` / `authenticated` groups, and the six roles of
// one tenant (three request roles, three login roles), created in one transaction and
// dropped together. Names come from a random tenant id, never from user input.
import { createHash, createHmac, pbkdf2Sync, randomBytes } from 'node:crypto'
import pg from 'pg'
import {
  inTransaction,
  quoteIdent,
  quoteLiteral,
  ROLE_CLAIMS,
  ROLE_KINDS as REQUEST_ROLE_KINDS,
} from '../shared/index.js'
import { ClusterUnreachableError, AdminNotSuperuserError, TenantIdInvalidError } from './errors.js'

/**
 * The cluster-wide group roles that policies and GRANTs name (`TO anon`, `TO authenticated`,
 * `TO service_role`: the claim names, as Supabase's migrations write them), with their
 * attributes. Each database's request role is a member of its kind's group, so a plain
 * `GRANT ... TO anon, authenticated, service_role` reaches it; other tenants' roles cannot
 * connect to the database, so the grant stays this database's. service_role is as Supabase
 * makes it (NOINHERIT BYPASSRLS); the attribute is never inherited by members: each
 * database's svc role has its own BYPASSRLS.
 */
const CLUSTER_GROUPS: ReadonlyArray<{ name: string; attributes: string }> = [
  { name: ROLE_CLAIMS.anon, attributes: 'NOLOGIN' },
  { name: ROLE_CLAIMS.auth, attributes: 'NOLOGIN' },
  { name: ROLE_CLAIMS.svc, attributes: 'NOLOGIN NOINHERIT BYPASSRLS' },
  // Each database's auth hook role is a member (migration 0280): Supabase's hook SQL grants to it.
  { name: 'supabase_auth_admin', attributes: 'NOLOGIN' },
]

/** Kinds of per-tenant roles. The first three are the request roles of platform.role(). */
export const ROLE_KINDS = [...REQUEST_ROLE_KINDS, 'rest', 'authn', 'owner'] as const
type TenantRoleKind = (typeof ROLE_KINDS)[number]
export type TenantRoleNames = Record<TenantRoleKind, string>

/** `t_<10 hex>` */
const TENANT_ID = /^t_[0-9a-f]{10}$/
/** Every role name provisioning creates (the `_probe` test-query logins and the `_hook` role too); dropping never touches anything else. */
export const TENANT_ROLE = /^(t_[0-9a-f]{10})_(anon|auth|svc|rest|authn|owner|hook|anon_probe|auth_probe|svc_probe)$/

export function newTenantId(): string {
  return 't_' + randomBytes(5).toString('hex')
}

export function tenantRoleNames(id: string): TenantRoleNames {
  if (!TENANT_ID.test(id)) throw new TenantIdInvalidError(id)
  const out = {} as TenantRoleNames
  for (const k of ROLE_KINDS) out[k] = `${id}_${k}`
  return out
}

/**
 * Every role of a tenant id: the six of tenantRoleNames, and what the migrations make: the
 * three test-query logins (`<request role>_probe`) and the auth hooks' role (`<id>_hook`,
 * migration 0280). Dropping a tenant drops these.
 */
export function allTenantRoleNames(id: string): string[] {
  const names = tenantRoleNames(id)
  return [...ROLE_KINDS.map((k) => names[k]), `${id}_hook`, ...REQUEST_ROLE_KINDS.map((k) => `${names[k]}_probe`)]
}

/** The tenant id of a role name made by provisioning, or null. */
export function tenantIdOf(roleName: string): string | null {
  return TENANT_ROLE.exec(roleName)?.[1] ?? null
}

/** `host:port/database` of a URL, for messages (never the password). */
export function describeUrl(url: string): string {
  try {
    const u = new URL(url)
    return `${u.hostname}:${u.port || '5432'}${u.pathname}`
  } catch {
    return '(unparsable URL)'
  }
}

/**
 * Answers when `url`'s server accepts a connection and runs `select 1` (readiness, `gatehouse
 * status`); rejects naming the server.
 */
export async function pingPostgres(url: string): Promise<void> {
  const client = new pg.Client({
    connectionString: url,
    connectionTimeoutMillis: 2_000,
    application_name: 'gatehouse-readyz',
  })
  client.on('error', () => {})
  try {
    await client.connect()
    await client.query('select 1')
  } catch (err) {
    const where = (() => {
      try {
        const u = new URL(url)
        return `${u.hostname}:${u.port || '5432'}`
      } catch {
        return 'the configured server'
      }
    })()
    throw new Error(`postgres at ${where}: ${(err as Error).message}`, { cause: err })
  } finally {
    await client.end().catch(() => {})
  }
}

/** Opens a client; a failure to connect becomes ClusterUnreachableError. */
export async function connectAdmin(url: string): Promise<pg.Client> {
  let client: pg.Client
  try {
    // The admin is a superuser working inside databases whose owner may create objects in
    // public: names resolve in pg_catalog only, so no owner-made function runs as superuser.
    client = new pg.Client({
      connectionString: url,
      connectionTimeoutMillis: 5_000,
      application_name: 'gatehouse-platform',
      options: '-c search_path=pg_catalog,pg_temp',
    })
  } catch (err) {
    throw new ClusterUnreachableError(describeUrl(url), (err as Error).message, { cause: err })
  }
  client.on('error', () => {})
  try {
    await client.connect()
  } catch (err) {
    await client.end().catch(() => {})
    const e = err as Error & { code?: string }
    throw new ClusterUnreachableError(describeUrl(url), e.code ? `${e.message} (${e.code})` : e.message, { cause: err })
  }
  return client
}

/** Runs `fn` on an admin connection to `url` (connectAdmin), closed once `fn` is done. */
export async function withAdmin<T>(url: string, fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = await connectAdmin(url)
  try {
    return await fn(client)
  } finally {
    await client.end().catch(() => {})
  }
}

/** Whether the cluster `client` is connected to has the database `database`. */
export async function databaseExists(client: pg.Client, database: string): Promise<boolean> {
  return (await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [database])).rowCount === 1
}

/** Refuses early (with a clear message) when the admin role cannot provision. */
export async function assertSuperuser(client: pg.Client): Promise<void> {
  const r = await client.query<{ rolsuper: boolean; name: string }>(
    'SELECT rolsuper, current_user::text AS name FROM pg_roles WHERE rolname = current_user',
  )
  if (!r.rows[0]?.rolsuper) throw new AdminNotSuperuserError(r.rows[0]?.name ?? '?')
}

async function serverVersion(client: pg.Client): Promise<number> {
  const r = await client.query<{ v: string }>("SELECT current_setting('server_version_num') AS v")
  return Number(r.rows[0].v)
}

function isDuplicate(err: unknown): boolean {
  const code = (err as { code?: string }).code
  // 42710 duplicate_object; 23505 when two sessions race on pg_authid's unique index.
  return code === '42710' || code === '23505'
}

/** One cluster group role; a process that created it first meanwhile is no error. */
async function createGroupRole(client: pg.Client, group: { name: string; attributes: string }): Promise<void> {
  try {
    await client.query(`CREATE ROLE ${quoteIdent(group.name)} ${group.attributes}`)
  } catch (err) {
    if (!isDuplicate(err)) throw err
  }
}

/**
 * Cluster-wide NOLOGIN group roles `anon`, `authenticated`, `service_role` and
 * `supabase_auth_admin` (policies say `TO authenticated`, migrations `GRANT ... TO
 * service_role`). Idempotent and safe when two processes race.
 */
export async function ensureClusterRoles(admin: string | pg.Client): Promise<void> {
  const client = typeof admin === 'string' ? await connectAdmin(admin) : admin
  try {
    const have = await client.query<{ rolname: string }>(
      'SELECT rolname FROM pg_roles WHERE rolname = ANY ($1::text[])',
      [CLUSTER_GROUPS.map((g) => g.name)],
    )
    const names = new Set(have.rows.map((r) => r.rolname))
    for (const group of CLUSTER_GROUPS) {
      if (!names.has(group.name)) await createGroupRole(client, group)
    }
  } finally {
    if (typeof admin === 'string') await client.end().catch(() => {})
  }
}

/**
 * PBKDF2 iterations of the engine logins' SCRAM verifiers. Postgres' default (4,096) slows
 * the guessing of a weak password from a stolen verifier; the engine logins' passwords are
 * 24 random bytes that no guessing reaches, so the count buys nothing there and costs the
 * engine that much hashing on every connection it opens (docs/operating.md "Sizing for many
 * tenants"). Owner passwords, which people may choose and reuse, keep Postgres' default.
 */
const ENGINE_SCRAM_ITERATIONS = 16

/**
 * A SCRAM-SHA-256 verifier of `password` in Postgres' stored form
 * (`SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>`, RFC 5802 / RFC 5803), for
 * `PASSWORD '<verifier>'`: the statement then carries no password, and the iteration count
 * is ours on every Postgres version. `password` must be ASCII (SASLprep leaves it as is).
 */
function scramVerifier(password: string, iterations: number): string {
  const salt = randomBytes(16)
  const salted = pbkdf2Sync(password, salt, iterations, 32, 'sha256')
  const clientKey = createHmac('sha256', salted).update('Client Key').digest()
  const storedKey = createHash('sha256').update(clientKey).digest()
  const serverKey = createHmac('sha256', salted).update('Server Key').digest()
  const b64 = (b: Buffer): string => b.toString('base64')
  return `SCRAM-SHA-256$${iterations}:${b64(salt)}$${b64(storedKey)}:${b64(serverKey)}`
}

/**
 * What an engine login's PASSWORD is set to: its verifier with ENGINE_SCRAM_ITERATIONS. A
 * password outside printable ASCII (a hand-written tenant file's) is left to Postgres, whose
 * SASLprep may change it.
 */
export function engineVerifier(password: string): string {
  return /^[\x21-\x7e]+$/.test(password) ? scramVerifier(password, ENGINE_SCRAM_ITERATIONS) : password
}

/**
 * Creates the six roles of a tenant and their memberships, and CONNECT on the database
 * for the login roles only (PUBLIC loses it), in one transaction: all or nothing.
 */
export async function createTenantRoles(
  client: pg.Client,
  database: string,
  roles: TenantRoleNames,
  passwords: Record<'rest' | 'authn' | 'owner', string>,
): Promise<void> {
  const q = (k: TenantRoleKind) => quoteIdent(roles[k])
  // PG 16 can say it directly: the engine login reaches request roles by SET ROLE only.
  const setOnly = (await serverVersion(client)) >= 160000 ? ' WITH INHERIT FALSE, SET TRUE' : ''
  const db = quoteIdent(database)
  const statements = [
    `CREATE ROLE ${q('anon')} NOLOGIN INHERIT`,
    `CREATE ROLE ${q('auth')} NOLOGIN INHERIT`,
    `CREATE ROLE ${q('svc')} NOLOGIN INHERIT BYPASSRLS`,
    `CREATE ROLE ${q('rest')} LOGIN NOINHERIT PASSWORD ${quoteLiteral(engineVerifier(passwords.rest))}`,
    `CREATE ROLE ${q('authn')} LOGIN NOINHERIT PASSWORD ${quoteLiteral(engineVerifier(passwords.authn))}`,
    `CREATE ROLE ${q('owner')} LOGIN INHERIT PASSWORD ${quoteLiteral(passwords.owner)}`,
    `GRANT ${quoteIdent(ROLE_CLAIMS.anon)} TO ${q('anon')}`,
    `GRANT ${quoteIdent(ROLE_CLAIMS.auth)}, ${q('anon')} TO ${q('auth')}`,
    `GRANT ${quoteIdent(ROLE_CLAIMS.svc)} TO ${q('svc')}`,
    `GRANT ${q('anon')}, ${q('auth')}, ${q('svc')} TO ${q('rest')}${setOnly}`,
    `REVOKE ALL ON DATABASE ${db} FROM PUBLIC`,
    `GRANT CONNECT ON DATABASE ${db} TO ${q('rest')}, ${q('authn')}`,
    `GRANT CONNECT, TEMPORARY, CREATE ON DATABASE ${db} TO ${q('owner')}`,
  ]
  await inTransaction(client, async () => {
    for (const s of statements) await client.query(s)
  })
}

/**
 * CONNECTION LIMITs of a database's logins, chosen by the operator (config `postgres.*`), never
 * by a tenant; 0 or absent sizes them from the cluster's max_connections (docs/security.md
 * "The tenant boundary").
 */
export interface ConnectionLimits {
  /** The owner login and the test-query logins, each; default min(20, max_connections / 10). */
  owner?: number
  /** Each engine login (rest, authn); default max_connections / 4. */
  engine?: number
}

/** The operator's CONNECTION LIMITs of the logins (config `postgres.*_connection_limit`; 0 sizes them). */
export function connectionLimitsOf(cfg: {
  postgres: { owner_connection_limit: number; engine_connection_limit: number }
}): ConnectionLimits {
  return { owner: cfg.postgres.owner_connection_limit, engine: cfg.postgres.engine_connection_limit }
}

/**
 * Sets the CONNECTION LIMIT of this database's logins (registered in platform.roles) so one
 * database's owner cannot take the connections every database shares, and on Postgres 16 and
 * later lets the engine logins use the slots `reserved_connections` keeps
 * (pg_use_reserved_connections), which owners and test queries cannot reach. Idempotent; run by
 * every migration run.
 */
export async function syncConnectionLimits(client: pg.Client, limits: ConnectionLimits = {}): Promise<void> {
  const r = await client.query<{ max: number; version: number }>(
    `SELECT current_setting('max_connections')::int AS max, current_setting('server_version_num')::int AS version`,
  )
  const { max, version } = r.rows[0]!
  const owner = limits.owner || Math.max(1, Math.min(20, Math.floor(max / 10)))
  const engine = limits.engine || Math.max(1, Math.floor(max / 4))
  const logins = await client.query<{ role_name: string; kind: string; connlimit: number }>(
    `SELECT a.rolname AS role_name, CASE WHEN p.kind IN ('rest', 'authn') THEN 'engine' ELSE 'owner' END AS kind,
       a.rolconnlimit AS connlimit
     FROM platform.roles p JOIN pg_roles a
       ON a.rolname = p.role_name OR (p.kind IN ('anon', 'auth', 'svc') AND a.rolname = p.role_name || '_probe')
     WHERE a.rolcanlogin AND p.kind IN ('rest', 'authn', 'owner', 'anon', 'auth', 'svc')`,
  )
  for (const l of logins.rows) {
    const limit = l.kind === 'engine' ? engine : owner
    if (l.connlimit !== limit) await client.query(`ALTER ROLE ${quoteIdent(l.role_name)} CONNECTION LIMIT ${limit}`)
  }
  if (version < 160000) return
  // The engine logins are NOINHERIT: the grant itself passes the role's privilege on.
  const missing = await client.query<{ role_name: string }>(
    `SELECT a.rolname AS role_name FROM platform.roles p JOIN pg_roles a ON a.rolname = p.role_name
     WHERE p.kind IN ('rest', 'authn') AND NOT pg_has_role(a.oid, 'pg_use_reserved_connections', 'USAGE')`,
  )
  const engines = missing.rows.map((l) => quoteIdent(l.role_name))
  if (engines.length > 0)
    await client.query(`GRANT pg_use_reserved_connections TO ${engines.join(', ')} WITH INHERIT TRUE`)
}

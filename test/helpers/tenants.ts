// Test tenants: provisions a real tenant (database, roles, platform and auth schemas) on
// the test cluster and drops it when the test ends; plus running SQL as a login or as a
// request role the way the engines do. Not a test file (excluded in .taprc).
import { randomBytes } from 'node:crypto'
import pg from 'pg'
import { quoteIdent } from '../../src/shared/index.js'
import { provisionTenant, dropTenant, type TenantRoleNames } from '../../src/platform/index.js'
import { toTenant, type AuthSettings, type Tenant, type TenantFile } from '../../src/tenants/index.js'
import { adminUrl } from './db.js'

interface Teardown {
  teardown(fn: () => unknown): void
}

export interface TestTenantOptions {
  /** Engine base URLs for the tenant file (default: our engines' default ports). */
  upstreams?: { auth: string; rest: string }
  auth?: Partial<AuthSettings>
  rest?: Partial<TenantFile['rest']>
  organization?: string
  /** Database name; random `tenant_<hex>` by default. */
  database?: string
  /** Pins jwt.issuer to `<publicUrl>/<database>/auth/v1`. */
  publicUrl?: string
  /** What signs the tenant's access tokens (provisioning's default: ES256). */
  signingAlgorithm?: 'HS256' | 'ES256' | 'RS256'
}

export interface TestTenant {
  /** The tenant file: plaintext keys and secrets, engine login URLs in file.engines. */
  file: TenantFile
  /** The runtime form (keys hashed), as a TenantLookup returns it. */
  tenant: Tenant
  database: string
  /** The customer's login: owns `public`, creates tables and policies. */
  ownerUrl: string
  /** All six role names (anon, auth, svc, rest, authn, owner). */
  roles: TenantRoleNames
}

/** Provisions a tenant on the test cluster; dropped (database and roles) on teardown. */
export async function createTestTenant(t: Teardown, opts: TestTenantOptions = {}): Promise<TestTenant> {
  const database = opts.database ?? `tenant_${randomBytes(5).toString('hex')}`
  const admin = adminUrl()
  const { file, ownerUrl, roles } = await provisionTenant({
    adminUrl: admin,
    database,
    organization: opts.organization ?? 'org_test',
    upstreams: opts.upstreams,
    auth: opts.auth,
    rest: opts.rest,
    publicUrl: opts.publicUrl,
    signingAlgorithm: opts.signingAlgorithm,
  })
  t.teardown(async () => {
    await dropTenant({ adminUrl: admin, database, roles: Object.values(roles) }).catch(() => {})
  })
  return { file, tenant: toTenant(file), database, ownerUrl, roles }
}

// ---- running SQL as the tenant's roles ----------------------------------------------------

export async function withClient<T>(url: string, fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const c = new pg.Client({ connectionString: url })
  c.on('error', () => {})
  await c.connect()
  try {
    return await fn(c)
  } finally {
    await c.end().catch(() => {})
  }
}

/** As the engines do: BEGIN; SET LOCAL ROLE; request.jwt.claims; fn; always ROLLBACK. */
export async function asRole<T>(
  loginUrl: string,
  role: string,
  fn: (c: pg.Client) => Promise<T>,
  claims?: Record<string, unknown>,
): Promise<T> {
  return withClient(loginUrl, async (c) => {
    await c.query('BEGIN')
    try {
      await c.query(`SET LOCAL ROLE ${quoteIdent(role)}`)
      if (claims) await c.query("SELECT set_config('request.jwt.claims', $1, true)", [JSON.stringify(claims)])
      return await fn(c)
    } finally {
      await c.query('ROLLBACK').catch(() => {})
    }
  })
}

/** The error a promise rejects with (fails when it resolves). */
export async function rejection(p: Promise<unknown>): Promise<Error & { code?: string }> {
  try {
    await p
  } catch (err) {
    return err as Error & { code?: string }
  }
  throw new Error('expected a rejection')
}

// The development stack for the end-to-end suites (not a test file): a temporary working
// copy of config/tenants whose databases, roles, passwords, keys and secrets are renamed or
// regenerated, so test files and a developer's `npm start` never collide on the shared
// cluster; startDev() on it with every port the kernel's choice (KERNEL_PORTS); supabase-js clients, owner connections and raw
// calls against what dev.json says. Everything is dropped on teardown.
import { mkdtempSync, mkdirSync, readFileSync, writeFileSync, rmSync } from 'node:fs'
import { randomBytes } from 'node:crypto'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import pg from 'pg'
import { parse as parseYaml, stringify as toYaml } from 'yaml'
import { Redis } from 'ioredis'
import { createClient, type SupabaseClient } from '@supabase/supabase-js'
import { startDev, type DevStack } from '../../src/dev/index.js'
import type { DevDatabaseInfo, DevInfo } from '../../src/dev/index.js'
import { dropTenant, tenantRoleNames, type TenantRoleNames } from '../../src/platform/index.js'
import { adminUrl } from './db.js'

interface Teardown {
  teardown(fn: () => unknown): void
}

export const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..')

/** One tenant of the working copy: its original name (demo, demo2) and what it became. */
interface CopiedTenant {
  /** demo | demo2 (the committed file it came from). */
  source: string
  database: string
  organization: string
  roles: TenantRoleNames
}

export interface WorkingCopy {
  root: string
  tenants: CopiedTenant[]
  byName(source: string): CopiedTenant
}

function hex(bytes: number): string {
  return randomBytes(bytes).toString('hex')
}

function secret(): string {
  return randomBytes(32).toString('base64url')
}

/** The URL with another login and database (host and port are retargeted by `gatehouse dev`). */
function withLogin(url: string, user: string, password: string, database: string): string {
  const u = new URL(url)
  u.username = user
  u.password = password
  u.pathname = `/${database}`
  return u.toString()
}

/**
 * A temp directory holding config/tenants/ as in the repository, each tenant renamed to
 * `<prefix>_<hex>_<name>` with a fresh role id (t_<10 hex>), fresh passwords, keys and JWT
 * secrets. The files stay otherwise as committed (auth settings, limits). Removed and its
 * databases and roles dropped on teardown.
 */
export function createWorkingCopy(t: Teardown, prefix: string): WorkingCopy {
  const root = mkdtempSync(path.join(os.tmpdir(), `gatehouse-${prefix}-`))
  const dir = path.join(root, 'config', 'tenants')
  mkdirSync(dir, { recursive: true })
  const run = hex(3)
  const tenants: CopiedTenant[] = []
  for (const source of ['demo', 'demo2']) {
    const raw = parseYaml(readFileSync(path.join(REPO_ROOT, 'config', 'tenants', `${source}.yaml`), 'utf8')) as Record<
      string,
      any
    >
    const database = `${prefix}_${run}_${source}`
    const roles = tenantRoleNames(`t_${hex(5)}`)
    raw.database = database
    raw.roles = { anon: roles.anon, auth: roles.auth, svc: roles.svc }
    raw.postgres = withLogin(raw.postgres, roles.owner, hex(12), database)
    raw.engines = {
      rest: withLogin(raw.engines.rest, roles.rest, hex(12), database),
      auth: withLogin(raw.engines.auth, roles.authn, hex(12), database),
    }
    raw.jwt = { ...raw.jwt, secret: secret(), upstream_secret: secret() }
    raw.keys = { public: `pk_e2e_${hex(16)}`, secret: `sk_e2e_${hex(16)}` }
    writeFileSync(path.join(dir, `${database}.yaml`), toYaml(raw, { lineWidth: 0 }))
    tenants.push({ source, database, organization: raw.organization, roles })
  }
  t.teardown(async () => {
    for (const x of tenants) {
      await dropTenant({ adminUrl: adminUrl(), database: x.database, roles: Object.values(x.roles) }).catch(() => {})
    }
    rmSync(root, { recursive: true, force: true })
  })
  return {
    root,
    tenants,
    byName(source) {
      const x = tenants.find((c) => c.source === source)
      if (x === undefined) throw new Error(`no tenant ${source} in the working copy`)
      return x
    },
  }
}

/**
 * Every port of a stack left to the kernel (0): the stack binds its listeners before it builds
 * anything and reports the ports it got (dev.json, DevStack.info), so nothing is handed over.
 */
export const KERNEL_PORTS = {
  gateway: { port: 0, admin_port: 0 },
  rest: { port: 0, admin_port: 0 },
  auth: { port: 0, admin_port: 0 },
  panel: { port: 0, admin_port: 0 },
  mail: { smtp_port: 0, web_port: 0 },
} as const

interface Call {
  status: number
  body: any
  headers: Headers
}

export interface E2eTenant extends CopiedTenant, DevDatabaseInfo {}

export interface E2eStack {
  info: DevInfo
  copy: WorkingCopy
  dev: DevStack
  /** Redis key prefix of this stack's tenant store (source 'redis'). */
  keyPrefix: string
  /** demo and demo2 of the working copy, with what dev.json says of them. */
  tenant(source: 'demo' | 'demo2'): E2eTenant
  /** supabase-js on the gateway as a browser app would make it (public key by default). */
  supabase(x: E2eTenant, opts?: { key?: 'public' | 'secret'; accessToken?: string }): SupabaseClient
  /** SQL as the tenant's owner (the customer), through owner_url as dev.json gives it. */
  owner<R extends pg.QueryResultRow = any>(x: E2eTenant, sql: string, values?: unknown[]): Promise<pg.QueryResult<R>>
  /** A raw HTTP call to the gateway under /<database>. */
  gateway(
    x: E2eTenant | string,
    pathAndQuery: string,
    o?: { method?: string; apikey?: string | null; token?: string; body?: unknown; headers?: Record<string, string> },
  ): Promise<Call>
  /** A raw HTTP call to the panel API with the development panel session (or another token). */
  panel(method: string, pathAndQuery: string, o?: { token?: string | null; body?: unknown }): Promise<Call>
}

async function call(
  url: string,
  init: { method: string; headers: Record<string, string>; body?: unknown },
): Promise<Call> {
  const headers = { ...init.headers }
  if (init.body !== undefined) headers['content-type'] ??= 'application/json'
  const res = await fetch(url, {
    method: init.method,
    headers,
    body: init.body !== undefined ? JSON.stringify(init.body) : undefined,
  })
  const text = await res.text()
  let body: any
  try {
    body = text ? JSON.parse(text) : null
  } catch {
    body = text
  }
  return { status: res.status, body, headers: res.headers }
}

export interface StartOptions {
  /** Tenant store: 'files' (embedded default) or 'redis' (REDIS_URL of the services wrapper, own key prefix). */
  source: 'files' | 'redis'
  /** Working-copy name prefix (the databases are `<prefix>_<hex>_demo` and `..._demo2`). */
  prefix: string
}

/** Starts the development stack on a working copy; stopped (and everything dropped) on teardown. */
export async function startE2eStack(t: Teardown, opts: StartOptions): Promise<E2eStack> {
  const copy = createWorkingCopy(t, opts.prefix)
  const stateDir = path.join(copy.root, '.gatehouse')
  const env: NodeJS.ProcessEnv = { DATABASE_URL: adminUrl() }
  const keyPrefix = `test:${hex(4)}:`
  if (opts.source === 'redis') {
    if (!process.env.REDIS_URL) throw new Error('REDIS_URL is not set: run the tests through scripts/with-services.mjs')
    env.REDIS_URL = process.env.REDIS_URL
    t.teardown(async () => {
      const redis = new Redis(process.env.REDIS_URL!, { maxRetriesPerRequest: 2 })
      try {
        const keys = await redis.keys(keyPrefix + '*')
        if (keys.length) await redis.del(...keys)
      } finally {
        redis.disconnect()
      }
    })
  }
  const dev = await startDev({
    root: copy.root,
    env,
    stateDir,
    overrides: {
      ...KERNEL_PORTS,
      log: { level: 'silent' },
      redis: { key_prefix: keyPrefix },
      // Fast password hashing for tests; small pools on the shared cluster.
      auth: { ...KERNEL_PORTS.auth, bcrypt_cost: 4, pool_per_tenant: 3 },
      rest: { ...KERNEL_PORTS.rest, pool_per_tenant: 4 },
    },
  })
  t.teardown(() => dev.stop())

  const pools = new Map<string, pg.Pool>()
  t.teardown(async () => {
    for (const p of pools.values()) await p.end().catch(() => {})
  })

  const stack: E2eStack = {
    info: dev.info,
    copy,
    dev,
    keyPrefix,
    tenant(source) {
      const c = copy.byName(source)
      const d = dev.info.databases.find((x) => x.database === c.database)
      if (d === undefined) throw new Error(`dev.json does not list ${c.database}`)
      return { ...c, ...d }
    },
    supabase(x, o = {}) {
      return createClient(x.url, o.key === 'secret' ? x.secret_key : x.public_key, {
        auth: { persistSession: false, autoRefreshToken: false, detectSessionInUrl: false },
        ...(o.accessToken !== undefined ? { global: { headers: { Authorization: `Bearer ${o.accessToken}` } } } : {}),
      })
    },
    owner(x, sql, values = []) {
      let p = pools.get(x.database)
      if (p === undefined) {
        p = new pg.Pool({ connectionString: x.owner_url, max: 2 })
        p.on('error', () => {})
        pools.set(x.database, p)
      }
      return p.query(sql, values)
    },
    gateway(x, pathAndQuery, o = {}) {
      const database = typeof x === 'string' ? x : x.database
      const headers: Record<string, string> = { ...(o.headers ?? {}) }
      const apikey = o.apikey === undefined ? (typeof x === 'string' ? undefined : x.public_key) : o.apikey
      if (apikey !== undefined && apikey !== null) headers.apikey = apikey
      if (o.token !== undefined) headers.authorization = `Bearer ${o.token}`
      return call(`${dev.info.gateway_url}/${database}${pathAndQuery}`, {
        method: o.method ?? 'GET',
        headers,
        body: o.body,
      })
    },
    panel(method, pathAndQuery, o = {}) {
      const headers: Record<string, string> = {}
      const token = o.token === undefined ? dev.info.panel_session : o.token
      if (token !== null) headers.authorization = `Bearer ${token}`
      return call(`${dev.info.panel_url}${pathAndQuery}`, { method, headers, body: o.body })
    },
  }
  return stack
}

/** A unique e-mail address for a test user. */
export function email(label: string): string {
  return `${label}.${hex(4)}@example.com`
}

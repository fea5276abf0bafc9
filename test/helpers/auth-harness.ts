// Test harness of the auth engine (not a test file): provisions real tenants, starts the
// engine on 127.0.0.1:0 with a mutable tenant lookup, a controllable clock and a real SMTP
// catcher, and makes auth-js clients against it over real HTTP.
import type { AddressInfo } from 'node:net'
import type { FastifyBaseLogger, FastifyInstance } from 'fastify'
import { GoTrueClient } from '@supabase/auth-js'
import { SignJWT } from 'jose'
import pg from 'pg'
import { loadConfig, type Config } from '../../src/config/index.js'
import { buildAuthEngine } from '../../src/auth/index.js'
import { tenantIssuer, type AuthSettings, type Tenant } from '../../src/tenants/index.js'
import { createTestTenant, type TestTenant, type TestTenantOptions } from './tenants.js'
import { startMailCatcher, type MailCatcher } from './mail.js'

interface Teardown {
  teardown(fn: () => unknown): void
}

export const PUBLIC_URL = 'http://gatehouse.test'

/** A clock tests move forward instead of sleeping. */
interface TestClock {
  now(): Date
  advance(seconds: number): void
}
function testClock(): TestClock {
  let offset = 0
  return {
    now: () => new Date(Date.now() + offset),
    advance: (s) => {
      offset += s * 1000
    },
  }
}

export interface AuthHarness {
  app: FastifyInstance
  /** http://127.0.0.1:<port> */
  url: string
  config: Config
  mail: MailCatcher
  clock: TestClock
  tenants: Map<string, TestTenant>
  /** The engine base URL of a tenant: http://127.0.0.1:<port>/<database>. */
  base(t: TestTenant): string
  /** Changes a tenant's auth settings as later look-ups see them. */
  setAuth(t: TestTenant, auth: Partial<AuthSettings>): void
  /** Changes any part of the tenant record later look-ups return. */
  setTenant(t: TestTenant, patch: Partial<Tenant>): void
  /** An auth-js client on a tenant (in-memory storage, no timers). */
  client(t: TestTenant): GoTrueClient
  /** A service_role JWT as the gateway mints it for the secret key. */
  serviceToken(t: TestTenant): Promise<string>
  /** A verify link of a mail rewritten from the public URL to this engine. */
  engineLink(t: TestTenant, link: string): string
  /** The tenant look-up the engine uses (setAuth/setTenant changes included), for a second engine. */
  lookup: { get(db: string): Promise<Tenant | null> }
  /** A query on the tenant database as its owner. */
  ownerQuery<R extends pg.QueryResultRow = pg.QueryResultRow>(
    t: TestTenant,
    sql: string,
    values?: unknown[],
  ): Promise<pg.QueryResult<R>>
}

export interface HarnessOptions {
  /** outbound.allow_hosts of the engine's config (default: 127.0.0.1, where test providers listen). */
  outboundAllowHosts?: string[]
  tenants?: TestTenantOptions[]
  bcryptCost?: number
  poolPerTenant?: number
  /** More of the process config's auth section (trusted_proxies, max_json_depth ...). */
  auth?: Record<string, unknown>
  /** The process config's redis section (counters of rate limits shared through it). */
  redis?: { url: string; key_prefix?: string }
  /** The engine's logger (default: the config's, silent). */
  logger?: FastifyBaseLogger
}

/** Rate limits no ordinary test reaches; tests of the limits set their own. */
export const ROOMY_RATE_LIMITS = Object.fromEntries(
  ['sign_in_sign_up', 'token_refresh', 'verify', 'otp'].map((k) => [
    k,
    { capacity: 100_000, rate: 100_000, interval_seconds: 1 },
  ]),
)

export async function startAuth(t: Teardown, opts: HarnessOptions = {}): Promise<AuthHarness & { list: TestTenant[] }> {
  const mail = await startMailCatcher(t)
  const clock = testClock()
  const list = await Promise.all(
    (opts.tenants ?? [{}]).map((o) =>
      createTestTenant(t, {
        ...o,
        auth: {
          mail_min_interval: 0,
          mail_rate_per_hour: 1000,
          rate_limits: ROOMY_RATE_LIMITS as never,
          ...(o.auth ?? {}),
        },
      }),
    ),
  )
  const tenants = new Map(list.map((x) => [x.database, x]))
  const runtime = new Map<string, Tenant>(list.map((x) => [x.database, x.tenant]))
  const config = loadConfig({
    env: {},
    overrides: {
      public_url: PUBLIC_URL,
      log: { level: 'silent' },
      auth: {
        port: 0,
        bcrypt_cost: opts.bcryptCost ?? 4,
        pool_per_tenant: opts.poolPerTenant ?? 5,
        ...(opts.auth ?? {}),
      },
      mail: { smtp_host: mail.host, smtp_port: mail.port },
      // The test identity providers listen on loopback over http.
      outbound: { allow_hosts: opts.outboundAllowHosts ?? ['127.0.0.1'] },
      ...(opts.redis ? { redis: opts.redis } : {}),
    },
  })
  const lookup = { get: async (db: string) => runtime.get(db) ?? null }
  const app = buildAuthEngine({
    config,
    tenants: lookup,
    now: clock.now,
    ...(opts.logger ? { logger: opts.logger } : {}),
  })
  await app.listen({ port: 0, host: '127.0.0.1' })
  t.teardown(() => app.close())
  const url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`
  const owners = new Map<string, pg.Pool>()
  t.teardown(async () => {
    for (const p of owners.values()) await p.end().catch(() => {})
  })

  const h: AuthHarness & { list: TestTenant[] } = {
    app,
    url,
    config,
    mail,
    clock,
    tenants,
    list,
    lookup,
    base: (x) => `${url}/${x.database}`,
    setAuth(x, auth) {
      const cur = runtime.get(x.database)!
      runtime.set(x.database, { ...cur, auth: { ...cur.auth, ...auth } })
    },
    setTenant(x, patch) {
      runtime.set(x.database, { ...runtime.get(x.database)!, ...patch })
    },
    client: (x) => {
      const store = new Map<string, string>()
      return new GoTrueClient({
        url: `${url}/${x.database}`,
        autoRefreshToken: false,
        persistSession: true,
        detectSessionInUrl: false,
        storage: {
          getItem: (k: string) => store.get(k) ?? null,
          setItem: (k: string, v: string) => {
            store.set(k, v)
          },
          removeItem: (k: string) => {
            store.delete(k)
          },
        },
      })
    },
    serviceToken: (x) =>
      new SignJWT({ role: 'service_role' })
        .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
        .setIssuer(tenantIssuer(x.tenant, PUBLIC_URL))
        .setIssuedAt()
        .setExpirationTime('5m')
        .sign(new TextEncoder().encode(x.file.jwt.secret)),
    engineLink: (x, link) => link.replace(`${PUBLIC_URL}/${x.database}/auth/v1`, `${url}/${x.database}`),
    ownerQuery: (x, sql, values = []) => {
      let p = owners.get(x.database)
      if (!p) {
        p = new pg.Pool({ connectionString: x.ownerUrl, max: 2 })
        p.on('error', () => {})
        owners.set(x.database, p)
      }
      return p.query(sql, values)
    },
  }
  return h
}

/** A fetch to the engine with auth-js's API version header unless told otherwise. */
export async function call(
  url: string,
  init: {
    method?: string
    body?: unknown
    headers?: Record<string, string>
    token?: string
    apiVersion?: string | null
  } = {},
) {
  const headers: Record<string, string> = { ...(init.headers ?? {}) }
  if (init.apiVersion !== null) headers['x-supabase-api-version'] = init.apiVersion ?? '2024-01-01'
  if (init.body !== undefined) headers['content-type'] = 'application/json'
  if (init.token) headers.authorization = `Bearer ${init.token}`
  const res = await fetch(url, {
    method: init.method ?? (init.body !== undefined ? 'POST' : 'GET'),
    headers,
    body: init.body !== undefined ? JSON.stringify(init.body) : undefined,
    redirect: 'manual',
  })
  const text = await res.text()
  let json: any
  try {
    json = text ? JSON.parse(text) : null
  } catch {
    json = text
  }
  return { status: res.status, headers: res.headers, body: json }
}

export function decodeJwt(token: string): Record<string, any> {
  return JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString('utf8'))
}

let seq = 0
export function email(prefix = 'user'): string {
  return `${prefix}.${process.pid}.${Date.now().toString(36)}.${seq++}@example.com`
}

/** An in-memory storage for supabase-js's auth client (sessions and PKCE verifiers); `map` shows what it holds. */
export function memoryStorage() {
  const m = new Map<string, string>()
  return {
    map: m,
    getItem: (k: string) => m.get(k) ?? null,
    setItem: (k: string, v: string) => {
      m.set(k, v)
    },
    removeItem: (k: string) => {
      m.delete(k)
    },
  }
}

// The whole stack for the panel and refusal tests (not a test file): real tenants on the test
// cluster, the tenant store in Redis (one store for the services, another for the panel, as
// separate processes would have), the REST and auth engines, the gateway with the refusal
// rewriter and the panel, each on 127.0.0.1:0; an SMTP catcher; supabase-js clients.
import type { AddressInfo } from 'node:net'
import type { FastifyInstance } from 'fastify'
import pg from 'pg'
import { createClient, type SupabaseClient } from '@supabase/supabase-js'
import { loadConfig, type Config } from '../../src/config/index.js'
import { buildGateway, createRefusalRewriter } from '../../src/gateway/index.js'
import { buildRestEngine } from '../../src/rest/index.js'
import { buildAuthEngine } from '../../src/auth/index.js'
import { buildPanel, signPanelSession } from '../../src/panel/index.js'
import {
  createRedisStore,
  createTenantCache,
  tenantIssuer,
  type RedisTenantStore,
  type Tenant,
  type TenantCache,
} from '../../src/tenants/index.js'
import { signHS256 } from '../../src/shared/index.js'
import { createTestTenant, type TestTenant, type TestTenantOptions } from './tenants.js'
import { createTestRedis } from './redis.js'
import { startMailCatcher, type MailCatcher } from './mail.js'

interface Teardown {
  teardown(fn: () => unknown): void
}

export const PUBLIC_URL = 'http://gatehouse.test'
const PANEL_SECRET = 'panel-session-secret-for-tests-0123456789abcdef'

export interface StackTenant extends TestTenant {
  /** The runtime record as stored (upstreams point at this stack's engines). */
  tenant: Tenant
}

export interface Stack {
  config: Config
  gatewayUrl: string
  panelUrl: string
  mail: MailCatcher
  /** The services' store (gateway and engines read through `cache`). */
  store: RedisTenantStore
  cache: TenantCache
  /** The panel's own store (another process's view of the same Redis). */
  panelStore: RedisTenantStore
  /** Provisions a tenant, points it at this stack's engines and writes it to the store. */
  addTenant(opts?: TestTenantOptions): Promise<StackTenant>
  /** A query as the tenant's owner (the customer). */
  owner<R extends pg.QueryResultRow = pg.QueryResultRow>(
    x: StackTenant,
    sql: string,
    values?: unknown[],
  ): Promise<pg.QueryResult<R>>
  /** supabase-js on the gateway: the public key, or the secret key. */
  supabase(x: StackTenant, key?: 'public' | 'secret', accessToken?: string): SupabaseClient
  /** A panel session (HS256 with the stack's secret). */
  panelSession(o: { userId: string; email?: string; orgs: string[]; expiresIn?: number }): Promise<string>
  /** A JSON call to the panel. */
  panel(
    method: string,
    path: string,
    o?: { token?: string; body?: unknown; headers?: Record<string, string> },
  ): Promise<{ status: number; body: any; headers: Headers }>
}

async function listen(t: Teardown, app: FastifyInstance): Promise<string> {
  await app.listen({ port: 0, host: '127.0.0.1' })
  t.teardown(() => app.close())
  return `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`
}

export async function startStack(
  t: Teardown,
  opts: { panelOverrides?: Record<string, unknown>; overrides?: Record<string, unknown> } = {},
): Promise<Stack> {
  const mail = await startMailCatcher(t)
  const { url: redisUrl, prefix } = createTestRedis(t)
  const store = createRedisStore({ url: redisUrl, prefix })
  const panelStore = createRedisStore({ url: redisUrl, prefix })
  const cache = createTenantCache(store)
  t.teardown(async () => {
    cache.close()
    await store.close()
    await panelStore.close()
  })

  const config = loadConfig({
    env: {},
    overrides: {
      public_url: PUBLIC_URL,
      log: { level: 'silent' },
      gateway: { port: 0 },
      rest: { port: 0, pool_per_tenant: 3 },
      auth: { port: 0, bcrypt_cost: 4, pool_per_tenant: 3 },
      panel: { port: 0, session_secret: PANEL_SECRET, test_query_max_rows: 5, ...(opts.panelOverrides ?? {}) },
      // The test identity providers listen on loopback over http.
      outbound: { allow_hosts: ['127.0.0.1'] },
      ...(opts.overrides ?? {}),
      mail: { smtp_host: mail.host, smtp_port: mail.port },
    },
  })

  const rewriter = createRefusalRewriter()
  t.teardown(() => rewriter.close())
  const restUrl = await listen(t, buildRestEngine({ config, tenants: cache }))
  const authUrl = await listen(t, buildAuthEngine({ config, tenants: cache }))
  const gatewayUrl = await listen(t, buildGateway({ config, tenants: cache, rewriteError: rewriter }))
  const panelCache = createTenantCache(panelStore)
  t.teardown(() => panelCache.close())
  const panelUrl = await listen(t, buildPanel({ config, tenants: panelCache, store: panelStore }))

  const owners = new Map<string, pg.Pool>()
  t.teardown(async () => {
    for (const p of owners.values()) await p.end().catch(() => {})
  })

  const stack: Stack = {
    config,
    gatewayUrl,
    panelUrl,
    mail,
    store,
    cache,
    panelStore,
    async addTenant(o = {}) {
      const x = await createTestTenant(t, {
        ...o,
        auth: { mail_min_interval: 0, mail_rate_per_hour: 1000, ...(o.auth ?? {}) },
      })
      const tenant: Tenant = {
        ...x.tenant,
        upstreams: { rest: `${restUrl}/${x.database}`, auth: `${authUrl}/${x.database}` },
      }
      await store.putAll([tenant])
      return { ...x, tenant }
    },
    owner(x, sql, values = []) {
      let p = owners.get(x.database)
      if (p === undefined) {
        p = new pg.Pool({ connectionString: x.ownerUrl, max: 2 })
        p.on('error', () => {})
        owners.set(x.database, p)
      }
      return p.query(sql, values)
    },
    supabase(x, key = 'public', accessToken) {
      return createClient(`${gatewayUrl}/${x.database}`, key === 'public' ? x.file.keys.public : x.file.keys.secret, {
        auth: { persistSession: false, autoRefreshToken: false, detectSessionInUrl: false },
        ...(accessToken !== undefined ? { global: { headers: { Authorization: `Bearer ${accessToken}` } } } : {}),
      })
    },
    panelSession: (o) =>
      signPanelSession({
        secret: PANEL_SECRET,
        userId: o.userId,
        email: o.email,
        orgs: o.orgs,
        expiresIn: o.expiresIn,
      }),
    async panel(method, path, o = {}) {
      const headers: Record<string, string> = { ...(o.headers ?? {}) }
      if (o.token !== undefined) headers.authorization = `Bearer ${o.token}`
      if (o.body !== undefined) headers['content-type'] = 'application/json'
      const res = await fetch(`${panelUrl}${path}`, {
        method,
        headers,
        body: o.body !== undefined ? JSON.stringify(o.body) : undefined,
      })
      const text = await res.text()
      let body: any
      try {
        body = text ? JSON.parse(text) : null
      } catch {
        body = text
      }
      return { status: res.status, body, headers: res.headers }
    },
  }
  return stack
}

/** A raw call to the gateway (status, headers and body as a client sees them). */
export async function gatewayCall(
  stack: Stack,
  x: StackTenant,
  path: string,
  o: {
    method?: string
    key?: 'public' | 'secret'
    token?: string
    body?: unknown
    headers?: Record<string, string>
  } = {},
): Promise<{ status: number; body: any; headers: Headers }> {
  const headers: Record<string, string> = {
    apikey: o.key === 'secret' ? x.file.keys.secret : x.file.keys.public,
    ...(o.headers ?? {}),
  }
  if (o.token !== undefined) headers.authorization = `Bearer ${o.token}`
  if (o.body !== undefined) headers['content-type'] = 'application/json'
  const res = await fetch(`${stack.gatewayUrl}/${x.database}${path}`, {
    method: o.method ?? 'GET',
    headers,
    body: o.body !== undefined ? JSON.stringify(o.body) : undefined,
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

/** An access token as the auth engine issues it (HS256, tenant secret, tenant issuer). */
export async function userToken(x: StackTenant, sub: string, extra: Record<string, unknown> = {}): Promise<string> {
  return signHS256(
    { role: 'authenticated', aud: x.tenant.jwt.aud, email: `${sub.slice(0, 8)}@example.com`, ...extra },
    {
      secret: x.file.jwt.secret,
      expiresInSeconds: 600,
      issuer: tenantIssuer(x.tenant, PUBLIC_URL),
      subject: sub,
    },
  )
}

// The whole REST path for supabase-js tests: the gateway (keys, re-signed tokens, the
// refusal rewriter) in front of the REST engine, both listening on 127.0.0.1:0, and a
// provisioned tenant whose REST upstream is the engine. Not a test file.
import type { AddressInfo } from 'node:net'
import { randomBytes } from 'node:crypto'
import type { FastifyInstance } from 'fastify'
import { createClient, type SupabaseClient } from '@supabase/supabase-js'
import { loadConfig } from '../../src/config/index.js'
import { buildGateway, createRefusalRewriter } from '../../src/gateway/index.js'
import { buildRestEngine } from '../../src/rest/index.js'
import { signHS256, type PartTracer } from '../../src/shared/index.js'
import { tenantIssuer, type Tenant } from '../../src/tenants/index.js'
import { createTestTenant, withClient, type TestTenant, type TestTenantOptions } from './tenants.js'
import { sharedFixtureTenant } from './shared-fixture.js'

const PUBLIC_URL = 'http://gatehouse.test'

interface Teardown {
  teardown(fn: () => unknown): void
}

export interface RestGatewayStack {
  tenant: TestTenant
  database: string
  gatewayUrl: string
  /** supabase-js with the public key; `accessToken` signs in as that user. */
  client(accessToken?: string): SupabaseClient
  /** A user's access token as the auth engine would issue it. */
  userToken(sub: string): Promise<string>
  owner(sql: string, values?: unknown[]): Promise<Array<Record<string, unknown>>>
}

async function listen(t: Teardown, app: FastifyInstance): Promise<string> {
  await app.listen({ port: 0, host: '127.0.0.1' })
  t.teardown(() => app.close())
  return `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`
}

export interface RestGatewayOptions {
  /** Run as the owner of a tenant of the test's own (`shared` instead: none). */
  sql?: string
  /** The shared tenant of test/fixtures/<shared>.sql (shared-fixture.ts), for tests that only read. */
  shared?: string
  rest?: TestTenantOptions['rest']
  /** The REST engine's process settings (config rest.*) over the helper's. */
  restConfig?: { statement_timeout_ms?: number }
  /** Tracers of the gateway and the engine (tracing on). */
  tracers?: { gateway?: PartTracer; rest?: PartTracer }
}

/** The tenant whose REST upstream is the engine at `restUrl`: the shared one, or one of its own with `sql`. */
async function stackTenant(t: Teardown, opts: RestGatewayOptions, restUrl: string): Promise<TestTenant> {
  if (opts.shared !== undefined) {
    if (opts.sql !== undefined) throw new Error('a shared fixture is not changed: its SQL goes in its file')
    const upstreams = (database: string) => ({ auth: `${restUrl}/unused`, rest: `${restUrl}/${database}` })
    return sharedFixtureTenant(opts.shared, { rest: opts.rest, upstreams })
  }
  const database = `tenant_${randomBytes(5).toString('hex')}`
  const x = await createTestTenant(t, {
    database,
    rest: opts.rest,
    upstreams: { auth: `${restUrl}/unused`, rest: `${restUrl}/${database}` },
  })
  await withClient(x.ownerUrl, (c) => c.query(opts.sql ?? ''))
  return x
}

export async function startRestGateway(t: Teardown, opts: RestGatewayOptions): Promise<RestGatewayStack> {
  const config = loadConfig({
    env: {},
    overrides: {
      public_url: PUBLIC_URL,
      log: { level: 'silent' },
      gateway: { port: 0 },
      rest: { port: 0, pool_per_tenant: 3, ...opts.restConfig },
    },
  })
  const tenants = new Map<string, Tenant>()
  const lookup = { get: async (db: string) => tenants.get(db) ?? null }
  const restUrl = await listen(t, buildRestEngine({ config, tenants: lookup, tracer: opts.tracers?.rest }))
  const rewriter = createRefusalRewriter()
  t.teardown(() => rewriter.close())
  const gatewayUrl = await listen(
    t,
    buildGateway({ config, tenants: lookup, rewriteError: rewriter, tracer: opts.tracers?.gateway }),
  )

  const x = await stackTenant(t, opts, restUrl)
  const database = x.database
  tenants.set(database, x.tenant)
  return {
    tenant: x,
    database,
    gatewayUrl,
    client: (accessToken) =>
      createClient(`${gatewayUrl}/${database}`, x.file.keys.public, {
        auth: { persistSession: false, autoRefreshToken: false, detectSessionInUrl: false },
        ...(accessToken !== undefined ? { global: { headers: { Authorization: `Bearer ${accessToken}` } } } : {}),
      }),
    userToken: (sub) =>
      signHS256(
        { role: 'authenticated', aud: x.tenant.jwt.aud },
        {
          secret: x.file.jwt.secret,
          expiresInSeconds: 600,
          issuer: tenantIssuer(x.tenant, PUBLIC_URL),
          subject: sub,
        },
      ),
    owner: (sql, values = []) => withClient(x.ownerUrl, async (c) => (await c.query(sql, values)).rows),
  }
}

// REST test fixture (not a test file): a provisioned tenant with an authors / books /
// tags / book_tags schema (RLS on notes with auth.uid()), created through the tenant's
// owner connection with grants through platform.grant, and a REST engine serving it.
import { readFileSync } from 'node:fs'
import type { FastifyInstance } from 'fastify'
import { signHS256 } from '../../src/shared/index.js'
import { buildRestEngine } from '../../src/rest/index.js'
import type { Config } from '../../src/config/index.js'
import type { Tenant } from '../../src/tenants/index.js'
import { createTestTenant, withClient, type TestTenant } from './tenants.js'
import { sharedFixtureTenant } from './shared-fixture.js'

interface Teardown {
  teardown(fn: () => unknown): void
}

export const ALICE = '11111111-1111-1111-1111-111111111111'
export const BOB = '22222222-2222-2222-2222-222222222222'

/** The fixture schema (test/fixtures/rest.sql), run as the tenant owner. */
export const FIXTURE_SQL = readFileSync(new URL('../fixtures/rest.sql', import.meta.url), 'utf8')

export interface RestFixture {
  t: TestTenant
  tenant: Tenant
  app: FastifyInstance
  database: string
  /** An upstream token as the gateway would sign it. */
  token(
    kind: 'anon' | 'auth' | 'svc',
    claims?: Record<string, unknown>,
    opts?: { expiresIn?: number; secret?: string },
  ): Promise<string>
  /** GET (or another method) on `/<database><path>` through fastify inject. */
  get(path: string, headers?: Record<string, string>, method?: 'GET' | 'HEAD'): Promise<InjectResult>
  ownerSql(sql: string, values?: unknown[]): Promise<Array<Record<string, unknown>>>
}

export interface InjectResult {
  status: number
  headers: Record<string, string | string[] | number | undefined>
  body: string
  json(): any
}

export const TEST_CONFIG: Pick<Config, 'rest'> = {
  rest: {
    host: '127.0.0.1',
    port: 0,
    admin_host: '127.0.0.1',
    admin_port: 0,
    pool_budget: 8,
    pool_cluster_share: 0.5,
    pool_per_tenant: 4,
    pool_idle_ms: 60_000,
    pool_max_tenants: 1000,
    max_body_bytes: 1_048_576,
    max_json_depth: 100,
    reconnect_backoff_ms: 1_000,
    reconnect_backoff_max_ms: 32_000,
    statement_timeout_ms: 10_000,
  },
}

export interface FixtureOptions {
  rest?: Partial<TestTenant['file']['rest']>
  config?: Partial<Config['rest']>
  /** Extra SQL run as the owner after the fixture (a tenant of the test's own). */
  sql?: string
  poolAcquireTimeoutMs?: number
  /**
   * Instead: the shared tenant of test/fixtures/<shared>.sql (shared-fixture.ts), for tests
   * that only read; `rest` applies to this test's copy of its tenant file.
   */
  shared?: string
}

async function fixtureTenant(tap: Teardown, opts: FixtureOptions): Promise<TestTenant> {
  if (opts.shared !== undefined) {
    if (opts.sql !== undefined) throw new Error('a shared fixture is not changed: its SQL goes in its file')
    return sharedFixtureTenant(opts.shared, { rest: opts.rest })
  }
  const t = await createTestTenant(tap, { rest: opts.rest })
  await withClient(t.ownerUrl, async (c) => {
    await c.query(FIXTURE_SQL)
    if (opts.sql) await c.query(opts.sql)
  })
  return t
}

export async function createRestFixture(tap: Teardown, opts: FixtureOptions = {}): Promise<RestFixture> {
  const t = await fixtureTenant(tap, opts)
  const tenants = new Map([[t.database, t.tenant]])
  const app = buildRestEngine({
    config: { rest: { ...TEST_CONFIG.rest, ...opts.config } },
    tenants: { get: async (db) => tenants.get(db) ?? null },
    poolAcquireTimeoutMs: opts.poolAcquireTimeoutMs,
  })
  tap.teardown(() => app.close())
  const fx: RestFixture = {
    t,
    tenant: t.tenant,
    app,
    database: t.database,
    async token(kind, claims = {}, o = {}) {
      return signHS256(
        { role: t.tenant.roles[kind], ...claims },
        {
          secret: o.secret ?? t.file.jwt.upstream_secret,
          expiresInSeconds: o.expiresIn ?? 300,
        },
      )
    },
    async get(path, headers = {}, method = 'GET') {
      const res = await app.inject({ method, url: `/${t.database}${path}`, headers })
      return {
        status: res.statusCode,
        headers: res.headers,
        body: res.body,
        json: () => JSON.parse(res.body),
      }
    },
    ownerSql: (sql, values = []) => withClient(t.ownerUrl, async (c) => (await c.query(sql, values)).rows),
  }
  return fx
}

export { eventually } from './eventually.js'

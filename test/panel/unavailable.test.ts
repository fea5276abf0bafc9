// The panel, while what it depends on is away, answers 503 with Retry-After as the gateway does
// (RFC 9110 section 10.2.3): its tenant store (a real redis-server of this test, killed), and a
// tenant database that refuses connections (its URL names a port the kernel just freed, so the
// connect is refused as when Postgres is down or its connection slots are taken).
import t from 'tap'
import type { AddressInfo } from 'node:net'
import { loadConfig } from '../../src/config/index.js'
import { buildPanel, signPanelSession } from '../../src/panel/index.js'
import {
  createRedisStore,
  createTenantCache,
  createMemoryStore,
  parseTenantFile,
  toTenant,
} from '../../src/tenants/index.js'
import { spawnRedis, tenantFile } from '../helpers/tenant-fixtures.js'
import { closedPort } from '../helpers/ports.js'

const SECRET = 'panel-session-secret-for-tests-unavailable-0123456789'

const config = loadConfig({
  env: {},
  overrides: { log: { level: 'silent' }, panel: { port: 0, session_secret: SECRET } },
})

async function listen(t: { teardown(fn: () => unknown): void }, app: ReturnType<typeof buildPanel>): Promise<string> {
  await app.listen({ port: 0, host: '127.0.0.1' })
  t.teardown(() => app.close())
  return `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`
}

t.test('the tenant store is down: 503 tenant_store_unavailable with Retry-After', async (t) => {
  const redis = await spawnRedis(t)
  const store = createRedisStore({
    url: redis.url,
    prefix: 'panel-down:',
    connectTimeoutMs: 300,
    commandTimeoutMs: 300,
  })
  const cache = createTenantCache(store)
  t.teardown(async () => {
    cache.close()
    await store.close()
  })
  const base = await listen(t, buildPanel({ config, tenants: cache, store }))
  await redis.stop()
  const token = await signPanelSession({ secret: SECRET, userId: 'u-down', orgs: ['org_down'] })
  const res = await fetch(`${base}/organizations/org_down/databases/acme/api/auth-settings`, {
    headers: { authorization: `Bearer ${token}` },
  })
  t.equal(res.status, 503)
  t.equal(res.headers.get('retry-after'), '5', 'Retry-After: the store is asked again within 5 s')
  const body = (await res.json()) as { code: string }
  t.match(body.code, /^tenant_store_/)
})

t.test('the tenant database refuses connections: 503 database_unavailable with Retry-After', async (t) => {
  const port = await closedPort()
  const file = parseTenantFile(
    tenantFile('acme', {
      organization: 'org_down',
      postgres: `postgres://owner:pw@127.0.0.1:${port}/acme`,
      engines: {
        rest: `postgres://rest:pw@127.0.0.1:${port}/acme`,
        auth: `postgres://authn:pw@127.0.0.1:${port}/acme`,
      },
    }),
    'acme.yaml',
  )
  const store = createMemoryStore()
  await store.putAll([toTenant(file)])
  const cache = createTenantCache(store)
  t.teardown(async () => {
    cache.close()
    await store.close()
  })
  const base = await listen(t, buildPanel({ config, tenants: cache, store }))
  const token = await signPanelSession({ secret: SECRET, userId: 'u-down', orgs: ['org_down'] })
  const res = await fetch(`${base}/organizations/org_down/databases/acme/api/test-query`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ sql: 'select 1', as: 'anon' }),
  })
  const text = await res.clone().text()
  t.equal(res.status, 503, text)
  t.equal(res.headers.get('retry-after'), '1', 'Retry-After: 1')
  t.equal(((await res.json()) as { code: string }).code, 'database_unavailable')
})

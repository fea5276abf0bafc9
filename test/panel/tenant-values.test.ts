// The tenant boundary (docs/security.md): what a tenant writes through the panel is data.
// With `tenants.source: files` a panel change is written into the tenant file; a value holding
// `${HOME}` reads back as that text after a restart (never as the process environment), an
// unset `${NOPE}` does not keep the file from loading, while the operator's own `${ENV}`
// reference in a secret field (the JWT secret) is still expanded. Removing a setting removes
// its entry, so the file loads again; an oversized change is refused with the file unchanged.
// Real tenant database, REST engine, gateway and panel over a real directory of files.
import t from 'tap'
import type { AddressInfo } from 'node:net'
import { readFileSync, writeFileSync } from 'node:fs'
import path from 'node:path'
import type { FastifyInstance } from 'fastify'
import pg from 'pg'
import { parse as parseYaml, stringify as toYaml } from 'yaml'
import { loadConfig } from '../../src/config/index.js'
import { buildGateway } from '../../src/gateway/index.js'
import { buildRestEngine } from '../../src/rest/index.js'
import { buildPanel, signPanelSession } from '../../src/panel/index.js'
import { createMemoryStore, createTenantCache, loadTenantFileEntries } from '../../src/tenants/index.js'
import { createTestTenant } from '../helpers/tenants.js'
import { tempDir } from '../helpers/tenant-fixtures.js'

const SESSION_SECRET = 'panel-session-secret-for-tests-0123456789abcdef'
const ENV = { TV_JWT_SECRET: '', HOME: '/home/platform-secret-home', PATH: '/platform/secret/bin' }

async function listen(app: FastifyInstance): Promise<string> {
  await app.listen({ port: 0, host: '127.0.0.1' })
  t.teardown(() => app.close())
  return `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`
}

const x = await createTestTenant(t, { organization: 'org_tv' })
ENV.TV_JWT_SECRET = x.file.jwt.secret
const dir = tempDir(t)
const file = path.join(dir, `${x.database}.yaml`)
const store = createMemoryStore({ dir, env: ENV })
const cache = createTenantCache(store)
t.teardown(async () => {
  cache.close()
  await store.close()
})
const config = loadConfig({
  env: {},
  overrides: {
    log: { level: 'silent' },
    rest: { port: 0, pool_per_tenant: 2 },
    panel: { port: 0, session_secret: SESSION_SECRET },
  },
})
const restUrl = await listen(buildRestEngine({ config, tenants: cache }))
const gatewayUrl = await listen(buildGateway({ config, tenants: cache }))
const panelUrl = await listen(buildPanel({ config, tenants: cache, store }))
// The operator's file: the JWT secret as a reference to the environment.
writeFileSync(
  file,
  toYaml({
    ...x.file,
    jwt: { ...x.file.jwt, secret: '${TV_JWT_SECRET}' },
    upstreams: { rest: `${restUrl}/${x.database}`, auth: `http://127.0.0.1:9/${x.database}` },
  }),
)
await store.reload()
const owner = new pg.Pool({ connectionString: x.ownerUrl, max: 1 })
t.teardown(() => owner.end())
await owner.query(
  `CREATE FUNCTION public.app_setting(name text) RETURNS text LANGUAGE sql STABLE
     AS $$ SELECT current_setting('app.settings.' || name, true) $$;
   GRANT EXECUTE ON FUNCTION public.app_setting(text) TO PUBLIC;`,
)
const token = await signPanelSession({ secret: SESSION_SECRET, userId: 'p1', orgs: ['org_tv'] })

async function patch(what: string, body: unknown): Promise<{ status: number; body: any }> {
  const res = await fetch(`${panelUrl}/organizations/org_tv/databases/${x.database}/api/${what}`, {
    method: 'PATCH',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  })
  return { status: res.status, body: await res.json() }
}

async function appSetting(name: string): Promise<unknown> {
  const res = await fetch(`${gatewayUrl}/${x.database}/rest/v1/rpc/app_setting`, {
    method: 'POST',
    headers: { apikey: x.file.keys.public, 'content-type': 'application/json' },
    body: JSON.stringify({ name }),
  })
  return res.json()
}

/** The records a restart would serve: a new store over the directory. */
async function restarted() {
  const again = createMemoryStore({ dir, env: ENV })
  t.teardown(() => again.close())
  return (await again.get(x.database))!
}

t.test(
  'a panel value holding ${...} reads back as that text after a restart; the operator reference still expands',
  async (t) => {
    const r = await patch('rest-settings', { app_settings: { leak: '${HOME}|${PATH}', nope: '${NOPE}', cost: '$$5' } })
    t.equal(r.status, 200, JSON.stringify(r.body))
    t.same(r.body.settings.app_settings, { leak: '********', nope: '********', cost: '********' })

    const record = await restarted()
    t.same(record.rest.app_settings, { leak: '${HOME}|${PATH}', nope: '${NOPE}', cost: '$$5' }, 'the literal text')
    t.equal(record.jwt.secret, x.file.jwt.secret, "the operator's ${TV_JWT_SECRET} is expanded")
    const text = readFileSync(file, 'utf8')
    t.match(text, 'secret: ${TV_JWT_SECRET}', 'the reference is kept in the file')
    t.notMatch(text, ENV.HOME)

    t.same(await store.reload(), [], 'the running store reads the file again: no error, nothing changed')
    t.equal(await appSetting('leak'), '${HOME}|${PATH}', 'an RPC reads the text, not the environment')
    t.equal(await appSetting('nope'), '${NOPE}')
    t.equal(await appSetting('cost'), '$$5')
  },
)

t.test('removing a setting through the panel removes its entry: the file loads again', async (t) => {
  const set = await patch('auth-settings', {
    hooks: { custom_access_token: { uri: 'pg-functions://postgres/public/claims' } },
    webauthn: { rp_id: 'localhost', rp_display_name: 'TV', rp_origins: ['http://localhost:3000'] },
    providers: { github: { client_id: 'gh-id', secret: 'gh-secret-of-tv' } },
  })
  t.equal(set.status, 200, JSON.stringify(set.body))
  const removals = [{ hooks: { custom_access_token: null } }, { webauthn: null }, { providers: { github: null } }]
  for (const body of removals) {
    const r = await patch('auth-settings', body)
    t.equal(r.status, 200, `${JSON.stringify(body)}: ${JSON.stringify(r.body)}`)
  }
  const auth = (parseYaml(readFileSync(file, 'utf8')) as { auth: Record<string, any> }).auth
  t.notOk(auth.hooks !== undefined && 'custom_access_token' in auth.hooks, 'no hooks.custom_access_token entry')
  t.notOk('webauthn' in auth, 'no webauthn entry')
  t.notOk(auth.providers !== undefined && 'github' in auth.providers, 'no providers.github entry')
  t.equal(loadTenantFileEntries(dir, ENV).length, 1, 'the directory loads (tenants list, serve)')
  const record = await restarted()
  t.equal(record.auth.webauthn, undefined)
  t.same(record.auth.providers, {})
})

t.test('an oversized change is refused with 400 naming the field; the file is unchanged', async (t) => {
  const before = readFileSync(file, 'utf8')
  const many = Object.fromEntries(Array.from({ length: 101 }, (_, i) => [`s${i}`, 'v']))
  const tooMany = await patch('rest-settings', { app_settings: many })
  t.equal(tooMany.status, 400)
  t.equal(tooMany.body.code, 'tenant_record_invalid')
  t.match(tooMany.body.message, /rest\.app_settings: must NOT have more than 100 properties/)

  const big = Object.fromEntries(Array.from({ length: 80 }, (_, i) => [`s${i}`, 'v'.repeat(4000)]))
  const tooBig = await patch('rest-settings', { app_settings: big })
  t.equal(tooBig.status, 400)
  t.match(tooBig.body.message, /\(record\): is \d+ bytes, over the cap of 262144 bytes .*rest\.app_settings/)

  const urls = Array.from({ length: 101 }, (_, i) => `https://app.example.com/cb${i}`)
  const tooLong = await patch('auth-settings', { redirect_urls: urls })
  t.equal(tooLong.status, 400)
  t.match(tooLong.body.message, /redirect_urls: must NOT have more than 100 items/)
  t.equal(readFileSync(file, 'utf8'), before, 'nothing written')
})

// The OAuth 2.1 server through the gateway, as a third-party app (an MCP client, say) uses it:
// it holds no API key of the database, so discovery, dynamic registration, the authorize
// redirect, the token endpoint (client authentication in the Basic header) and userinfo (the
// app's bearer token) are reached without one, while the consent page is the database's own
// app with supabase-js and its public key (docs/auth-protocol.md §3.22). With the server off
// those routes answer GoTrue's 404 feature_disabled, and the admin API still needs the secret key.
import { createHash, randomBytes } from 'node:crypto'
import type { AddressInfo } from 'node:net'
import t from 'tap'
import { createClient } from '@supabase/supabase-js'
import { loadConfig } from '../../src/config/index.js'
import { buildAuthEngine } from '../../src/auth/index.js'
import { buildGateway } from '../../src/gateway/index.js'
import type { Tenant } from '../../src/tenants/index.js'
import { createTestTenant } from '../helpers/tenants.js'
import { PUBLIC_URL, email, decodeJwt, memoryStorage } from '../helpers/auth-harness.js'

const SITE = 'https://consent.example.com'
const APP = 'https://app.example.com/callback'

t.test('the OAuth 2.1 server through the gateway, without an API key', async (t) => {
  const config = loadConfig({
    env: {},
    overrides: {
      public_url: PUBLIC_URL,
      log: { level: 'silent' },
      auth: { port: 0, bcrypt_cost: 4 },
      gateway: { port: 0 },
    },
  })
  const tenants = new Map<string, Tenant>()
  const lookup = { get: async (db: string) => tenants.get(db) ?? null }
  const engine = buildAuthEngine({ config, tenants: lookup })
  await engine.listen({ port: 0, host: '127.0.0.1' })
  t.teardown(() => engine.close())
  const engineUrl = `http://127.0.0.1:${(engine.server.address() as AddressInfo).port}`
  const make = async (auth: Record<string, unknown>) => {
    const database = `tenant_${randomBytes(5).toString('hex')}`
    const tt = await createTestTenant(t, {
      database,
      upstreams: { auth: `${engineUrl}/${database}`, rest: `http://127.0.0.1:9/${database}` },
      auth: { site_url: SITE, mail_min_interval: 0, ...auth } as never,
    })
    tenants.set(database, tt.tenant)
    return tt
  }
  const a = await make({ oauth_server: { enabled: true, allow_dynamic_registration: true } })
  const off = await make({})
  const gateway = buildGateway({ config, tenants: lookup })
  await gateway.listen({ port: 0, host: '127.0.0.1' })
  t.teardown(() => gateway.close())
  const gw = `http://127.0.0.1:${(gateway.server.address() as AddressInfo).port}`
  const auth = (x: typeof a) => `${gw}/${x.database}/auth/v1`

  const meta = await fetch(`${auth(a)}/.well-known/oauth-authorization-server`)
  t.equal(meta.status, 200, 'discovery needs no key')
  const doc = (await meta.json()) as Record<string, string>
  t.equal(doc.issuer, `${PUBLIC_URL}/${a.database}/auth/v1`)

  const reg = await fetch(`${auth(a)}/oauth/clients/register`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ client_name: 'MCP client', redirect_uris: [APP] }),
  })
  t.equal(reg.status, 201, 'dynamic registration needs no key')
  const client = (await reg.json()) as { client_id: string; client_secret: string }

  const verifier = randomBytes(32).toString('base64url')
  const challenge = createHash('sha256').update(verifier).digest('base64url')
  const q = new URLSearchParams({
    client_id: client.client_id,
    redirect_uri: APP,
    response_type: 'code',
    scope: 'openid email',
    state: 'st',
    code_challenge: challenge,
    code_challenge_method: 'S256',
  })
  const go = await fetch(`${auth(a)}/oauth/authorize?${q.toString()}`, { redirect: 'manual' })
  t.equal(go.status, 302, 'the browser redirect needs no key')
  const consent = new URL(go.headers.get('location')!)
  t.equal(consent.origin + consent.pathname, `${SITE}/oauth/consent`)

  // The consent page: the database's own app, with its public key.
  const sb = createClient(`${gw}/${a.database}`, a.file.keys.public, {
    auth: { storage: memoryStorage(), persistSession: true, autoRefreshToken: false, detectSessionInUrl: false },
  })
  const address = email('gw-oauth')
  t.error((await sb.auth.signUp({ email: address, password: 'secret123' })).error)
  const id = consent.searchParams.get('authorization_id')!
  t.error((await sb.auth.oauth.getAuthorizationDetails(id)).error)
  const approved = await sb.auth.oauth.approveAuthorization(id, { skipBrowserRedirect: true })
  t.error(approved.error)
  const code = new URL(approved.data!.redirect_url).searchParams.get('code')!

  const basic = Buffer.from(`${client.client_id}:${client.client_secret}`).toString('base64')
  const tok = await fetch(`${auth(a)}/oauth/token`, {
    method: 'POST',
    headers: { authorization: `Basic ${basic}`, 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ grant_type: 'authorization_code', code, code_verifier: verifier }).toString(),
  })
  const tokens = (await tok.json()) as { access_token: string; refresh_token: string }
  t.equal(tok.status, 200, 'the code exchange with Basic credentials needs no key')
  t.equal(decodeJwt(tokens.access_token).client_id, client.client_id)

  const info = await fetch(`${auth(a)}/oauth/userinfo`, { headers: { authorization: `Bearer ${tokens.access_token}` } })
  t.equal(info.status, 200, 'userinfo with the bearer alone')
  t.match(await info.json(), { email: address })

  const refreshed = await fetch(`${auth(a)}/oauth/token`, {
    method: 'POST',
    headers: { authorization: `Basic ${basic}`, 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ grant_type: 'refresh_token', refresh_token: tokens.refresh_token }).toString(),
  })
  t.equal(refreshed.status, 200)

  const badSecret = Buffer.from(`${client.client_id}:nope`).toString('base64')
  const refused = await fetch(`${auth(a)}/oauth/token`, {
    method: 'POST',
    headers: { authorization: `Basic ${badSecret}`, 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ grant_type: 'refresh_token', refresh_token: tokens.refresh_token }).toString(),
  })
  t.equal(refused.status, 400)

  const adminNoKey = await fetch(`${auth(a)}/admin/oauth/clients`)
  t.equal(adminNoKey.status, 401, 'the admin API still needs a key')
  const otherRoute = await fetch(`${auth(a)}/user`, { headers: { authorization: `Basic ${basic}` } })
  t.equal(otherRoute.status, 401, 'Basic credentials open nothing else')

  for (const path of ['/.well-known/oauth-authorization-server', `/oauth/authorize?${q.toString()}`]) {
    const r = await fetch(`${auth(off)}${path}`, { redirect: 'manual' })
    t.equal(r.status, 404, `off: ${path}`)
  }
})

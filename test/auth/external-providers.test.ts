// External providers (docs/auth-protocol.md §3.12-3.13, §5.9): supabase-js signInWithOAuth through
// the gateway against a real OpenID Provider (oidc-provider on loopback) whose login form
// the test fills in over HTTP. The first sign-in creates the user, later ones find it; a
// verified address links to the existing account; implicit and PKCE flows; provider_token
// in the session; a disabled or unknown provider, bad states and an open redirect refused.
import t, { type Test } from 'tap'
import { randomBytes } from 'node:crypto'
import type { AddressInfo } from 'node:net'
import { createClient, type SupabaseClient } from '@supabase/supabase-js'
import { loadConfig } from '../../src/config/index.js'
import { buildGateway } from '../../src/gateway/index.js'
import type { Tenant } from '../../src/tenants/index.js'
import { startAuth, call, decodeJwt, email, PUBLIC_URL, type AuthHarness } from '../helpers/auth-harness.js'
import type { TestTenant } from '../helpers/tenants.js'
import { startOidcProvider } from '../helpers/oidc.js'
import { memoryStorage } from '../helpers/auth-harness.js'

const SITE = 'http://localhost:3000'
const APP = 'http://app.example.com'

t.test('external providers', async (t) => {
  const database = `tenant_${randomBytes(5).toString('hex')}`
  const op = await startOidcProvider(t, { redirectUris: [`${PUBLIC_URL}/${database}/auth/v1/callback`] })
  const provider = { client_id: op.client.client_id, secret: op.client.client_secret, issuer: op.issuer }
  const h: AuthHarness & { list: TestTenant[] } = await startAuth(t, {
    tenants: [
      {
        database,
        auth: {
          site_url: SITE,
          redirect_urls: [`${APP}/**`],
          pkce: true,
          providers: { oidc: provider, github: { client_id: 'x', secret: 'y', enabled: false } },
        },
      },
    ],
  })
  const tt = h.list[0]!

  // The gateway in front of the engine (the tenant's auth upstream is the engine).
  const config = loadConfig({
    env: {},
    overrides: { public_url: PUBLIC_URL, log: { level: 'silent' }, gateway: { port: 0 } },
  })
  const runtime: Tenant = { ...tt.tenant, upstreams: { auth: h.base(tt), rest: 'http://127.0.0.1:9/' + database } }
  const gw = buildGateway({ config, tenants: { get: async (db) => (db === database ? runtime : null) } })
  await gw.listen({ port: 0, host: '127.0.0.1' })
  t.teardown(() => gw.close())
  const gwBase = `http://127.0.0.1:${(gw.server.address() as AddressInfo).port}/${database}`
  /** A URL of the tenant's public auth API as the browser would reach it: through the gateway. */
  const viaGateway = (u: string) => u.replace(`${PUBLIC_URL}/${database}`, gwBase)

  const supabase = (flowType: 'implicit' | 'pkce'): SupabaseClient =>
    createClient(gwBase, tt.file.keys.public, {
      auth: {
        flowType,
        storage: memoryStorage(),
        persistSession: true,
        autoRefreshToken: false,
        detectSessionInUrl: false,
      },
    })

  /** GET with no redirect following; returns the Location. */
  async function location(url: string): Promise<{ status: number; location: string }> {
    const res = await fetch(url, { redirect: 'manual' })
    await res.arrayBuffer()
    return { status: res.status, location: res.headers.get('location') ?? '' }
  }

  /** Browser walk: our /authorize -> provider login -> our /callback -> the app's URL. */
  async function walk(t: Test, authorizeUrl: string, account: string): Promise<URL> {
    const a = await location(authorizeUrl)
    if (a.status !== 302) throw new Error(`authorize answered ${a.status}`)
    t.ok(a.location.startsWith(op.issuer + '/'), 'authorize sends the browser to the provider')
    const back = await op.signIn(a.location, account)
    t.ok(
      back.startsWith(`${PUBLIC_URL}/${database}/auth/v1/callback?`),
      'the provider sends the browser to our callback',
    )
    const cb = await location(viaGateway(back))
    t.equal(cb.status, 302, 'callback redirects')
    return new URL(cb.location)
  }

  const fragment = (u: URL) => Object.fromEntries(new URLSearchParams(u.hash.slice(1)))
  const adminUsers = async () =>
    (await call(`${h.base(tt)}/admin/users?per_page=1000`, { token: await h.serviceToken(tt) })).body.users as any[]

  t.test('/settings lists the enabled provider only', async (t) => {
    const r = await call(`${h.base(tt)}/settings`)
    t.equal(r.body.external.oidc, true)
    t.equal(r.body.external.github, false)
    t.equal(r.body.external.google, false)
  })

  const alice = email('alice')
  op.accounts.set('alice-sub', {
    email: alice,
    email_verified: true,
    name: 'Alice Liddell',
    picture: 'https://pics.example.com/alice.png',
  })
  let aliceId = ''

  t.test('implicit: the first sign-in creates the user, a second finds it', async (t) => {
    const sb = supabase('implicit')
    const { data, error } = await sb.auth.signInWithOAuth({
      provider: 'oidc' as never,
      options: { redirectTo: `${APP}/welcome` },
    })
    t.error(error)
    t.ok(data.url?.startsWith(`${gwBase}/auth/v1/authorize?provider=oidc`), 'supabase-js builds the authorize URL')
    const landed = await walk(t, data.url!, 'alice-sub')
    t.equal(landed.origin + landed.pathname, `${APP}/welcome`, 'back at the allowed redirect_to')
    const f = fragment(landed)
    t.match(f, { token_type: 'bearer', expires_in: '3600', sb: '' })
    t.ok(f.access_token && f.refresh_token && f.provider_token, 'session and provider token in the fragment')
    const claims = decodeJwt(f.access_token!)
    t.equal(claims.amr[0].method, 'oauth')
    t.equal(claims.email, alice)
    aliceId = claims.sub

    // The client takes the session over and reads the user through the gateway.
    const set = await sb.auth.setSession({ access_token: f.access_token!, refresh_token: f.refresh_token! })
    t.error(set.error)
    const user = set.data.user!
    t.equal(user.id, aliceId)
    t.same(user.app_metadata, { provider: 'oidc', providers: ['oidc'] })
    t.equal(user.identities?.length, 1)
    t.match(user.identities?.[0], { provider: 'oidc', id: 'alice-sub' })
    t.match(user.user_metadata, {
      sub: 'alice-sub',
      email: alice,
      email_verified: true,
      name: 'Alice Liddell',
      full_name: 'Alice Liddell',
      avatar_url: 'https://pics.example.com/alice.png',
      iss: op.issuer,
    })
    t.ok(user.email_confirmed_at, 'a verified provider email confirms the account')

    // Second sign-in: the same user, no second account.
    const again = await supabase('implicit').auth.signInWithOAuth({
      provider: 'oidc' as never,
      options: { redirectTo: `${APP}/welcome` },
    })
    const landed2 = await walk(t, again.data.url!, 'alice-sub')
    t.equal(decodeJwt(fragment(landed2).access_token!).sub, aliceId, 'same user')
    t.equal((await adminUsers()).filter((u) => u.email === alice).length, 1, 'one account for the address')
  })

  t.test('PKCE: exchangeCodeForSession returns the session with provider_token', async (t) => {
    const sb = supabase('pkce')
    const { data } = await sb.auth.signInWithOAuth({ provider: 'oidc' as never, options: { redirectTo: `${APP}/cb` } })
    t.match(data.url, /code_challenge=[^&]+&code_challenge_method=s256/)
    const landed = await walk(t, data.url!, 'alice-sub')
    t.equal(landed.origin + landed.pathname, `${APP}/cb`)
    t.equal(landed.hash, '', 'no tokens in the fragment')
    const code = landed.searchParams.get('code')!
    t.match(code, /^[0-9a-f-]{36}$/)
    const ex = await sb.auth.exchangeCodeForSession(code)
    t.error(ex.error)
    t.equal(ex.data.user?.id, aliceId, 'the same user as the implicit sign-ins')
    t.ok(ex.data.session?.provider_token, 'provider_token in the session')
    t.equal(decodeJwt(ex.data.session!.access_token).amr[0].method, 'oauth')
    const me = await sb.auth.getUser()
    t.equal(me.data.user?.id, aliceId, 'the session works through the gateway')

    // The code is spent.
    const again = await call(`${h.base(tt)}/token?grant_type=pkce`, {
      body: { auth_code: code, code_verifier: 'x'.repeat(43) },
    })
    t.equal(again.status, 404)
    t.equal(again.body.code, 'flow_state_not_found')
  })

  t.test('a verified provider email links to the existing password account', async (t) => {
    const bob = email('bob')
    const c = h.client(tt)
    const signup = await c.signUp({ email: bob, password: 'secret123' })
    t.error(signup.error)
    const bobId = signup.data.user!.id
    op.accounts.set('bob-sub', { email: bob, email_verified: true, name: 'Bob' })
    const { data } = await supabase('implicit').auth.signInWithOAuth({ provider: 'oidc' as never })
    const landed = await walk(t, data.url!, 'bob-sub')
    t.equal(landed.origin, SITE, 'no redirect_to: the site URL')
    const f = fragment(landed)
    t.equal(decodeJwt(f.access_token!).sub, bobId, 'linked to the password account')
    const user = (await call(`${h.base(tt)}/user`, { token: f.access_token })).body
    t.same(user.identities.map((i: any) => i.provider).sort(), ['email', 'oidc'])
    t.same(user.app_metadata.providers, ['email', 'oidc'])
    t.error(
      (await h.client(tt).signInWithPassword({ email: bob, password: 'secret123' })).error,
      'the password still works',
    )
  })

  t.test('an unverified provider email does not take over an account', async (t) => {
    const carol = email('carol')
    const signup = await h.client(tt).signUp({ email: carol, password: 'secret123' })
    t.error(signup.error)
    op.accounts.set('mallory-sub', { email: carol, email_verified: false, name: 'Mallory' })
    const { data } = await supabase('implicit').auth.signInWithOAuth({ provider: 'oidc' as never })
    const f = fragment(await walk(t, data.url!, 'mallory-sub'))
    const claims = decodeJwt(f.access_token!)
    t.not(claims.sub, signup.data.user!.id, 'a different user')
    t.equal(claims.email, '', 'who gets no email address')
  })

  t.test('an open redirect falls back to the site URL', async (t) => {
    const { data } = await supabase('implicit').auth.signInWithOAuth({
      provider: 'oidc' as never,
      options: { redirectTo: 'https://evil.example.net/steal' },
    })
    const landed = await walk(t, data.url!, 'alice-sub')
    t.equal(landed.origin, SITE)
    t.ok(fragment(landed).access_token)
  })

  t.test('state problems redirect to the site URL with GoTrue codes', async (t) => {
    const missing = await location(`${gwBase}/auth/v1/callback?code=abc`)
    t.equal(missing.status, 303)
    let u = new URL(missing.location)
    t.equal(u.origin, SITE)
    t.match(Object.fromEntries(u.searchParams), { error: 'invalid_request', error_code: 'bad_oauth_callback' })
    t.equal(u.hash, '', "a state that cannot be loaded: the error in the query only, as GoTrue's loadFlowState")

    const forged = await location(`${gwBase}/auth/v1/callback?code=abc&state=${crypto.randomUUID()}`)
    u = new URL(forged.location)
    t.match(Object.fromEntries(u.searchParams), {
      error_code: 'bad_oauth_state',
      error_description: 'OAuth state not found or expired',
    })
    const garbage = await location(`${gwBase}/auth/v1/callback?code=abc&state=not-a-uuid`)
    t.equal(new URL(garbage.location).searchParams.get('error_code'), 'bad_oauth_state')

    // Replaying an implicit callback: the state is spent.
    const { data } = await supabase('implicit').auth.signInWithOAuth({
      provider: 'oidc' as never,
      options: { redirectTo: `${APP}/x` },
    })
    const a = await location(data.url!)
    const back = await op.signIn(a.location, 'alice-sub')
    t.equal((await location(viaGateway(back))).status, 302)
    const replay = await location(viaGateway(back))
    t.equal(new URL(replay.location).searchParams.get('error_code'), 'bad_oauth_state')

    // Replaying a PKCE callback before the exchange: already used.
    const p = await supabase('pkce').auth.signInWithOAuth({
      provider: 'oidc' as never,
      options: { redirectTo: `${APP}/x` },
    })
    const pa = await location(p.data.url!)
    const pback = await op.signIn(pa.location, 'alice-sub')
    t.ok(new URL((await location(viaGateway(pback))).location).searchParams.get('code'))
    const preplay = new URL((await location(viaGateway(pback))).location)
    t.equal(preplay.origin, SITE)
    t.match(Object.fromEntries(preplay.searchParams), {
      error_code: 'flow_state_already_used',
      error_description: 'State has already been used',
    })

    // An expired state (GoTrue: 5 minutes).
    const e = await location(
      `${gwBase}/auth/v1/authorize?provider=oidc&redirect_to=${encodeURIComponent(APP + '/late')}`,
    )
    const state = new URL(e.location).searchParams.get('state')!
    h.clock.advance(301)
    try {
      const late = new URL((await location(`${gwBase}/auth/v1/callback?code=abc&state=${state}`)).location)
      t.match(Object.fromEntries(late.searchParams), {
        error_code: 'bad_oauth_state',
        error_description: 'OAuth state has expired',
      })
    } finally {
      h.clock.advance(-301)
    }
  })

  t.test('errors after the state go back to the app, in the query and the fragment', async (t) => {
    const a = await location(
      `${gwBase}/auth/v1/authorize?provider=oidc&redirect_to=${encodeURIComponent(APP + '/done')}`,
    )
    const state = new URL(a.location).searchParams.get('state')!
    // The person refused at the provider.
    const denied = new URL(
      (
        await location(
          `${gwBase}/auth/v1/callback?state=${state}&error=access_denied&error_description=${encodeURIComponent('End-User aborted interaction')}`,
        )
      ).location,
    )
    t.equal(denied.origin + denied.pathname, `${APP}/done`)
    t.match(Object.fromEntries(denied.searchParams), {
      error: 'access_denied',
      error_description: 'End-User aborted interaction',
    })
    t.match(fragment(denied), { error: 'access_denied', sb: '' })

    // A forged code: the provider refuses the exchange.
    const b = await location(
      `${gwBase}/auth/v1/authorize?provider=oidc&redirect_to=${encodeURIComponent(APP + '/done')}`,
    )
    const s2 = new URL(b.location).searchParams.get('state')!
    const bad = new URL((await location(`${gwBase}/auth/v1/callback?state=${s2}&code=forged`)).location)
    t.equal(bad.origin + bad.pathname, `${APP}/done`)
    t.match(Object.fromEntries(bad.searchParams), { error: 'server_error', error_code: 'unexpected_failure' })
    t.notMatch(bad.searchParams.get('error_description') ?? '', /forged|invalid_grant/, 'no provider detail leaks')
  })

  t.test('a disabled or unknown provider is refused', async (t) => {
    const off = await call(`${gwBase}/auth/v1/authorize?provider=github`)
    t.equal(off.status, 400)
    t.match(off.body, { code: 'validation_failed', message: 'Unsupported provider: provider is not enabled' })
    const unknown = await call(`${gwBase}/auth/v1/authorize?provider=myspace`)
    t.equal(unknown.status, 400)
    t.match(unknown.body, {
      code: 'validation_failed',
      message: 'Unsupported provider: Provider myspace could not be found',
    })

    // Switched off after a flow started: the callback refuses it too.
    const a = await location(
      `${gwBase}/auth/v1/authorize?provider=oidc&redirect_to=${encodeURIComponent(APP + '/off')}`,
    )
    const back = await op.signIn(a.location, 'alice-sub')
    h.setAuth(tt, { providers: { oidc: { ...provider, enabled: false } } })
    try {
      const r = new URL((await location(viaGateway(back))).location)
      t.equal(r.origin + r.pathname, `${APP}/off`)
      t.match(Object.fromEntries(r.searchParams), {
        error: 'invalid_request',
        error_code: 'validation_failed',
        error_description: 'Unsupported provider: provider is not enabled',
      })
      t.equal((await call(`${gwBase}/auth/v1/authorize?provider=oidc`)).body.code, 'validation_failed')
      t.equal((await call(`${h.base(tt)}/settings`)).body.external.oidc, false, '/settings says so')
    } finally {
      h.setAuth(tt, { providers: { oidc: provider } })
    }
  })

  t.test('PKCE switched off: a code_challenge is refused', async (t) => {
    h.setAuth(tt, { pkce: false })
    try {
      const { data } = await supabase('pkce').auth.signInWithOAuth({ provider: 'oidc' as never })
      const r = await call(data.url!)
      t.equal(r.status, 400)
      t.match(r.body, { code: 'validation_failed', message: 'PKCE flow is disabled for this database' })
      t.equal((await call(`${h.base(tt)}/settings`)).body.pkce_enabled, false)
    } finally {
      h.setAuth(tt, { pkce: true })
    }
  })

  t.test('skip_http_redirect answers the provider URL as JSON', async (t) => {
    const r = await call(
      `${gwBase}/auth/v1/authorize?provider=oidc&skip_http_redirect=true&scopes=offline_access&prompt=login`,
    )
    t.equal(r.status, 200)
    const u = new URL(r.body.url)
    t.equal(u.origin, op.issuer)
    t.equal(u.searchParams.get('client_id'), provider.client_id)
    t.equal(u.searchParams.get('redirect_uri'), `${PUBLIC_URL}/${database}/auth/v1/callback`)
    t.equal(u.searchParams.get('scope'), 'openid email profile offline_access')
    t.equal(u.searchParams.get('prompt'), 'login', 'other parameters are forwarded')
    t.equal(u.searchParams.get('code_challenge_method'), 'S256', 'our own PKCE towards the provider')
    t.ok(u.searchParams.get('nonce'))
  })
})

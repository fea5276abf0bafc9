// PKCE end to end for the email flows (docs/auth-protocol.md §5.7): supabase-js with flowType
// 'pkce' and a memory storage through the gateway; signInWithOtp, resetPasswordForEmail
// and signUp mail a `pkce_` link whose verify ends with `?code=`, and exchangeCodeForSession
// turns it into a session. Wrong verifier, reuse, expiry and tampering refused with
// GoTrue's codes; a tenant without PKCE refuses every PKCE request.
import t from 'tap'
import { createHash } from 'node:crypto'
import type { AddressInfo } from 'node:net'
import { createClient, type SupabaseClient } from '@supabase/supabase-js'
import { loadConfig } from '../../src/config/index.js'
import { buildGateway } from '../../src/gateway/index.js'
import type { Tenant } from '../../src/tenants/index.js'
import { startAuth, call, decodeJwt, email, PUBLIC_URL } from '../helpers/auth-harness.js'
import type { TestTenant } from '../helpers/tenants.js'
import type { CaughtMail } from '../helpers/mail.js'
import { codeOf } from '../helpers/mail.js'
import { memoryStorage } from '../helpers/auth-harness.js'

const SITE = 'http://localhost:3000'
const APP = 'http://app.example.com'

function linkOf(mail: CaughtMail): URL {
  const l = mail.links.find((x) => x.includes('/verify?'))
  if (!l) throw new Error('no verify link in the mail')
  return new URL(l)
}

const s256 = (v: string) => createHash('sha256').update(v).digest('base64url')

t.test('PKCE', async (t) => {
  const h = await startAuth(t, {
    tenants: [
      { auth: { site_url: SITE, redirect_urls: [`${APP}/**`], magic_link: true, pkce: true } },
      { auth: { site_url: SITE, redirect_urls: [`${APP}/**`], magic_link: true, pkce: true, mail_confirmation: true } },
      { auth: { site_url: SITE, magic_link: true, pkce: false } },
    ],
  })
  const [pk, confirming, nopkce] = h.list as [TestTenant, TestTenant, TestTenant]

  const config = loadConfig({
    env: {},
    overrides: { public_url: PUBLIC_URL, log: { level: 'silent' }, gateway: { port: 0 } },
  })
  const runtime = new Map<string, Tenant>(
    h.list.map((x) => [
      x.database,
      { ...x.tenant, upstreams: { auth: h.base(x), rest: 'http://127.0.0.1:9/' + x.database } },
    ]),
  )
  const gw = buildGateway({ config, tenants: { get: async (db) => runtime.get(db) ?? null } })
  await gw.listen({ port: 0, host: '127.0.0.1' })
  t.teardown(() => gw.close())
  const gwUrl = `http://127.0.0.1:${(gw.server.address() as AddressInfo).port}`
  const gwBase = (x: TestTenant) => `${gwUrl}/${x.database}`
  const viaGateway = (x: TestTenant, link: URL) => link.toString().replace(`${PUBLIC_URL}/${x.database}`, gwBase(x))
  const supabase = (x: TestTenant, storage = memoryStorage()): SupabaseClient =>
    createClient(gwBase(x), x.file.keys.public, {
      auth: { flowType: 'pkce', storage, persistSession: true, autoRefreshToken: false, detectSessionInUrl: false },
    })
  async function follow(url: string): Promise<URL> {
    const res = await fetch(url, { redirect: 'manual' })
    await res.arrayBuffer()
    if (res.status !== 303) throw new Error(`verify answered ${res.status}`)
    return new URL(res.headers.get('location')!)
  }
  const fragment = (u: URL) => Object.fromEntries(new URLSearchParams(u.hash.slice(1)))
  const exchange = (x: TestTenant, body: Record<string, unknown>) =>
    call(`${h.base(x)}/token?grant_type=pkce`, { body })

  /** A magic-link PKCE flow up to the code: returns the code and the client holding the verifier. */
  async function magicCode(x: TestTenant, e: string): Promise<{ code: string; sb: SupabaseClient; verifier: string }> {
    const storage = memoryStorage()
    const sb = supabase(x, storage)
    const r = await sb.auth.signInWithOtp({ email: e, options: { emailRedirectTo: `${APP}/magic?keep=1` } })
    if (r.error) throw r.error
    // supabase-js stores the verifier JSON-encoded.
    const verifier = JSON.parse([...storage.map.entries()].find(([k]) => k.endsWith('-code-verifier'))![1]) as string
    const link = linkOf(await h.mail.waitForMail(e))
    const landed = await follow(viaGateway(x, link))
    return { code: landed.searchParams.get('code')!, sb, verifier }
  }

  t.test('signInWithOtp -> link -> ?code= -> exchangeCodeForSession', async (t) => {
    const storage = memoryStorage()
    const sb = supabase(pk, storage)
    const e = email('pkce-magic')
    t.error((await sb.auth.signInWithOtp({ email: e, options: { emailRedirectTo: `${APP}/magic?keep=1` } })).error)
    const stored = [...storage.map.entries()].find(([k]) => k.endsWith('-code-verifier'))?.[1]
    t.ok(stored, 'supabase-js kept a verifier')
    const verifier = JSON.parse(stored!) as string
    const link = linkOf(await h.mail.waitForMail(e))
    t.match(link.searchParams.get('token'), /^pkce_[0-9a-f]{56}$/, 'the mailed token is pkce_-prefixed')
    const landed = await follow(viaGateway(pk, link))
    t.equal(landed.origin + landed.pathname, `${APP}/magic`)
    t.equal(landed.searchParams.get('keep'), '1', 'the redirect URL keeps its query')
    t.equal(landed.hash, '', 'no tokens in the fragment')
    const code = landed.searchParams.get('code')!
    t.match(code, /^[0-9a-f-]{36}$/)
    const { data, error } = await sb.auth.exchangeCodeForSession(code)
    t.error(error)
    t.equal(data.user?.email, e)
    t.equal(decodeJwt(data.session!.access_token).amr[0].method, 'magiclink', 'AMR is the flow method')
    t.equal((await sb.auth.getUser()).data.user?.email, e, 'the session works through the gateway')

    const reuse = await exchange(pk, { auth_code: code, code_verifier: verifier })
    t.equal(reuse.status, 404)
    t.match(reuse.body, { code: 'flow_state_not_found', message: 'invalid flow state, no valid flow state found' })
    t.match(fragment(await follow(viaGateway(pk, link))), { error_code: 'otp_expired' }, 'the link works once')
  })

  t.test('the code mailed in a PKCE flow still works with verifyOtp', async (t) => {
    const e = email('pkce-code')
    const sb = supabase(pk)
    await sb.auth.signInWithOtp({ email: e })
    const v = await sb.auth.verifyOtp({ email: e, token: codeOf(await h.mail.waitForMail(e)), type: 'email' })
    t.error(v.error)
    t.equal(v.data.user?.email, e)
  })

  t.test('wrong verifier, tampered code, missing fields', async (t) => {
    const e = email('pkce-wrong')
    const { code, verifier } = await magicCode(pk, e)
    const wrong = await exchange(pk, { auth_code: code, code_verifier: verifier.slice(0, -2) + 'zz' })
    t.equal(wrong.status, 400)
    t.match(wrong.body, {
      code: 'bad_code_verifier',
      message: 'code challenge does not match previously saved code verifier',
    })
    const tampered = await exchange(pk, {
      auth_code: code.slice(0, -1) + (code.endsWith('0') ? '1' : '0'),
      code_verifier: verifier,
    })
    t.equal(tampered.status, 404)
    t.equal(tampered.body.code, 'flow_state_not_found')
    const empty = await exchange(pk, { auth_code: code })
    t.equal(empty.status, 400)
    t.match(empty.body, {
      code: 'validation_failed',
      message: 'invalid request: both auth code and code verifier should be non-empty',
    })
    const ok = await exchange(pk, { auth_code: code, code_verifier: verifier })
    t.equal(ok.status, 200, 'a wrong verifier does not spend the code')
    t.equal(ok.body.user.email, e)
  })

  t.test('expiry: 5 minutes after the code was issued (magic link)', async (t) => {
    const { code, verifier } = await magicCode(pk, email('pkce-late'))
    h.clock.advance(301)
    try {
      const late = await exchange(pk, { auth_code: code, code_verifier: verifier })
      t.equal(late.status, 422)
      t.match(late.body, { code: 'flow_state_expired', message: 'invalid flow state, flow state has expired' })
    } finally {
      h.clock.advance(-301)
    }
  })

  t.test('resetPasswordForEmail -> code -> session (redirectType recovery) -> updateUser', async (t) => {
    const e = email('pkce-reset')
    t.error((await supabase(pk).auth.signUp({ email: e, password: 'old-secret1' })).error)
    const sb = supabase(pk)
    t.error((await sb.auth.resetPasswordForEmail(e, { redirectTo: `${APP}/reset` })).error)
    const landed = await follow(viaGateway(pk, linkOf(await h.mail.waitForMail(e))))
    t.equal(landed.origin + landed.pathname, `${APP}/reset`)
    const { data, error } = await sb.auth.exchangeCodeForSession(landed.searchParams.get('code')!)
    t.error(error)
    t.equal((data as { redirectType?: string }).redirectType, 'recovery')
    t.equal(decodeJwt(data.session!.access_token).amr[0].method, 'recovery')
    t.error((await sb.auth.updateUser({ password: 'new-secret2' })).error)
    t.error((await supabase(pk).auth.signInWithPassword({ email: e, password: 'new-secret2' })).error)
  })

  t.test('signUp with mail confirmation -> link -> code -> session', async (t) => {
    const sb = supabase(confirming)
    const e = email('pkce-signup')
    const s = await sb.auth.signUp({ email: e, password: 'secret123', options: { emailRedirectTo: `${APP}/welcome` } })
    t.error(s.error)
    t.equal(s.data.session, null)
    const link = linkOf(await h.mail.waitForMail(e))
    t.equal(link.searchParams.get('type'), 'signup')
    t.match(link.searchParams.get('token'), /^pkce_/)
    const landed = await follow(viaGateway(confirming, link))
    const { data, error } = await sb.auth.exchangeCodeForSession(landed.searchParams.get('code')!)
    t.error(error)
    t.ok(data.user?.email_confirmed_at)
    t.equal(decodeJwt(data.session!.access_token).amr[0].method, 'email/signup')

    // A signup flow lives 5 minutes from its creation, clicked or not.
    const e2 = email('pkce-signup-late')
    const sb2 = supabase(confirming)
    await sb2.auth.signUp({ email: e2, password: 'secret123' })
    const link2 = linkOf(await h.mail.waitForMail(e2))
    h.clock.advance(301)
    try {
      const landed2 = await follow(viaGateway(confirming, link2))
      const late = await sb2.auth.exchangeCodeForSession(landed2.searchParams.get('code')!)
      t.equal(late.error?.code, 'flow_state_expired')
    } finally {
      h.clock.advance(-301)
    }
  })

  t.test('updateUser({email}) of a PKCE client: both links, the second ends with ?code=', async (t) => {
    const from = email('pkce-from')
    const storage = memoryStorage()
    const sb = supabase(pk, storage)
    t.error((await sb.auth.signUp({ email: from, password: 'secret123' })).error, 'autoconfirm: signed in')
    const to = email('pkce-to')
    // auth-js saves the updated session right after PUT /user, which clears the verifier it
    // has just made; the test keeps a copy and puts it back, as an app spanning the two
    // browser tabs would.
    let verifier: string | null = null
    const setItem = storage.setItem
    storage.setItem = (k: string, v: string) => {
      if (k.endsWith('-code-verifier')) verifier = v
      setItem(k, v)
    }
    t.error((await sb.auth.updateUser({ email: to }, { emailRedirectTo: `${APP}/changed` })).error)
    t.ok(verifier, 'PUT /user was sent with a challenge')
    storage.setItem = setItem
    const toLink = linkOf(await h.mail.waitForMail(to))
    const fromLink = linkOf(await h.mail.waitForMail(from))
    t.match(toLink.searchParams.get('token'), /^pkce_/)
    const first = await follow(viaGateway(pk, fromLink))
    t.equal(
      first.searchParams.get('message'),
      'Confirmation link accepted. Please proceed to confirm link sent to the other email',
    )
    t.equal(fragment(first).message, first.searchParams.get('message'))
    const second = await follow(viaGateway(pk, toLink))
    t.equal(second.origin + second.pathname, `${APP}/changed`)
    storage.setItem(`${[...storage.map.keys()].find((k) => k.endsWith('-auth-token'))}-code-verifier`, verifier!)
    const { data, error } = await sb.auth.exchangeCodeForSession(second.searchParams.get('code')!)
    t.error(error)
    t.equal(data.user?.email, to)
    t.equal(decodeJwt(data.session!.access_token).amr[0].method, 'email_change')
  })

  t.test('a failing PKCE link puts the error in the query and the fragment', async (t) => {
    const e = email('pkce-fail')
    await supabase(pk).auth.signInWithOtp({ email: e, options: { emailRedirectTo: `${APP}/magic` } })
    const link = linkOf(await h.mail.waitForMail(e))
    link.searchParams.set(
      'token',
      link.searchParams.get('token')!.replace(/.$/, (c) => (c === 'a' ? 'b' : 'a')),
    )
    const landed = await follow(viaGateway(pk, link))
    t.equal(landed.origin + landed.pathname, `${APP}/magic`)
    t.match(Object.fromEntries(landed.searchParams), {
      error: 'access_denied',
      error_code: 'otp_expired',
      error_description: 'Email link is invalid or has expired',
    })
    t.match(fragment(landed), { error_code: 'otp_expired', sb: '' })
  })

  t.test('bad PKCE parameters', async (t) => {
    const otp = (body: Record<string, unknown>) => call(`${h.base(pk)}/otp`, { body: { email: email('bad'), ...body } })
    t.match((await otp({ code_challenge: s256('v'.repeat(50)) })).body, {
      code: 'validation_failed',
      message: 'PKCE flow requires code_challenge_method and code_challenge',
    })
    t.match((await otp({ code_challenge_method: 's256' })).body, { code: 'validation_failed' })
    t.match((await otp({ code_challenge: 'short', code_challenge_method: 's256' })).body, {
      code: 'validation_failed',
      message: 'code challenge has to be between 43 and 128 characters',
    })
    t.match((await otp({ code_challenge: s256('v'.repeat(50)), code_challenge_method: 'md5' })).body, {
      code: 'validation_failed',
    })
    // plain works (upper-case method accepted).
    const e = email('plain')
    const verifier = 'p'.repeat(60)
    t.equal(
      (
        await call(`${h.base(pk)}/otp`, {
          body: { email: e, code_challenge: verifier, code_challenge_method: 'PLAIN' },
        })
      ).status,
      200,
    )
    const landed = await follow(h.engineLink(pk, linkOf(await h.mail.waitForMail(e)).toString()))
    const ok = await exchange(pk, { auth_code: landed.searchParams.get('code'), code_verifier: verifier })
    t.equal(ok.status, 200)
  })

  t.test('a tenant without PKCE refuses every PKCE request', async (t) => {
    const e = email('nopkce')
    t.equal((await supabase(nopkce).auth.signInWithOtp({ email: e })).error?.code, 'validation_failed')
    const reset = await supabase(nopkce).auth.resetPasswordForEmail(e)
    t.equal(reset.error?.status, 400)
    t.equal(reset.error?.message, 'PKCE flow is disabled for this database')
    const signup = await supabase(nopkce).auth.signUp({ email: e, password: 'secret123' })
    t.equal(signup.error?.message, 'PKCE flow is disabled for this database')
    const grant = await exchange(nopkce, { auth_code: crypto.randomUUID(), code_verifier: 'v'.repeat(43) })
    t.equal(grant.status, 400)
    t.equal(grant.body.code, 'validation_failed')
    t.equal(h.mail.count(e), 0)
    t.equal((await call(`${h.base(nopkce)}/settings`)).body.pkce_enabled, false)
    t.equal((await call(`${h.base(pk)}/settings`)).body.pkce_enabled, true)
  })
})

// Magic link and email OTP (docs/auth-protocol.md §3.5-3.6, §3.8-3.9, §5.4-5.5): supabase-js
// signInWithOtp through the gateway, the link and the 6-digit code read from a real SMTP
// catcher; create_user, the confirmation mail of new accounts, single use, expiry,
// tampering, the interval between mails, redirect_to checks, and the per-database switch.
import t from 'tap'
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

function verifyLinkOf(mail: CaughtMail): string {
  const l = mail.links.find((x) => x.includes('/verify?'))
  if (!l) throw new Error('no verify link in the mail')
  return l
}

t.test('magic link and email OTP', async (t) => {
  const h = await startAuth(t, {
    tenants: [
      { auth: { magic_link: true, site_url: SITE, redirect_urls: [`${APP}/**`] } },
      { auth: { magic_link: true, mail_confirmation: true, site_url: SITE } },
      { auth: { magic_link: true, site_url: SITE, mail_min_interval: 60 } },
      { auth: { magic_link: false, site_url: SITE } },
    ],
  })
  const [open, confirming, throttled, off] = h.list as [TestTenant, TestTenant, TestTenant, TestTenant]

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
  /** A mailed link as the browser follows it: through the gateway. */
  const viaGateway = (x: TestTenant, link: string) => link.replace(`${PUBLIC_URL}/${x.database}`, gwBase(x))

  const supabase = (x: TestTenant): SupabaseClient =>
    createClient(gwBase(x), x.file.keys.public, {
      auth: {
        flowType: 'implicit',
        storage: memoryStorage(),
        persistSession: true,
        autoRefreshToken: false,
        detectSessionInUrl: false,
      },
    })

  async function follow(url: string): Promise<{ status: number; location: URL }> {
    const res = await fetch(url, { redirect: 'manual' })
    await res.arrayBuffer()
    return { status: res.status, location: new URL(res.headers.get('location') ?? 'about:blank') }
  }
  const fragment = (u: URL) => Object.fromEntries(new URLSearchParams(u.hash.slice(1)))

  t.test('signInWithOtp: the mailed link signs the user in', async (t) => {
    const sb = supabase(open)
    const e = email('link')
    const { data, error } = await sb.auth.signInWithOtp({
      email: e,
      options: { emailRedirectTo: `${APP}/home`, data: { plan: 'free' } },
    })
    t.error(error)
    t.same(data, { user: null, session: null })
    const mail = await h.mail.waitForMail(e)
    t.equal(mail.subject, 'Your sign-in link', 'autoconfirm: a new account gets the magic link at once')
    const link = verifyLinkOf(mail)
    const u = new URL(link)
    t.equal(u.origin + u.pathname, `${PUBLIC_URL}/${open.database}/auth/v1/verify`)
    t.equal(u.searchParams.get('type'), 'magiclink')
    t.equal(u.searchParams.get('redirect_to'), `${APP}/home`)
    t.match(u.searchParams.get('token'), /^[0-9a-f]{56}$/, 'the token is the SHA-224 hash')

    const r = await follow(viaGateway(open, link))
    t.equal(r.status, 303)
    t.equal(r.location.origin + r.location.pathname, `${APP}/home`)
    const f = fragment(r.location)
    t.match(f, { token_type: 'bearer', type: 'magiclink', expires_in: '3600', sb: '' })
    const claims = decodeJwt(f.access_token!)
    t.equal(claims.email, e)
    t.equal(claims.amr[0].method, 'otp')
    const set = await sb.auth.setSession({ access_token: f.access_token!, refresh_token: f.refresh_token! })
    t.error(set.error)
    t.equal(set.data.user?.email, e)
    t.match(set.data.user?.user_metadata, { plan: 'free', email_verified: true })
    t.ok(set.data.user?.email_confirmed_at)

    // Single use: the same link again.
    const again = await follow(viaGateway(open, link))
    t.equal(again.status, 303)
    t.match(fragment(again.location), {
      error: 'access_denied',
      error_code: 'otp_expired',
      error_description: 'Email link is invalid or has expired',
    })
  })

  t.test('signInWithOtp: the 6-digit code signs the user in (verifyOtp type email)', async (t) => {
    const sb = supabase(open)
    const e = email('code')
    t.error((await sb.auth.signInWithOtp({ email: e })).error)
    const code = codeOf(await h.mail.waitForMail(e))
    const wrong = await sb.auth.verifyOtp({ email: e, token: code === '000000' ? '111111' : '000000', type: 'email' })
    t.equal(wrong.error?.status, 403)
    t.equal(wrong.error?.code, 'otp_expired')
    t.equal(wrong.error?.message, 'Token has expired or is invalid')
    const other = await sb.auth.verifyOtp({ email: email('someone-else'), token: code, type: 'email' })
    t.equal(other.error?.code, 'otp_expired', 'a code is bound to its address')
    const { data, error } = await sb.auth.verifyOtp({ email: e, token: code, type: 'email' })
    t.error(error)
    t.equal(data.user?.email, e)
    t.ok(data.session?.access_token)
    t.equal((await sb.auth.getUser()).data.user?.email, e, 'the session works through the gateway')
    const reused = await sb.auth.verifyOtp({ email: e, token: code, type: 'email' })
    t.equal(reused.error?.code, 'otp_expired', 'a code works once')

    // An existing confirmed user signs in again with a new code; type magiclink works too.
    t.error((await sb.auth.signInWithOtp({ email: e })).error)
    const code2 = codeOf(await h.mail.waitForMail(e))
    const second = await supabase(open).auth.verifyOtp({ email: e, token: code2, type: 'magiclink' })
    t.error(second.error)
    t.equal(second.data.user?.id, data.user?.id, 'the same user')
  })

  t.test('a newer mail replaces the older token', async (t) => {
    const sb = supabase(open)
    const e = email('newer')
    await sb.auth.signInWithOtp({ email: e })
    const first = await h.mail.waitForMail(e)
    await sb.auth.signInWithOtp({ email: e })
    const second = await h.mail.waitForMail(e)
    t.equal(fragment((await follow(viaGateway(open, verifyLinkOf(first)))).location).error_code, 'otp_expired')
    t.ok(fragment((await follow(viaGateway(open, verifyLinkOf(second)))).location).access_token)
  })

  t.test('create_user: false refuses unknown addresses', async (t) => {
    const e = email('nobody')
    const { error } = await supabase(open).auth.signInWithOtp({ email: e, options: { shouldCreateUser: false } })
    t.equal(error?.status, 422)
    t.equal(error?.code, 'otp_disabled')
    t.equal(error?.message, 'Signups not allowed for otp')
    t.equal(h.mail.count(e), 0, 'no mail')
  })

  t.test('with mail confirmation, a new account gets the confirmation mail (type signup)', async (t) => {
    const sb = supabase(confirming)
    const e = email('confirm')
    t.error((await sb.auth.signInWithOtp({ email: e, options: { data: { name: 'Neo' } } })).error)
    const mail = await h.mail.waitForMail(e)
    t.equal(mail.subject, 'Confirm your email address')
    const link = verifyLinkOf(mail)
    t.equal(new URL(link).searchParams.get('type'), 'signup')
    t.equal(new URL(link).searchParams.get('redirect_to'), SITE, 'no redirect_to: the site URL')
    // The code works as well: type email finds the confirmation token.
    const { data, error } = await sb.auth.verifyOtp({ email: e, token: codeOf(mail), type: 'email' })
    t.error(error)
    t.ok(data.user?.email_confirmed_at, 'confirmed')
    t.match(data.user?.user_metadata, { name: 'Neo', email_verified: true })
    // Confirmed now: the next request is a magic link.
    t.error((await sb.auth.signInWithOtp({ email: e })).error)
    t.equal((await h.mail.waitForMail(e)).subject, 'Your sign-in link')
  })

  t.test('the link and code expire after otp_expiry', async (t) => {
    const sb = supabase(open)
    const e = email('late')
    await sb.auth.signInWithOtp({ email: e })
    const mail = await h.mail.waitForMail(e)
    h.clock.advance(open.tenant.auth.otp_expiry + 1)
    try {
      const r = await follow(viaGateway(open, verifyLinkOf(mail)))
      t.equal(r.location.origin, SITE)
      t.match(fragment(r.location), { error: 'access_denied', error_code: 'otp_expired' })
      const v = await sb.auth.verifyOtp({ email: e, token: codeOf(mail), type: 'email' })
      t.equal(v.error?.code, 'otp_expired')
    } finally {
      h.clock.advance(-(open.tenant.auth.otp_expiry + 1))
    }
  })

  t.test('tampered tokens are refused', async (t) => {
    const e = email('tamper')
    await supabase(open).auth.signInWithOtp({ email: e })
    const link = new URL(verifyLinkOf(await h.mail.waitForMail(e)))
    const token = link.searchParams.get('token')!
    link.searchParams.set('token', token.slice(0, -1) + (token.endsWith('0') ? '1' : '0'))
    const r = await follow(viaGateway(open, link.toString()))
    t.match(fragment(r.location), { error_code: 'otp_expired' })
    link.searchParams.set('token', token)
    link.searchParams.set('type', 'signup')
    t.match(
      fragment((await follow(viaGateway(open, link.toString()))).location),
      { error_code: 'otp_expired' },
      'a magic-link token is no confirmation token',
    )
    link.searchParams.set('type', 'sms')
    t.match(fragment((await follow(viaGateway(open, link.toString()))).location), {
      error: 'invalid_request',
      error_code: 'validation_failed',
      error_description: 'Invalid email verification type',
    })
    const hashOnly = await call(`${gwBase(open)}/auth/v1/verify`, {
      body: { type: 'magiclink', token_hash: token + 'ff' },
      headers: { apikey: open.file.keys.public },
    })
    t.equal(hashOnly.status, 403)
    t.equal(hashOnly.body.code, 'otp_expired')
    // The untouched hash still works (POST /verify with token_hash).
    const ok = await call(`${gwBase(open)}/auth/v1/verify`, {
      body: { type: 'magiclink', token_hash: token },
      headers: { apikey: open.file.keys.public },
    })
    t.equal(ok.status, 200)
    t.equal(ok.body.user.email, e)
  })

  t.test('an open redirect falls back to the site URL', async (t) => {
    const e = email('redirect')
    await supabase(open).auth.signInWithOtp({
      email: e,
      options: { emailRedirectTo: 'https://evil.example.net/collect' },
    })
    const link = verifyLinkOf(await h.mail.waitForMail(e))
    t.equal(new URL(link).searchParams.get('redirect_to'), SITE)
    // Editing redirect_to in the link does not help either.
    const forged = new URL(link)
    forged.searchParams.set('redirect_to', 'https://app.example.com.evil.net/')
    const r = await follow(viaGateway(open, forged.toString()))
    t.equal(r.location.origin, SITE)
    t.ok(fragment(r.location).access_token)
    for (const bad of [
      'http://2130706433/',
      'https://evil.example.net/?x=http://app.example.com/',
      'javascript:alert(1)//app.example.com/',
    ]) {
      const x = email('redirect')
      await supabase(open).auth.signInWithOtp({ email: x, options: { emailRedirectTo: bad } })
      t.equal(new URL(verifyLinkOf(await h.mail.waitForMail(x))).searchParams.get('redirect_to'), SITE, bad)
    }
  })

  t.test('one mail per address per interval', async (t) => {
    const sb = supabase(throttled)
    const e = email('throttle')
    t.error((await sb.auth.signInWithOtp({ email: e })).error)
    await h.mail.waitForMail(e)
    const second = await sb.auth.signInWithOtp({ email: e })
    t.equal(second.error?.status, 429)
    t.equal(second.error?.code, 'over_email_send_rate_limit')
    t.match(second.error?.message, /^For security purposes, you can only request this after \d+ seconds\.$/)
    t.equal(h.mail.count(e), 1)
    t.error((await sb.auth.signInWithOtp({ email: email('throttle') })).error, 'another address is not held back')
    h.clock.advance(61)
    try {
      t.error((await sb.auth.signInWithOtp({ email: e })).error, 'after the interval')
      await h.mail.waitForMail(e)
    } finally {
      h.clock.advance(-61)
    }
  })

  t.test('POST /magiclink (legacy) sends the same link', async (t) => {
    const e = email('legacy')
    const r = await call(`${gwBase(open)}/auth/v1/magiclink`, {
      body: { email: e },
      headers: { apikey: open.file.keys.public },
    })
    t.equal(r.status, 200)
    t.same(r.body, {})
    t.equal((await h.mail.waitForMail(e)).subject, 'Your sign-in link')
    const missing = await call(`${gwBase(open)}/auth/v1/magiclink`, {
      body: {},
      headers: { apikey: open.file.keys.public },
    })
    t.equal(missing.status, 422)
    t.equal(missing.body.code, 'validation_failed')
  })

  t.test('bad requests', async (t) => {
    const post = (body: unknown) => call(`${h.base(open)}/otp`, { body })
    t.match((await post({})).body, { code: 'validation_failed', message: 'One of email or phone must be set' })
    t.match((await post({ email: 'a@example.com', phone: '15551234567' })).body, { code: 'validation_failed' })
    t.match((await post({ phone: '15551234567' })).body, { code: 'phone_provider_disabled' })
    t.match((await post({ email: 'not-an-email' })).body, {
      code: 'validation_failed',
      message: 'Unable to validate email address: invalid format',
    })
    t.match((await post({ email: 'a@example.com', code_challenge: 'x'.repeat(43) })).body, {
      code: 'validation_failed',
      message: 'PKCE flow requires code_challenge_method and code_challenge',
    })
    t.match((await post({ email: 'a@example.com', create_user: 'yes' })).body, { code: 'bad_json' })
  })

  t.test('magic link switched off for the database', async (t) => {
    const e = email('off')
    const { error } = await supabase(off).auth.signInWithOtp({ email: e })
    t.equal(error?.status, 422)
    t.equal(error?.code, 'email_provider_disabled')
    t.equal(error?.message, 'Login with magic link is disabled')
    const legacy = await call(`${h.base(off)}/magiclink`, { body: { email: e } })
    t.equal(legacy.status, 422)
    t.equal(legacy.body.code, 'email_provider_disabled')
    t.equal(h.mail.count(e), 0)
    t.equal((await call(`${h.base(off)}/settings`)).body.magic_link_enabled, false)
    t.equal((await call(`${h.base(open)}/settings`)).body.magic_link_enabled, true)
    // Password sign-in is not affected.
    t.error((await supabase(off).auth.signUp({ email: e, password: 'secret123' })).error)
  })
})

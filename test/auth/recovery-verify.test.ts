// Password recovery, resend and the verify types (docs/auth-protocol.md §3.7-3.10, §5.5):
// resetPasswordForEmail then updateUser({password}) through the gateway with the link and
// with the code from the SMTP catcher; POST /verify for signup, invite, recovery,
// magiclink, email_change and email; POST /resend of confirmation and email-change mails.
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

function linkOf(mail: CaughtMail): URL {
  const l = mail.links.find((x) => x.includes('/verify?'))
  if (!l) throw new Error('no verify link in the mail')
  return new URL(l)
}

t.test('recovery, resend and verify types', async (t) => {
  const h = await startAuth(t, {
    tenants: [
      { auth: { site_url: SITE, redirect_urls: [`${APP}/**`], magic_link: true } },
      { auth: { site_url: SITE, mail_confirmation: true } },
      { auth: { site_url: SITE, magic_link: true, mail_min_interval: 60 } },
    ],
  })
  const [open, confirming, throttled] = h.list as [TestTenant, TestTenant, TestTenant]

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
  async function follow(url: string): Promise<URL> {
    const res = await fetch(url, { redirect: 'manual' })
    await res.arrayBuffer()
    if (res.status !== 303) throw new Error(`verify answered ${res.status}`)
    return new URL(res.headers.get('location')!)
  }
  const fragment = (u: URL) => Object.fromEntries(new URLSearchParams(u.hash.slice(1)))

  async function registered(x: TestTenant, prefix: string, password = 'secret123'): Promise<string> {
    const e = email(prefix)
    const r = await supabase(x).auth.signUp({ email: e, password })
    if (r.error) throw r.error
    return e
  }

  t.test('resetPasswordForEmail -> link -> updateUser({password})', async (t) => {
    const e = await registered(open, 'reset', 'old-secret1')
    const sb = supabase(open)
    const { data, error } = await sb.auth.resetPasswordForEmail(e, { redirectTo: `${APP}/reset` })
    t.error(error)
    t.same(data, {})
    const mail = await h.mail.waitForMail(e)
    t.equal(mail.subject, 'Reset your password')
    const link = linkOf(mail)
    t.equal(link.searchParams.get('type'), 'recovery')
    const landed = await follow(viaGateway(open, link))
    t.equal(landed.origin + landed.pathname, `${APP}/reset`)
    const f = fragment(landed)
    t.equal(f.type, 'recovery')
    t.error((await sb.auth.setSession({ access_token: f.access_token!, refresh_token: f.refresh_token! })).error)
    const upd = await sb.auth.updateUser({ password: 'new-secret2' })
    t.error(upd.error)
    const old = await supabase(open).auth.signInWithPassword({ email: e, password: 'old-secret1' })
    t.equal(old.error?.code, 'invalid_credentials')
    t.error(
      (await supabase(open).auth.signInWithPassword({ email: e, password: 'new-secret2' })).error,
      'the new password works',
    )
    t.match(fragment(await follow(viaGateway(open, link))), { error_code: 'otp_expired' }, 'the link works once')
  })

  t.test('resetPasswordForEmail -> code (verifyOtp type recovery) -> updateUser({password})', async (t) => {
    const e = await registered(open, 'reset-code')
    const sb = supabase(open)
    t.error((await sb.auth.resetPasswordForEmail(e)).error)
    const mail = await h.mail.waitForMail(e)
    t.equal(linkOf(mail).searchParams.get('redirect_to'), SITE)
    const v = await sb.auth.verifyOtp({ email: e, token: codeOf(mail), type: 'recovery' })
    t.error(v.error)
    t.equal(decodeJwt(v.data.session!.access_token).amr[0].method, 'otp')
    t.error((await sb.auth.updateUser({ password: 'brand-new-3' })).error)
    t.error((await supabase(open).auth.signInWithPassword({ email: e, password: 'brand-new-3' })).error)
  })

  t.test('unknown addresses answer the same and get no mail', async (t) => {
    const e = email('ghost')
    const r = await supabase(open).auth.resetPasswordForEmail(e)
    t.error(r.error)
    t.same(r.data, {})
    t.equal(h.mail.count(e), 0)
    const missing = await call(`${h.base(open)}/recover`, { body: {} })
    t.equal(missing.status, 400)
    t.match(missing.body, { code: 'validation_failed', message: 'Password recovery requires an email' })
  })

  t.test('recovery of an unconfirmed account confirms the address', async (t) => {
    const e = email('unconfirmed')
    t.error((await supabase(confirming).auth.signUp({ email: e, password: 'secret123' })).error)
    t.equal((await h.mail.waitForMail(e)).subject, 'Confirm your email address')
    t.error((await supabase(confirming).auth.resetPasswordForEmail(e)).error)
    const f = fragment(await follow(viaGateway(confirming, linkOf(await h.mail.waitForMail(e)))))
    const user = (await call(`${h.base(confirming)}/user`, { token: f.access_token })).body
    t.ok(user.email_confirmed_at)
    t.error(
      (await supabase(confirming).auth.signInWithPassword({ email: e, password: 'secret123' })).error,
      'password sign-in now allowed',
    )
  })

  t.test('recovery and magic link share the interval between mails', async (t) => {
    const e = await registered(throttled, 'shared')
    t.error((await supabase(throttled).auth.resetPasswordForEmail(e)).error)
    await h.mail.waitForMail(e)
    const otp = await supabase(throttled).auth.signInWithOtp({ email: e })
    t.equal(otp.error?.status, 429)
    t.equal(otp.error?.code, 'over_email_send_rate_limit')
    const again = await supabase(throttled).auth.resetPasswordForEmail(e)
    t.equal(again.error?.code, 'over_email_send_rate_limit')
  })

  t.test('resend: a new confirmation mail replaces the old one', async (t) => {
    const sb = supabase(confirming)
    const e = email('resend')
    t.error((await sb.auth.signUp({ email: e, password: 'secret123' })).error)
    const first = await h.mail.waitForMail(e)
    const r = await sb.auth.resend({
      type: 'signup',
      email: e,
      options: { emailRedirectTo: 'https://evil.example.net/' },
    })
    t.error(r.error)
    const second = await h.mail.waitForMail(e)
    t.equal(second.subject, 'Confirm your email address')
    t.equal(linkOf(second).searchParams.get('redirect_to'), SITE)
    t.match(fragment(await follow(viaGateway(confirming, linkOf(first)))), { error_code: 'otp_expired' })
    const ok = fragment(await follow(viaGateway(confirming, linkOf(second))))
    t.equal(ok.type, 'signup')
    t.ok(ok.access_token)
    // Confirmed now: nothing to resend; unknown users neither.
    t.error((await sb.auth.resend({ type: 'signup', email: e })).error)
    const ghost = email('ghost')
    t.error((await sb.auth.resend({ type: 'signup', email: ghost })).error)
    t.equal(h.mail.count(e), 2)
    t.equal(h.mail.count(ghost), 0)
  })

  t.test('resend: bad requests', async (t) => {
    const post = (body: unknown) => call(`${h.base(confirming)}/resend`, { body })
    t.match((await post({ type: 'magiclink', email: 'a@example.com' })).body, {
      code: 'validation_failed',
      message: 'Missing one of these types: signup, email_change, sms, phone_change',
    })
    t.match((await post({ type: 'signup' })).body, {
      code: 'validation_failed',
      message: 'Type provided requires an email address',
    })
    t.match((await post({ type: 'sms', phone: '15551234567' })).body, { code: 'phone_provider_disabled' })
  })

  t.test("POST /verify with a phone: no code was sent, so GoTrue's answers", async (t) => {
    const post = (body: unknown) => call(`${h.base(open)}/verify`, { body })
    const unknown = await post({ type: 'sms', phone: '15551234567', token: '123456' })
    t.equal(unknown.status, 403)
    t.match(unknown.body, { code: 'otp_expired', message: 'Token has expired or is invalid' })
    const change = await post({ type: 'phone_change', phone: '+1 555 123 4567', token: '123456' })
    t.match([change.status, change.body.code], [403, 'otp_expired'])
    const bad = await post({ type: 'sms', phone: '15551234567-invalid', token: '123456' })
    t.equal(bad.status, 400)
    t.match(bad.body, { code: 'validation_failed', message: 'Invalid phone number format (E.164 required)' })
    const both = await post({ type: 'sms', phone: '15551234567', email: 'a@example.com', token: '123456' })
    t.equal(both.status, 400)
    t.match(both.body, {
      code: 'validation_failed',
      message: 'Only an email address or phone number should be provided on verify',
    })
    const neither = await post({ type: 'sms', token: '123456' })
    t.match(
      [neither.status, neither.body.message],
      [400, 'Only an email address or phone number should be provided on verify'],
    )
  })

  t.test('email change: resend, then both links (POST /verify token_hash)', async (t) => {
    const sb = supabase(open)
    const e = await registered(open, 'change-from')
    t.error((await sb.auth.signInWithPassword({ email: e, password: 'secret123' })).error)
    const to = email('change-to')
    t.error((await sb.auth.updateUser({ email: to })).error)
    await h.mail.waitForMail(to)
    await h.mail.waitForMail(e)
    t.error((await sb.auth.resend({ type: 'email_change', email: e })).error)
    const toMail = await h.mail.waitForMail(to)
    const fromMail = await h.mail.waitForMail(e)
    t.equal(toMail.subject, 'Confirm your new email address')
    const first = await sb.auth.verifyOtp({
      token_hash: linkOf(fromMail).searchParams.get('token')!,
      type: 'email_change',
    })
    t.error(first.error)
    t.equal(first.data.session, null, 'secure change: the first link only records it')
    const second = await sb.auth.verifyOtp({
      token_hash: linkOf(toMail).searchParams.get('token')!,
      type: 'email_change',
    })
    t.error(second.error)
    t.equal(second.data.user?.email, to)
  })

  t.test('invite: the mailed code (type invite) and link', async (t) => {
    const service = await h.serviceToken(open)
    const e = email('invitee')
    const inv = await call(`${h.base(open)}/invite`, { body: { email: e, data: { team: 'blue' } }, token: service })
    t.equal(inv.status, 200)
    const mail = await h.mail.waitForMail(e)
    t.equal(linkOf(mail).searchParams.get('type'), 'invite')
    const v = await supabase(open).auth.verifyOtp({ email: e, token: codeOf(mail), type: 'invite' })
    t.error(v.error)
    t.ok(v.data.user?.email_confirmed_at)
    t.match(v.data.user?.user_metadata, { team: 'blue' })

    const e2 = email('invitee')
    await call(`${h.base(open)}/invite`, { body: { email: e2 }, token: service })
    const f = fragment(await follow(viaGateway(open, linkOf(await h.mail.waitForMail(e2)))))
    t.equal(f.type, 'invite')
    t.equal(decodeJwt(f.access_token!).email, e2)
  })

  t.test('POST /verify: token_hash of type signup and email, magiclink code', async (t) => {
    const sb = supabase(confirming)
    const a = email('hash-signup')
    await sb.auth.signUp({ email: a, password: 'secret123' })
    const v1 = await sb.auth.verifyOtp({
      token_hash: linkOf(await h.mail.waitForMail(a)).searchParams.get('token')!,
      type: 'signup',
    })
    t.error(v1.error)
    t.equal(v1.data.user?.email, a)

    const b = email('hash-email')
    await sb.auth.signUp({ email: b, password: 'secret123' })
    const v2 = await sb.auth.verifyOtp({
      token_hash: linkOf(await h.mail.waitForMail(b)).searchParams.get('token')!,
      type: 'email',
    })
    t.error(v2.error, 'type email accepts a confirmation hash')
    t.equal(v2.data.user?.email, b)

    const c = await registered(open, 'hash-magic')
    await supabase(open).auth.signInWithOtp({ email: c })
    const hash = linkOf(await h.mail.waitForMail(c)).searchParams.get('token')!
    const v3 = await supabase(open).auth.verifyOtp({ token_hash: hash, type: 'email' })
    t.error(v3.error, 'type email accepts a magic-link hash')
    t.equal(v3.data.user?.email, c)

    const mixed = await call(`${h.base(open)}/verify`, { body: { type: 'email', token_hash: hash, email: c } })
    t.match(mixed.body, { code: 'validation_failed', message: 'Only the token_hash and type should be provided' })
  })
})

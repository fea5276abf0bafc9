// Differences to GoTrue (supabase/auth) found by reading its handlers side by side with
// ours, each pinned here over real HTTP against the engine (auth-js where it has a method,
// a real SMTP catcher for mail): the sanitised user of a repeated sign-up, /verify redirect
// parameters and verify-type refusals, /resend's validation and email-change restart,
// validateEmail's texts, the mail wait's seconds, admin ban_duration and id texts,
// redirect_to as GetReferrer picks it, passkeys / Web3 / OAuth server / custom providers
// answered as GoTrue has them off, the OIDC discovery document, "provider is not enabled",
// and when X-Supabase-Api-Version is echoed.
import t from 'tap'
import { GoTrueAdminApi, GoTrueClient } from '@supabase/auth-js'
import { startAuth, call, email, memoryStorage } from '../helpers/auth-harness.js'
import { errorParams } from '../../src/auth/redirects.js'
import { FlowStateExpiredError, OtpExpiredError } from '../../src/auth/errors.js'

const SITE = 'http://app.example.com'

t.test('gotrue audit', async (t) => {
  const h = await startAuth(t, {
    tenants: [{ auth: { mail_confirmation: true, site_url: SITE, redirect_urls: [`${SITE}/**`] } }],
  })
  const x = h.list[0]!

  async function confirmedUser(): Promise<string> {
    const e = email('confirmed')
    const r = await call(h.base(x) + '/admin/users', {
      token: await h.serviceToken(x),
      body: { email: e, password: 'secret123', email_confirm: true },
    })
    t.equal(r.status, 200)
    return e
  }

  t.test("repeated sign-up of a confirmed address: GoTrue's sanitised user, shaped like a new one", async (t) => {
    const c = h.client(x)
    const fresh = await c.signUp({ email: email('fresh'), password: 'secret123' })
    t.error(fresh.error)
    t.equal(fresh.data.session, null)
    const e = await confirmedUser()
    const dup = await c.signUp({ email: e, password: 'whatever1', options: { data: { team: 'red' } } })
    t.error(dup.error)
    t.equal(dup.data.session, null)
    const fake = dup.data.user!
    // sanitizeUser: empty role, confirmation_sent_at now, no confirmation times, no identities.
    t.equal(fake.role, '')
    t.ok(fake.confirmation_sent_at, 'confirmation_sent_at set as for a mail just sent')
    t.equal(fake.email_confirmed_at, undefined)
    t.equal(fake.confirmed_at, undefined)
    t.same(fake.identities, [])
    t.same(fake.user_metadata, { team: 'red' })
    t.same(fake.app_metadata, { provider: 'email', providers: ['email'] })
    // The same fields as a real new sign-up (whose user_metadata GoTrue also fills in).
    t.same(Object.keys(fake).sort(), Object.keys(fresh.data.user!).sort())
  })

  t.test("GET /verify: the session fragment in Go's sorted key order, sb among them", async (t) => {
    const c = h.client(x)
    const e = email('order')
    t.error((await c.signUp({ email: e, password: 'secret123', options: { emailRedirectTo: `${SITE}/done` } })).error)
    const mail = await h.mail.waitForMail(e)
    const link = mail.links.find((l) => l.includes('/verify?'))!
    const res = await fetch(h.engineLink(x, link), { redirect: 'manual' })
    t.equal(res.status, 303)
    const location = res.headers.get('location')!
    t.ok(location.startsWith(`${SITE}/done#`))
    const keys = location
      .split('#')[1]!
      .split('&')
      .map((kv) => kv.split('=')[0])
    t.same(keys, ['access_token', 'expires_at', 'expires_in', 'refresh_token', 'sb', 'token_type', 'type'])

    const again = await fetch(h.engineLink(x, link), { redirect: 'manual' })
    const errKeys = again.headers
      .get('location')!
      .split('#')[1]!
      .split('&')
      .map((kv) => kv.split('=')[0])
    t.same(errKeys, ['error', 'error_code', 'error_description', 'sb'])
  })

  t.test('verify redirects name the OAuth error only for statuses GoTrue maps', async (t) => {
    // prepErrorRedirectURL takes `error` from oauthErrorMap (400, 401, 403, 500, 503) only;
    // a provider callback says server_error for the rest.
    t.same(errorParams(new FlowStateExpiredError(), 'verify'), {
      error_code: 'flow_state_expired',
      error_description: 'invalid flow state, flow state has expired',
    })
    t.equal(errorParams(new FlowStateExpiredError()).error, 'server_error')
    t.equal(errorParams(new OtpExpiredError('token'), 'verify').error, 'access_denied')
  })

  t.test(
    'POST /verify: a token hash of a type without emailed tokens is 400 "Invalid email verification type"',
    async (t) => {
      const c = h.client(x)
      const r = await c.verifyOtp({ token_hash: 'a'.repeat(56), type: 'sms' as 'signup' })
      t.equal(r.error?.status, 400)
      t.equal(r.error?.code, 'validation_failed')
      t.equal(r.error?.message, 'Invalid email verification type')
      const unknown = await c.verifyOtp({ token_hash: 'a'.repeat(56), type: 'signup' })
      t.equal(unknown.error?.status, 403)
      t.equal(unknown.error?.code, 'otp_expired')
    },
  )

  t.test("/resend validates in GoTrue's order with its texts", async (t) => {
    const post = (body: Record<string, unknown>) => call(h.base(x) + '/resend', { body })
    const e = await confirmedUser()
    t.match((await post({ type: 'email_change' })).body, {
      code: 'validation_failed',
      message: 'Missing email address or phone number',
    })
    t.match((await post({ type: 'sms', email: e })).body, {
      code: 'validation_failed',
      message: 'Type provided requires a phone number',
    })
    const phone = await post({ type: 'sms', phone: '+15555550100' })
    t.equal(phone.status, 400)
    t.match(phone.body, { code: 'phone_provider_disabled', message: 'Phone logins are disabled' })
    const pc = await post({ type: 'phone_change', email: e })
    t.equal(pc.status, 200, 'no phone change pending: nothing to send')
    t.same(pc.body, {})
    // auth-js's own call for the email types still works.
    const c = h.client(x)
    t.error((await c.resend({ type: 'signup', email: e })).error)
  })
  t.test("emails are validated as GoTrue's validateEmail does: required, length, never trimmed", async (t) => {
    const c = h.client(x)
    const e = await confirmedUser()
    const spaced = await c.signUp({ email: ` ${email('spaced')}`, password: 'secret123' })
    t.equal(spaced.error?.status, 400)
    t.equal(spaced.error?.message, 'Unable to validate email address: invalid format')
    const long = await c.signUp({ email: 'a'.repeat(250) + '@example.com', password: 'secret123' })
    t.equal(long.error?.code, 'validation_failed')
    t.equal(long.error?.message, 'An email address is too long')
    const signIn = await c.signInWithPassword({ email: e + ' ', password: 'secret123' })
    t.equal(signIn.error?.code, 'invalid_credentials', 'an address with a space is another address')
    const admin = await call(h.base(x) + '/invite', { token: await h.serviceToken(x), body: {} })
    t.equal(admin.status, 400)
    t.match(admin.body, { code: 'validation_failed', message: 'An email address is required' })
  })
  t.test('a mail asked for again too soon: whole seconds left, truncated as GoTrue counts them', async (t) => {
    h.setAuth(x, { mail_min_interval: 60 })
    t.teardown(() => h.setAuth(x, { mail_min_interval: 0 }))
    const c = h.client(x)
    const e = await confirmedUser()
    t.error((await c.resetPasswordForEmail(e)).error)
    const again = await c.resetPasswordForEmail(e)
    t.equal(again.error?.status, 429)
    t.equal(again.error?.code, 'over_email_send_rate_limit')
    const seconds = Number(
      /^For security purposes, you can only request this after (\d+) seconds\.$/.exec(again.error?.message ?? '')?.[1],
    )
    t.ok(seconds >= 0 && seconds < 60, `under a minute left: ${seconds}`)
  })
  t.test("admin createUser/updateUserById: GoTrue's texts for a bad ban_duration and a bad id", async (t) => {
    const admin = new GoTrueAdminApi({
      url: h.base(x),
      headers: { Authorization: `Bearer ${await h.serviceToken(x)}` },
    })
    const unit = await admin.createUser({ email: email('ban'), ban_duration: '1d' })
    t.equal(unit.error?.status, 400)
    t.equal(unit.error?.message, 'invalid format for ban duration: time: unknown unit "d" in duration "1d"')
    const bare = await admin.createUser({ email: email('ban'), ban_duration: '10' })
    t.equal(bare.error?.message, 'invalid format for ban duration: time: missing unit in duration "10"')
    const junk = await admin.createUser({ email: email('ban'), ban_duration: 'soon' })
    t.equal(junk.error?.message, 'invalid format for ban duration: time: invalid duration "soon"')
    const id = await admin.createUser({ email: email('id'), id: 'not-a-uuid' } as never)
    t.equal(id.error?.message, 'ID must conform to the uuid v4 format')
    const nil = await admin.createUser({ email: email('id'), id: '00000000-0000-0000-0000-000000000000' } as never)
    t.equal(nil.error?.message, 'ID cannot be a nil uuid')
    const ok = await admin.createUser({ email: email('ban'), ban_duration: '1h30m' })
    t.error(ok.error)
    t.ok(ok.data.user?.banned_until)
    const update = await admin.updateUserById(ok.data.user!.id, { ban_duration: '2x' })
    t.equal(update.error?.message, 'invalid format for ban duration: time: unknown unit "x" in duration "2x"')
  })
  t.test(
    "redirect_to as GoTrue's GetReferrer: any loopback IP, else the Referer when redirect_to is refused",
    async (t) => {
      const c = h.client(x)
      const linkOf = async (address: string) => {
        const mail = await h.mail.waitForMail(address)
        return new URL(mail.links.find((l) => l.includes('/verify?'))!).searchParams.get('redirect_to')
      }
      const a = await confirmedUser()
      t.error((await c.resetPasswordForEmail(a, { redirectTo: 'http://127.0.0.1:4000/cb' })).error)
      t.equal(await linkOf(a), 'http://127.0.0.1:4000/cb', 'a loopback IP literal needs no allow-list entry')
      const b = await confirmedUser()
      const r = await call(h.base(x) + '/recover?redirect_to=' + encodeURIComponent('https://evil.example.net/'), {
        body: { email: b },
        headers: { referer: `${SITE}/from-here` },
      })
      t.equal(r.status, 200)
      t.equal(await linkOf(b), `${SITE}/from-here`, 'the allowed Referer, not the site URL')
      const d = await confirmedUser()
      t.error((await c.resetPasswordForEmail(d, { redirectTo: 'http://10.0.0.8/cb' })).error)
      t.equal(await linkOf(d), SITE, 'a private IP literal is never allowed')
    },
  )
  t.test('passkeys and Web3 sign-in answer as GoTrue does with them off', async (t) => {
    const c = new GoTrueClient({
      url: h.base(x),
      storage: memoryStorage(),
      autoRefreshToken: false,
      experimental: { passkey: true },
    } as never)
    const started = await c.passkey.startAuthentication({})
    t.equal(started.error?.status, 404)
    t.equal(started.error?.code, 'passkey_disabled')
    t.equal(started.error?.message, 'Passkeys are disabled')
    const list = await call(h.base(x) + '/passkeys')
    t.equal(list.status, 404, 'before any bearer check')
    t.match(list.body, { code: 'passkey_disabled' })
    const web3 = await call(h.base(x) + '/token?grant_type=web3', {
      body: { chain: 'ethereum', message: 'm', signature: '0x00' },
    })
    t.equal(web3.status, 422)
    t.match(web3.body, { code: 'web3_provider_disabled', message: 'Web3 provider is disabled' })
  })
  t.test("GET /.well-known/openid-configuration: GoTrue's discovery document for the tenant issuer", async (t) => {
    const r = await call(h.base(x) + '/.well-known/openid-configuration')
    t.equal(r.status, 200)
    t.equal(r.headers.get('cache-control'), 'public, max-age=600')
    const issuer = `http://gatehouse.test/${x.database}/auth/v1`
    t.match(r.body, {
      issuer,
      jwks_uri: `${issuer}/.well-known/jwks.json`,
      response_types_supported: ['code'],
      subject_types_supported: ['public'],
    })
    const jwks = await call(h.engineLink(x, r.body.jwks_uri))
    t.equal(jwks.status, 200)
    t.ok(Array.isArray(jwks.body.keys))
  })
  t.test('/authorize: a provider GoTrue knows but the database has not set up "is not enabled"', async (t) => {
    const c = h.client(x)
    const known = await c.signInWithOAuth({ provider: 'github', options: { skipBrowserRedirect: true } })
    t.error(known.error)
    const r = await call(known.data.url!)
    t.equal(r.status, 400)
    t.match(r.body, { code: 'validation_failed', message: 'Unsupported provider: provider is not enabled' })
    const unknown = await call(h.base(x) + '/authorize?provider=myspace')
    t.match(unknown.body, {
      code: 'validation_failed',
      message: 'Unsupported provider: Provider myspace could not be found',
    })
  })
  t.test('the OAuth server, custom providers and admin passkeys answer as GoTrue does with them off', async (t) => {
    const admin = new GoTrueAdminApi({
      url: h.base(x),
      headers: { Authorization: `Bearer ${await h.serviceToken(x)}` },
      experimental: { passkey: true },
    } as never)
    const clients = await admin.oauth.listClients()
    t.equal(clients.error?.status, 404)
    t.equal(clients.error?.code, 'feature_disabled')
    t.equal(clients.error?.message, 'OAuth server is disabled')
    const custom = await admin.customProviders.listProviders()
    t.equal(custom.error?.code, 'feature_disabled')
    t.equal(custom.error?.message, 'Custom OAuth providers are disabled')
    const created = await admin.createUser({ email: email('pk'), email_confirm: true })
    const keys = await admin.passkey.listPasskeys({ userId: created.data.user!.id })
    t.error(keys.error)
    t.same(keys.data, [])
    const gone = await admin.passkey.listPasskeys({ userId: '6b1a2f0e-4a55-4c8e-9a43-1f0d8c9e2b11' })
    t.equal(gone.error?.code, 'user_not_found')
    const anon = await call(h.base(x) + '/admin/oauth/clients')
    t.equal(anon.status, 401, 'the admin check comes first')
    const authorize = await call(h.base(x) + '/oauth/authorize?client_id=x')
    t.equal(authorize.status, 404)
    t.match(authorize.body, { code: 'feature_disabled', message: 'OAuth server is disabled' })
  })

  t.test('X-Supabase-Api-Version is echoed on errors only, for a version of 2024-01-01 or later', async (t) => {
    const old = await call(h.base(x) + '/token?grant_type=password', {
      body: { email: 'a@b.example' },
      apiVersion: '2023-05-01',
    })
    t.equal(old.status, 400)
    t.equal(old.headers.get('x-supabase-api-version'), null)
    t.match(old.body, { code: 400, error_code: 'invalid_credentials' })
    const current = await call(h.base(x) + '/token?grant_type=password', { body: { email: 'a@b.example' } })
    t.equal(current.headers.get('x-supabase-api-version'), '2024-01-01')
    t.match(current.body, { code: 'invalid_credentials' })
    const ok = await call(h.base(x) + '/settings')
    t.equal(ok.status, 200)
    t.equal(ok.headers.get('x-supabase-api-version'), null, 'not on a success')
  })
  t.test(
    '/resend of an email change starts it over: both links again, an earlier confirmation no longer counts',
    async (t) => {
      const c = h.client(x)
      const from = await confirmedUser()
      t.error((await c.signInWithPassword({ email: from, password: 'secret123' })).error)
      const to = email('change-to')
      t.error((await c.updateUser({ email: to })).error)
      await h.mail.waitForMail(to)
      const current1 = await h.mail.waitForMail(from)
      const tokenOf = (m: { links: string[] }) =>
        new URL(m.links.find((l) => l.includes('/verify?'))!).searchParams.get('token')!
      const first = await c.verifyOtp({ token_hash: tokenOf(current1), type: 'email_change' })
      t.error(first.error)
      t.equal(first.data.session, null, 'the current address confirmed first')
      t.error((await c.resend({ type: 'email_change', email: from })).error)
      const newMail = await h.mail.waitForMail(to)
      const currentMail = await h.mail.waitForMail(from)
      t.ok(currentMail, 'the current address gets a link again')
      const afterNew = await c.verifyOtp({ token_hash: tokenOf(newMail), type: 'email_change' })
      t.error(afterNew.error)
      t.equal(afterNew.data.session, null, 'the new link alone no longer completes the change')
      const done = await c.verifyOtp({ token_hash: tokenOf(currentMail), type: 'email_change' })
      t.error(done.error)
      t.equal(done.data.user?.email, to)
    },
  )
})

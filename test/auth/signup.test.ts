// Sign-up (docs/auth-protocol.md §3.3) through auth-js against the engine over real HTTP: autoconfirm
// sessions, the confirmation mail read from a real SMTP catcher and its link verified,
// anonymous sign-in, the password policy, duplicate sign-ups, disabled sign-ups, mail
// limits, and GoTrue's two error shapes.
import t from 'tap'
import { AuthWeakPasswordError } from '@supabase/auth-js'
import { startAuth, call, email, decodeJwt } from '../helpers/auth-harness.js'
import { adminQuery } from '../helpers/db.js'

t.test('signup', async (t) => {
  const h = await startAuth(t, {
    tenants: [
      {}, // autoconfirm (mail_confirmation off), the default
      {
        auth: {
          mail_confirmation: true,
          site_url: 'http://app.example.com',
          redirect_urls: ['http://localhost:5173/**'],
        },
      },
      {
        auth: {
          anonymous_sign_in: true,
          password_min_length: 10,
          password_required_characters: 'lower_upper_letters_digits',
        },
      },
    ],
  })
  const [auto, confirm, strict] = h.list as [(typeof h.list)[0], (typeof h.list)[0], (typeof h.list)[0]]

  t.test('autoconfirm: a session, SIGNED_IN, metadata from data', async (t) => {
    const c = h.client(auto)
    const events: string[] = []
    c.onAuthStateChange((event) => {
      events.push(event)
    })
    const e = email()
    const { data, error } = await c.signUp({
      email: e.toUpperCase(),
      password: 'secret123',
      options: { data: { name: 'Ada', plan: 'pro' } },
    })
    t.error(error)
    t.ok(data.session, 'session returned')
    t.equal(data.user?.email, e, 'email lower-cased')
    t.match(data.user?.user_metadata, {
      name: 'Ada',
      plan: 'pro',
      email: e,
      email_verified: true,
      phone_verified: false,
      sub: data.user?.id,
    })
    t.same(data.user?.app_metadata, { provider: 'email', providers: ['email'] })
    t.equal(data.user?.identities?.length, 1)
    t.equal(data.user?.identities?.[0]?.provider, 'email')
    t.equal(data.session?.token_type, 'bearer')
    t.equal(data.session?.expires_in, 3600)
    t.ok(events.includes('SIGNED_IN'), 'SIGNED_IN emitted: ' + events.join(','))
    const claims = decodeJwt(data.session!.access_token)
    t.same(
      Object.keys(claims).sort(),
      [
        'aal',
        'amr',
        'app_metadata',
        'aud',
        'email',
        'exp',
        'iat',
        'is_anonymous',
        'iss',
        'phone',
        'role',
        'session_id',
        'sub',
        'user_metadata',
      ].sort(),
    )
    t.match(claims, {
      sub: data.user?.id,
      aud: 'authenticated',
      role: 'authenticated',
      email: e,
      phone: '',
      aal: 'aal1',
      is_anonymous: false,
    })
    t.equal(claims.iss, `http://gatehouse.test/${auto.database}/auth/v1`)
    t.equal(claims.exp - claims.iat, 3600)
    t.equal(claims.amr[0].method, 'password')
    t.equal(data.session?.expires_at, claims.exp)
  })

  t.test('duplicate sign-up with autoconfirm: 422 user_already_exists', async (t) => {
    const c = h.client(auto)
    const e = email()
    t.error((await c.signUp({ email: e, password: 'secret123' })).error)
    const { error } = await c.signUp({ email: e, password: 'other-secret' })
    t.equal(error?.status, 422)
    t.equal(error?.code, 'user_already_exists')
    t.equal(error?.message, 'User already registered')
  })

  t.test('weak passwords: 422 weak_password with reasons', async (t) => {
    const c = h.client(auto)
    const short = await c.signUp({ email: email(), password: '12345' })
    t.ok(short.error instanceof AuthWeakPasswordError)
    t.equal(short.error?.status, 422)
    t.equal(short.error?.code, 'weak_password')
    t.same((short.error as AuthWeakPasswordError).reasons, ['length'])
    t.equal(short.error?.message, 'Password should be at least 6 characters.')

    const s = h.client(strict)
    const both = await s.signUp({ email: email(), password: 'abc' })
    t.same((both.error as AuthWeakPasswordError).reasons, ['length', 'characters'])
    const chars = await s.signUp({ email: email(), password: 'alllowercaseletters' })
    t.same((chars.error as AuthWeakPasswordError).reasons, ['characters'])
    t.match(chars.error?.message, /at least one character of each/)
    t.error((await s.signUp({ email: email(), password: 'Str0ngEnough' })).error)

    const long = await c.signUp({ email: email(), password: 'é'.repeat(37) }) // 74 bytes
    t.equal(long.error?.status, 400)
    t.equal(long.error?.code, 'validation_failed')
  })

  t.test('bad input: email format, missing password', async (t) => {
    const r1 = await call(h.base(auto) + '/signup', { body: { email: 'not-an-email', password: 'secret123' } })
    t.equal(r1.status, 400)
    t.same(r1.body, { code: 'validation_failed', message: 'Unable to validate email address: invalid format' })
    const r2 = await call(h.base(auto) + '/signup', { body: { email: email() } })
    t.equal(r2.status, 400)
    t.equal(r2.body.message, 'Signup requires a valid password')
    const r3 = await call(h.base(auto) + '/signup', {
      body: { email: email(), phone: '+15551234567', password: 'secret123' },
    })
    t.equal(r3.status, 400)
    const r4 = await call(h.base(auto) + '/signup', { body: '[1,2]' })
    t.equal(r4.status, 400)
    t.equal(r4.body.code, 'bad_json')
    const raw = await fetch(h.base(auto) + '/signup', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"email":',
    })
    t.equal(raw.status, 400)
    t.equal(((await raw.json()) as { error_code: string }).error_code, 'bad_json')
  })

  t.test('error shapes follow X-Supabase-Api-Version', async (t) => {
    const e = email()
    await call(h.base(auto) + '/signup', { body: { email: e, password: 'secret123' } })
    const legacy = await call(h.base(auto) + '/signup', { body: { email: e, password: 'secret123' }, apiVersion: null })
    t.equal(legacy.status, 422)
    t.same(legacy.body, { code: 422, error_code: 'user_already_exists', msg: 'User already registered' })
    t.equal(legacy.headers.get('x-sb-error-code'), 'user_already_exists')
    t.notOk(legacy.headers.get('x-supabase-api-version'))
    const v2024 = await call(h.base(auto) + '/signup', { body: { email: e, password: 'secret123' } })
    t.same(v2024.body, { code: 'user_already_exists', message: 'User already registered' })
    t.equal(v2024.headers.get('x-supabase-api-version'), '2024-01-01')
    const old = await call(h.base(auto) + '/signup', {
      body: { email: e, password: 'secret123' },
      apiVersion: '2023-05-01',
    })
    t.equal(old.body.error_code, 'user_already_exists')
    const weak = await call(h.base(auto) + '/signup', { body: { email: email(), password: '1' }, apiVersion: null })
    t.same(weak.body.weak_password, { reasons: ['length'] })
  })

  t.test('mail confirmation: no session, mail read from SMTP, link verified, then sign-in', async (t) => {
    const c = h.client(confirm)
    const e = email('confirm')
    const { data, error } = await c.signUp({
      email: e,
      password: 'secret123',
      options: { emailRedirectTo: 'http://localhost:5173/welcome', data: { team: 'blue' } },
    })
    t.error(error)
    t.equal(data.session, null, 'no session before confirmation')
    t.equal(data.user?.email, e)
    t.ok(data.user?.confirmation_sent_at)
    t.notOk(data.user?.email_confirmed_at)

    const early = await c.signInWithPassword({ email: e, password: 'secret123' })
    t.equal(early.error?.status, 400)
    t.equal(early.error?.code, 'email_not_confirmed')

    const mail = await h.mail.waitForMail(e)
    t.equal(mail.subject, 'Confirm your email address')
    t.match(mail.headers.from, confirm.database)
    const link = mail.links.find((l) => l.includes('/verify?'))!
    t.ok(link, 'mail carries a verify link')
    const u = new URL(link)
    t.equal(`${u.origin}${u.pathname}`, `http://gatehouse.test/${confirm.database}/auth/v1/verify`)
    t.equal(u.searchParams.get('type'), 'signup')
    t.equal(u.searchParams.get('redirect_to'), 'http://localhost:5173/welcome')
    t.match(u.searchParams.get('token'), /^[0-9a-f]{56}$/, 'SHA-224 hex token hash')
    t.match(mail.text, /Or enter this code: \d{6}/)
    const stored = await adminQuery(
      'SELECT token_type::text, relates_to FROM auth.one_time_tokens WHERE token_hash = $1',
      [u.searchParams.get('token')],
      confirm.database,
    )
    t.same(stored.rows, [{ token_type: 'confirmation_token', relates_to: e }], 'the hash is kept in one_time_tokens')

    const res = await fetch(h.engineLink(confirm, link), { redirect: 'manual' })
    t.equal(res.status, 303)
    const loc = new URL(res.headers.get('location')!)
    t.equal(`${loc.origin}${loc.pathname}`, 'http://localhost:5173/welcome')
    const frag = new URLSearchParams(loc.hash.slice(1))
    t.equal(frag.get('token_type'), 'bearer')
    t.equal(frag.get('type'), 'signup')
    t.ok(frag.get('access_token'))
    t.ok(frag.get('refresh_token'))
    t.equal(frag.get('expires_in'), '3600')
    t.ok(frag.has('sb') && frag.get('sb') === '', 'the sb marker')
    const claims = decodeJwt(frag.get('access_token')!)
    t.equal(claims.email, e)
    t.equal(claims.user_metadata.email_verified, true)
    t.equal(claims.user_metadata.team, 'blue')
    t.equal(claims.amr[0].method, 'otp')

    const again = await fetch(h.engineLink(confirm, link), { redirect: 'manual' })
    t.equal(again.status, 303, 'a used link redirects with an error')
    const errFrag = new URLSearchParams(new URL(again.headers.get('location')!).hash.slice(1))
    t.equal(errFrag.get('error'), 'access_denied')
    t.equal(errFrag.get('error_code'), 'otp_expired')
    t.equal(errFrag.get('error_description'), 'Email link is invalid or has expired')

    const signed = await c.signInWithPassword({ email: e, password: 'secret123' })
    t.error(signed.error)
    t.ok(signed.data.user?.email_confirmed_at)
    t.equal(signed.data.user?.user_metadata.email_verified, true)
    t.equal(signed.data.user?.identities?.[0]?.identity_data?.email_verified, true)

    // A confirmed address signed up again: an obfuscated user (no enumeration), no mail.
    const before = h.mail.count(e)
    const dup = await c.signUp({ email: e, password: 'whatever1' })
    t.error(dup.error)
    t.same(dup.data.user?.identities, [])
    t.not(dup.data.user?.id, signed.data.user?.id)
    t.equal(h.mail.count(e), before)
  })

  t.test('mail confirmation: the emailed code verifies through verifyOtp', async (t) => {
    const c = h.client(confirm)
    const e = email('otp')
    t.error((await c.signUp({ email: e, password: 'secret123' })).error)
    const mail = await h.mail.waitForMail(e)
    const code = /Or enter this code: (\d{6})/.exec(mail.text)![1]!
    const bad = await c.verifyOtp({ email: e, token: code === '000000' ? '111111' : '000000', type: 'signup' })
    t.equal(bad.error?.status, 403)
    t.equal(bad.error?.code, 'otp_expired')
    const { data, error } = await c.verifyOtp({ email: e, token: code, type: 'signup' })
    t.error(error)
    t.ok(data.session?.access_token)
    t.equal(data.user?.email, e)
    t.ok(data.user?.email_confirmed_at)
  })

  t.test('an unknown redirect_to falls back to the site URL', async (t) => {
    const e = email('redir')
    const r = await call(h.base(confirm) + '/signup?redirect_to=' + encodeURIComponent('https://evil.example.net/'), {
      body: { email: e, password: 'secret123' },
    })
    t.equal(r.status, 200)
    const mail = await h.mail.waitForMail(e)
    const link = new URL(mail.links.find((l) => l.includes('/verify?'))!)
    t.equal(link.searchParams.get('redirect_to'), 'http://app.example.com')
  })

  t.test('mail limits: per address and kind, and per tenant per hour, kept in the database', async (t) => {
    h.setAuth(confirm, { mail_min_interval: 60 })
    const e = email('throttle')
    t.equal((await call(h.base(confirm) + '/signup', { body: { email: e, password: 'secret123' } })).status, 200)
    await h.mail.waitForMail(e)
    // Signing up again while unconfirmed re-sends the confirmation: too soon.
    const again = await call(h.base(confirm) + '/signup', { body: { email: e, password: 'secret123' } })
    t.equal(again.status, 429)
    t.equal(again.body.code, 'over_email_send_rate_limit')
    t.match(again.body.message, /^For security purposes, you can only request this after \d+ seconds\.$/)
    h.clock.advance(61)
    t.equal((await call(h.base(confirm) + '/signup', { body: { email: e, password: 'secret123' } })).status, 200)
    await h.mail.waitForMail(e)

    const counted = await adminQuery<{ n: number }>(
      'SELECT count(*)::int AS n FROM auth.gatehouse_mail_sends WHERE address = $1',
      [e],
      confirm.database,
    )
    t.equal(counted.rows[0]?.n, 2, 'sends are counted in the tenant database')
    h.setAuth(confirm, { mail_min_interval: 0, mail_rate_per_hour: 0 })
    const over = await call(h.base(confirm) + '/signup', { body: { email: email('over'), password: 'secret123' } })
    t.equal(over.status, 429)
    t.same(over.body, { code: 'over_email_send_rate_limit', message: 'email rate limit exceeded' })
    h.setAuth(confirm, { mail_rate_per_hour: 1000 })
  })

  t.test('signup disabled and anonymous sign-in', async (t) => {
    h.setAuth(auto, { signup_enabled: false })
    const c = h.client(auto)
    const off = await c.signUp({ email: email(), password: 'secret123' })
    t.equal(off.error?.status, 422)
    t.equal(off.error?.code, 'signup_disabled')
    t.equal(off.error?.message, 'Signups not allowed for this instance')
    h.setAuth(auto, { signup_enabled: true })

    const noAnon = await c.signInAnonymously()
    t.equal(noAnon.error?.status, 422)
    t.equal(noAnon.error?.code, 'anonymous_provider_disabled')

    const s = h.client(strict)
    const { data, error } = await s.signInAnonymously({ options: { data: { theme: 'dark' } } })
    t.error(error)
    t.equal(data.user?.is_anonymous, true)
    t.equal(data.user?.email, '')
    t.same(data.user?.app_metadata, {})
    t.same(data.user?.user_metadata, { theme: 'dark' })
    const claims = decodeJwt(data.session!.access_token)
    t.match(claims, { role: 'authenticated', is_anonymous: true, email: '', phone: '' })
    t.equal(claims.amr[0].method, 'anonymous')
    const me = await s.getUser()
    t.equal(me.data.user?.id, data.user?.id)
  })

  t.test('settings, health and jwks reflect the tenant', async (t) => {
    const health = await call(h.base(auto) + '/health')
    t.same(health.body, {
      version: 'gatehouse-0.1.0',
      name: 'GoTrue',
      description: 'GoTrue is a user registration and authentication API',
    })
    const s1 = await call(h.base(confirm) + '/settings')
    t.match(s1.body, {
      disable_signup: false,
      mailer_autoconfirm: false,
      phone_autoconfirm: false,
      external: { email: true, phone: false, anonymous_users: false, github: false, google: false },
    })
    const s2 = await call(h.base(strict) + '/settings')
    t.match(s2.body, { mailer_autoconfirm: true, external: { anonymous_users: true } })
    h.setAuth(auto, { providers: { github: { client_id: 'x', secret: 'y' } }, magic_link: true, signup_enabled: false })
    const s3 = await call(h.base(auto) + '/settings')
    t.match(s3.body, { disable_signup: true, magic_link_enabled: true, external: { github: true } })
    h.setAuth(auto, { providers: {}, magic_link: false, signup_enabled: true })
    const jwks = await call(h.base(auto) + '/.well-known/jwks.json')
    const key = auto.file.jwt.signing_keys[0]!
    t.same(
      jwks.body.keys.map((k: Record<string, unknown>) => [k.kid, k.alg, k.use]),
      [[key.kid, key.alg, 'sig']],
      "the tenant's own signing key",
    )
    t.notOk('d' in jwks.body.keys[0], 'its public half only')
    t.equal(jwks.headers.get('cache-control'), 'public, max-age=600')
    const unknown = await call(`${h.url}/no_such_db/health`)
    t.equal(unknown.status, 404)
    t.equal(unknown.body.code, 'tenant_not_found')
    const notFound = await call(h.base(auto) + '/nope')
    t.equal(notFound.status, 404)
  })
})

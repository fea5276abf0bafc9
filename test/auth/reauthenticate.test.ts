// GET /reauthenticate and secure password change through auth-js: the nonce mailed, a
// password change in a session older than 24 h refused without it (400
// reauthentication_needed), with a wrong or stale one (422 reauthentication_not_valid), and
// accepted with the right one (spent after); the error answers of /reauthenticate; and
// GET /user/identities with manual linking on (GoTrue has no handler there: 404).
import t from 'tap'
import { SignJWT } from 'jose'
import { tenantIssuer } from '../../src/tenants/index.js'
import { startAuth, call, email, PUBLIC_URL } from '../helpers/auth-harness.js'

t.test('reauthenticate', async (t) => {
  const h = await startAuth(t, {
    tenants: [{ auth: { secure_password_change: true, manual_linking: true } }, { auth: { mail_confirmation: true } }],
  })
  const [a, confirm] = h.list as [(typeof h.list)[0], (typeof h.list)[0]]

  t.test('the nonce of a password change in an old session', async (t) => {
    const c = h.client(a)
    const e = email('reauth')
    t.error((await c.signUp({ email: e, password: 'secret123' })).error)
    h.clock.advance(25 * 3600)
    t.error((await c.refreshSession()).error, 'a new access token, the same (old) session')
    const none = await c.updateUser({ password: 'secret456' })
    t.same(
      [none.error?.status, none.error?.code, none.error?.message],
      [400, 'reauthentication_needed', 'Password update requires reauthentication'],
    )
    const noNonceYet = await c.updateUser({ password: 'secret456', nonce: '123456' })
    t.same(
      [noNonceYet.error?.status, noNonceYet.error?.code, noNonceYet.error?.message],
      [422, 'reauthentication_not_valid', 'Nonce has expired or is invalid'],
    )

    t.error((await c.reauthenticate()).error)
    const mail = await h.mail.waitForMail(e)
    const nonce = /(\d{6})/.exec(mail.text)?.[1]
    t.ok(nonce, 'the mail carries a 6-digit nonce')
    t.ok(((await c.getUser()).data.user as unknown as Record<string, unknown>)?.reauthentication_sent_at)
    const wrong = await c.updateUser({ password: 'secret456', nonce: nonce === '000000' ? '111111' : '000000' })
    t.same([wrong.error?.status, wrong.error?.code], [422, 'reauthentication_not_valid'])
    const ok = await c.updateUser({ password: 'secret456', nonce: nonce! })
    t.error(ok.error)
    const again = await c.updateUser({ password: 'secret789', nonce: nonce! })
    t.same([again.error?.status, again.error?.code], [422, 'reauthentication_not_valid'], 'a nonce is spent once')
    t.error((await h.client(a).signInWithPassword({ email: e, password: 'secret456' })).error)

    // A nonce older than otp_expiry is stale.
    t.error((await c.reauthenticate()).error)
    const m2 = await h.mail.waitForMail(e)
    h.clock.advance(3601)
    t.error((await c.refreshSession()).error)
    const stale = await c.updateUser({ password: 'secret789', nonce: /(\d{6})/.exec(m2.text)![1]! })
    t.same([stale.error?.status, stale.error?.code], [422, 'reauthentication_not_valid'])
    h.clock.advance(-(25 * 3600 + 3601))
  })

  t.test('error answers', async (t) => {
    const none = await call(h.base(a) + '/reauthenticate')
    t.same(
      [none.status, none.body],
      [401, { code: 'no_authorization', message: 'This endpoint requires a valid Bearer token' }],
    )
    // An anonymous user has no address to send the nonce to.
    h.setAuth(a, { anonymous_sign_in: true })
    const anon = h.client(a)
    t.error((await anon.signInAnonymously()).error)
    const noAddress = await anon.reauthenticate()
    t.same(
      [noAddress.error?.status, noAddress.error?.code, noAddress.error?.message],
      [400, 'validation_failed', 'Reauthentication requires the user to have an email or a phone number'],
    )
    // A user whose address is not confirmed (made by the admin API; a token minted for it).
    const made = await call(h.base(confirm) + '/admin/users', {
      token: await h.serviceToken(confirm),
      body: { email: email('unconfirmed'), password: 'secret123' },
    })
    t.equal(made.status, 200)
    const userJwt = await new SignJWT({ role: 'authenticated', aud: 'authenticated' })
      .setProtectedHeader({ alg: 'HS256' })
      .setSubject(made.body.id)
      .setIssuer(tenantIssuer(confirm.tenant, PUBLIC_URL))
      .setIssuedAt()
      .setExpirationTime('5m')
      .sign(new TextEncoder().encode(confirm.file.jwt.secret))
    const unconfirmed = await call(h.base(confirm) + '/reauthenticate', { token: userJwt })
    t.same(
      [unconfirmed.status, unconfirmed.body],
      [422, { code: 'email_not_confirmed', message: 'Please verify your email first.' }],
    )
    const c = h.client(a)
    t.error((await c.signUp({ email: email('ok'), password: 'secret123' })).error)
    const token = (await c.getSession()).data.session!.access_token
    const ids = await call(h.base(a) + '/user/identities', { token })
    t.same([ids.status, ids.body.code], [404, 'not_found'], 'GoTrue has no GET /user/identities')
    const sso = await call(h.base(a) + '/sso', { body: { domain: 'example.com' } })
    t.same([sso.status, sso.body], [404, { code: 'saml_provider_disabled', message: 'SAML 2.0 is disabled' }])
    const ssoAdmin = await call(h.base(a) + '/admin/sso/providers', { token: await h.serviceToken(a) })
    t.same([ssoAdmin.status, ssoAdmin.body.code], [404, 'saml_provider_disabled'])
    const ssoNotAdmin = await call(h.base(a) + '/admin/sso/providers', { token })
    t.same([ssoNotAdmin.status, ssoNotAdmin.body.code], [403, 'not_admin'])
  })
})

// GET/PUT /user through auth-js: metadata merge, password change (policy, same password,
// other sessions ended), email change confirmed by both mails (secure mode), an anonymous
// user taking an address, app_metadata refused to non-admins, and tokens of another
// audience refused (GoTrue's UserGet check).
import t from 'tap'
import { SignJWT } from 'jose'
import { startAuth, call, email, decodeJwt } from '../helpers/auth-harness.js'

t.test('user', async (t) => {
  const h = await startAuth(t, { tenants: [{}, { auth: { mail_confirmation: true, anonymous_sign_in: true } }] })
  const [a, confirm] = h.list as [(typeof h.list)[0], (typeof h.list)[0]]

  t.test('getUser and metadata updates', async (t) => {
    const c = h.client(a)
    const e = email('meta')
    t.error((await c.signUp({ email: e, password: 'secret123', options: { data: { color: 'red', size: 3 } } })).error)
    const events: string[] = []
    c.onAuthStateChange((ev) => {
      events.push(ev)
    })
    const got = await c.getUser()
    t.equal(got.data.user?.email, e)
    const upd = await c.updateUser({ data: { color: 'blue', size: null, extra: { nested: true } } })
    t.error(upd.error)
    t.match(upd.data.user?.user_metadata, { color: 'blue', extra: { nested: true }, email: e })
    t.notOk('size' in (upd.data.user?.user_metadata ?? {}), 'null deletes a key')
    t.ok(events.includes('USER_UPDATED'))
    const again = await c.getUser()
    t.equal(again.data.user?.user_metadata.color, 'blue')
    // A new access token carries the new metadata.
    const { data } = await c.refreshSession()
    t.equal(decodeJwt(data.session!.access_token).user_metadata.color, 'blue')
    const admin = await call(h.base(a) + '/user', {
      method: 'PUT',
      body: { app_metadata: { plan: 'gold' } },
      token: data.session!.access_token,
    })
    t.same(
      [admin.status, admin.body],
      [403, { code: 'not_admin', message: 'Updating app_metadata requires admin privileges' }],
    )
  })

  t.test('a token of this database made for another audience: /user and the admin routes refuse it', async (t) => {
    const c = h.client(a)
    t.error((await c.signUp({ email: email('aud'), password: 'secret123' })).error)
    const own = (await c.getSession()).data.session!.access_token
    const claims = decodeJwt(own)
    // The same claims, signed with the database's secret, for another audience.
    const resign = (aud: string | null, extra: Record<string, unknown> = claims) => {
      let jwt = new SignJWT({ ...extra, aud: undefined })
        .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
        .setIssuer(claims.iss)
        .setIssuedAt()
        .setExpirationTime('5m')
      if (aud !== null) jwt = jwt.setAudience(aud)
      return jwt.sign(new TextEncoder().encode(a.file.jwt.secret))
    }
    t.equal((await call(h.base(a) + '/user', { token: own })).status, 200, 'its own token: served')
    const other = await resign('another-app')
    const got = await call(h.base(a) + '/user', { token: other })
    t.same(
      [got.status, got.body],
      [400, { code: 'validation_failed', message: "Token audience doesn't match request audience" }],
      "GET /user: GoTrue's answer",
    )
    const put = await call(h.base(a) + '/user', { method: 'PUT', body: { data: { x: 1 } }, token: other })
    t.same([put.status, put.body.code], [400, 'validation_failed'], 'PUT /user too')
    t.equal((await call(h.base(a) + '/user', { token: await resign(null) })).status, 400, 'no audience at all: refused')

    const service = { role: 'service_role' }
    t.equal(
      (await call(h.base(a) + '/admin/users', { token: await resign(null, service) })).status,
      200,
      'a service token with no audience: served',
    )
    t.equal(
      (await call(h.base(a) + '/admin/users', { token: await resign('authenticated', service) })).status,
      200,
      "with the database's audience: served",
    )
    const adm = await call(h.base(a) + '/admin/users', { token: await resign('another-app', service) })
    t.same(
      [adm.status, adm.body],
      [403, { code: 'unexpected_audience', message: "Token audience doesn't match request audience" }],
      'another audience: refused',
    )
  })

  t.test('password change', async (t) => {
    const e = email('pw')
    const main = h.client(a)
    const other = h.client(a)
    t.error((await main.signUp({ email: e, password: 'first-pass' })).error)
    t.error((await other.signInWithPassword({ email: e, password: 'first-pass' })).error)
    const weak = await main.updateUser({ password: '123' })
    t.equal(weak.error?.code, 'weak_password')
    t.equal(weak.error?.status, 422)
    const same = await main.updateUser({ password: 'first-pass' })
    t.same(
      [same.error?.status, same.error?.code, same.error?.message],
      [422, 'same_password', 'New password should be different from the old password.'],
    )
    t.error((await main.updateUser({ password: 'second-pass' })).error)
    t.error((await main.getUser()).error, 'the current session stays')
    t.equal((await other.getUser()).error?.name, 'AuthSessionMissingError', 'other sessions ended')
    const old = await h.client(a).signInWithPassword({ email: e, password: 'first-pass' })
    t.equal(old.error?.code, 'invalid_credentials')
    t.error((await h.client(a).signInWithPassword({ email: e, password: 'second-pass' })).error)
  })

  t.test('email change: a mail to each address, both links confirm', async (t) => {
    const c = h.client(a)
    const oldEmail = email('old')
    const newEmail = email('new')
    const taken = email('taken')
    t.error((await h.client(a).signUp({ email: taken, password: 'secret123' })).error)
    t.error((await c.signUp({ email: oldEmail, password: 'secret123' })).error)
    const dup = await c.updateUser({ email: taken })
    t.same([dup.error?.status, dup.error?.code], [422, 'email_exists'])

    const { data, error } = await c.updateUser(
      { email: newEmail },
      { emailRedirectTo: 'http://localhost:3000/changed' },
    )
    t.error(error)
    t.equal(data.user?.email, oldEmail, 'unchanged until confirmed')
    t.equal(data.user?.new_email, newEmail)
    t.ok(data.user?.email_change_sent_at)
    const toNew = await h.mail.waitForMail(newEmail)
    const toOld = await h.mail.waitForMail(oldEmail)
    t.equal(toNew.subject, 'Confirm your new email address')
    t.match(toNew.text, `from ${oldEmail} to ${newEmail}`)
    const linkNew = toNew.links.find((l) => l.includes('/verify?'))!
    const linkOld = toOld.links.find((l) => l.includes('/verify?'))!
    t.equal(new URL(linkNew).searchParams.get('type'), 'email_change')
    t.not(linkNew, linkOld)

    const first = await fetch(h.engineLink(a, linkOld), { redirect: 'manual' })
    t.equal(first.status, 303)
    const firstFrag = new URLSearchParams(new URL(first.headers.get('location')!).hash.slice(1))
    t.equal(
      firstFrag.get('message'),
      'Confirmation link accepted. Please proceed to confirm link sent to the other email',
    )
    t.equal((await c.getUser()).data.user?.email, oldEmail, 'one link is not enough')

    const second = await fetch(h.engineLink(a, linkNew), { redirect: 'manual' })
    t.equal(second.status, 303)
    const loc = new URL(second.headers.get('location')!)
    t.equal(`${loc.origin}${loc.pathname}`, 'http://localhost:3000/changed')
    const frag = new URLSearchParams(loc.hash.slice(1))
    t.equal(frag.get('type'), 'email_change')
    t.equal(decodeJwt(frag.get('access_token')!).email, newEmail)
    const me = await c.getUser()
    t.equal(me.data.user?.email, newEmail)
    t.notOk(me.data.user?.new_email)
    t.equal(me.data.user?.identities?.[0]?.identity_data?.email, newEmail)
    t.error((await h.client(a).signInWithPassword({ email: newEmail, password: 'secret123' })).error)
    const byOld = await h.client(a).signInWithPassword({ email: oldEmail, password: 'secret123' })
    t.equal(byOld.error?.code, 'invalid_credentials')
  })

  t.test('anonymous user adds an email: confirmed by the mail, then a normal account', async (t) => {
    const c = h.client(confirm)
    const anon = await c.signInAnonymously()
    t.error(anon.error)
    const e = email('anon')
    const noEmail = await c.updateUser({ password: 'secret123' })
    t.same([noEmail.error?.status, noEmail.error?.code], [422, 'validation_failed'])
    const { data, error } = await c.updateUser({ email: e })
    t.error(error)
    t.equal(data.user?.new_email, e)
    t.equal(data.user?.is_anonymous, true)
    const mail = await h.mail.waitForMail(e)
    const res = await fetch(
      h.engineLink(
        confirm,
        mail.links.find((l) => l.includes('/verify?'))!,
      ),
      { redirect: 'manual' },
    )
    const frag = new URLSearchParams(new URL(res.headers.get('location')!).hash.slice(1))
    const claims = decodeJwt(frag.get('access_token')!)
    t.equal(claims.is_anonymous, false)
    t.equal(claims.email, e)
    t.same(claims.app_metadata, { provider: 'email', providers: ['email'] })
    t.equal(claims.sub, anon.data.user?.id, 'the same user')
  })

  t.test('PUT /user input errors', async (t) => {
    const s = (await h.client(a).signUp({ email: email('in'), password: 'secret123' })).data.session!
    const badEmail = await call(h.base(a) + '/user', { method: 'PUT', body: { email: 'nope' }, token: s.access_token })
    t.same([badEmail.status, badEmail.body.code], [400, 'validation_failed'])
    const badData = await call(h.base(a) + '/user', { method: 'PUT', body: { data: 'str' }, token: s.access_token })
    t.same([badData.status, badData.body.code], [400, 'bad_json'])
    const noToken = await call(h.base(a) + '/user', { method: 'PUT', body: {} })
    t.equal(noToken.status, 401)
  })
})

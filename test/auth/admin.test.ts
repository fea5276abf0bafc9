// The admin API through auth-js's GoTrueAdminApi with a service_role JWT (as the gateway
// mints it for the secret key): list with paging headers, create, get, update, delete,
// generate_link (no mail; the link verifies), invite (with mail), and refusals.
import t from 'tap'
import { GoTrueAdminApi } from '@supabase/auth-js'
import { SignJWT } from 'jose'
import { startAuth, call, email, decodeJwt } from '../helpers/auth-harness.js'
import { tenantIssuer } from '../../src/tenants/index.js'

t.test('admin', async (t) => {
  const h = await startAuth(t)
  const [a] = h.list as [(typeof h.list)[0]]
  const service = await h.serviceToken(a)
  const admin = new GoTrueAdminApi({ url: h.base(a), headers: { Authorization: `Bearer ${service}` } })

  t.test('refusals', async (t) => {
    const none = await call(h.base(a) + '/admin/users')
    t.same([none.status, none.body.code], [401, 'no_authorization'])
    const s = (await h.client(a).signUp({ email: email('plain'), password: 'secret123' })).data.session!
    const user = await call(h.base(a) + '/admin/users', { token: s.access_token })
    t.same([user.status, user.body], [403, { code: 'not_admin', message: 'User not allowed' }])
    const forged = await new SignJWT({ role: 'service_role' })
      .setProtectedHeader({ alg: 'HS256' })
      .setIssuer(tenantIssuer(a.tenant, 'http://gatehouse.test'))
      .setExpirationTime('5m')
      .sign(new TextEncoder().encode('x'.repeat(40)))
    const bad = await call(h.base(a) + '/admin/users', { token: forged })
    t.same([bad.status, bad.body.code], [403, 'bad_jwt'])
    const otherIss = await new SignJWT({ role: 'service_role' })
      .setProtectedHeader({ alg: 'HS256' })
      .setIssuer('supabase')
      .setExpirationTime('5m')
      .sign(new TextEncoder().encode(a.file.jwt.secret))
    t.equal((await call(h.base(a) + '/admin/users', { token: otherIss })).status, 403, 'iss is pinned to the tenant')
  })

  t.test('create, get, update, delete', async (t) => {
    const e = email('adm')
    const created = await admin.createUser({
      email: e,
      password: 'secret123',
      email_confirm: true,
      user_metadata: { name: 'Grace' },
      app_metadata: { plan: 'gold' },
    })
    t.error(created.error)
    const u = created.data.user!
    t.equal(u.email, e)
    t.ok(u.email_confirmed_at)
    t.same(u.app_metadata, { provider: 'email', providers: ['email'], plan: 'gold' })
    t.same(u.user_metadata, { name: 'Grace' })
    t.equal(u.identities?.length, 1)
    const dup = await admin.createUser({ email: e, password: 'secret123' })
    t.same([dup.error?.status, dup.error?.code], [422, 'email_exists'])
    const noAddr = await admin.createUser({ password: 'secret123' })
    t.equal(noAddr.error?.status, 400)

    const got = await admin.getUserById(u.id)
    t.equal(got.data.user?.id, u.id)
    const missing = await admin.getUserById('00000000-0000-0000-0000-000000000001')
    t.same([missing.error?.status, missing.error?.code], [404, 'user_not_found'])
    const badId = await call(h.base(a) + '/admin/users/not-a-uuid', { token: service })
    t.same([badId.status, badId.body.code], [404, 'validation_failed'])
    const longId = await call(h.base(a) + '/admin/users/' + 'a'.repeat(300), { token: service })
    t.same([longId.status, longId.body.code], [404, 'validation_failed'], 'a long id too, in GoTrue shape')
    const huge = await call(h.base(a) + '/admin/users/' + 'a'.repeat(5000), { token: service })
    t.same([huge.status, huge.body.code], [404, 'not_found'], 'past any limit: not_found, in GoTrue shape')

    const signedIn = await h.client(a).signInWithPassword({ email: e, password: 'secret123' })
    t.error(signedIn.error)
    t.equal(decodeJwt(signedIn.data.session!.access_token).app_metadata.plan, 'gold')
    const weak = await admin.updateUserById(u.id, { password: '1' })
    t.equal(weak.error?.code, 'weak_password', 'strength is checked on update')
    const upd = await admin.updateUserById(u.id, {
      password: 'changed-1',
      user_metadata: { name: null, team: 'x' },
      app_metadata: { plan: 'silver' },
    })
    t.error(upd.error)
    t.same(upd.data.user?.user_metadata, { team: 'x' })
    t.equal(upd.data.user?.app_metadata.plan, 'silver')
    const old = await call(h.base(a) + '/user', { token: signedIn.data.session!.access_token })
    t.equal(old.status, 403, 'an admin password change ends the sessions')
    t.error((await h.client(a).signInWithPassword({ email: e, password: 'changed-1' })).error)

    const banned = await admin.updateUserById(u.id, { ban_duration: '24h' })
    t.ok(banned.data.user?.banned_until)
    const refused = await h.client(a).signInWithPassword({ email: e, password: 'changed-1' })
    t.same([refused.error?.status, refused.error?.code], [400, 'user_banned'])
    t.error((await admin.updateUserById(u.id, { ban_duration: 'none' })).error)
    t.error((await h.client(a).signInWithPassword({ email: e, password: 'changed-1' })).error)

    t.error((await admin.deleteUser(u.id)).error)
    t.same([(await admin.getUserById(u.id)).error?.status], [404])
    const gone = await h.client(a).signInWithPassword({ email: e, password: 'changed-1' })
    t.equal(gone.error?.code, 'invalid_credentials')
  })

  t.test('list with paging headers', async (t) => {
    for (let i = 0; i < 5; i++)
      t.error(
        (
          await admin.createUser({
            email: email('page'),
            password: 'secret123',
            user_metadata: { full_name: `Pager ${i}` },
          })
        ).error,
      )
    const raw = await call(h.base(a) + '/admin/users?page=1&per_page=2', { token: service })
    t.equal(raw.status, 200)
    const total = Number(raw.headers.get('x-total-count'))
    t.ok(total >= 5)
    t.equal(raw.body.users.length, 2)
    t.equal(raw.body.aud, 'authenticated')
    const link = raw.headers.get('link')!
    t.match(link, `<http://gatehouse.test/${a.database}/auth/v1/admin/users?page=2&per_page=2>; rel="next"`)
    t.match(link, `?page=${Math.ceil(total / 2)}&per_page=2>; rel="last"`)
    const listed = await admin.listUsers({ page: 2, perPage: 2 })
    t.error(listed.error)
    t.equal(listed.data.users.length, 2)
    t.equal((listed.data as unknown as { nextPage: number }).nextPage, 3)
    t.equal((listed.data as unknown as { total: number }).total, total)
    const filtered = await call(h.base(a) + '/admin/users?filter=Pager%203', { token: service })
    t.equal(filtered.body.users.length, 1)
    const page1 = new Set(raw.body.users.map((u: { id: string }) => u.id))
    t.notOk(
      listed.data.users.some((u) => page1.has(u.id)),
      'pages do not overlap',
    )
  })

  t.test('generate_link: properties and working links, no mail', async (t) => {
    const e = email('gen')
    const before = h.mail.count()
    const signup = await admin.generateLink({
      type: 'signup',
      email: e,
      password: 'secret123',
      options: { data: { via: 'admin' }, redirectTo: 'http://localhost:3000/in' },
    })
    t.error(signup.error)
    const p = signup.data.properties!
    t.equal(p.verification_type, 'signup')
    t.equal(p.redirect_to, 'http://localhost:3000/in')
    t.match(p.email_otp, /^\d{6}$/)
    t.match(p.hashed_token, /^[0-9a-f]{56}$/)
    const link = new URL(p.action_link)
    t.equal(link.searchParams.get('token'), p.hashed_token)
    t.equal(link.searchParams.get('type'), 'signup')
    t.equal(signup.data.user?.email, e)
    // GoTrue's admin-made users keep the given data alone as user_metadata (no sub/email/..._verified).
    t.same(signup.data.user?.user_metadata, { via: 'admin' })
    t.same(
      signup.data.user?.identities?.[0]?.identity_data,
      { sub: signup.data.user?.id, email: e, email_verified: false, phone_verified: false },
      'the identity holds the claims only',
    )
    t.equal(h.mail.count(), before, 'generate_link sends no mail')

    const c = h.client(a)
    const verified = await c.verifyOtp({ token_hash: p.hashed_token, type: 'signup' })
    t.error(verified.error)
    t.equal(verified.data.user?.email, e)
    t.ok(verified.data.user?.email_confirmed_at)
    const confirmedAgain = await admin.generateLink({ type: 'signup', email: e, password: 'secret123' })
    t.same([confirmedAgain.error?.status, confirmedAgain.error?.code], [422, 'email_exists'])

    const magic = await admin.generateLink({ type: 'magiclink', email: e })
    t.equal(magic.data.properties?.verification_type, 'magiclink')
    t.equal(new URL(magic.data.properties!.action_link).searchParams.get('type'), 'magiclink')
    const magicNew = await admin.generateLink({ type: 'magiclink', email: email('newmagic') })
    t.equal(magicNew.data.properties?.verification_type, 'signup', 'unknown user: a signup link')
    const recovery = await admin.generateLink({ type: 'recovery', email: e })
    t.equal(recovery.data.properties?.verification_type, 'recovery')
    const noUser = await admin.generateLink({ type: 'recovery', email: email('nobody') })
    t.same([noUser.error?.status, noUser.error?.code], [404, 'user_not_found'])

    const invited = email('inv')
    const invite = await admin.generateLink({ type: 'invite', email: invited })
    t.ok(invite.data.user?.invited_at)
    t.same(invite.data.user?.user_metadata, {})
    const res = await fetch(h.engineLink(a, invite.data.properties!.action_link), { redirect: 'manual' })
    t.equal(res.status, 303)
    const frag = new URLSearchParams(new URL(res.headers.get('location')!).hash.slice(1))
    t.equal(frag.get('type'), 'invite')
    t.equal(decodeJwt(frag.get('access_token')!).email, invited)

    const newAddr = email('moved')
    const change = await admin.generateLink({ type: 'email_change_new', email: e, newEmail: newAddr })
    t.error(change.error)
    t.equal(new URL(change.data.properties!.action_link).searchParams.get('type'), 'email_change')
    t.equal(change.data.user?.new_email, newAddr)
    const moved = await h
      .client(a)
      .verifyOtp({ token_hash: change.data.properties!.hashed_token, type: 'email_change' })
    t.error(moved.error)
    t.equal(moved.data.user?.email, newAddr)
    t.equal(h.mail.count(), before, 'still no mail')
  })

  t.test('invite sends the invite mail; its link signs in', async (t) => {
    const e = email('invitee')
    const { data, error } = await admin.inviteUserByEmail(e, { data: { org: 'acme' } })
    t.error(error)
    t.ok(data.user?.invited_at)
    const mail = await h.mail.waitForMail(e)
    t.equal(mail.subject, "You've been invited")
    const res = await fetch(
      h.engineLink(
        a,
        mail.links.find((l) => l.includes('/verify?'))!,
      ),
      { redirect: 'manual' },
    )
    const frag = new URLSearchParams(new URL(res.headers.get('location')!).hash.slice(1))
    t.equal(frag.get('type'), 'invite')
    const again = await admin.inviteUserByEmail(e)
    t.same([again.error?.status, again.error?.code], [422, 'email_exists'])
  })
})

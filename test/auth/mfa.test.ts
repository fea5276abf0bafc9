// MFA with TOTP through auth-js (auth.mfa.*): enroll (secret, otpauth URI, SVG QR code),
// challenge, verify (aal2 token with the totp AMR, refresh keeps aal2, other aal1 sessions
// end), getAuthenticatorAssuranceLevel, unenroll (AAL2 needed for a verified factor), the
// admin listing and deletion of factors, and every error answer of the factor routes.
import t from 'tap'
import * as OTPAuth from 'otpauth'
import pg from 'pg'
import { startAuth, call, email, decodeJwt } from '../helpers/auth-harness.js'

// pg warns (once per process) when a query is sent to a client still running another: inside
// a transaction that is a query racing its neighbours, and pg 9 refuses it outright.
const busyClientWarnings: string[] = []
process.on('warning', (w) => {
  if (/already executing a query/.test(w.message)) busyClientWarnings.push(w.message)
})

function codeOf(secret: string, at: Date): string {
  return new OTPAuth.TOTP({
    secret: OTPAuth.Secret.fromBase32(secret),
    digits: 6,
    period: 30,
    algorithm: 'SHA1',
  }).generate({ timestamp: at.getTime() })
}

t.test('mfa', async (t) => {
  const h = await startAuth(t, {
    tenants: [
      { auth: { anonymous_sign_in: true, site_url: 'https://app.example.com' } },
      { auth: { mfa_totp_enroll: false, mfa_totp_verify: false } },
    ],
  })
  const [a, off] = h.list as [(typeof h.list)[0], (typeof h.list)[0]]

  t.test('enroll, challenge, verify, assurance levels, unenroll', async (t) => {
    const c = h.client(a)
    const other = h.client(a)
    const e = email('mfa')
    t.error((await c.signUp({ email: e, password: 'secret123' })).error)
    t.error((await other.signInWithPassword({ email: e, password: 'secret123' })).error)
    const before = await c.mfa.getAuthenticatorAssuranceLevel()
    t.same([before.data?.currentLevel, before.data?.nextLevel], ['aal1', 'aal1'])

    const en = await c.mfa.enroll({ factorType: 'totp', friendlyName: 'phone app' })
    t.error(en.error)
    const f = en.data!
    t.equal(f.type, 'totp')
    t.equal(f.friendly_name, 'phone app')
    t.match(f.totp.secret, /^[A-Z2-7]{32}$/)
    t.equal(
      f.totp.uri,
      `otpauth://totp/app.example.com:${encodeURIComponent(e).replace(/%40/g, '@')}?algorithm=SHA1&digits=6&issuer=app.example.com&period=30&secret=${f.totp.secret}`,
    )
    t.match(f.totp.qr_code, /^data:image\/svg\+xml;utf-8,<svg /)
    const dup = await c.mfa.enroll({ factorType: 'totp', friendlyName: 'phone app' })
    t.same(
      [dup.error?.status, dup.error?.code, dup.error?.message],
      [422, 'mfa_factor_name_conflict', 'A factor with the friendly name "phone app" for this user already exists'],
    )

    const listed = await c.mfa.listFactors()
    t.error(listed.error)
    t.equal(listed.data?.all.length, 1)
    t.equal(listed.data?.all[0]?.status, 'unverified')

    const ch = await c.mfa.challenge({ factorId: f.id })
    t.error(ch.error)
    t.equal(ch.data?.type, 'totp')
    t.ok(ch.data!.expires_at > Date.now() / 1000 + 200)
    const wrong = await c.mfa.verify({
      factorId: f.id,
      challengeId: ch.data!.id,
      code: '000000' === codeOf(f.totp.secret, h.clock.now()) ? '111111' : '000000',
    })
    t.same(
      [wrong.error?.status, wrong.error?.code, wrong.error?.message],
      [422, 'mfa_verification_failed', 'Invalid TOTP code entered'],
    )

    const ok = await c.mfa.verify({
      factorId: f.id,
      challengeId: ch.data!.id,
      code: codeOf(f.totp.secret, h.clock.now()),
    })
    t.error(ok.error)
    const claims = decodeJwt(ok.data!.access_token)
    t.equal(claims.aal, 'aal2')
    t.same(claims.amr.map((x: { method: string }) => x.method).sort(), ['password', 'totp'])
    t.equal(ok.data!.user.factors?.[0]?.status, 'verified')
    const after = await c.mfa.getAuthenticatorAssuranceLevel()
    t.same([after.data?.currentLevel, after.data?.nextLevel], ['aal2', 'aal2'])

    const spent = await c.mfa.verify({
      factorId: f.id,
      challengeId: ch.data!.id,
      code: codeOf(f.totp.secret, h.clock.now()),
    })
    t.same(
      [spent.error?.status, spent.error?.code, spent.error?.message],
      [422, 'mfa_ip_address_mismatch', 'Challenge and verify IP addresses mismatch.'],
    )

    t.equal((await other.getUser()).error?.name, 'AuthSessionMissingError', 'the other aal1 session ended')
    const refreshed = await c.refreshSession()
    t.error(refreshed.error)
    t.equal(decodeJwt(refreshed.data.session!.access_token).aal, 'aal2', 'a refresh keeps aal2')

    // A new password sign-in is aal1 with aal2 reachable; it may not remove the verified factor.
    const fresh = h.client(a)
    t.error((await fresh.signInWithPassword({ email: e, password: 'secret123' })).error)
    const lv = await fresh.mfa.getAuthenticatorAssuranceLevel()
    t.same([lv.data?.currentLevel, lv.data?.nextLevel], ['aal1', 'aal2'])
    const un1 = await fresh.mfa.unenroll({ factorId: f.id })
    t.same(
      [un1.error?.status, un1.error?.code, un1.error?.message],
      [422, 'insufficient_aal', 'AAL2 required to unenroll verified factor'],
    )
    const en2 = await fresh.mfa.enroll({ factorType: 'totp', friendlyName: 'second' })
    t.same(
      [en2.error?.status, en2.error?.code, en2.error?.message],
      [403, 'insufficient_aal', 'AAL2 required to enroll a new factor'],
    )
    const pw = await fresh.updateUser({ password: 'another-pass' })
    t.same(
      [pw.error?.status, pw.error?.code, pw.error?.message],
      [401, 'insufficient_aal', 'AAL2 session is required to update email or password when MFA is enabled.'],
    )

    // The expired challenge.
    const ch2 = await c.mfa.challenge({ factorId: f.id })
    h.clock.advance(301)
    const late = await c.mfa.verify({
      factorId: f.id,
      challengeId: ch2.data!.id,
      code: codeOf(f.totp.secret, h.clock.now()),
    })
    t.same(
      [late.error?.status, late.error?.code, late.error?.message],
      [
        422,
        'mfa_challenge_expired',
        `MFA challenge ${ch2.data!.id} has expired, verify against another challenge or create a new challenge.`,
      ],
    )
    h.clock.advance(-301)

    const un = await c.mfa.unenroll({ factorId: f.id })
    t.error(un.error)
    t.equal(un.data?.id, f.id)
    const { data } = await c.refreshSession()
    t.equal(decodeJwt(data.session!.access_token).aal, 'aal1', 'the session drops to aal1')
    t.notOk((await c.getUser()).data.user?.factors?.length)
  })

  t.test('a code that verified is refused for the rest of its window, and so is an older one', async (t) => {
    const c = h.client(a)
    const e = email('replay')
    t.error((await c.signUp({ email: e, password: 'secret123' })).error)
    const f = (await c.mfa.enroll({ factorType: 'totp' })).data!
    const first = codeOf(f.totp.secret, h.clock.now())
    const ch = await c.mfa.challenge({ factorId: f.id })
    t.error(
      (await c.mfa.verify({ factorId: f.id, challengeId: ch.data!.id, code: first })).error,
      'the code verifies once',
    )

    // Someone who saw the code (and has the password) tries it again within its window.
    const thief = h.client(a)
    t.error((await thief.signInWithPassword({ email: e, password: 'secret123' })).error)
    const ch2 = await thief.mfa.challenge({ factorId: f.id })
    const again = await thief.mfa.verify({ factorId: f.id, challengeId: ch2.data!.id, code: first })
    t.same(
      [again.error?.status, again.error?.code, again.error?.message],
      [422, 'mfa_verification_failed', 'This TOTP code was already used; wait for the next code of your authenticator'],
    )

    h.clock.advance(30)
    const ch3 = await thief.mfa.challenge({ factorId: f.id })
    const stale = await thief.mfa.verify({ factorId: f.id, challengeId: ch3.data!.id, code: first })
    t.equal(
      stale.error?.message,
      'This TOTP code was already used; wait for the next code of your authenticator',
      'still within the skew window: refused',
    )
    const next = await thief.mfa.verify({
      factorId: f.id,
      challengeId: ch3.data!.id,
      code: codeOf(f.totp.secret, h.clock.now()),
    })
    t.error(next.error, 'the next code verifies')
    h.clock.advance(-30)
  })

  t.test('admin lists and deletes factors; RLS reads aal', async (t) => {
    const c = h.client(a)
    const e = email('mfaadmin')
    t.error((await c.signUp({ email: e, password: 'secret123' })).error)
    const en = await c.mfa.enroll({ factorType: 'totp' })
    t.error(en.error)
    t.equal(en.data?.friendly_name, '')
    const userId = (await c.getUser()).data.user!.id
    const token = await h.serviceToken(a)
    const list = await call(`${h.base(a)}/admin/users/${userId}/factors`, { token })
    t.equal(list.status, 200, JSON.stringify(list.body))
    t.same(
      list.body.map((x: any) => [x.id, x.factor_type, x.status, x.phone]),
      [[en.data!.id, 'totp', 'unverified', '']],
    )
    t.notOk('secret' in list.body[0])
    const bad = await call(`${h.base(a)}/admin/users/${userId}/factors/nope`, { method: 'DELETE', token })
    t.same([bad.status, bad.body], [404, { code: 'validation_failed', message: 'factor_id must be an UUID' }])
    const missing = await call(`${h.base(a)}/admin/users/${userId}/factors/${crypto.randomUUID()}`, {
      method: 'DELETE',
      token,
    })
    t.same([missing.status, missing.body], [404, { code: 'mfa_factor_not_found', message: 'Factor not found' }])
    const noUser = await call(`${h.base(a)}/admin/users/${crypto.randomUUID()}/factors`, { token })
    t.same([noUser.status, noUser.body], [404, { code: 'user_not_found', message: 'User not found' }])
    const del = await call(`${h.base(a)}/admin/users/${userId}/factors/${en.data!.id}`, { method: 'DELETE', token })
    t.same([del.status, del.body.id], [200, en.data!.id])
    const userToken = (await c.getSession()).data.session!.access_token
    const notAdmin = await call(`${h.base(a)}/admin/users/${userId}/factors`, { token: userToken })
    t.same([notAdmin.status, notAdmin.body.code], [403, 'not_admin'])
  })

  t.test('error answers of the factor routes', async (t) => {
    const c = h.client(a)
    t.error((await c.signUp({ email: email('mfaerr'), password: 'secret123' })).error)
    const token = (await c.getSession()).data.session!.access_token
    const base = h.base(a)
    const none = await call(`${base}/factors`, { body: { factor_type: 'totp' } })
    t.same(
      [none.status, none.body],
      [401, { code: 'no_authorization', message: 'This endpoint requires a valid Bearer token' }],
    )
    const bad = await call(`${base}/factors`, { token, body: { factor_type: 'sms' } })
    t.same(
      [bad.status, bad.body],
      [400, { code: 'validation_failed', message: 'factor_type needs to be totp, phone, or webauthn' }],
    )
    const phone = await call(`${base}/factors`, { token, body: { factor_type: 'phone', phone: '+15555550100' } })
    t.same(
      [phone.status, phone.body],
      [422, { code: 'mfa_phone_enroll_not_enabled', message: 'MFA enroll is disabled for Phone' }],
    )
    const webauthn = await call(`${base}/factors`, { token, body: { factor_type: 'webauthn' } })
    t.same(
      [webauthn.status, webauthn.body],
      [422, { code: 'mfa_webauthn_enroll_not_enabled', message: 'MFA enroll is disabled for WebAuthn' }],
    )
    const notUuid = await call(`${base}/factors/abc/challenge`, { token, body: {} })
    t.same([notUuid.status, notUuid.body], [404, { code: 'validation_failed', message: 'factor_id must be an UUID' }])
    const unknown = await call(`${base}/factors/${crypto.randomUUID()}/verify`, { token, body: { code: '123456' } })
    t.same([unknown.status, unknown.body], [404, { code: 'mfa_factor_not_found', message: 'Factor not found' }])
    const f = await call(`${base}/factors`, { token, body: { factor_type: 'totp', friendly_name: 'x' } })
    t.equal(f.status, 200)
    t.match(f.body.totp.qr_code, /^<svg /, 'the server sends the SVG itself (auth-js makes the data URI)')
    const noCode = await call(`${base}/factors/${f.body.id}/verify`, {
      token,
      body: { challenge_id: crypto.randomUUID() },
    })
    t.same([noCode.status, noCode.body], [400, { code: 'validation_failed', message: 'Code needs to be non-empty' }])
    const noChallenge = await call(`${base}/factors/${f.body.id}/verify`, {
      token,
      body: { challenge_id: crypto.randomUUID(), code: '123456' },
    })
    t.same(
      [noChallenge.status, noChallenge.body],
      [422, { code: 'mfa_factor_not_found', message: 'MFA factor with the provided challenge ID not found' }],
    )

    // Anonymous users may not use MFA.
    const anon = h.client(a)
    t.error((await anon.signInAnonymously()).error)
    const anonEnroll = await anon.mfa.enroll({ factorType: 'totp' })
    t.same(
      [anonEnroll.error?.status, anonEnroll.error?.code, anonEnroll.error?.message],
      [403, 'no_authorization', 'Anonymous user not allowed to perform these actions'],
    )

    // The verify rate limit: GoTrue's burst of 30 per client IP (earlier subtests used a few), then 429.
    const statuses: number[] = []
    let limited: Awaited<ReturnType<typeof call>> | null = null
    for (let i = 0; i < 40 && !limited; i++) {
      const r = await call(`${base}/factors/${f.body.id}/verify`, {
        token,
        body: { challenge_id: crypto.randomUUID(), code: '123456' },
      })
      if (r.status === 429) limited = r
      else statuses.push(r.status)
    }
    t.ok(statuses.length >= 20 && statuses.length < 30, `${statuses.length} answers before the limit`)
    t.same([...new Set(statuses)], [422])
    t.same(
      [limited?.status, limited?.body],
      [429, { code: 'over_request_rate_limit', message: 'Request rate limit reached' }],
    )
  })

  t.test("phone and WebAuthn factors (stored by another server) answer GoTrue's disabled errors", async (t) => {
    // On the second database: the first one's MFA request budget is spent by the rate-limit test above.
    const c = h.client(off)
    t.error((await c.signUp({ email: email('mfaother'), password: 'secret123' })).error)
    const userId = (await c.getUser()).data.user!.id
    // Such factors cannot be enrolled here; they are written as GoTrue would have, through the engine's login.
    const db = new pg.Client({ connectionString: off.file.engines!.auth! })
    await db.connect()
    t.teardown(() => db.end())
    const ids = [crypto.randomUUID(), crypto.randomUUID()]
    await db.query(
      `INSERT INTO auth.mfa_factors (id, user_id, friendly_name, factor_type, status, created_at, updated_at, phone)
      VALUES ($1, $3, 'phone', 'phone', 'verified', now(), now(), '15555550100'), ($2, $3, 'key', 'webauthn', 'unverified', now(), now(), NULL)`,
      [...ids, userId],
    )
    const token = (await c.getSession()).data.session!.access_token
    const base = h.base(off)
    const expect = async (path: string, body: unknown, status: number, code: string, message: string) => {
      const r = await call(base + path, { token, body })
      t.same([r.status, r.body], [status, { code, message }], path)
    }
    await expect(
      `/factors/${ids[0]}/challenge`,
      {},
      422,
      'mfa_phone_verify_not_enabled',
      'MFA verification is disabled for Phone',
    )
    await expect(
      `/factors/${ids[0]}/verify`,
      { challenge_id: crypto.randomUUID(), code: '123456' },
      422,
      'mfa_phone_verify_not_enabled',
      'MFA verification is disabled for Phone',
    )
    await expect(
      `/factors/${ids[1]}/challenge`,
      {},
      422,
      'mfa_webauthn_verify_not_enabled',
      'MFA verification is disabled for WebAuthn',
    )
    await expect(
      `/factors/${ids[1]}/verify`,
      { challenge_id: crypto.randomUUID() },
      422,
      'mfa_webauthn_enroll_not_enabled',
      'MFA verification is disabled for WebAuthn',
    )
    const listed = await c.mfa.listFactors()
    t.same([listed.data?.phone.length, listed.data?.all.length], [1, 2])
  })

  t.test('a database with TOTP switched off', async (t) => {
    const c = h.client(off)
    t.error((await c.signUp({ email: email('mfaoff'), password: 'secret123' })).error)
    const en = await c.mfa.enroll({ factorType: 'totp' })
    t.same(
      [en.error?.status, en.error?.code, en.error?.message],
      [422, 'mfa_totp_enroll_not_enabled', 'MFA enroll is disabled for TOTP'],
    )
    h.setAuth(off, { mfa_totp_enroll: true })
    const f = await c.mfa.enroll({ factorType: 'totp' })
    t.error(f.error)
    h.setAuth(off, { mfa_totp_enroll: false })
    const ch = await c.mfa.challenge({ factorId: f.data!.id })
    t.same(
      [ch.error?.status, ch.error?.code, ch.error?.message],
      [422, 'mfa_totp_verify_not_enabled', 'MFA verification is disabled for TOTP'],
    )
    const v = await c.mfa.verify({ factorId: f.data!.id, challengeId: crypto.randomUUID(), code: '123456' })
    t.same(
      [v.error?.status, v.error?.code, v.error?.message],
      [422, 'mfa_totp_verify_not_enabled', 'MFA verification is disabled for TOTP'],
    )
  })
})

t.test('no query is sent to a transaction client still running another', async (t) => {
  t.same(busyClientWarnings, [])
})

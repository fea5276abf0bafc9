// Passkeys through auth-js (auth.passkey.*, experimental in supabase-js) with a software
// authenticator (test/helpers/webauthn-authenticator.ts): registration and sign-in ceremonies,
// list, rename, delete, the admin API, every refusal (challenge used, expired, wrong origin,
// unknown authenticator, another database's passkey, the limit, AAL2 with MFA), and the feature
// off by default (docs/auth-protocol.md §3.21).
import t from 'tap'
import * as OTPAuth from 'otpauth'
import { GoTrueAdminApi, GoTrueClient, AuthSessionMissingError } from '@supabase/auth-js'
import { startAuth, call, decodeJwt, email } from '../helpers/auth-harness.js'
import type { TestTenant } from '../helpers/tenants.js'
import { SoftAuthenticator } from '../helpers/webauthn-authenticator.js'

const RP = { rp_id: 'localhost', rp_display_name: 'Gatehouse tests', rp_origins: ['http://localhost:5173'] }
const ORIGIN = 'http://localhost:5173'
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/

t.test('passkeys', async (t) => {
  const h = await startAuth(t, {
    tenants: [
      { auth: { passkeys: true, webauthn: { ...RP, challenge_expiry_seconds: 300 } } },
      { auth: { passkeys: true, webauthn: { ...RP, challenge_expiry_seconds: 300 } } },
      {},
    ],
  })
  const [a, b, off] = h.list as [TestTenant, TestTenant, TestTenant]

  const passkeyClient = (x: TestTenant) => {
    const store = new Map<string, string>()
    return new GoTrueClient({
      url: h.base(x),
      autoRefreshToken: false,
      persistSession: true,
      detectSessionInUrl: false,
      storage: {
        getItem: (k: string) => store.get(k) ?? null,
        setItem: (k: string, v: string) => void store.set(k, v),
        removeItem: (k: string) => void store.delete(k),
      },
      experimental: { passkey: true },
    } as never)
  }
  const admin = async (x: TestTenant) =>
    new GoTrueAdminApi({
      url: h.base(x),
      headers: { Authorization: `Bearer ${await h.serviceToken(x)}` },
      experimental: { passkey: true },
    } as never)

  const owner = passkeyClient(a)
  const address = email('pk')
  const up = await owner.signUp({ email: address, password: 'secret123' })
  t.error(up.error)
  const userId = up.data.user!.id
  const device = new SoftAuthenticator({ rpId: 'localhost', origin: ORIGIN })
  let passkeyId = ''

  t.test('registration: options, then the authenticator answer creates the passkey', async (t) => {
    const opts = await owner.passkey.startRegistration()
    t.error(opts.error)
    const o = opts.data!
    t.match(o.challenge_id, UUID)
    t.ok(o.expires_at > Math.floor(h.clock.now().getTime() / 1000))
    t.equal(o.options.rp.id, 'localhost')
    t.equal(o.options.rp.name, 'Gatehouse tests')
    t.equal(Buffer.from(o.options.user.id, 'base64url').toString(), userId, 'the user handle is the user id')
    t.equal(o.options.user.name, address)
    t.ok(
      o.options.pubKeyCredParams.some((p: { alg: number }) => p.alg === -7),
      'ES256 offered',
    )
    t.equal(o.options.authenticatorSelection?.residentKey, 'required', 'discoverable credentials')
    t.equal(o.options.attestation, 'none')

    const made = await owner.passkey.verifyRegistration({
      challengeId: o.challenge_id,
      credential: device.create(o.options),
    })
    t.error(made.error)
    t.match(made.data!.id, UUID)
    t.match(made.data!.created_at, /^\d{4}-\d\d-\d\dT/)
    passkeyId = made.data!.id

    const listed = await owner.passkey.list()
    t.same(
      listed.data!.map((p) => p.id),
      [passkeyId],
    )
    t.notOk(listed.data![0]!.last_used_at, 'never used yet')
  })

  t.test('registration refusals', async (t) => {
    const noSession = await passkeyClient(a).passkey.startRegistration()
    t.ok(noSession.error instanceof AuthSessionMissingError)

    const token = (await owner.getSession()).data.session!.access_token
    const post = (path: string, body: unknown) => call(`${h.base(a)}/passkeys/registration/${path}`, { token, body })
    const opts = (await post('options', {})).body
    const answer = new SoftAuthenticator({ rpId: 'localhost', origin: ORIGIN }).create(opts.options)
    t.match((await post('verify', { credential: answer })).body, {
      code: 'validation_failed',
      message: 'challenge_id is required',
    })
    t.match((await post('verify', { challenge_id: opts.challenge_id })).body, { message: 'credential is required' })
    t.match((await post('verify', { challenge_id: 'nope', credential: answer })).body, {
      message: 'challenge_id must be a valid UUID',
    })
    const unknown = await post('verify', { challenge_id: '00000000-0000-0000-0000-000000000000', credential: answer })
    t.same([unknown.status, unknown.body.code], [400, 'webauthn_challenge_not_found'])
    const garbage = await post('verify', { challenge_id: opts.challenge_id, credential: { id: 'x' } })
    t.same(
      [garbage.status, garbage.body.code, garbage.body.message],
      [400, 'webauthn_verification_failed', 'Invalid credential response'],
    )
    const used = await post('verify', { challenge_id: opts.challenge_id, credential: answer })
    t.same(
      [used.status, used.body.code],
      [400, 'webauthn_challenge_not_found'],
      'a challenge is used once, even by a bad answer',
    )

    const o2 = (await post('options', {})).body
    const elsewhere = new SoftAuthenticator({ rpId: 'localhost', origin: 'https://evil.example' }).create(o2.options)
    const wrongOrigin = await post('verify', { challenge_id: o2.challenge_id, credential: elsewhere })
    t.same(
      [wrongOrigin.status, wrongOrigin.body.code, wrongOrigin.body.message],
      [400, 'webauthn_verification_failed', 'Credential verification failed'],
    )

    const o3 = (await post('options', {})).body
    h.clock.advance(301)
    const late = await post('verify', { challenge_id: o3.challenge_id, credential: device.create(o3.options) })
    t.same([late.status, late.body.code], [400, 'webauthn_challenge_expired'])
    h.clock.advance(-301)

    const o4 = (await post('options', {})).body
    t.same(
      o4.options.excludeCredentials.map((c: { id: string }) => c.id),
      [device.credentialId.toString('base64url')],
      "the user's passkeys are excluded",
    )
    const again = await post('verify', { challenge_id: o4.challenge_id, credential: device.create(o4.options) })
    t.same([again.status, again.body.code], [422, 'webauthn_credential_exists'])
    t.equal((await owner.passkey.list()).data!.length, 1, 'nothing was added')

    // An attestation statement is dropped, not checked (we ask for none): checking one would
    // fetch the CRL URLs its certificates name. A statement no check could pass registers.
    const o5 = (await post('options', {})).body
    const attested = new SoftAuthenticator({ rpId: 'localhost', origin: ORIGIN })
    const attStmt = new Map<string, unknown>([
      ['alg', -7],
      ['sig', Buffer.alloc(70, 1)],
      ['x5c', [Buffer.from('not a certificate with a CRL at http://169.254.169.254/')]],
    ])
    const withStatement = await post('verify', {
      challenge_id: o5.challenge_id,
      credential: attested.create(o5.options, { fmt: 'android-key', attStmt }),
    })
    t.equal(withStatement.status, 200, JSON.stringify(withStatement.body))
    t.error((await owner.passkey.delete({ passkeyId: withStatement.body.id })).error)

    h.setAuth(a, { max_passkeys_per_user: 1 })
    const full = await post('options', {})
    t.same(
      [full.status, full.body.code, full.body.message],
      [422, 'too_many_passkeys', 'Maximum number of passkeys reached'],
    )
    h.setAuth(a, { max_passkeys_per_user: 10 })
  })

  t.test('sign-in: discoverable, one use per challenge, a session with AMR passkey', async (t) => {
    const c = passkeyClient(a)
    const opts = await c.passkey.startAuthentication()
    t.error(opts.error)
    t.match(opts.data!.challenge_id, UUID)
    t.same(opts.data!.options.allowCredentials ?? [], [], 'no credential named')
    t.equal(opts.data!.options.rpId, 'localhost')
    const assertion = device.get(opts.data!.options)
    const signed = await c.passkey.verifyAuthentication({ challengeId: opts.data!.challenge_id, credential: assertion })
    t.error(signed.error)
    t.equal(signed.data!.user!.id, userId)
    const claims = decodeJwt(signed.data!.session!.access_token)
    t.same(
      claims.amr.map((x: { method: string }) => x.method),
      ['passkey'],
    )
    t.equal((await c.getUser()).data.user?.id, userId, 'the session works')
    t.ok((await owner.passkey.list()).data![0]!.last_used_at, 'the sign-in is recorded')

    const replay = await c.passkey.verifyAuthentication({ challengeId: opts.data!.challenge_id, credential: assertion })
    t.equal((replay.error as { code?: string }).code, 'webauthn_challenge_not_found')

    // An authenticator bound to the user's handle but never registered.
    const stranger = new SoftAuthenticator({ rpId: 'localhost', origin: ORIGIN })
    stranger.create((await owner.passkey.startRegistration()).data!.options)
    const o2 = (await c.passkey.startAuthentication()).data!
    const forged = await c.passkey.verifyAuthentication({
      challengeId: o2.challenge_id,
      credential: stranger.get(o2.options),
    })
    t.equal((forged.error as { code?: string }).code, 'webauthn_verification_failed')

    // Database b knows neither the user nor the passkey of database a.
    const cb = passkeyClient(b)
    const ob = (await cb.passkey.startAuthentication()).data!
    const cross = await cb.passkey.verifyAuthentication({
      challengeId: ob.challenge_id,
      credential: device.get(ob.options),
    })
    t.equal((cross.error as { code?: string }).code, 'webauthn_verification_failed')
    t.equal((await cb.getSession()).data.session, null)

    // A challenge of database a is not one of database b.
    const oa = (await c.passkey.startAuthentication()).data!
    const moved = await cb.passkey.verifyAuthentication({
      challengeId: oa.challenge_id,
      credential: device.get(oa.options),
    })
    t.equal((moved.error as { code?: string }).code, 'webauthn_challenge_not_found')
  })

  t.test('rename, and the admin API', async (t) => {
    const renamed = await owner.passkey.update({ passkeyId, friendlyName: 'laptop' })
    t.error(renamed.error)
    t.equal(renamed.data!.friendly_name, 'laptop')
    t.equal((await owner.passkey.list()).data![0]!.friendly_name, 'laptop')
    const missing = await owner.passkey.update({ passkeyId: '00000000-0000-0000-0000-000000000000', friendlyName: 'x' })
    t.equal((missing.error as { status?: number }).status, 404)
    const long = await owner.passkey.update({ passkeyId, friendlyName: 'x'.repeat(121) })
    t.equal(long.error?.message, 'friendly_name must be 120 characters or less')

    const api = await admin(a)
    const listed = await api.passkey.listPasskeys({ userId })
    t.error(listed.error)
    t.same(
      listed.data!.map((p) => p.id),
      [passkeyId],
    )
    const second = new SoftAuthenticator({ rpId: 'localhost', origin: ORIGIN })
    const o = (await owner.passkey.startRegistration()).data!
    const made = await owner.passkey.verifyRegistration({
      challengeId: o.challenge_id,
      credential: second.create(o.options),
    })
    t.error(made.error)
    t.error((await api.passkey.deletePasskey({ userId, passkeyId: made.data!.id })).error)
    t.same(
      (await api.passkey.listPasskeys({ userId })).data!.map((p) => p.id),
      [passkeyId],
    )
    const gone = await api.passkey.deletePasskey({ userId, passkeyId: made.data!.id })
    t.equal((gone.error as { status?: number }).status, 404)
    const noUser = await api.passkey.listPasskeys({ userId: '00000000-0000-0000-0000-000000000000' })
    t.equal((noUser.error as { code?: string }).code, 'user_not_found')
  })

  t.test('with a verified MFA factor, managing passkeys needs aal2', async (t) => {
    const c = passkeyClient(a)
    const who = { email: email('mfa'), password: 'secret123' }
    t.error((await c.signUp(who)).error)
    const factor = (await c.mfa.enroll({ factorType: 'totp' })).data!
    const totp = new OTPAuth.TOTP({ secret: OTPAuth.Secret.fromBase32(factor.totp.secret), digits: 6, period: 30 })
    const ch = (await c.mfa.challenge({ factorId: factor.id })).data!
    const code = totp.generate({ timestamp: h.clock.now().getTime() })
    t.error((await c.mfa.verify({ factorId: factor.id, challengeId: ch.id, code })).error)
    t.error((await c.passkey.startRegistration()).error, 'aal2: allowed')
    t.error((await c.signInWithPassword(who)).error)
    const aal1 = await c.passkey.startRegistration()
    t.same(
      [(aal1.error as { status?: number }).status, (aal1.error as { code?: string }).code],
      [403, 'insufficient_aal'],
    )
  })

  t.test('delete: the passkey no longer signs in', async (t) => {
    t.error((await owner.passkey.delete({ passkeyId })).error)
    t.same((await owner.passkey.list()).data, [])
    const c = passkeyClient(a)
    const o = (await c.passkey.startAuthentication()).data!
    const after = await c.passkey.verifyAuthentication({
      challengeId: o.challenge_id,
      credential: device.get(o.options),
    })
    t.equal((after.error as { code?: string }).code, 'webauthn_verification_failed')
  })

  t.test("off by default: GoTrue's passkey_disabled, and /settings says so", async (t) => {
    const r = await call(`${h.base(off)}/passkeys/authentication/options`, { body: {} })
    t.same([r.status, r.body.code, r.body.message], [404, 'passkey_disabled', 'Passkeys are disabled'])
    t.equal((await call(`${h.base(off)}/settings`)).body.passkeys_enabled, false)
    t.equal((await call(`${h.base(a)}/settings`)).body.passkeys_enabled, true)
  })
})

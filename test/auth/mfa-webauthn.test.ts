// WebAuthn MFA factors (docs/auth-protocol.md §3.19): enrol through auth-js (mfa.enroll with
// factorType webauthn), the first challenge is a registration ceremony whose answer verifies the
// factor and raises the session to aal2 (AMR mfa/webauthn), later challenges are authentication
// ceremonies with the factor's credential; every refusal of the verify body; the switches off
// by default. The ceremonies are run by our software authenticator over raw HTTP, since auth-js
// turns the options into browser ArrayBuffers.
import t from 'tap'
import { startAuth, call, decodeJwt, email } from '../helpers/auth-harness.js'
import type { TestTenant } from '../helpers/tenants.js'
import { SoftAuthenticator } from '../helpers/webauthn-authenticator.js'

const RP = { rp_id: 'localhost', rp_display_name: 'Gatehouse tests', rp_origins: ['http://localhost:5173'] }
const ORIGIN = 'http://localhost:5173'

t.test('WebAuthn factors', async (t) => {
  const h = await startAuth(t, {
    tenants: [
      {
        auth: {
          mfa_webauthn_enroll: true,
          mfa_webauthn_verify: true,
          webauthn: { ...RP, challenge_expiry_seconds: 300 },
        },
      },
      {},
    ],
  })
  const [a, off] = h.list as [TestTenant, TestTenant]
  const c = h.client(a)
  const who = { email: email('wa'), password: 'secret123' }
  t.error((await c.signUp(who)).error)
  const token = async () => (await c.getSession()).data.session!.access_token
  const post = async (path: string, body: unknown) => call(`${h.base(a)}${path}`, { token: await token(), body })
  const device = new SoftAuthenticator({ rpId: 'localhost', origin: ORIGIN })
  let factorId = ''

  t.test('enrol, then the registration ceremony verifies the factor', async (t) => {
    const empty = await c.mfa.enroll({ factorType: 'webauthn', friendlyName: '' } as never)
    t.error(empty.error, 'an empty friendly name is allowed')
    t.error((await c.mfa.unenroll({ factorId: (empty.data as { id: string }).id })).error)
    const en = await c.mfa.enroll({ factorType: 'webauthn', friendlyName: 'yubikey' } as never)
    t.error(en.error)
    const f = en.data as unknown as { id: string; type: string; friendly_name: string }
    t.same([f.type, f.friendly_name], ['webauthn', 'yubikey'])
    factorId = f.id
    const listed = await c.mfa.listFactors()
    t.same(
      listed.data!.all.map((x) => [x.factor_type, x.status]),
      [['webauthn', 'unverified']],
    )

    const ch = await post(`/factors/${factorId}/challenge`, {})
    t.equal(ch.status, 200)
    t.equal(ch.body.type, 'webauthn')
    t.equal(ch.body.webauthn.type, 'create')
    const options = ch.body.webauthn.credential_options.publicKey
    t.equal(options.rp.id, 'localhost')
    t.ok(ch.body.expires_at > Math.floor(h.clock.now().getTime() / 1000))

    const bad = [
      [{}, 'WebAuthn config required'],
      [{ webauthn: { type: 'sign' } }, 'WebAuthn type must be create or request'],
      [{ webauthn: { type: 'create' } }, 'credential_response required'],
      [{ webauthn: { type: 'create', credential_response: { id: 'x' } } }, 'Invalid credential_response'],
    ] as const
    for (const [body, message] of bad) {
      const r = await post(`/factors/${factorId}/verify`, { challenge_id: ch.body.id, ...body })
      t.same([r.status, r.body.code, r.body.message], [400, 'validation_failed', message])
    }
    const wrongOrigin = new SoftAuthenticator({ rpId: 'localhost', origin: 'https://evil.example' })
    const refused = await post(`/factors/${factorId}/verify`, {
      challenge_id: ch.body.id,
      webauthn: { type: 'create', credential_response: wrongOrigin.create(options) },
    })
    t.same([refused.status, refused.body.code], [400, 'webauthn_verification_failed'])

    const ok = await post(`/factors/${factorId}/verify`, {
      challenge_id: ch.body.id,
      webauthn: { type: 'create', credential_response: device.create(options) },
    })
    t.equal(ok.status, 200, JSON.stringify(ok.body))
    const claims = decodeJwt(ok.body.access_token)
    t.equal(claims.aal, 'aal2')
    t.same(claims.amr.map((x: { method: string }) => x.method).sort(), ['mfa/webauthn', 'password'])
    const again = await post(`/factors/${factorId}/verify`, {
      challenge_id: ch.body.id,
      webauthn: { type: 'create', credential_response: device.create(options) },
    })
    t.equal(again.status, 422, 'a challenge verifies once')
    await c.setSession({ access_token: ok.body.access_token, refresh_token: ok.body.refresh_token })
    t.same(
      (await c.mfa.listFactors()).data!.all.map((x) => [x.factor_type, x.status]),
      [['webauthn', 'verified']],
    )
  })

  t.test('a verified factor: the authentication ceremony with its credential', async (t) => {
    t.error((await c.signInWithPassword(who)).error)
    t.equal(decodeJwt(await token()).aal, 'aal1')
    const ch = await post(`/factors/${factorId}/challenge`, {})
    t.equal(ch.body.webauthn.type, 'request')
    const options = ch.body.webauthn.credential_options.publicKey
    t.same(
      options.allowCredentials.map((x: { id: string }) => x.id),
      [device.credentialId.toString('base64url')],
    )
    const createAnswer = await post(`/factors/${factorId}/verify`, {
      challenge_id: ch.body.id,
      webauthn: {
        type: 'create',
        credential_response: new SoftAuthenticator({ rpId: 'localhost', origin: ORIGIN }).create({
          challenge: options.challenge,
          rp: { id: 'localhost' },
          user: { id: 'eA' },
        }),
      },
    })
    t.same(
      [createAnswer.status, createAnswer.body.code],
      [400, 'webauthn_verification_failed'],
      'a create answer to a request',
    )

    const ch2 = await post(`/factors/${factorId}/challenge`, {})
    const stranger = new SoftAuthenticator({ rpId: 'localhost', origin: ORIGIN })
    stranger.create({ challenge: 'AA', rp: { id: 'localhost' }, user: { id: 'eA' } })
    const forged = await post(`/factors/${factorId}/verify`, {
      challenge_id: ch2.body.id,
      webauthn: { type: 'request', credential_response: stranger.get(ch2.body.webauthn.credential_options.publicKey) },
    })
    t.same([forged.status, forged.body.code], [400, 'webauthn_verification_failed'], 'another authenticator')

    const ch3 = await post(`/factors/${factorId}/challenge`, {})
    const ok = await post(`/factors/${factorId}/verify`, {
      challenge_id: ch3.body.id,
      webauthn: { type: 'request', credential_response: device.get(ch3.body.webauthn.credential_options.publicKey) },
    })
    t.equal(ok.status, 200, JSON.stringify(ok.body))
    t.equal(decodeJwt(ok.body.access_token).aal, 'aal2')
    await c.setSession({ access_token: ok.body.access_token, refresh_token: ok.body.refresh_token })
    t.error((await c.mfa.unenroll({ factorId })).error, 'aal2 unenrols it')
    t.same((await c.mfa.listFactors()).data!.all, [])
  })

  t.test("off by default: GoTrue's errors", async (t) => {
    const other = h.client(off)
    t.error((await other.signUp({ email: email('off'), password: 'secret123' })).error)
    const en = await other.mfa.enroll({ factorType: 'webauthn', friendlyName: 'k' } as never)
    t.same([en.error?.status, en.error?.code], [422, 'mfa_webauthn_enroll_not_enabled'])
  })
})

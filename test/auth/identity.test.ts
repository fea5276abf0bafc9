// The in-process sign-in through an external identity (the panel exchange's entry point,
// and the code path of external provider callbacks): first call creates the user, repeated
// and concurrent calls find the same one, a verified email links to the existing user.
import t from 'tap'
import { randomUUID } from 'node:crypto'
import { createAuthService, findOrCreateUserByIdentity } from '../../src/auth/index.js'
import { startAuth, call, email, decodeJwt } from '../helpers/auth-harness.js'
import { adminQuery } from '../helpers/db.js'

t.test('identity sign-in', async (t) => {
  const h = await startAuth(t, { tenants: [{}, { auth: { signup_enabled: false } }] })
  const [a, closed] = h.list as [(typeof h.list)[0], (typeof h.list)[0]]
  const service = createAuthService({ config: h.config, now: h.clock.now })
  t.teardown(() => service.close())

  t.test('creates once, then finds the same user', async (t) => {
    const e = email('panel')
    const subject = randomUUID()
    const first = await service.findOrCreateUserByIdentity({
      tenant: a.tenant,
      provider: 'panel',
      providerId: subject,
      email: e,
      emailVerified: true,
      identityData: { name: 'Pat' },
    })
    t.equal(first.user.email, e)
    t.match(first.user.app_metadata, { provider: 'panel', providers: ['panel'] })
    t.match(first.user.user_metadata, { name: 'Pat', email: e, email_verified: true })
    t.ok(first.user.email_confirmed_at)
    t.equal(first.session.token_type, 'bearer')
    t.equal(first.session.expires_in, 3600)
    const claims = decodeJwt(first.session.access_token)
    t.match(claims, { sub: first.user.id, role: 'authenticated', aud: 'authenticated', email: e })
    t.equal(claims.amr[0].method, 'oauth')
    t.equal(claims.iss, `http://gatehouse.test/${a.database}/auth/v1`)
    // The session is a real one: the engine accepts it, refresh works.
    t.equal((await call(h.base(a) + '/user', { token: first.session.access_token })).body.id, first.user.id)
    t.equal(
      (
        await call(h.base(a) + '/token?grant_type=refresh_token', {
          body: { refresh_token: first.session.refresh_token },
        })
      ).status,
      200,
    )

    const again = await service.findOrCreateUserByIdentity({
      tenant: a.tenant,
      provider: 'panel',
      providerId: subject,
      email: e,
      emailVerified: true,
      identityData: { name: 'Pat Q' },
    })
    t.equal(again.user.id, first.user.id, 'the same user')
    t.not(again.session.refresh_token, first.session.refresh_token, 'a new session')
    t.equal(again.user.user_metadata.name, 'Pat Q', 'identity data refreshed')
    const ids = await adminQuery<{ n: number }>(
      "SELECT count(*)::int AS n FROM auth.identities WHERE provider = 'panel' AND provider_id = $1",
      [subject],
      a.database,
    )
    t.equal(ids.rows[0]?.n, 1)
    // The plain function (panel's entry point) lands on the same user too.
    const viaFn = await findOrCreateUserByIdentity({
      config: h.config,
      tenant: a.tenant,
      provider: 'panel',
      providerId: subject,
      email: e,
      emailVerified: true,
    })
    t.equal(viaFn.user.id, first.user.id)
  })

  t.test('concurrent first calls make one user', async (t) => {
    const e = email('race')
    const subject = randomUUID()
    const results = await Promise.all(
      Array.from({ length: 8 }, () =>
        service.findOrCreateUserByIdentity({
          tenant: a.tenant,
          provider: 'panel',
          providerId: subject,
          email: e,
          emailVerified: true,
        }),
      ),
    )
    t.equal(new Set(results.map((r) => r.user.id)).size, 1)
    const users = await adminQuery<{ n: number }>(
      'SELECT count(*)::int AS n FROM auth.users WHERE email = $1',
      [e],
      a.database,
    )
    t.equal(users.rows[0]?.n, 1)
  })

  t.test('a verified email links to the existing password user', async (t) => {
    const e = email('linked')
    const signed = await h.client(a).signUp({ email: e, password: 'secret123' })
    t.error(signed.error)
    const r = await service.findOrCreateUserByIdentity({
      tenant: a.tenant,
      provider: 'panel',
      providerId: randomUUID(),
      email: e.toUpperCase(),
      emailVerified: true,
    })
    t.equal(r.user.id, signed.data.user?.id)
    t.same(r.user.app_metadata.providers, ['email', 'panel'])
    t.equal((r.user.identities as unknown[]).length, 2)
    t.error(
      (await h.client(a).signInWithPassword({ email: e, password: 'secret123' })).error,
      'the password still works',
    )
  })

  t.test('an unverified email never links', async (t) => {
    const e = email('unverified')
    const signed = await h.client(a).signUp({ email: e, password: 'secret123' })
    const r = await service.findOrCreateUserByIdentity({
      tenant: a.tenant,
      provider: 'github',
      providerId: '12345-' + randomUUID(),
      email: e,
      emailVerified: false,
    })
    t.not(r.user.id, signed.data.user?.id, 'a separate user')
    t.equal(r.user.email, '', 'without the address another user holds')
  })

  t.test('sign-ups disabled: an existing identity signs in, a new one is refused', async (t) => {
    await t.rejects(
      service.findOrCreateUserByIdentity({
        tenant: closed.tenant,
        provider: 'panel',
        providerId: randomUUID(),
        email: email('x'),
        emailVerified: true,
      }),
      { code: 'signup_disabled', status: 422 },
    )
  })
})

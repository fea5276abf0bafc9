// Error texts of the auth engine that differ from GoTrue's were brought in line with
// supabase/auth (internal/api): each answer here is what GoTrue sends, as auth-js reads it.
import t from 'tap'
import { GoTrueAdminApi } from '@supabase/auth-js'
import { SignJWT } from 'jose'
import { startAuth, call } from '../helpers/auth-harness.js'
import { tenantIssuer } from '../../src/tenants/index.js'

t.test('GoTrue texts', async (t) => {
  const h = await startAuth(t)
  const [a] = h.list as [(typeof h.list)[0]]
  const admin = new GoTrueAdminApi({ url: h.base(a), headers: { Authorization: `Bearer ${await h.serviceToken(a)}` } })

  t.test('admin create without email or phone: GoTrue adminUserCreate', async (t) => {
    const r = await admin.createUser({ password: 'secret123' })
    t.equal(r.error?.status, 400)
    t.equal(r.error?.code, 'validation_failed')
    t.equal(r.error?.message, 'Cannot create a user without either an email or phone')
  })

  t.test('a bearer token whose sub is not a UUID: 400 bad_jwt (GoTrue requireAuthentication)', async (t) => {
    const token = await new SignJWT({ role: 'authenticated' })
      .setProtectedHeader({ alg: 'HS256' })
      .setSubject('not-a-uuid')
      .setIssuer(tenantIssuer(a.tenant, 'http://gatehouse.test'))
      .setExpirationTime('5m')
      .sign(new TextEncoder().encode(a.file.jwt.secret))
    const r = await call(h.base(a) + '/user', { token })
    t.same([r.status, r.body], [400, { code: 'bad_jwt', message: 'invalid claim: sub claim must be a UUID' }])
    const noSub = await new SignJWT({ role: 'authenticated' })
      .setProtectedHeader({ alg: 'HS256' })
      .setIssuer(tenantIssuer(a.tenant, 'http://gatehouse.test'))
      .setExpirationTime('5m')
      .sign(new TextEncoder().encode(a.file.jwt.secret))
    const m = await call(h.base(a) + '/user', { token: noSub })
    t.same([m.status, m.body], [403, { code: 'bad_jwt', message: 'invalid claim: missing sub claim' }])
  })
})

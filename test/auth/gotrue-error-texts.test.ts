// Error texts of the auth engine that differ from GoTrue's were brought in line with
// supabase/auth (internal/api): each answer here is what GoTrue sends, as auth-js reads it.
import t from 'tap'
import { GoTrueAdminApi } from '@supabase/auth-js'
import { startAuth } from '../helpers/auth-harness.js'

t.test('GoTrue texts', async (t) => {
  const h = await startAuth(t)
  const [a] = h.list as [typeof h.list[0]]
  const admin = new GoTrueAdminApi({ url: h.base(a), headers: { Authorization: `Bearer ${await h.serviceToken(a)}` } })

  t.test('admin create without email or phone: GoTrue adminUserCreate', async (t) => {
    const r = await admin.createUser({ password: 'secret123' })
    t.equal(r.error?.status, 400)
    t.equal(r.error?.code, 'validation_failed')
    t.equal(r.error?.message, 'Cannot create a user without either an email or phone')
  })
})

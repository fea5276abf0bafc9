// Failures a client must see as clean GoTrue errors (never a stack, never SQL): the tenant
// database unreachable, the SMTP server down (the sign-up is rolled back), an over-large
// body. And per-tenant mail: the tenant's own SMTP server, sender and templates.
import t from 'tap'
import { AuthRetryableFetchError } from '@supabase/auth-js'
import { startAuth, call, email } from '../helpers/auth-harness.js'

t.test('errors and per-tenant mail', async (t) => {
  const h = await startAuth(t, { tenants: [{}, { auth: { mail_confirmation: true } }] })
  const [a, confirm] = h.list as [(typeof h.list)[0], (typeof h.list)[0]]

  t.test('the tenant database unreachable: 503 database_unavailable, nothing internal', async (t) => {
    h.setTenant(a, { engines: { ...a.tenant.engines, auth: 'postgres://nobody:secret@127.0.0.1:1/nowhere' } })
    t.teardown(() => h.setTenant(a, { engines: a.tenant.engines }))
    const legacy = await call(h.base(a) + '/signup', {
      body: { email: email(), password: 'secret123' },
      apiVersion: null,
    })
    t.equal(legacy.status, 503)
    t.same(Object.keys(legacy.body).sort(), ['code', 'error_code', 'error_id', 'msg'])
    t.match(legacy.body, { code: 503, error_code: 'database_unavailable' })
    t.ok(legacy.body.error_id, 'a request id to find the log line')
    const v2024 = await call(h.base(a) + '/token?grant_type=password', {
      body: { email: email(), password: 'secret123' },
    })
    t.same([v2024.status, v2024.body.code], [503, 'database_unavailable'])
    for (const r of [legacy, v2024])
      t.notMatch(JSON.stringify(r.body), /ECONNREFUSED|postgres|nobody|nowhere|\.ts:|secret/)
    const viaClient = await h.client(a).signInWithPassword({ email: email(), password: 'secret123' })
    t.ok(viaClient.error instanceof AuthRetryableFetchError, 'auth-js may retry a 503')
  })

  t.test('SMTP down: 500, and the sign-up is rolled back', async (t) => {
    h.setAuth(confirm, { smtp: { host: '127.0.0.1', port: 1, sender: 'no-reply@gatehouse.local' } })
    const e = email('smtpdown')
    const r = await call(h.base(confirm) + '/signup', { body: { email: e, password: 'secret123' } })
    t.same([r.status, r.body], [500, { code: 'unexpected_failure', message: 'Error sending confirmation email' }])
    h.setAuth(confirm, { smtp: undefined })
    const again = await h.client(confirm).signUp({ email: e, password: 'secret123' })
    t.error(again.error)
    t.equal(again.data.user?.identities?.length, 1, 'a real new user, not the obfuscated one')
    await h.mail.waitForMail(e)
  })

  t.test('request body over 1 MiB: 413', async (t) => {
    const r = await call(h.base(a) + '/signup', {
      body: { email: email(), password: 'secret123', data: { blob: 'x'.repeat(1_100_000) } },
    })
    t.same([r.status, r.body.code], [413, 'request_entity_too_large'])
  })

  t.test("the tenant's own SMTP server, sender and templates", async (t) => {
    h.setAuth(confirm, {
      site_url: 'https://acme.example',
      smtp: { host: h.mail.host, port: h.mail.port, sender: 'hello@acme.example', sender_name: 'Acme Inc' },
      mail_templates: {
        confirmation: {
          subject: 'Welcome to {{ .SiteURL }}',
          html: '<p>Hi {{ .Data.name }}</p><a href="{{ .ConfirmationURL }}">Confirm</a> <b>{{ .Token }}</b>',
        },
      },
    })
    t.teardown(() =>
      h.setAuth(confirm, { smtp: undefined, mail_templates: undefined, site_url: 'http://localhost:3000' }),
    )
    const e = email('tpl')
    t.error(
      (await h.client(confirm).signUp({ email: e, password: 'secret123', options: { data: { name: '<Ada>' } } })).error,
    )
    const m = await h.mail.waitForMail(e)
    t.equal(m.subject, 'Welcome to https://acme.example')
    t.equal(m.from, 'hello@acme.example')
    t.match(m.headers.from, /Acme Inc/)
    t.match(m.html, '<p>Hi &lt;Ada&gt;</p>', 'values are HTML-escaped')
    t.match(m.html, /<b>\d{6}<\/b>/)
    const link = m.links.find((l) => l.includes('/verify?'))!
    t.equal(new URL(link).searchParams.get('type'), 'signup')
    t.match(m.text, 'Confirm your signup', 'the default text part stays')
    const res = await fetch(h.engineLink(confirm, link), { redirect: 'manual' })
    t.equal(new URL(res.headers.get('location')!).origin, 'https://acme.example')
  })
})

// The OAuth 2.1 server's clients (docs/auth-protocol.md §3.22) through auth-js's admin API
// (auth.admin.oauth.*) and plain HTTP: registration with GoTrue's defaults and checks, the secret
// shown once and stored hashed, listing with pagination, partial updates, secret regeneration,
// soft delete, dynamic registration when allowed, GoTrue's 404 feature_disabled while the
// server is off, and one database's clients invisible from another.
import { createHash } from 'node:crypto'
import t from 'tap'
import { GoTrueAdminApi } from '@supabase/auth-js'
import { startAuth, call } from '../helpers/auth-harness.js'
import { adminQuery } from '../helpers/db.js'
import type { TestTenant } from '../helpers/tenants.js'

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/

t.test('OAuth clients', async (t) => {
  const h = await startAuth(t, {
    tenants: [
      { auth: { oauth_server: { enabled: true, allow_dynamic_registration: true } } as never },
      { auth: { oauth_server: { enabled: true } } as never },
      {},
    ],
  })
  const [a, b, off] = h.list as [TestTenant, TestTenant, TestTenant]
  const admin = async (x: TestTenant) =>
    new GoTrueAdminApi({ url: h.base(x), headers: { Authorization: `Bearer ${await h.serviceToken(x)}` } })
  const adminA = await admin(a)

  t.test('create: GoTrue defaults, the secret once, stored as its SHA-256', async (t) => {
    const made = await adminA.oauth.createClient({
      client_name: 'Minimal',
      redirect_uris: ['https://app.example.com/cb', 'http://localhost:3000/cb', 'myapp://callback'],
    })
    t.error(made.error)
    const c = made.data!
    t.match(c.client_id, UUID)
    t.match(c.client_secret, /^[A-Za-z0-9_-]{43}$/)
    t.equal(c.client_type, 'confidential')
    t.equal(c.token_endpoint_auth_method, 'client_secret_basic')
    t.same(c.grant_types, ['authorization_code', 'refresh_token'])
    t.same(c.response_types, ['code'])
    t.same(c.redirect_uris, ['https://app.example.com/cb', 'http://localhost:3000/cb', 'myapp://callback'])
    t.equal(c.registration_type, 'manual')
    const row = await adminQuery<any>(
      'SELECT client_secret_hash FROM auth.oauth_clients WHERE id = $1',
      [c.client_id],
      a.database,
    )
    t.equal(
      row.rows[0].client_secret_hash,
      createHash('sha256').update(c.client_secret!).digest('base64url'),
      'only the hash is stored',
    )
    const got = await adminA.oauth.getClient(c.client_id)
    t.error(got.error)
    t.equal(got.data!.client_id, c.client_id)
    t.notOk('client_secret' in got.data!, 'never shown again')
  })

  t.test('create: a public client has no secret; type and method must agree', async (t) => {
    const pub = await adminA.oauth.createClient({
      client_name: 'SPA',
      redirect_uris: ['https://spa.example.com/cb'],
      token_endpoint_auth_method: 'none',
    } as never)
    t.error(pub.error)
    t.equal(pub.data!.client_type, 'public')
    t.notOk('client_secret' in pub.data!)
    const regen = await adminA.oauth.regenerateClientSecret(pub.data!.client_id)
    t.equal(regen.error?.message, 'Cannot regenerate secret for public client')
    const bad = await adminA.oauth.createClient({
      client_name: 'x',
      redirect_uris: ['https://x.example.com/cb'],
      client_type: 'public',
      token_endpoint_auth_method: 'client_secret_post',
    } as never)
    t.equal(bad.error?.code, 'validation_failed')
    t.match(bad.error?.message, /inconsistent with token_endpoint_auth_method/)
  })

  t.test("refusals: GoTrue's validation_failed messages", async (t) => {
    const cases: Array<[Record<string, unknown>, string | RegExp]> = [
      [{ redirect_uris: [] }, 'redirect_uris is required'],
      [{}, 'redirect_uris is required'],
      [{ redirect_uris: ['http://app.example.com/cb'] }, /HTTP scheme only allowed for localhost/],
      [{ redirect_uris: ['javascript://x/alert(1)'] }, /not allowed for security reasons/],
      [{ redirect_uris: ['https://app.example.com/cb#x'] }, /fragment not allowed/],
      [{ redirect_uris: ['/relative'] }, /must have scheme and host/],
      [{ redirect_uris: [`https://e.com/${'x'.repeat(2048)}`] }, /at most 2048 characters/],
      [{ redirect_uris: Array.from({ length: 11 }, (_, i) => `https://e.com/${i}`) }, /cannot exceed 10 items/],
      [{ redirect_uris: ['https://e.com/cb'], grant_types: ['password'] }, /grant_types must only contain/],
      [{ redirect_uris: ['https://e.com/cb'], client_type: 'other' }, /client_type must be/],
      [{ redirect_uris: ['https://e.com/cb'], logo_uri: 'not a url' }, 'logo_uri must be a valid URL'],
      [{ redirect_uris: ['https://e.com/cb'], client_name: 'x'.repeat(1025) }, /client_name cannot exceed 1024/],
    ]
    for (const [body, message] of cases) {
      const r = await call(h.base(a) + '/admin/oauth/clients', { body, token: await h.serviceToken(a) })
      t.equal(r.status, 400, JSON.stringify(body).slice(0, 80))
      t.equal(r.body.code, 'validation_failed')
      t.match(r.body.msg ?? r.body.message, message)
    }
    const wrongType = await call(h.base(a) + '/admin/oauth/clients', {
      body: { redirect_uris: 'https://e.com/cb' },
      token: await h.serviceToken(a),
    })
    t.equal(wrongType.status, 400)
    t.equal(wrongType.body.code, 'bad_json')
    const count = await adminQuery<any>(
      'SELECT count(*)::int AS n FROM auth.oauth_clients WHERE client_name = $1',
      ['x'.repeat(1025)],
      a.database,
    )
    t.equal(count.rows[0].n, 0, 'nothing written')
  })

  t.test('list with pagination, update, regenerate, delete', async (t) => {
    const ids: string[] = []
    for (let i = 0; i < 3; i++) {
      const r = await adminA.oauth.createClient({ client_name: `L${i}`, redirect_uris: ['https://l.example.com/cb'] })
      t.error(r.error)
      ids.push(r.data!.client_id)
    }
    const all = await adminA.oauth.listClients()
    t.error(all.error)
    for (const id of ids) t.ok(all.data.clients.some((c) => c.client_id === id))
    const page = await call(h.base(a) + '/admin/oauth/clients?page=2&per_page=2', { token: await h.serviceToken(a) })
    t.equal(page.status, 200)
    t.equal(page.body.clients.length, 2)
    t.equal(page.headers.get('x-total-count'), String(all.data.clients.length))
    t.match(page.headers.get('link'), /page=\d+&per_page=2>; rel="last"/)
    const viaJs = await adminA.oauth.listClients({ page: 1, perPage: 2 })
    t.error(viaJs.error)
    t.equal(viaJs.data.clients.length, 2)
    const badPage = await call(h.base(a) + '/admin/oauth/clients?page=x', { token: await h.serviceToken(a) })
    t.equal(badPage.status, 400)

    const upd = await adminA.oauth.updateClient(ids[0]!, { logo_uri: 'https://l.example.com/logo.png' })
    t.error(upd.error)
    t.equal(upd.data!.logo_uri, 'https://l.example.com/logo.png')
    t.equal(upd.data!.client_name, 'L0', 'fields not sent are kept')
    const empty = await adminA.oauth.updateClient(ids[0]!, {})
    t.equal(empty.error?.message, 'No fields provided for update')
    const badMethod = await adminA.oauth.updateClient(ids[0]!, { token_endpoint_auth_method: 'none' } as never)
    t.match(badMethod.error?.message, /is not valid for client_type 'confidential'/)

    const before = await adminQuery<any>(
      'SELECT client_secret_hash FROM auth.oauth_clients WHERE id = $1',
      [ids[1]],
      a.database,
    )
    const regen = await adminA.oauth.regenerateClientSecret(ids[1]!)
    t.error(regen.error)
    t.match(regen.data!.client_secret, /^[A-Za-z0-9_-]{43}$/)
    const after = await adminQuery<any>(
      'SELECT client_secret_hash FROM auth.oauth_clients WHERE id = $1',
      [ids[1]],
      a.database,
    )
    t.not(after.rows[0].client_secret_hash, before.rows[0].client_secret_hash)

    const del = await adminA.oauth.deleteClient(ids[2]!)
    t.error(del.error)
    const gone = await adminA.oauth.getClient(ids[2]!)
    t.equal(gone.error?.status, 404)
    t.equal(gone.error?.code, 'oauth_client_not_found')
    t.equal((await adminA.oauth.deleteClient(ids[2]!)).error?.code, 'oauth_client_not_found')
    const kept = await adminQuery<any>('SELECT deleted_at FROM auth.oauth_clients WHERE id = $1', [ids[2]], a.database)
    t.ok(kept.rows[0].deleted_at, 'soft-deleted as GoTrue does')
    const malformed = await call(h.base(a) + '/admin/oauth/clients/nope', { token: await h.serviceToken(a) })
    t.equal(malformed.status, 400)
    t.equal(malformed.body.msg ?? malformed.body.message, 'invalid client_id format')
  })

  t.test('the admin API needs the service_role token', async (t) => {
    const anon = await call(h.base(a) + '/admin/oauth/clients')
    t.equal(anon.status, 401)
    const user = h.client(a)
    const up = await user.signUp({ email: `oauth-admin-${Date.now()}@example.com`, password: 'secret123' })
    t.error(up.error)
    const asUser = await call(h.base(a) + '/admin/oauth/clients', { token: up.data.session!.access_token })
    t.equal(asUser.status, 403)
    t.equal(asUser.body.code, 'not_admin')
  })

  t.test('dynamic registration: only where allowed', async (t) => {
    const body = { client_name: 'DCR', redirect_uris: ['https://dcr.example.com/cb'] }
    const ok = await call(h.base(a) + '/oauth/clients/register', { body })
    t.equal(ok.status, 201)
    t.equal(ok.body.registration_type, 'dynamic')
    t.match(ok.body.client_secret, /^[A-Za-z0-9_-]{43}$/)
    const refused = await call(h.base(b) + '/oauth/clients/register', { body })
    t.equal(refused.status, 403)
    t.equal(refused.body.code, 'oauth_dynamic_client_registration_disabled')
    t.equal(refused.body.msg ?? refused.body.message, 'Dynamic client registration is not enabled')
    const bad = await call(h.base(a) + '/oauth/clients/register', { body: { redirect_uris: [] } })
    t.equal(bad.status, 400)
    t.equal(bad.body.code, 'validation_failed')
  })

  t.test('dynamic registration: a URI holding a comma is refused, never split in two', async (t) => {
    const smuggled = 'https://ok.example/cb?a=,javascript:alert(document.domain)//'
    for (const uri of [smuggled, 'https://ok.example/cb?a=,http://evil.example/cb', 'https://ok.example/?a=,x#f']) {
      const r = await call(h.base(a) + '/oauth/clients/register', {
        body: { client_name: 'comma', redirect_uris: [uri] },
      })
      t.equal(r.status, 400, uri)
      t.equal(r.body.code, 'validation_failed')
      t.match(r.body.msg ?? r.body.message, /^invalid redirect_uri '.*': must not contain ','$/)
    }
    const n = await adminQuery<any>(
      `SELECT count(*)::int AS n FROM auth.oauth_clients WHERE client_name = 'comma'`,
      [],
      a.database,
    )
    t.equal(n.rows[0].n, 0, 'nothing stored')
    const ok = await call(h.base(a) + '/oauth/clients/register', {
      body: { client_name: 'array', redirect_uris: ['https://ok.example/cb?a=1&b=2', 'http://127.0.0.1:8080/cb'] },
    })
    t.equal(ok.status, 201)
    const row = await adminQuery<any>(
      'SELECT redirect_uris FROM auth.oauth_clients WHERE id = $1',
      [ok.body.client_id],
      a.database,
    )
    t.same(
      row.rows[0].redirect_uris,
      ['https://ok.example/cb?a=1&b=2', 'http://127.0.0.1:8080/cb'],
      'stored as an array',
    )
  })

  t.test('a client whose URIs were split in more than 10 before migration 0275 can be deleted', async (t) => {
    const made = await adminA.oauth.createClient({ client_name: 'split', redirect_uris: ['https://s.example/cb'] })
    t.error(made.error)
    const id = made.data!.client_id
    const split = Array.from({ length: 12 }, (_, i) => `https://s.example/cb?a=${i}`)
    await adminQuery('UPDATE auth.oauth_clients SET redirect_uris = $2 WHERE id = $1', [id, split], a.database)
    const shown = await adminA.oauth.getClient(id)
    t.same(shown.data?.redirect_uris, split)
    t.error((await adminA.oauth.deleteClient(id)).error, 'deleted')
    t.equal((await adminA.oauth.getClient(id)).error?.status, 404)
  })

  t.test("one database's clients are invisible from another", async (t) => {
    const made = await adminA.oauth.createClient({ client_name: 'mine', redirect_uris: ['https://m.example.com/cb'] })
    t.error(made.error)
    const adminB = await admin(b)
    const seen = await adminB.oauth.getClient(made.data!.client_id)
    t.equal(seen.error?.code, 'oauth_client_not_found')
    const list = await adminB.oauth.listClients()
    t.notOk(list.data.clients.some((c) => c.client_id === made.data!.client_id))
    // a's service token is refused by b outright.
    const cross = await call(h.base(b) + '/admin/oauth/clients', { token: await h.serviceToken(a) })
    t.equal(cross.status, 403)
  })

  t.test('switched off: GoTrue 404 feature_disabled after the admin check', async (t) => {
    const adminOff = await admin(off)
    const r = await adminOff.oauth.listClients()
    t.equal(r.error?.status, 404)
    t.equal(r.error?.code, 'feature_disabled')
    t.equal(r.error?.message, 'OAuth server is disabled')
    const create = await adminOff.oauth.createClient({ client_name: 'x', redirect_uris: ['https://x.example.com/cb'] })
    t.equal(create.error?.code, 'feature_disabled')
    const dcr = await call(h.base(off) + '/oauth/clients/register', { body: { redirect_uris: ['https://e.com/cb'] } })
    t.equal(dcr.status, 404)
    t.equal(dcr.body.code, 'feature_disabled')
    t.equal((await call(h.base(off) + '/admin/oauth/clients')).status, 401)
  })
})

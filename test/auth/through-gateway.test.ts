// supabase-js against the whole path: createClient(<gateway>/<database>, publicKey) ->
// gateway (keys, tokens, /auth/v1 prefix) -> auth engine -> tenant database. Sign-up,
// sign-in, getUser, refresh, sign-out, the confirmation mail's link through the gateway's
// open /verify route, the admin API with the secret key, and tenant A's token refused on
// tenant B's path.
import t from 'tap'
import { randomBytes } from 'node:crypto'
import type { AddressInfo } from 'node:net'
import { createClient, type SupabaseClient } from '@supabase/supabase-js'
import { loadConfig } from '../../src/config/index.js'
import { buildAuthEngine } from '../../src/auth/index.js'
import { buildGateway } from '../../src/gateway/index.js'
import type { Tenant } from '../../src/tenants/index.js'
import { createTestTenant } from '../helpers/tenants.js'
import { startMailCatcher } from '../helpers/mail.js'
import { PUBLIC_URL, email, decodeJwt } from '../helpers/auth-harness.js'
import { memoryStorage } from '../helpers/auth-harness.js'

t.test('through the gateway', async (t) => {
  const mail = await startMailCatcher(t)
  const config = loadConfig({
    env: {},
    overrides: {
      public_url: PUBLIC_URL,
      log: { level: 'silent' },
      auth: { port: 0, bcrypt_cost: 4 },
      gateway: { port: 0 },
      mail: { smtp_host: mail.host, smtp_port: mail.port },
    },
  })
  const tenants = new Map<string, Tenant>()
  const lookup = { get: async (db: string) => tenants.get(db) ?? null }

  const engine = buildAuthEngine({ config, tenants: lookup })
  await engine.listen({ port: 0, host: '127.0.0.1' })
  t.teardown(() => engine.close())
  const engineUrl = `http://127.0.0.1:${(engine.server.address() as AddressInfo).port}`

  const make = async (auth: Record<string, unknown> = {}) => {
    const database = `tenant_${randomBytes(5).toString('hex')}`
    const tt = await createTestTenant(t, {
      database,
      upstreams: { auth: `${engineUrl}/${database}`, rest: `http://127.0.0.1:9/${database}` },
      auth: { mail_min_interval: 0, ...auth },
    })
    tenants.set(database, tt.tenant)
    return tt
  }
  const a = await make()
  const b = await make({ mail_confirmation: true, site_url: 'http://app.example.com' })

  const gateway = buildGateway({ config, tenants: lookup })
  await gateway.listen({ port: 0, host: '127.0.0.1' })
  t.teardown(() => gateway.close())
  const gw = `http://127.0.0.1:${(gateway.server.address() as AddressInfo).port}`
  const client = (tt: typeof a, key = tt.file.keys.public): SupabaseClient =>
    createClient(`${gw}/${tt.database}`, key, {
      auth: { storage: memoryStorage(), persistSession: true, autoRefreshToken: false, detectSessionInUrl: false },
    })

  t.test('sign-up, sign-in, getUser, refresh, sign-out', async (t) => {
    const sb = client(a)
    const e = email('gw')
    const events: string[] = []
    sb.auth.onAuthStateChange((ev) => {
      events.push(ev)
    })
    const up = await sb.auth.signUp({ email: e, password: 'secret123', options: { data: { via: 'gateway' } } })
    t.error(up.error)
    t.ok(up.data.session)
    const claims = decodeJwt(up.data.session!.access_token)
    t.equal(claims.iss, `${PUBLIC_URL}/${a.database}/auth/v1`)

    const other = client(a)
    const signed = await other.auth.signInWithPassword({ email: e, password: 'secret123' })
    t.error(signed.error)
    const me = await other.auth.getUser()
    t.equal(me.data.user?.email, e)
    t.equal(me.data.user?.user_metadata.via, 'gateway')
    const wrong = await client(a).auth.signInWithPassword({ email: e, password: 'wrong-one' })
    t.same([wrong.error?.status, wrong.error?.code], [400, 'invalid_credentials'])

    const refreshed = await sb.auth.refreshSession()
    t.error(refreshed.error)
    t.ok(events.includes('TOKEN_REFRESHED'))
    const upd = await sb.auth.updateUser({ data: { plan: 'pro' } })
    t.error(upd.error)
    t.equal(upd.data.user?.user_metadata.plan, 'pro')

    t.error((await other.auth.signOut({ scope: 'local' })).error)
    t.error((await sb.auth.getUser()).error, 'the other session lives on')
    t.error((await sb.auth.signOut()).error)
    t.ok(events.includes('SIGNED_OUT'))
    const after = await fetch(`${gw}/${a.database}/auth/v1/user`, {
      headers: { apikey: a.file.keys.public, authorization: `Bearer ${refreshed.data.session!.access_token}` },
    })
    t.equal(after.status, 403)
    t.equal(((await after.json()) as { error_code: string }).error_code, 'session_not_found')
  })

  t.test("tenant A's token is refused on tenant B's path", async (t) => {
    const s = (await client(a).auth.signUp({ email: email('cross'), password: 'secret123' })).data.session!
    const res = await fetch(`${gw}/${b.database}/auth/v1/user`, {
      headers: { apikey: b.file.keys.public, authorization: `Bearer ${s.access_token}` },
    })
    // On /auth/v1 the gateway hands a token it cannot verify to B's engine without a role,
    // which refuses it as GoTrue does (403 bad_jwt: B's secret did not sign it).
    t.equal(res.status, 403, 'refused')
    t.match(await res.json(), { error_code: 'bad_jwt' })
    const onB = createClient(`${gw}/${b.database}`, b.file.keys.public, {
      auth: { persistSession: false, autoRefreshToken: false },
      global: { headers: { Authorization: `Bearer ${s.access_token}` } },
    })
    const viaClient = await onB.auth.getUser(s.access_token)
    t.ok(viaClient.error, 'supabase-js on B gets an error')
    const keyOfA = await fetch(`${gw}/${b.database}/auth/v1/user`, {
      headers: { apikey: a.file.keys.public, authorization: `Bearer ${s.access_token}` },
    })
    t.equal(keyOfA.status, 401, "A's key on B's path")
    const direct = await fetch(`${engineUrl}/${b.database}/user`, {
      headers: { authorization: `Bearer ${s.access_token}` },
    })
    t.equal(direct.status, 403, "and B's engine path refuses it too")
  })

  t.test('confirmation mail link through the open /verify route', async (t) => {
    const sb = client(b)
    const e = email('gwmail')
    const up = await sb.auth.signUp({ email: e, password: 'secret123' })
    t.error(up.error)
    t.equal(up.data.session, null)
    const m = await mail.waitForMail(e)
    const link = m.links.find((l) => l.includes('/verify?'))!
    t.ok(link.startsWith(`${PUBLIC_URL}/${b.database}/auth/v1/verify?`))
    const res = await fetch(link.replace(PUBLIC_URL, gw), { redirect: 'manual' })
    t.equal(res.status, 303)
    const loc = new URL(res.headers.get('location')!)
    t.equal(loc.origin, 'http://app.example.com')
    t.ok(new URLSearchParams(loc.hash.slice(1)).get('access_token'))
    t.error((await sb.auth.signInWithPassword({ email: e, password: 'secret123' })).error)
  })

  t.test('the admin API with the secret key', async (t) => {
    const admin = client(a, a.file.keys.secret)
    const e = email('gwadmin')
    const created = await admin.auth.admin.createUser({ email: e, password: 'secret123', email_confirm: true })
    t.error(created.error)
    const listed = await admin.auth.admin.listUsers({ page: 1, perPage: 50 })
    t.error(listed.error)
    t.ok(listed.data.users.some((u) => u.email === e))
    const denied = await client(a).auth.admin.listUsers()
    t.same([denied.error?.status], [401], 'the public key gets no admin rights')
  })
})

// The per-database auth switches through the panel: read masked (secrets never leave),
// validated changes written to the tenant store, and taken up by the running engines through
// the store's invalidation, with no restart: magic link switched on works at once through
// supabase-js (and its mailed link signs in, to the new site URL), switched off is refused.
import t from 'tap'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { exportTenantFile, loadTenantFileEntries } from '../../src/tenants/index.js'
import { PUBLIC_URL, startStack, type Stack, type StackTenant } from '../helpers/panel-stack.js'
import { tempDir } from '../helpers/tenant-fixtures.js'

let stack: Stack
let x: StackTenant
let token: string
const path = () => `/organizations/org_as/databases/${x.database}/api/auth-settings`

/** Resolves when the services' store has announced a change of the tenant (their caches are dropped). */
function servicesSeeChange(): Promise<void> {
  return new Promise((resolve) => {
    const off = stack.store.onChange((db) => {
      if (db === x.database) {
        off()
        resolve()
      }
    })
  })
}

t.before(async () => {
  stack = await startStack(t)
  x = await stack.addTenant({
    organization: 'org_as',
    auth: { providers: { github: { client_id: 'gh-client', secret: 'gh-very-secret-value' } } },
  })
  token = await stack.panelSession({ userId: 'p1', email: 'ops@example.com', orgs: ['org_as'] })
})

t.test('GET shows the switches with secrets masked', async (t) => {
  const r = await stack.panel('GET', path(), { token })
  t.equal(r.status, 200)
  t.same(r.body, {
    database: x.database,
    settings: {
      site_url: 'http://localhost:3000',
      redirect_urls: [],
      magic_link: false,
      pkce: false,
      mail_confirmation: false,
      signup_enabled: true,
      anonymous_sign_in: false,
      anonymous_rate_per_hour: 30,
      mfa_totp_enroll: true,
      mfa_totp_verify: true,
      mfa_max_enrolled_factors: 10,
      mfa_rate_per_minute: 15,
      manual_linking: false,
      secure_password_change: false,
      mail_rate_per_hour: 1000,
      rate_limits: {
        sign_in_sign_up: { capacity: 30, rate: 30, interval_seconds: 300 },
        token_refresh: { capacity: 30, rate: 150, interval_seconds: 300 },
        verify: { capacity: 30, rate: 30, interval_seconds: 300 },
        otp: { capacity: 30, rate: 30, interval_seconds: 300 },
      },
      providers: { github: { client_id: 'gh-client', secret: '********', enabled: true } },
      hooks: {},
      password_min_length: 6,
      password_required_characters: '',
      refresh_token_reuse_interval: 10,
      refresh_token_algorithm_version: 2,
      otp_expiry: 3600,
      mail_min_interval: 0,
      passkeys: false,
      max_passkeys_per_user: 10,
      mfa_webauthn_enroll: false,
      mfa_webauthn_verify: false,
      webauthn: null,
      oauth_server: { enabled: false, authorization_url_path: '/oauth/consent', allow_dynamic_registration: false },
    },
  })
  t.notMatch(JSON.stringify(r.body), 'gh-very-secret-value')
})

t.test(
  'PATCH sets auth hooks by name: secrets masked, kept when masked, null removes, private endpoints refused',
  async (t) => {
    const secret = `v1,whsec_${Buffer.from('hook secret of the panel test').toString('base64')}`
    const set = await stack.panel('PATCH', path(), {
      token,
      body: {
        hooks: {
          custom_access_token: { uri: 'pg-functions://postgres/public/claims' },
          send_email: { uri: 'http://127.0.0.1:9/mail', secrets: [secret] },
        },
      },
    })
    t.equal(set.status, 200, JSON.stringify(set.body))
    t.same(set.body.settings.hooks, {
      custom_access_token: { uri: 'pg-functions://postgres/public/claims' },
      send_email: { uri: 'http://127.0.0.1:9/mail', secrets: ['********'] },
    })
    t.notMatch(JSON.stringify(set.body), secret)
    const stored = await stack.store.get(x.database)
    t.same(stored?.auth.hooks?.send_email?.secrets, [secret], 'the store keeps the secret')

    const masked = await stack.panel('PATCH', path(), {
      token,
      body: {
        hooks: { send_email: { uri: 'http://127.0.0.1:9/mail2', secrets: ['********'] }, custom_access_token: null },
      },
    })
    t.equal(masked.status, 200)
    t.same(masked.body.settings.hooks, { send_email: { uri: 'http://127.0.0.1:9/mail2', secrets: ['********'] } })
    t.same(
      (await stack.store.get(x.database))?.auth.hooks?.send_email?.secrets,
      [secret],
      'a masked secret keeps the stored one',
    )

    const bad = await stack.panel('PATCH', path(), {
      token,
      body: { hooks: { before_user_created: { uri: 'ftp://x' }, not_a_hook: { uri: 'https://a.example' } } },
    })
    t.equal(bad.status, 400)
    t.match(bad.body.message, 'hooks.not_a_hook: not a hook')
    const internal = await stack.panel('PATCH', path(), {
      token,
      body: { hooks: { before_user_created: { uri: 'https://10.0.0.1/hook' } } },
    })
    t.equal(internal.status, 400)
    t.match(internal.body.message, 'hooks.before_user_created.uri')
    await stack.panel('PATCH', path(), { token, body: { hooks: { send_email: null } } })
  },
)

t.test('bad changes are refused with 400 and nothing is written', async (t) => {
  const cases: Array<[unknown, RegExp]> = [
    [{ magic_link: 'yes' }, /magic_link: must be boolean/],
    [{ mfa_totp_enroll: 'yes' }, /mfa_totp_enroll: must be boolean/],
    [{ mfa_max_enrolled_factors: 0 }, /mfa_max_enrolled_factors: must be >= 1/],
    [{ keys: { public: 'x' } }, /keys: not a setting the panel changes/],
    [{}, /name at least one setting/],
    [{ site_url: 'not a url' }, /site_url: must be an absolute URL/],
    [{ redirect_urls: 'https://a.example' }, /redirect_urls: must be array/],
    [{ redirect_urls: ['https://ok.example/**', 'nope'] }, /redirect_urls.1/],
    [{ providers: { gitlab: { client_id: 'c' } } }, /providers.gitlab.secret: is required/],
    [
      { providers: { gitlab: { client_id: 'c', secret: '********' } } },
      /providers.gitlab.secret: is required for a new provider/,
    ],
    [{ providers: { 'Bad Name': { client_id: 'c', secret: 's' } } }, /providers/],
    [{ providers: { github: { client_id: 'c', colour: 'red' } } }, /colour: unknown field/],
    [[true], /JSON object/],
    [{ rate_limits: 5 }, /rate_limits: must be an object/],
    [{ rate_limits: { verify: { capacity: 0 } } }, /rate_limits.verify.capacity: must be >= 1/],
    [{ rate_limits: { verfy: { capacity: 3 } } }, /rate_limits.verfy: unknown field/],
    [{ rate_limits: { verify: { burst: 3 } } }, /rate_limits.verify.burst: unknown field/],
    [{ mail_rate_per_hour: -1 }, /mail_rate_per_hour: must be >= 0/],
    [{ password_min_length: 5 }, /password_min_length: must be >= 6/],
    [{ signup_enabled: 'no' }, /signup_enabled: must be boolean/],
    [{ refresh_token_algorithm_version: 3 }, /refresh_token_algorithm_version: must be one of 1, 2$/],
    [{ passkeys: true }, /passkeys: needs webauthn \(rp_id, rp_display_name, rp_origins\)/],
    [{ mfa_webauthn_verify: true }, /mfa_webauthn_verify: needs webauthn/],
    [{ webauthn: { rp_id: 'example.com', rp_display_name: 'X', rp_origins: [] } }, /webauthn.rp_origins/],
    [{ webauthn: { rp_id: 'example.com', rp_display_name: 'X', rp_origins: ['example.com'] } }, /webauthn.rp_origins/],
    [{ oauth_server: { enabled: 'yes' } }, /oauth_server.enabled: must be boolean/],
    [{ oauth_server: { enabled: true, issuer: 'x' } }, /oauth_server.issuer: unknown field/],
    [{ oauth_server: { authorization_url_path: '/consent?x=1' } }, /oauth_server.authorization_url_path/],
  ]
  for (const [body, message] of cases) {
    const r = await stack.panel('PATCH', path(), { token, body })
    t.equal(r.status, 400, JSON.stringify(body))
    t.equal(r.body.code, 'validation_failed')
    t.match(r.body.message, message, JSON.stringify(body))
  }
  const stored = await stack.store.get(x.database)
  t.same(stored?.auth.providers, { github: { client_id: 'gh-client', secret: 'gh-very-secret-value', enabled: true } })
  t.equal(stored?.auth.magic_link, false)
})

t.test('providers merge by name; a missing or masked secret keeps the stored one', async (t) => {
  const r1 = await stack.panel('PATCH', path(), {
    token,
    body: { providers: { github: { client_id: 'gh-client-2' } } },
  })
  t.equal(r1.status, 200)
  t.same(r1.body.settings.providers.github, { client_id: 'gh-client-2', secret: '********', enabled: true })
  t.equal((await stack.store.get(x.database))?.auth.providers.github?.secret, 'gh-very-secret-value')

  const r2 = await stack.panel('PATCH', path(), {
    token,
    body: {
      providers: {
        github: { ...r1.body.settings.providers.github, enabled: false },
        gitlab: { client_id: 'gl', secret: 'gl-secret' },
      },
    },
  })
  t.equal(r2.status, 200)
  const stored = await stack.store.get(x.database)
  t.same(stored?.auth.providers, {
    github: { client_id: 'gh-client-2', secret: 'gh-very-secret-value', enabled: false },
    gitlab: { client_id: 'gl', secret: 'gl-secret', enabled: true },
  })
  t.notMatch(JSON.stringify(r2.body), /gl-secret|gh-very-secret-value/)

  const r3 = await stack.panel('PATCH', path(), { token, body: { providers: { gitlab: null } } })
  t.same(Object.keys(r3.body.settings.providers), ['github'])
})

t.test('magic link switched on works at once through supabase-js; switched off is refused again', async (t) => {
  const supabase = stack.supabase(x)
  const email = `magic.${Date.now()}@example.com`

  // Off (the default): refused.
  const before = await supabase.auth.signInWithOtp({ email })
  t.equal(before.error?.code, 'email_provider_disabled')

  // 1. Switch it on (and a site URL) in the panel; the engines drop their cached record.
  let seen = servicesSeeChange()
  const on = await stack.panel('PATCH', path(), {
    token,
    body: { magic_link: true, site_url: 'https://app.example.com' },
  })
  t.equal(on.status, 200)
  t.equal(on.body.settings.magic_link, true)
  await seen

  // 2. At once: the settings of the engine and a magic link through supabase-js.
  const settings = await fetch(`${stack.gatewayUrl}/${x.database}/auth/v1/settings`, {
    headers: { apikey: x.file.keys.public },
  })
  t.equal(((await settings.json()) as { magic_link_enabled: boolean }).magic_link_enabled, true)
  const sent = await supabase.auth.signInWithOtp({ email })
  t.equal(sent.error, null)
  const mail = await stack.mail.waitForMail(email)
  const link = mail.links.find((l) => l.includes('/auth/v1/verify'))
  t.ok(link, 'the mail has a sign-in link')
  const res = await fetch(link!.replace(PUBLIC_URL, stack.gatewayUrl), { redirect: 'manual' })
  t.equal(res.status, 303)
  const location = res.headers.get('location') ?? ''
  t.match(location, /^https:\/\/app\.example\.com/, 'redirected to the site URL set in the panel')
  t.match(location, /access_token=/)

  // 3. Switch it off: refused again.
  seen = servicesSeeChange()
  const off = await stack.panel('PATCH', path(), { token, body: { magic_link: false } })
  t.equal(off.status, 200)
  await seen
  const after = await supabase.auth.signInWithOtp({ email })
  t.equal(after.error?.code, 'email_provider_disabled')
})

t.test('a rate limit changed in the panel applies at once through the gateway', async (t) => {
  const seen = servicesSeeChange()
  const r = await stack.panel('PATCH', path(), { token, body: { rate_limits: { verify: { capacity: 2 } } } })
  t.equal(r.status, 200)
  t.same(
    r.body.settings.rate_limits.verify,
    { capacity: 2, rate: 30, interval_seconds: 300 },
    'one field changed, the others kept',
  )
  t.same(r.body.settings.rate_limits.otp, { capacity: 30, rate: 30, interval_seconds: 300 })
  await seen
  const verify = () =>
    fetch(`${stack.gatewayUrl}/${x.database}/auth/v1/verify`, {
      method: 'POST',
      headers: { apikey: x.file.keys.public, 'content-type': 'application/json' },
      body: JSON.stringify({ type: 'signup', token_hash: 'f'.repeat(56) }),
    })
  t.equal((await verify()).status, 403)
  t.equal((await verify()).status, 403)
  const over = await verify()
  t.equal(over.status, 429)
  t.match(await over.json(), { error_code: 'over_request_rate_limit', msg: 'Request rate limit reached' })

  const reset = await stack.panel('PATCH', path(), { token, body: { rate_limits: { verify: null } } })
  t.same(
    reset.body.settings.rate_limits.verify,
    { capacity: 30, rate: 30, interval_seconds: 300 },
    "null puts GoTrue's default back",
  )
})

t.test(
  'refresh_token_algorithm_version switched in the panel: v1 tokens on 1, the session moves to v2 on 2',
  async (t) => {
    let seen = servicesSeeChange()
    const r = await stack.panel('PATCH', path(), { token, body: { refresh_token_algorithm_version: 1 } })
    t.equal(r.status, 200)
    t.equal(r.body.settings.refresh_token_algorithm_version, 1)
    await seen
    const user = stack.supabase(x)
    const signUp = await user.auth.signUp({ email: `rt1.${Date.now()}@example.com`, password: 'secret123' })
    t.error(signUp.error)
    t.match(signUp.data.session!.refresh_token, /^[a-z2-7]{12}$/, 'a v1 token')
    seen = servicesSeeChange()
    const back = await stack.panel('PATCH', path(), { token, body: { refresh_token_algorithm_version: 2 } })
    t.equal(back.body.settings.refresh_token_algorithm_version, 2)
    await seen
    const refreshed = await user.auth.refreshSession()
    t.error(refreshed.error)
    const v2 = refreshed.data.session!.refresh_token
    t.equal(Buffer.from(v2, 'base64url')[0], 0, 'a v2 token (version byte 0) for the same session')
    t.ok(v2.length > 12)
    t.error((await user.auth.getUser()).error)
    t.error((await user.auth.refreshSession()).error)
  },
)

t.test('anonymous sign-in and TOTP enrolment switched in the panel apply at once through supabase-js', async (t) => {
  const supabase = stack.supabase(x)
  const before = await supabase.auth.signInAnonymously()
  t.equal(before.error?.code, 'anonymous_provider_disabled')

  const seen = servicesSeeChange()
  const r = await stack.panel('PATCH', path(), { token, body: { anonymous_sign_in: true, mfa_totp_enroll: false } })
  t.equal(r.status, 200)
  t.same([r.body.settings.anonymous_sign_in, r.body.settings.mfa_totp_enroll], [true, false])
  await seen

  const settings = await fetch(`${stack.gatewayUrl}/${x.database}/auth/v1/settings`, {
    headers: { apikey: x.file.keys.public },
  })
  t.equal(((await settings.json()) as { external: { anonymous_users: boolean } }).external.anonymous_users, true)
  const anon = await stack.supabase(x).auth.signInAnonymously()
  t.error(anon.error)
  t.equal(anon.data.user?.is_anonymous, true)
  const user = stack.supabase(x)
  t.error((await user.auth.signUp({ email: `mfa.${Date.now()}@example.com`, password: 'secret123' })).error)
  const enroll = await user.auth.mfa.enroll({ factorType: 'totp' })
  t.same([enroll.error?.status, enroll.error?.code], [422, 'mfa_totp_enroll_not_enabled'])
})

t.test(
  'passkeys and sign-up switched in the panel apply at once; the relying party can be taken away again',
  async (t) => {
    const settings = async () =>
      (await (
        await fetch(`${stack.gatewayUrl}/${x.database}/auth/v1/settings`, { headers: { apikey: x.file.keys.public } })
      ).json()) as { passkeys_enabled: boolean; disable_signup: boolean }
    t.match(await settings(), { passkeys_enabled: false, disable_signup: false }, 'before')
    const rp = { rp_id: 'app.example.com', rp_display_name: 'App', rp_origins: ['https://app.example.com'] }
    let seen = servicesSeeChange()
    const on = await stack.panel('PATCH', path(), {
      token,
      body: { passkeys: true, webauthn: rp, signup_enabled: false, password_min_length: 10 },
    })
    t.equal(on.status, 200, JSON.stringify(on.body))
    t.same(on.body.settings.webauthn, { ...rp, challenge_expiry_seconds: 300 })
    await seen
    t.match(await settings(), { passkeys_enabled: true, disable_signup: true })
    const options = await fetch(`${stack.gatewayUrl}/${x.database}/auth/v1/passkeys/authentication/options`, {
      method: 'POST',
      headers: { apikey: x.file.keys.public, 'content-type': 'application/json' },
      body: '{}',
    })
    t.equal(options.status, 200)
    t.equal(((await options.json()) as { options: { rpId: string } }).options.rpId, 'app.example.com')

    const stillOn = await stack.panel('PATCH', path(), { token, body: { webauthn: null } })
    t.same([stillOn.status, stillOn.body.code], [400, 'validation_failed'], 'passkeys on keep their relying party')
    seen = servicesSeeChange()
    const off = await stack.panel('PATCH', path(), {
      token,
      body: { passkeys: false, webauthn: null, signup_enabled: true, password_min_length: 6 },
    })
    t.equal(off.status, 200)
    t.equal(off.body.settings.webauthn, null)
    await seen
    t.match(await settings(), { passkeys_enabled: false, disable_signup: false })
  },
)

t.test('the OAuth 2.1 server switched on in the panel: its admin API answers through the gateway', async (t) => {
  const clients = () =>
    fetch(`${stack.gatewayUrl}/${x.database}/auth/v1/admin/oauth/clients`, {
      headers: { apikey: x.file.keys.secret, authorization: `Bearer ${x.file.keys.secret}` },
    })
  const before = await clients()
  t.equal(before.status, 404)
  t.match(await before.json(), { error_code: 'feature_disabled' })
  let seen = servicesSeeChange()
  const on = await stack.panel('PATCH', path(), { token, body: { oauth_server: { enabled: true } } })
  t.equal(on.status, 200, JSON.stringify(on.body))
  t.same(on.body.settings.oauth_server, {
    enabled: true,
    authorization_url_path: '/oauth/consent',
    allow_dynamic_registration: false,
  })
  await seen
  const after = await clients()
  t.equal(after.status, 200)
  t.same(await after.json(), { clients: [] })
  seen = servicesSeeChange()
  const path2 = await stack.panel('PATCH', path(), {
    token,
    body: { oauth_server: { authorization_url_path: '/consent' } },
  })
  t.equal(path2.body.settings.oauth_server.enabled, true, 'fields merge one by one')
  const off = await stack.panel('PATCH', path(), { token, body: { oauth_server: { enabled: false } } })
  t.equal(off.status, 200)
  await seen
})

t.test('only members of the owning organization may read or change them', async (t) => {
  const outsider = await stack.panelSession({ userId: 'p9', orgs: ['org_other'] })
  t.equal((await stack.panel('GET', path(), { token: outsider })).status, 403)
  t.equal((await stack.panel('PATCH', path(), { token: outsider, body: { magic_link: true } })).status, 403)
  t.equal((await stack.panel('PATCH', path(), { body: { magic_link: true } })).status, 401)
  const stranger = await stack.panelSession({ userId: 'p9', orgs: ['org_other'] })
  const r = await stack.panel('GET', `/organizations/org_other/databases/${x.database}/api/auth-settings`, {
    token: stranger,
  })
  t.equal(r.status, 404)
  t.equal((await stack.store.get(x.database))?.auth.magic_link, false)
})

t.test('with Redis, a setting removed through the panel leaves no entry; the export loads', async (t) => {
  const y = await stack.addTenant({ organization: 'org_as' })
  const api = `/organizations/org_as/databases/${y.database}/api/auth-settings`
  const set = await stack.panel('PATCH', api, {
    token,
    body: {
      hooks: { custom_access_token: { uri: 'pg-functions://postgres/public/claims' } },
      webauthn: { rp_id: 'localhost', rp_display_name: 'AS', rp_origins: ['http://localhost:3000'] },
      providers: { github: { client_id: 'gh-id', secret: 'gh-secret-of-as' } },
    },
  })
  t.equal(set.status, 200, JSON.stringify(set.body))
  for (const body of [{ hooks: { custom_access_token: null } }, { webauthn: null }, { providers: { github: null } }])
    t.equal((await stack.panel('PATCH', api, { token, body })).status, 200, JSON.stringify(body))
  const stored = (await stack.store.get(y.database))!
  t.notOk(stored.auth.hooks !== undefined && 'custom_access_token' in stored.auth.hooks)
  t.notOk('webauthn' in stored.auth)
  t.notOk('github' in stored.auth.providers)
  const dir = tempDir(t)
  writeFileSync(join(dir, `${y.database}.yaml`), exportTenantFile(stored, { includeSecrets: true }).text)
  t.equal(loadTenantFileEntries(dir, {})[0]?.file.database, y.database, 'the export loads (and applies)')
})

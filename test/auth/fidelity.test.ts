// GoTrue fidelity through the gateway with supabase-js: an RLS policy reading
// auth.jwt()->>'aal' after MFA, anonymous sign-in (switch, token claim, becoming permanent,
// rate limit), reauthenticate and the nonce of a password change, identity linking and
// unlinking behind the manual-linking switch (a real OpenID Provider), signInWithIdToken
// against that provider (JWKS, audience, nonce; a provider that is off), SSO answering
// "SAML 2.0 is disabled", and the admin API's validation, generateLink and signOut answers.
import t from 'tap'
import { createHash, randomBytes } from 'node:crypto'
import * as OTPAuth from 'otpauth'
import { PUBLIC_URL, gatewayCall, startStack, type Stack, type StackTenant } from '../helpers/panel-stack.js'
import { startOidcProvider, type OidcProviderHandle } from '../helpers/oidc.js'

let stack: Stack
let x: StackTenant
let op: OidcProviderHandle
const database = `tenant_${randomBytes(5).toString('hex')}`
const SITE = 'http://app.example.com'

function totp(secret: string): string {
  return new OTPAuth.TOTP({
    secret: OTPAuth.Secret.fromBase32(secret),
    digits: 6,
    period: 30,
    algorithm: 'SHA1',
  }).generate()
}

function claimsOf(jwt: string): Record<string, any> {
  return JSON.parse(Buffer.from(jwt.split('.')[1]!, 'base64url').toString('utf8'))
}

let seq = 0
const mail = (p: string) => `${p}.${process.pid}.${Date.now().toString(36)}.${seq++}@example.com`

/** An ID token of the test provider for `account`, with the nonce hashed as GoTrue expects. */
async function idTokenFor(account: string, nonce?: string): Promise<string> {
  const redirect = `${SITE}/idtoken`
  const auth = new URL(`${op.issuer}/auth`)
  auth.searchParams.set('client_id', op.client.client_id)
  auth.searchParams.set('redirect_uri', redirect)
  auth.searchParams.set('response_type', 'code')
  auth.searchParams.set('scope', 'openid email profile')
  auth.searchParams.set('state', randomBytes(8).toString('hex'))
  if (nonce !== undefined) auth.searchParams.set('nonce', createHash('sha256').update(nonce).digest('hex'))
  const back = new URL(await op.signIn(auth.toString(), account))
  const code = back.searchParams.get('code')!
  const res = await fetch(`${op.issuer}/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({
      grant_type: 'authorization_code',
      code,
      redirect_uri: redirect,
      client_id: op.client.client_id,
      client_secret: op.client.client_secret,
    }).toString(),
  })
  const body = (await res.json()) as { id_token: string }
  return body.id_token
}

t.before(async () => {
  stack = await startStack(t)
  op = await startOidcProvider(t, {
    redirectUris: [`${PUBLIC_URL}/${database}/auth/v1/callback`, `${SITE}/idtoken`],
    accounts: { alice: { email: 'alice@oidc.example.com', name: 'Alice' }, bob: { email: 'bob@oidc.example.com' } },
  })
  x = await stack.addTenant({
    database,
    auth: {
      site_url: SITE,
      anonymous_sign_in: true,
      manual_linking: true,
      secure_password_change: true,
      providers: {
        oidc: { client_id: op.client.client_id, secret: op.client.client_secret, issuer: op.issuer },
        google: { client_id: 'g', secret: 'g', enabled: false },
      },
    },
  })
  await stack.owner(x, `CREATE TABLE public.secrets (id int PRIMARY KEY, body text)`)
  await stack.owner(x, `INSERT INTO public.secrets VALUES (1, 'only with aal2')`)
  await stack.owner(x, `ALTER TABLE public.secrets ENABLE ROW LEVEL SECURITY`)
  await stack.owner(
    x,
    `CREATE POLICY aal2_only ON public.secrets FOR SELECT TO authenticated USING ((auth.jwt() ->> 'aal') = 'aal2')`,
  )
  await stack.owner(x, `SELECT platform.grant('SELECT', 'public.secrets', 'auth')`)
})

t.test("MFA through the gateway: an RLS policy on auth.jwt()->>'aal'", async (t) => {
  const supabase = stack.supabase(x)
  const e = mail('mfa')
  t.error((await supabase.auth.signUp({ email: e, password: 'secret123' })).error)
  const before = await supabase.from('secrets').select('body')
  t.same(before.data, [], 'aal1 sees no rows')
  const en = await supabase.auth.mfa.enroll({ factorType: 'totp', friendlyName: 'app' })
  t.error(en.error)
  const cv = await supabase.auth.mfa.challengeAndVerify({ factorId: en.data!.id, code: totp(en.data!.totp.secret) })
  t.error(cv.error)
  const lvl = await supabase.auth.mfa.getAuthenticatorAssuranceLevel()
  t.same([lvl.data?.currentLevel, lvl.data?.nextLevel], ['aal2', 'aal2'])
  t.same(lvl.data?.currentAuthenticationMethods.map((m) => (typeof m === 'string' ? m : m.method)).sort(), [
    'password',
    'totp',
  ])
  const after = await supabase.from('secrets').select('body')
  t.same(after.data, [{ body: 'only with aal2' }], 'aal2 reads the row')
  // The admin API lists the factor and deletes it.
  const admin = stack.supabase(x, 'secret')
  const userId = (await supabase.auth.getUser()).data.user!.id
  const list = await admin.auth.admin.mfa.listFactors({ userId })
  t.error(list.error)
  t.same(
    list.data?.factors.map((f) => [f.id, f.status]),
    [[en.data!.id, 'verified']],
  )
  const del = await admin.auth.admin.mfa.deleteFactor({ userId, id: en.data!.id })
  t.error(del.error)
  // auth-js hands the deleted factor (GoTrue's body) back wrapped once more in `data`.
  t.equal((del.data as unknown as { data: { id: string } }).data.id, en.data!.id)
})

t.test('anonymous sign-ins', async (t) => {
  const supabase = stack.supabase(x)
  const anon = await supabase.auth.signInAnonymously({ options: { data: { theme: 'dark' } } })
  t.error(anon.error)
  t.equal(anon.data.user?.is_anonymous, true)
  t.equal(claimsOf(anon.data.session!.access_token).is_anonymous, true)
  t.same(
    claimsOf(anon.data.session!.access_token).amr.map((a: { method: string }) => a.method),
    ['anonymous'],
  )
  const settings = await gatewayCall(stack, x, '/auth/v1/settings')
  t.equal(settings.body.external.anonymous_users, true)
  t.equal(settings.body.saml_enabled, false)

  // Permanent: an address and a password (mail confirmation is off here, so at once).
  const e = mail('anon')
  const up = await supabase.auth.updateUser({ email: e, password: 'secret123' })
  t.error(up.error)
  t.equal(up.data.user?.is_anonymous, false)
  t.equal(up.data.user?.email, e)
  const { data } = await supabase.auth.refreshSession()
  t.equal(claimsOf(data.session!.access_token).is_anonymous, false)
  t.error(
    (await stack.supabase(x).auth.signInWithPassword({ email: e, password: 'secret123' })).error,
    'signs in with the new password',
  )

  // Off: GoTrue's error.
  const y = await stack.addTenant({ auth: { anonymous_sign_in: false } })
  const off = await stack.supabase(y).auth.signInAnonymously()
  t.same(
    [off.error?.status, off.error?.code, off.error?.message],
    [422, 'anonymous_provider_disabled', 'Anonymous sign-ins are disabled'],
  )
  // The rate limit: anonymous_rate_per_hour sign-ins per client IP.
  const z = await stack.addTenant({ auth: { anonymous_sign_in: true, anonymous_rate_per_hour: 2 } })
  const zs = stack.supabase(z)
  t.error((await zs.auth.signInAnonymously()).error)
  t.error((await zs.auth.signInAnonymously()).error)
  const third = await zs.auth.signInAnonymously()
  t.same(
    [third.error?.status, third.error?.code, third.error?.message],
    [429, 'over_request_rate_limit', 'Request rate limit reached'],
  )
})

t.test('reauthenticate and the nonce of a password change', async (t) => {
  const supabase = stack.supabase(x)
  const e = mail('reauth')
  t.error((await supabase.auth.signUp({ email: e, password: 'secret123' })).error)
  // A fresh session changes the password without a nonce (GoTrue: only sessions older than 24 h need one).
  t.error((await supabase.auth.updateUser({ password: 'secret456' })).error)
  const r = await supabase.auth.reauthenticate()
  t.error(r.error)
  const m = await stack.mail.waitForMail(e)
  const code = /(\d{6})/.exec(m.text ?? m.html ?? '')?.[1]
  t.ok(code, 'the mail carries the nonce')
  const token = (await supabase.auth.getSession()).data.session!.access_token
  const wrong = await gatewayCall(stack, x, '/auth/v1/user', {
    method: 'PUT',
    token,
    body: { password: 'secret789', nonce: code === '000000' ? '111111' : '000000' },
  })
  // The session is fresh, so the nonce is not looked at; the change goes through.
  t.equal(wrong.status, 200)
  const none = await gatewayCall(stack, x, '/auth/v1/reauthenticate', {})
  t.same([none.status, none.body.error_code ?? none.body.code], [401, 'no_authorization'])
})

t.test('identity linking and unlinking; signInWithIdToken', async (t) => {
  const supabase = stack.supabase(x)
  const e = mail('link')
  t.error((await supabase.auth.signUp({ email: e, password: 'secret123' })).error)
  const started = await supabase.auth.linkIdentity({
    provider: 'oidc' as never,
    options: { skipBrowserRedirect: true },
  })
  t.error(started.error)
  const back = await op.signIn(started.data.url!, 'alice')
  const res = await fetch(back.replace(PUBLIC_URL, stack.gatewayUrl), { redirect: 'manual' })
  t.equal(res.status, 302)
  t.match(res.headers.get('location') ?? '', /^http:\/\/app\.example\.com.*access_token=/)
  const ids = await supabase.auth.getUserIdentities()
  t.error(ids.error)
  t.same(ids.data?.identities.map((i) => i.provider).sort(), ['email', 'oidc'])
  const userId = (await supabase.auth.getUser()).data.user!.id

  // Linking the same identity again: it is taken.
  const again = await supabase.auth.linkIdentity({ provider: 'oidc' as never, options: { skipBrowserRedirect: true } })
  const back2 = new URL(await op.signIn(again.data.url!, 'alice'))
  const res2 = await fetch(back2.toString().replace(PUBLIC_URL, stack.gatewayUrl), { redirect: 'manual' })
  const failed = new URL(res2.headers.get('location') ?? '')
  t.same(
    [failed.searchParams.get('error_code'), failed.searchParams.get('error_description')],
    ['identity_already_exists', 'Identity is already linked'],
  )

  // signInWithIdToken with the provider's ID token finds the same user.
  const nonce = randomBytes(8).toString('hex')
  const viaToken = await stack
    .supabase(x)
    .auth.signInWithIdToken({ provider: 'oidc', token: await idTokenFor('alice', nonce), nonce })
  t.error(viaToken.error)
  t.equal(viaToken.data.user?.id, userId)
  t.same(
    claimsOf(viaToken.data.session!.access_token).amr.map((a: { method: string }) => a.method),
    ['oauth'],
  )

  // Unlink the OIDC identity; the last one cannot go.
  const oidcIdentity = ids.data!.identities.find((i) => i.provider === 'oidc')!
  t.error((await supabase.auth.unlinkIdentity(oidcIdentity)).error)
  const left = await supabase.auth.getUserIdentities()
  t.same(
    left.data?.identities.map((i) => i.provider),
    ['email'],
  )
  const last = await supabase.auth.unlinkIdentity(left.data!.identities[0]!)
  t.same(
    [last.error?.status, last.error?.code, last.error?.message],
    [422, 'single_identity_not_deletable', 'User must have at least 1 identity after unlinking'],
  )
})

t.test('error answers: id_token, linking switched off, identities, SSO', async (t) => {
  const pub = (path: string, body?: unknown, token?: string) =>
    gatewayCall(stack, x, path, {
      method: body === undefined ? 'GET' : 'POST',
      body,
      token,
      headers: { 'x-supabase-api-version': '2024-01-01' },
    })
  t.same((await pub('/auth/v1/token?grant_type=id_token', { provider: 'oidc' })).body, {
    error: 'invalid request',
    error_description: 'id_token required',
  })
  t.same((await pub('/auth/v1/token?grant_type=id_token', { id_token: 'x' })).body, {
    error: 'invalid request',
    error_description: 'provider or client_id and issuer required',
  })
  const off = await pub('/auth/v1/token?grant_type=id_token', { id_token: 'x', provider: 'google' })
  t.same(
    [off.status, off.body],
    [400, { code: 'provider_disabled', message: 'Provider (issuer "https://accounts.google.com") is not enabled' }],
  )
  const apple = await pub('/auth/v1/token?grant_type=id_token', { id_token: 'x', provider: 'apple' })
  t.same(
    [apple.status, apple.body],
    [400, { code: 'provider_disabled', message: 'Provider (issuer "https://appleid.apple.com") is not enabled' }],
  )
  const custom = await pub('/auth/v1/token?grant_type=id_token', { id_token: 'x', provider: 'nosuch' })
  t.same(
    [custom.status, custom.body],
    [400, { code: 'validation_failed', message: 'Custom OIDC provider "nosuch" not allowed' }],
  )
  const bad = await pub('/auth/v1/token?grant_type=id_token', { id_token: 'not.a.jwt', provider: 'oidc' })
  t.same([bad.status, bad.body], [400, { error: 'invalid request', error_description: 'Bad ID token' }])
  const tok = await idTokenFor('bob', 'n1')
  const noNonce = await pub('/auth/v1/token?grant_type=id_token', { id_token: tok, provider: 'oidc' })
  t.same(noNonce.body, {
    error: 'invalid request',
    error_description: 'Passed nonce and nonce in id_token should either both exist or not.',
  })
  const badNonce = await pub('/auth/v1/token?grant_type=id_token', { id_token: tok, provider: 'oidc', nonce: 'n2' })
  t.same(badNonce.body, { error: 'invalid nonce', error_description: 'Nonces mismatch' })
  const forged = tok.split('.').slice(0, 2).join('.') + '.' + Buffer.from('forged').toString('base64url')
  t.same((await pub('/auth/v1/token?grant_type=id_token', { id_token: forged, provider: 'oidc', nonce: 'n1' })).body, {
    error: 'invalid request',
    error_description: 'Bad ID token',
  })
  // An ID token with no expiry would sign in forever once leaked: refused (GoTrue's
  // verifier too); the same token with one is accepted.
  const forever = await pub('/auth/v1/token?grant_type=id_token', {
    id_token: await op.signIdToken({ sub: 'carol', email: mail('carol') }, { expiresIn: null }),
    provider: 'oidc',
  })
  t.same(
    [forever.status, forever.body],
    [400, { error: 'invalid request', error_description: 'Bad ID token' }],
    'no exp: refused',
  )
  const expiring = await pub('/auth/v1/token?grant_type=id_token', {
    id_token: await op.signIdToken({ sub: 'carol', email: mail('carol') }),
    provider: 'oidc',
  })
  t.equal(expiring.status, 200, 'with exp: signed in')
  const link = await pub('/auth/v1/token?grant_type=id_token', {
    id_token: tok,
    provider: 'oidc',
    nonce: 'n1',
    link_identity: true,
  })
  t.same(link.body, {
    error: 'invalid request',
    error_description: 'Linking requires a valid user access token in Authorization',
  })

  // SSO is off.
  const sso = await stack.supabase(x).auth.signInWithSSO({ domain: 'example.com' })
  t.same(
    [sso.error?.status, sso.error?.code, sso.error?.message],
    [404, 'saml_provider_disabled', 'SAML 2.0 is disabled'],
  )

  // Manual linking switched off.
  const y = await stack.addTenant({ auth: { manual_linking: false } })
  const ys = stack.supabase(y)
  t.error((await ys.auth.signUp({ email: mail('nolink'), password: 'secret123' })).error)
  const l = await ys.auth.linkIdentity({ provider: 'github', options: { skipBrowserRedirect: true } })
  t.same(
    [l.error?.status, l.error?.code, l.error?.message],
    [404, 'manual_linking_disabled', 'Manual linking is disabled'],
  )
  const token = (await ys.auth.getSession()).data.session!.access_token
  const del = await gatewayCall(stack, y, `/auth/v1/user/identities/${crypto.randomUUID()}`, {
    method: 'DELETE',
    token,
    headers: { 'x-supabase-api-version': '2024-01-01' },
  })
  t.same([del.status, del.body], [404, { code: 'manual_linking_disabled', message: 'Manual linking is disabled' }])
  const list = await gatewayCall(stack, y, '/auth/v1/user/identities', {
    token,
    headers: { 'x-supabase-api-version': '2024-01-01' },
  })
  t.same([list.status, list.body], [404, { code: 'manual_linking_disabled', message: 'Manual linking is disabled' }])
  // With the switch on: bad identity ids.
  const xs = stack.supabase(x)
  t.error((await xs.auth.signUp({ email: mail('ids'), password: 'secret123' })).error)
  const xt = (await xs.auth.getSession()).data.session!.access_token
  const notUuid = await gatewayCall(stack, x, '/auth/v1/user/identities/nope', {
    method: 'DELETE',
    token: xt,
    headers: { 'x-supabase-api-version': '2024-01-01' },
  })
  t.same([notUuid.status, notUuid.body], [404, { code: 'validation_failed', message: 'identity_id must be an UUID' }])
})

t.test('admin API: listUsers validation, generateLink for every type, signOut with a bad token', async (t) => {
  const admin = stack.supabase(x, 'secret').auth.admin
  const call = (path: string, o: { method?: string; body?: unknown } = {}) =>
    gatewayCall(stack, x, path, { ...o, key: 'secret', headers: { 'x-supabase-api-version': '2024-01-01' } })
  const bad = [
    ['page=abc', 'Bad Pagination Parameters: strconv.ParseUint: parsing "abc": invalid syntax'],
    ['per_page=-1', 'Bad Pagination Parameters: strconv.ParseUint: parsing "-1": invalid syntax'],
    [
      'page=99999999999999999999',
      'Bad Pagination Parameters: strconv.ParseUint: parsing "99999999999999999999": value out of range',
    ],
    ['sort=email', "Bad Sort Parameters: bad field for sort 'email'"],
    ['sort=created_at%20up', "Bad Sort Parameters: bad direction for sort 'up', only 'asc' and 'desc' allowed"],
  ]
  for (const [q, message] of bad) {
    const r = await call(`/auth/v1/admin/users?${q}`)
    t.same([r.status, r.body], [400, { code: 'validation_failed', message }], q)
  }
  t.equal((await call('/auth/v1/admin/users?page=1&per_page=2&sort=created_at%20asc')).status, 200)

  const confirmed = mail('gl')
  t.error((await admin.createUser({ email: confirmed, password: 'secret123', email_confirm: true })).error)
  const shape = (d: any) => Object.keys(d.properties).sort()
  const props = ['action_link', 'email_otp', 'hashed_token', 'redirect_to', 'verification_type']
  for (const type of ['magiclink', 'recovery'] as const) {
    const r = await admin.generateLink({ type, email: confirmed })
    t.error(r.error, type)
    t.same(shape(r.data), props)
    t.equal(r.data.properties!.verification_type, type)
    t.equal(r.data.user?.email, confirmed)
    t.match(
      r.data.properties!.action_link,
      new RegExp(`/verify\\?token=${r.data.properties!.hashed_token}&type=${type}&redirect_to=`),
    )
    t.equal(
      r.data.properties!.hashed_token,
      createHash('sha224')
        .update(confirmed + r.data.properties!.email_otp)
        .digest('hex'),
    )
  }
  const fresh = mail('gl-new')
  const signup = await admin.generateLink({ type: 'signup', email: fresh, password: 'secret123' })
  t.error(signup.error)
  t.equal(signup.data.properties!.verification_type, 'signup')
  t.notOk(signup.data.user?.email_confirmed_at)
  const invite = await admin.generateLink({ type: 'invite', email: mail('gl-inv') })
  t.error(invite.error)
  t.equal(invite.data.properties!.verification_type, 'invite')
  t.ok(invite.data.user?.invited_at)
  const magicNew = await admin.generateLink({ type: 'magiclink', email: mail('gl-magic') })
  t.equal(magicNew.data.properties!.verification_type, 'signup', 'a magic link for a new address is a signup link')
  for (const type of ['email_change_current', 'email_change_new'] as const) {
    const r = await admin.generateLink({ type, email: confirmed, newEmail: mail('gl-change') })
    t.error(r.error, type)
    t.equal(r.data.properties!.verification_type, type)
    t.match(r.data.properties!.action_link, /type=email_change&/)
    t.ok(r.data.user?.new_email)
  }
  const errors: Array<[unknown, number, string, string]> = [
    [{ type: 'signup' }, 400, 'validation_failed', 'An email address is required'],
    [{ type: 'recovery', email: mail('nobody') }, 404, 'user_not_found', 'User with this email not found'],
    [{ type: 'bogus', email: confirmed }, 400, 'validation_failed', 'Invalid email action link type requested: bogus'],
    [{ type: 'signup', email: mail('nopw') }, 400, 'validation_failed', 'Signup requires a valid password'],
    [
      { type: 'signup', email: confirmed, password: 'secret123' },
      422,
      'email_exists',
      'A user with this email address has already been registered',
    ],
    [{ type: 'email_change_new', email: confirmed }, 400, 'validation_failed', 'An email address is required'],
  ]
  for (const [body, status, code, message] of errors) {
    const r = await call('/auth/v1/admin/generate_link', { method: 'POST', body })
    t.same([r.status, r.body], [status, { code, message }], JSON.stringify(body))
  }

  // signOut(jwt) with a token that is no JWT, and with a forged one.
  const malformed = await admin.signOut('not-a-jwt')
  t.equal(malformed.error?.status, 403)
  t.equal(
    malformed.error?.message,
    'invalid JWT: unable to parse or verify signature, token is malformed: token contains an invalid number of segments',
  )
  const s = stack.supabase(x)
  t.error((await s.auth.signUp({ email: mail('so'), password: 'secret123' })).error)
  const jwt = (await s.auth.getSession()).data.session!.access_token
  const forged = await admin.signOut(jwt.slice(0, -4) + (jwt.endsWith('AAAA') ? 'BBBB' : 'AAAA'))
  t.equal(forged.error?.status, 403)
  t.equal(
    forged.error?.message,
    'invalid JWT: unable to parse or verify signature, token signature is invalid: signature is invalid',
  )
  t.error((await admin.signOut(jwt)).error, 'a good token signs out')
  // The engine answers 403 session_not_found; auth-js reports that as a missing session.
  const gone = await s.auth.getUser(jwt)
  t.equal(gone.error?.name, 'AuthSessionMissingError', 'that session is gone')
})

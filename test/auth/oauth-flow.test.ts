// The OAuth 2.1 server's authorization code flow (docs/auth-protocol.md §3.22): a third-party app
// sends the user to GET /oauth/authorize, the consent page reads and approves the request with
// supabase-js (auth.oauth.*), the app exchanges the code at POST /oauth/token with its client
// authentication and PKCE, and gets a session bound to it (client_id and scope claims). Every
// refusal: untrusted client or redirect URI as JSON, the rest as error redirects, codes used
// twice, expired, for another client or with a wrong verifier, wrong secrets and methods,
// another user's or another database's request, denial; the consented client approved at once;
// the user's grants listed and revoked (its sessions end); the metadata document.
import { createHash, randomBytes } from 'node:crypto'
import t from 'tap'
import { GoTrueAdminApi } from '@supabase/auth-js'
import { createLocalJWKSet, jwtVerify } from 'jose'
import { startAuth, call, decodeJwt, email } from '../helpers/auth-harness.js'
import { adminQuery } from '../helpers/db.js'
import type { TestTenant } from '../helpers/tenants.js'

const SITE = 'https://consent.example.com'
const APP = 'https://app.example.com/callback'

function pkce(): { verifier: string; challenge: string } {
  const verifier = randomBytes(32).toString('base64url')
  return { verifier, challenge: createHash('sha256').update(verifier).digest('base64url') }
}

/** A form POST to the token endpoint, as OAuth client libraries send it. */
async function tokenCall(url: string, form: Record<string, string>, basic?: [string, string]) {
  const headers: Record<string, string> = { 'content-type': 'application/x-www-form-urlencoded' }
  if (basic) headers.authorization = `Basic ${Buffer.from(`${basic[0]}:${basic[1]}`).toString('base64')}`
  const res = await fetch(url, { method: 'POST', headers, body: new URLSearchParams(form).toString() })
  return { status: res.status, body: (await res.json()) as any }
}

t.test('OAuth authorization code flow', async (t) => {
  const on = { oauth_server: { enabled: true, allow_dynamic_registration: true }, site_url: SITE } as never
  const h = await startAuth(t, { tenants: [{ auth: on }, { auth: on }, { auth: { site_url: SITE } }] })
  const [a, b, off] = h.list as [TestTenant, TestTenant, TestTenant]
  const admin = new GoTrueAdminApi({ url: h.base(a), headers: { Authorization: `Bearer ${await h.serviceToken(a)}` } })
  const confidential = (await admin.oauth.createClient({ client_name: 'App', redirect_uris: [APP] })).data!
  const pub = (
    await admin.oauth.createClient({
      client_name: 'SPA',
      redirect_uris: ['http://localhost:5173/cb'],
      token_endpoint_auth_method: 'none',
    } as never)
  ).data!
  // Made now: a later test moves the clock past the service token's expiry.
  const old = (await admin.oauth.createClient({ client_name: 'Old', redirect_uris: [APP] })).data!
  const user = h.client(a)
  const address = email('oauth')
  const up = await user.signUp({ email: address, password: 'secret123' })
  t.error(up.error)
  const userId = up.data.user!.id

  const authorize = (q: Record<string, string>) =>
    call(`${h.base(a)}/oauth/authorize?${new URLSearchParams(q).toString()}`)
  /** Starts a request and returns its authorization_id (from the redirect to the consent page). */
  const start = async (
    clientId: string,
    redirectUri: string,
    challenge: string,
    extra: Record<string, string> = {},
  ) => {
    const r = await authorize({
      client_id: clientId,
      redirect_uri: redirectUri,
      response_type: 'code',
      scope: 'openid email',
      state: 'st-1',
      code_challenge: challenge,
      code_challenge_method: 'S256',
      ...extra,
    })
    t.equal(r.status, 302)
    const loc = new URL(r.headers.get('location')!)
    t.equal(loc.origin + loc.pathname, `${SITE}/oauth/consent`)
    return loc.searchParams.get('authorization_id')!
  }
  const codeOf = (redirectUrl: string) => new URL(redirectUrl).searchParams.get('code')!

  t.test('authorize, consent, code for tokens bound to the client', async (t) => {
    const p = pkce()
    const id = await start(confidential.client_id, APP, p.challenge, { nonce: 'n-0S6_WzA2Mj' })
    const details = await user.oauth.getAuthorizationDetails(id)
    t.error(details.error)
    t.same(details.data, {
      authorization_id: id,
      redirect_uri: APP,
      client: { id: confidential.client_id, name: 'App' },
      user: { id: userId, email: address },
      scope: 'openid email',
    })
    const ok = await user.oauth.approveAuthorization(id, { skipBrowserRedirect: true })
    t.error(ok.error)
    const back = new URL(ok.data!.redirect_url)
    t.equal(back.origin + back.pathname, APP)
    t.equal(back.searchParams.get('state'), 'st-1')
    const code = back.searchParams.get('code')!

    const tokenUrl = `${h.base(a)}/oauth/token`
    const wrong = await tokenCall(
      tokenUrl,
      { grant_type: 'authorization_code', code, code_verifier: pkce().verifier },
      [confidential.client_id, confidential.client_secret!],
    )
    t.same([wrong.status, wrong.body.error], [400, 'invalid_grant'])
    t.match(wrong.body.error_description, /PKCE verification failed/)

    const tokens = await tokenCall(
      tokenUrl,
      { grant_type: 'authorization_code', code, code_verifier: p.verifier, redirect_uri: APP },
      [confidential.client_id, confidential.client_secret!],
    )
    t.equal(tokens.status, 200, JSON.stringify(tokens.body))
    t.same(Object.keys(tokens.body).sort(), ['access_token', 'expires_in', 'id_token', 'refresh_token', 'token_type'])
    // OpenID Connect: the ID token, signed with the database's current key (its JWKS), for the client.
    const jwks = createLocalJWKSet((await call(`${h.base(a)}/.well-known/jwks.json`)).body)
    const { payload: idToken } = await jwtVerify(tokens.body.id_token, jwks, {
      issuer: `http://gatehouse.test/${a.database}/auth/v1`,
      audience: confidential.client_id,
      currentDate: h.clock.now(),
    })
    t.match(idToken, {
      sub: userId,
      nonce: 'n-0S6_WzA2Mj',
      email: address,
      email_verified: true,
      phone_number_verified: false,
      client_id: confidential.client_id,
    })
    t.type(idToken.auth_time, 'number')
    const claims = decodeJwt(tokens.body.access_token)
    t.equal(claims.sub, userId)
    t.equal(claims.client_id, confidential.client_id)
    t.equal(claims.scope, 'openid email')
    t.same(
      claims.amr.map((x: { method: string }) => x.method),
      ['oauth_provider/authorization_code'],
    )
    const me = await call(`${h.base(a)}/user`, { token: tokens.body.access_token })
    t.equal(me.body.id, userId, 'the token works on the API')

    const again = await tokenCall(tokenUrl, { grant_type: 'authorization_code', code, code_verifier: p.verifier }, [
      confidential.client_id,
      confidential.client_secret!,
    ])
    t.same(
      [again.status, again.body.error, again.body.error_description],
      [400, 'invalid_grant', 'Invalid authorization code'],
    )
  })

  t.test('a public client: no secret, PKCE proves the flow', async (t) => {
    const p = pkce()
    const id = await start(pub.client_id, 'http://localhost:5173/cb', p.challenge)
    await user.oauth.getAuthorizationDetails(id)
    const code = codeOf((await user.oauth.approveAuthorization(id, { skipBrowserRedirect: true })).data!.redirect_url)
    const withSecret = await tokenCall(`${h.base(a)}/oauth/token`, {
      grant_type: 'authorization_code',
      code,
      code_verifier: p.verifier,
      client_id: pub.client_id,
      client_secret: 'anything',
    })
    t.same([withSecret.status, withSecret.body.error_code], [400, 'invalid_credentials'])
    const ok = await tokenCall(`${h.base(a)}/oauth/token`, {
      grant_type: 'authorization_code',
      code,
      code_verifier: p.verifier,
      client_id: pub.client_id,
    })
    t.equal(ok.status, 200, JSON.stringify(ok.body))
    t.equal(decodeJwt(ok.body.access_token).client_id, pub.client_id)
  })

  t.test('client authentication refusals', async (t) => {
    const url = `${h.base(a)}/oauth/token`
    const form = { grant_type: 'authorization_code', code: 'x', code_verifier: 'y' }
    const cases: Array<[Record<string, string>, [string, string] | undefined, string]> = [
      [form, undefined, 'Invalid client credentials: client_id is required'],
      [{ ...form, client_id: 'nope' }, undefined, 'Invalid client_id format'],
      [form, ['00000000-0000-4000-8000-000000000000', 's'], 'Invalid client credentials'],
      [form, [confidential.client_id, 'wrong-secret'], 'invalid client credentials'],
      [
        { ...form, client_id: confidential.client_id, client_secret: confidential.client_secret! },
        undefined,
        "invalid authentication method: client is registered for 'client_secret_basic' but 'client_secret_post' was used",
      ],
    ]
    for (const [body, basic, message] of cases) {
      const r = await tokenCall(url, body, basic)
      t.equal(r.status, 400, message)
      t.equal(r.body.error_code, 'invalid_credentials')
      t.equal(r.body.msg, message)
    }
    const noGrant = await tokenCall(url, {}, [confidential.client_id, confidential.client_secret!])
    t.same([noGrant.body.error, noGrant.body.error_description], ['invalid_request', 'grant_type is required'])
    const password = await tokenCall(url, { grant_type: 'password' }, [
      confidential.client_id,
      confidential.client_secret!,
    ])
    t.same(
      [password.body.error, password.body.error_description],
      ['unsupported_grant_type', 'Client is not allowed to use grant type: password'],
    )
  })

  t.test('a code is for its client only, and short-lived', async (t) => {
    const p = pkce()
    // A scope not consented to yet, so the consent page asks again.
    const id = await start(confidential.client_id, APP, p.challenge, { scope: 'openid email phone' })
    await user.oauth.getAuthorizationDetails(id)
    const code = codeOf((await user.oauth.approveAuthorization(id, { skipBrowserRedirect: true })).data!.redirect_url)
    const other = await tokenCall(`${h.base(a)}/oauth/token`, {
      grant_type: 'authorization_code',
      code,
      code_verifier: p.verifier,
      client_id: pub.client_id,
    })
    t.same(
      [other.body.error, other.body.error_description],
      ['invalid_grant', 'Authorization code was not issued for this client'],
    )
    h.clock.advance(11 * 60)
    const late = await tokenCall(
      `${h.base(a)}/oauth/token`,
      { grant_type: 'authorization_code', code, code_verifier: p.verifier },
      [confidential.client_id, confidential.client_secret!],
    )
    t.same([late.body.error, late.body.error_description], ['invalid_grant', 'Authorization code has expired'])
    const stale = await start(confidential.client_id, APP, p.challenge, { scope: 'profile' })
    h.clock.advance(11 * 60)
    const gone = await user.oauth.getAuthorizationDetails(stale)
    t.same([gone.error?.status, gone.error?.code], [404, 'oauth_authorization_not_found'])
  })

  t.test('authorize refusals: JSON before the redirect URI is trusted, redirects after', async (t) => {
    const p = pkce()
    const base = {
      client_id: confidential.client_id,
      redirect_uri: APP,
      response_type: 'code',
      code_challenge: p.challenge,
      code_challenge_method: 'S256',
      state: 's',
    }
    const json: Array<[Record<string, string>, number, string, string]> = [
      [{ ...base, client_id: '' }, 400, 'validation_failed', 'client_id is required'],
      [{ ...base, redirect_uri: '' }, 400, 'validation_failed', 'redirect_uri is required'],
      [{ ...base, client_id: 'x' }, 400, 'oauth_client_not_found', 'invalid client_id format'],
      [{ ...base, client_id: pub.client_id }, 400, 'validation_failed', 'invalid redirect_uri'],
      [{ ...base, redirect_uri: `${APP}/other` }, 400, 'validation_failed', 'invalid redirect_uri'],
      [{ ...base, redirect_uri: `${APP}?x=1` }, 400, 'validation_failed', 'invalid redirect_uri'],
    ]
    for (const [q, status, code, message] of json) {
      const r = await authorize(q)
      t.same([r.status, r.body.code, r.body.msg ?? r.body.message], [status, code, message])
    }
    const redirected: Array<[Record<string, string>, RegExp]> = [
      [{ ...base, code_challenge: '' }, /PKCE flow requires both/],
      [{ ...base, code_challenge_method: 'plain' }, /code_challenge_method must be 'S256'/],
      [{ ...base, code_challenge: 'short' }, /between 43 and 128/],
      [{ ...base, response_type: 'token' }, /only response_type=code is supported/],
      [{ ...base, scope: 'admin' }, /unsupported scope: admin/],
      [{ ...base, nonce: 'n'.repeat(256) }, /too long/],
      [{ ...base, scope: 'email '.repeat(700) }, /too long/],
    ]
    for (const [q, description] of redirected) {
      const r = await authorize(q)
      t.equal(r.status, 302)
      const loc = new URL(r.headers.get('location')!)
      t.equal(loc.origin + loc.pathname, APP)
      t.equal(loc.searchParams.get('error'), 'invalid_request')
      t.match(loc.searchParams.get('error_description'), description)
      t.equal(loc.searchParams.get('state'), 's')
    }
  })

  t.test('authorize checks the redirect URI again: a row stored before the checks cannot send a script', async (t) => {
    // A client whose URIs were comma-split by migration 0275 from a row registered before the
    // comma check: the stored array holds URIs registration refuses today.
    await adminQuery(
      `UPDATE auth.oauth_clients SET redirect_uris = $2 WHERE id = $1`,
      [old.client_id, [APP, 'javascript:alert(document.domain)//', 'http://evil.example/cb', `${APP}#f`]],
      a.database,
    )
    const p = pkce()
    for (const redirect_uri of ['javascript:alert(document.domain)//', 'http://evil.example/cb', `${APP}#f`]) {
      const r = await authorize({
        client_id: old.client_id,
        redirect_uri,
        response_type: 'code',
        code_challenge: p.challenge,
        code_challenge_method: 'S256',
      })
      t.same(
        [r.status, r.body.code, r.body.msg ?? r.body.message],
        [400, 'validation_failed', 'invalid redirect_uri'],
        redirect_uri,
      )
    }
    t.ok(await start(old.client_id, APP, p.challenge), 'the checked URI still works')
  })

  t.test('deny, another user, another database, a decided request', async (t) => {
    const p = pkce()
    const id = await start(confidential.client_id, APP, p.challenge, { scope: 'profile' })
    await user.oauth.getAuthorizationDetails(id)
    const stranger = h.client(a)
    t.error((await stranger.signUp({ email: email('stranger'), password: 'secret123' })).error)
    const theirs = await stranger.oauth.getAuthorizationDetails(id)
    t.same([theirs.error?.status, theirs.error?.code], [404, 'oauth_authorization_not_found'])
    t.equal((await stranger.oauth.approveAuthorization(id, { skipBrowserRedirect: true })).error?.status, 404)
    const elsewhere = h.client(b)
    t.error((await elsewhere.signUp({ email: email('b'), password: 'secret123' })).error)
    t.equal((await elsewhere.oauth.getAuthorizationDetails(id)).error?.code, 'oauth_authorization_not_found')
    const no = await user.oauth.denyAuthorization(id, { skipBrowserRedirect: true })
    t.error(no.error)
    const back = new URL(no.data!.redirect_url)
    t.same(
      [back.searchParams.get('error'), back.searchParams.get('error_description'), back.searchParams.get('state')],
      ['access_denied', 'User denied the request', 'st-1'],
    )
    const decided = await user.oauth.approveAuthorization(id, { skipBrowserRedirect: true })
    t.same([decided.error?.status, decided.error?.message], [400, 'authorization request is no longer pending'])
    const foreignOrigin = await call(`${h.base(a)}/oauth/authorizations/${id}`, {
      token: (await user.getSession()).data.session!.access_token,
      headers: { origin: 'https://evil.example.net' },
    })
    t.same(
      [foreignOrigin.status, foreignOrigin.body.msg ?? foreignOrigin.body.message],
      [400, 'unauthorized request origin'],
    )
  })

  /** The whole flow for the confidential client: its tokens. */
  const flowTokens = async (scope: string) => {
    const p = pkce()
    const id = await start(confidential.client_id, APP, p.challenge, { scope })
    const seen = await user.oauth.getAuthorizationDetails(id)
    const url =
      'redirect_url' in seen.data!
        ? seen.data.redirect_url
        : (await user.oauth.approveAuthorization(id, { skipBrowserRedirect: true })).data!.redirect_url
    const r = await tokenCall(
      `${h.base(a)}/oauth/token`,
      { grant_type: 'authorization_code', code: codeOf(url), code_verifier: p.verifier },
      [confidential.client_id, confidential.client_secret!],
    )
    t.equal(r.status, 200, JSON.stringify(r.body))
    return r.body as { access_token: string; refresh_token: string }
  }

  for (const version of [1, 2] as const) {
    t.test(`refresh tokens v${version}: an OAuth session refreshes only at /oauth/token, as its client`, async (t) => {
      h.setAuth(a, { refresh_token_algorithm_version: version } as never)
      t.teardown(() => h.setAuth(a, { refresh_token_algorithm_version: 1 } as never))
      const tokens = await flowTokens('openid email')
      const plain = await call(`${h.base(a)}/token?grant_type=refresh_token`, {
        body: { refresh_token: tokens.refresh_token },
      })
      t.same(
        [plain.status, plain.body.error, plain.body.error_description],
        [400, 'invalid_client', 'Client authentication required for OAuth session'],
      )
      const other = await tokenCall(`${h.base(a)}/oauth/token`, {
        grant_type: 'refresh_token',
        refresh_token: tokens.refresh_token,
        client_id: pub.client_id,
      })
      t.same(
        [other.body.error, other.body.error_description],
        ['invalid_client', "Client does not match the session's OAuth client"],
      )
      const ok = await tokenCall(
        `${h.base(a)}/oauth/token`,
        { grant_type: 'refresh_token', refresh_token: tokens.refresh_token },
        [confidential.client_id, confidential.client_secret!],
      )
      t.equal(ok.status, 200, JSON.stringify(ok.body))
      t.not(ok.body.refresh_token, tokens.refresh_token)
      t.match(decodeJwt(ok.body.access_token), {
        client_id: confidential.client_id,
        scope: 'openid email',
        sub: userId,
      })

      const own = await user.getSession()
      const notOAuth = await tokenCall(
        `${h.base(a)}/oauth/token`,
        { grant_type: 'refresh_token', refresh_token: own.data.session!.refresh_token },
        [confidential.client_id, confidential.client_secret!],
      )
      t.same(
        [notOAuth.body.error, notOAuth.body.error_description],
        ['invalid_client', 'Client authentication not allowed for non-OAuth session'],
      )
    })
  }

  t.test('userinfo: the claims the scopes reach', async (t) => {
    const narrow = await flowTokens('openid')
    const r1 = await call(`${h.base(a)}/oauth/userinfo`, { token: narrow.access_token })
    t.same(r1.body, { sub: userId })
    const wide = await flowTokens('openid email profile')
    const r2 = await call(`${h.base(a)}/oauth/userinfo`, { token: wide.access_token })
    t.match(r2.body, { sub: userId, email: address, name: address })
    t.ok('user_metadata' in r2.body)
    t.equal((await call(`${h.base(a)}/oauth/userinfo`)).status, 401)
  })

  t.test('authorize and token requests count in the sign-in bucket', async (t) => {
    h.setAuth(b, { rate_limits: { sign_in_sign_up: { capacity: 2, rate: 1, interval_seconds: 3600 } } } as never)
    const q = `${h.base(b)}/oauth/authorize?client_id=${confidential.client_id}&redirect_uri=${encodeURIComponent(APP)}`
    t.equal((await call(q)).status, 400, 'a client of another database is unknown here')
    t.equal((await call(q)).status, 400)
    const third = await call(q)
    t.same([third.status, third.body.code], [429, 'over_request_rate_limit'])
  })

  t.test('a client the user consented to is approved at once; grants are listed and revoked', async (t) => {
    const p = pkce()
    const id = await start(confidential.client_id, APP, p.challenge, { scope: 'email' })
    const auto = await user.oauth.getAuthorizationDetails(id)
    t.error(auto.error)
    const code = codeOf((auto.data as { redirect_url: string }).redirect_url)
    const tokens = await tokenCall(
      `${h.base(a)}/oauth/token`,
      { grant_type: 'authorization_code', code, code_verifier: p.verifier },
      [confidential.client_id, confidential.client_secret!],
    )
    t.equal(tokens.status, 200)
    const grants = await user.oauth.listGrants()
    t.error(grants.error)
    const mine = grants.data!.find((g) => g.client.id === confidential.client_id)!
    t.same(mine.scopes, ['openid', 'email', 'profile'], 'the last consent replaced the scopes')
    t.equal(mine.client.name, 'App')
    const revoked = await user.oauth.revokeGrant({ clientId: confidential.client_id })
    t.error(revoked.error)
    t.notOk((await user.oauth.listGrants()).data!.some((g) => g.client.id === confidential.client_id))
    const refused = await call(`${h.base(a)}/user`, { token: tokens.body.access_token })
    t.equal(refused.status, 403, "the client's sessions ended")
    const again = await user.oauth.revokeGrant({ clientId: confidential.client_id })
    t.equal(again.error?.code, 'oauth_consent_not_found')
  })

  t.test('metadata, and everything off where the server is off', async (t) => {
    const meta = await call(`${h.base(a)}/.well-known/oauth-authorization-server`)
    t.equal(meta.status, 200)
    t.match(meta.body, {
      authorization_endpoint: /\/oauth\/authorize$/,
      token_endpoint: /\/oauth\/token$/,
      registration_endpoint: /\/oauth\/clients\/register$/,
      code_challenge_methods_supported: ['S256'],
    })
    for (const path of ['/.well-known/oauth-authorization-server', '/oauth/authorize?client_id=x']) {
      const r = await call(h.base(off) + path)
      t.same([r.status, r.body.code], [404, 'feature_disabled'], path)
    }
    const tok = await tokenCall(`${h.base(off)}/oauth/token`, { grant_type: 'authorization_code' })
    t.same([tok.status, tok.body.error_code], [404, 'feature_disabled'])
  })

  t.test('requests that expired a day ago are deleted as new ones come', async (t) => {
    const count = async () =>
      (
        await adminQuery<{ n: number }>(
          'SELECT count(*)::int AS n FROM auth.oauth_authorizations WHERE expires_at < $1',
          [h.clock.now()],
          a.database,
        )
      ).rows[0]!.n
    t.ok((await count()) > 0, 'expired requests from the tests above')
    h.clock.advance(25 * 3600)
    await start(confidential.client_id, APP, pkce().challenge, { scope: 'profile' })
    t.equal(await count(), 0)
  })
})

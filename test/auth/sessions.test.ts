// Password sign-in, refresh-token rotation with reuse detection (docs/auth-protocol.md §5.2), sign-out
// scopes and access-token expiry, through auth-js and raw HTTP against the engine. Time
// moves through the engine's injected clock, never by sleeping.
import t from 'tap'
import { startAuth, call, email, decodeJwt } from '../helpers/auth-harness.js'
import { adminQuery } from '../helpers/db.js'

t.test('sessions', async (t) => {
  // Algorithm 1: these tests read v1 internals (token rows, parents); v2 is test/auth/refresh-token-v2.test.ts.
  const h = await startAuth(t, {
    tenants: [{ auth: { refresh_token_reuse_interval: 10, refresh_token_algorithm_version: 1 } }],
  })
  const [a] = h.list as [(typeof h.list)[0]]
  const password = 'correct-horse'
  const user = email('sess')
  t.error((await h.client(a).signUp({ email: user, password })).error)
  const token = (body: unknown) => call(h.base(a) + '/token?grant_type=refresh_token', { body })

  t.test('password grant: success and refusals', async (t) => {
    const c = h.client(a)
    const events: string[] = []
    c.onAuthStateChange((e) => {
      events.push(e)
    })
    const ok = await c.signInWithPassword({ email: user, password })
    t.error(ok.error)
    t.ok(ok.data.session?.refresh_token.match(/^[a-z2-7]{12}$/), 'a v1 refresh token')
    t.ok(events.includes('SIGNED_IN'))
    t.ok(ok.data.user?.last_sign_in_at)

    const wrong = await c.signInWithPassword({ email: user, password: 'nope-nope' })
    t.equal(wrong.error?.status, 400)
    t.equal(wrong.error?.code, 'invalid_credentials')
    t.equal(wrong.error?.message, 'Invalid login credentials')
    const unknown = await c.signInWithPassword({ email: email('ghost'), password })
    t.equal(unknown.error?.status, 400)
    t.equal(unknown.error?.code, 'invalid_credentials')

    const grant = await call(h.base(a) + '/token?grant_type=magic', { body: {} })
    t.same([grant.status, grant.body], [400, { code: 'invalid_credentials', message: 'unsupported_grant_type' }])
    const missing = await call(h.base(a) + '/token?grant_type=password', { body: { password } })
    t.same([missing.status, missing.body.code], [400, 'validation_failed'])
  })

  t.test('refreshSession rotates and keeps the session', async (t) => {
    const c = h.client(a)
    const events: string[] = []
    c.onAuthStateChange((e) => {
      events.push(e)
    })
    const first = (await c.signInWithPassword({ email: user, password })).data.session!
    const { data, error } = await c.refreshSession()
    t.error(error)
    t.ok(events.includes('TOKEN_REFRESHED'), events.join(','))
    t.not(data.session?.refresh_token, first.refresh_token)
    t.equal(decodeJwt(data.session!.access_token).session_id, decodeJwt(first.access_token).session_id)
    t.equal(decodeJwt(data.session!.access_token).amr[0].method, 'password', 'AMR re-read from the session')
    const row = await adminQuery(
      'SELECT parent, revoked FROM auth.refresh_tokens WHERE token = $1',
      [data.session!.refresh_token],
      a.database,
    )
    t.same(row.rows, [{ parent: first.refresh_token, revoked: false }])
  })

  t.test('reuse: lost response, within the interval, beyond it (family revoked)', async (t) => {
    const s0 = (await h.client(a).signInWithPassword({ email: user, password })).data.session!
    const sid = decodeJwt(s0.access_token).session_id
    const r1 = await token({ refresh_token: s0.refresh_token })
    t.equal(r1.status, 200)
    const rt1 = r1.body.refresh_token as string
    // 1. The client lost r1's response and retries with the same token: it gets rt1 back.
    const lost = await token({ refresh_token: s0.refresh_token })
    t.equal(lost.status, 200)
    t.equal(lost.body.refresh_token, rt1, 'the active child is returned, no new branch')
    // 2. rt1 rotates to rt2; rt0 presented again inside the reuse interval gets the current token.
    const r2 = await token({ refresh_token: rt1 })
    const rt2 = r2.body.refresh_token as string
    t.not(rt2, rt1)
    const within = await token({ refresh_token: s0.refresh_token })
    t.equal(within.status, 200)
    t.equal(within.body.refresh_token, rt2, 'current active token')
    t.equal(decodeJwt(within.body.access_token).session_id, sid)
    // 3. Beyond the interval: theft assumed, the whole session family revoked.
    h.clock.advance(11)
    const reused = await token({ refresh_token: s0.refresh_token })
    t.equal(reused.status, 400)
    t.same(reused.body, { code: 'refresh_token_already_used', message: 'Invalid Refresh Token: Already Used' })
    const live = await adminQuery<{ n: number }>(
      'SELECT count(*)::int AS n FROM auth.refresh_tokens WHERE session_id = $1 AND NOT revoked',
      [sid],
      a.database,
    )
    t.equal(live.rows[0]?.n, 0, 'no live token left in the session')
    const afterwards = await token({ refresh_token: rt2 })
    t.equal(afterwards.status, 400)
    t.equal(afterwards.body.code, 'refresh_token_already_used', 'even the last issued token is dead')
    // auth-js sees the same code.
    const c = h.client(a)
    const viaClient = await c.refreshSession({ refresh_token: rt2 })
    t.equal(viaClient.error?.code, 'refresh_token_already_used')
    t.equal(viaClient.error?.status, 400)
  })

  t.test('concurrent refreshes of one token all succeed with the same token', async (t) => {
    const s = (await h.client(a).signInWithPassword({ email: user, password })).data.session!
    const results = await Promise.all(Array.from({ length: 6 }, () => token({ refresh_token: s.refresh_token })))
    t.same(
      results.map((r) => r.status),
      [200, 200, 200, 200, 200, 200],
    )
    t.equal(new Set(results.map((r) => r.body.refresh_token)).size, 1, 'one child, handed to every caller')
    const sid = decodeJwt(s.access_token).session_id
    const rows = await adminQuery<{ n: number }>(
      'SELECT count(*)::int AS n FROM auth.refresh_tokens WHERE session_id = $1',
      [sid],
      a.database,
    )
    t.equal(rows.rows[0]?.n, 2)
  })

  t.test('a refresh racing a sign-out of its session never fails with a 5xx', async (t) => {
    const statuses: number[] = []
    for (let i = 0; i < 8; i++) {
      const s = (await h.client(a).signInWithPassword({ email: user, password })).data.session!
      const [r] = await Promise.all([
        token({ refresh_token: s.refresh_token }),
        call(h.base(a) + '/logout?scope=local', { method: 'POST', token: s.access_token }),
      ])
      statuses.push(r.status)
      if (r.status !== 200) t.match(r.body.code, /^(refresh_token_not_found|session_not_found)$/)
    }
    t.ok(
      statuses.every((x) => x === 200 || x === 400),
      statuses.join(','),
    )
  })

  t.test('a refresh token of an expired session: 400 session_expired', async (t) => {
    const s = (await h.client(a).signInWithPassword({ email: user, password })).data.session!
    const sid = decodeJwt(s.access_token).session_id
    // not_after is how GoTrue bounds a session's life (set for SSO sessions).
    await adminQuery(
      'UPDATE auth.sessions SET not_after = $2 WHERE id = $1',
      [sid, new Date(h.clock.now().getTime() - 1000)],
      a.database,
    )
    const r = await token({ refresh_token: s.refresh_token })
    t.same([r.status, r.body], [400, { code: 'session_expired', message: 'Invalid Refresh Token: Session Expired' }])
    const viaClient = await h.client(a).refreshSession({ refresh_token: s.refresh_token })
    t.same([viaClient.error?.status, viaClient.error?.code], [400, 'session_expired'])
  })

  t.test('bad refresh tokens', async (t) => {
    const unknown = await token({ refresh_token: 'aaaaaaaaaaaa' })
    t.same(
      [unknown.status, unknown.body],
      [400, { code: 'refresh_token_not_found', message: 'Invalid Refresh Token: Refresh Token Not Found' }],
    )
    const malformed = await token({ refresh_token: 'short' })
    t.same(
      [malformed.status, malformed.body],
      [400, { code: 'validation_failed', message: 'Refresh token is not valid' }],
    )
    const missing = await token({})
    t.same(
      [missing.status, missing.body],
      [400, { error: 'invalid_request', error_description: 'refresh_token required' }],
    )
  })

  t.test('sign-out scopes', async (t) => {
    const [ca, cb, cc] = [h.client(a), h.client(a), h.client(a)]
    const sa = (await ca.signInWithPassword({ email: user, password })).data.session!
    const sb = (await cb.signInWithPassword({ email: user, password })).data.session!
    const sc = (await cc.signInWithPassword({ email: user, password })).data.session!
    const events: string[] = []
    ca.onAuthStateChange((e) => {
      events.push(e)
    })

    // local: only A's session ends.
    t.error((await ca.signOut({ scope: 'local' })).error)
    t.ok(events.includes('SIGNED_OUT'))
    const goneA = await call(h.base(a) + '/user', { token: sa.access_token })
    t.same(
      [goneA.status, goneA.body],
      [403, { code: 'session_not_found', message: 'Session from session_id claim in JWT does not exist' }],
    )
    t.error((await cb.getUser()).error)
    t.error((await cc.getUser()).error)
    // A's refresh token died with its session ("expired" for the client).
    const deadRefresh = await token({ refresh_token: sa.refresh_token })
    t.same([deadRefresh.status, deadRefresh.body.code], [400, 'refresh_token_not_found'])

    // others: B stays, C ends.
    t.error((await cb.signOut({ scope: 'others' })).error)
    t.error((await cb.getUser()).error)
    t.equal((await call(h.base(a) + '/user', { token: sc.access_token })).status, 403)
    const cGone = await cc.getUser()
    t.equal(cGone.error?.name, 'AuthSessionMissingError', 'auth-js maps session_not_found')

    // global: B ends as well.
    t.error((await cb.signOut()).error)
    t.equal((await call(h.base(a) + '/user', { token: sb.access_token })).status, 403)

    const raw = await call(h.base(a) + '/logout?scope=everything', { method: 'POST', token: sb.access_token })
    t.equal(raw.status, 403, 'the session is gone before the scope is looked at')
    const fresh = (await h.client(a).signInWithPassword({ email: user, password })).data.session!
    const badScope = await call(h.base(a) + '/logout?scope=everything', { method: 'POST', token: fresh.access_token })
    t.same([badScope.status, badScope.body.code], [400, 'validation_failed'])
    const ok = await call(h.base(a) + '/logout', { method: 'POST', token: fresh.access_token })
    t.equal(ok.status, 204)
    t.equal(ok.body, null)
  })

  t.test('expired access token: 403 bad_jwt; no token: 401', async (t) => {
    const s = (await h.client(a).signInWithPassword({ email: user, password })).data.session!
    t.equal((await call(h.base(a) + '/user', { token: s.access_token })).status, 200)
    h.clock.advance(3601)
    const expired = await call(h.base(a) + '/user', { token: s.access_token })
    t.equal(expired.status, 403)
    t.equal(expired.body.code, 'bad_jwt')
    t.match(
      expired.body.message,
      /^invalid JWT: unable to parse or verify signature, token has invalid claims: token is expired$/,
    )
    // The refresh token still works after the access token expired.
    const refreshed = await token({ refresh_token: s.refresh_token })
    t.equal(refreshed.status, 200)
    t.equal((await call(h.base(a) + '/user', { token: refreshed.body.access_token })).status, 200)
    const none = await call(h.base(a) + '/user')
    t.same(
      [none.status, none.body],
      [401, { code: 'no_authorization', message: 'This endpoint requires a valid Bearer token' }],
    )
    const junk = await call(h.base(a) + '/user', { token: 'not.a.jwt' })
    t.same([junk.status, junk.body.code], [403, 'bad_jwt'])
  })
})

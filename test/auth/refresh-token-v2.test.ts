// Refresh tokens v2 (docs/auth-protocol.md §5.3, GoTrue's internal/crypto/refresh_tokens.go): the
// token's bytes, its HMAC under the session's key, rotation by the session's counter, the
// allowed reuses (one behind, or within the reuse interval of the last refresh), reuse beyond
// them ending the session, tampered and forged tokens, and the move of a v1 session to v2.
// The token's layout is checked here with node:crypto directly, not with the engine's encoder.
import { createHash, createHmac, randomBytes, randomUUID } from 'node:crypto'
import * as OTPAuth from 'otpauth'
import pg from 'pg'
import t from 'tap'
import { startAuth, call, decodeJwt, email } from '../helpers/auth-harness.js'
import { adminQuery, adminUrl } from '../helpers/db.js'
import { withDatabase } from '../../src/shared/index.js'
import { rotateSessionToken } from '../../src/auth/models/hot-refresh.js'
import { parseRefreshTokenV2 } from '../../src/auth/refresh-token-format.js'

/** base64url of version 0 | uuid | uvarint counter | HMAC[0:16] | SHA-256[0:4], written out independently. */
function forge(sessionId: string, counter: number, key: string, version = 0): string {
  const varint: number[] = []
  let v = counter
  while (v >= 0x80) {
    varint.push((v & 0x7f) | 0x80)
    v = Math.floor(v / 128)
  }
  varint.push(v)
  const signed = Buffer.concat([
    Buffer.of(version),
    Buffer.from(sessionId.replace(/-/g, ''), 'hex'),
    Buffer.from(varint),
  ])
  const sig = createHmac('sha256', Buffer.from(key, 'base64url')).update(signed).digest().subarray(0, 16)
  const body = Buffer.concat([signed, sig])
  return Buffer.concat([body, createHash('sha256').update(body).digest().subarray(0, 4)]).toString('base64url')
}

/** The same token with one signature byte changed and the checksum made right again. */
function tamper(token: string): string {
  const raw = Buffer.from(token, 'base64url')
  const body = raw.subarray(0, raw.length - 4)
  body[body.length - 1] ^= 1
  return Buffer.concat([body, createHash('sha256').update(body).digest().subarray(0, 4)]).toString('base64url')
}

t.test('refresh tokens v2', async (t) => {
  const h = await startAuth(t, {
    tenants: [{ auth: { refresh_token_reuse_interval: 10, refresh_token_algorithm_version: 2 } }],
  })
  const [a] = h.list as [(typeof h.list)[0]]
  const password = 'correct-horse'
  const user = email('v2')
  t.error((await h.client(a).signUp({ email: user, password })).error)
  const token = (refresh_token: string, userAgent = 'test-agent') =>
    call(h.base(a) + '/token?grant_type=refresh_token', {
      body: { refresh_token },
      headers: { 'user-agent': userAgent },
    })
  const session = async (sid: string) =>
    (
      await adminQuery<{ key: string | null; counter: string | null; user_agent: string | null; refreshed: boolean }>(
        `SELECT refresh_token_hmac_key AS key, refresh_token_counter::text AS counter, user_agent,
                refreshed_at IS NOT NULL AS refreshed FROM auth.sessions WHERE id = $1`,
        [sid],
        a.database,
      )
    ).rows[0]
  const rows = async (sid: string) =>
    (
      await adminQuery<{ n: number }>(
        'SELECT count(*)::int AS n FROM auth.refresh_tokens WHERE session_id = $1',
        [sid],
        a.database,
      )
    ).rows[0]!.n
  const signIn = async () => (await h.client(a).signInWithPassword({ email: user, password })).data.session!

  t.test("a sign-in's token: GoTrue's layout, signed with the session's key, no token row", async (t) => {
    const s = await signIn()
    const sid = decodeJwt(s.access_token).session_id as string
    const row = await session(sid)
    t.match(row, { counter: '0' })
    t.match(row!.key, /^[A-Za-z0-9_-]{43}$/, '32 random bytes as base64url')
    t.equal(s.refresh_token, forge(sid, 0, row!.key!), 'version 0 | session | counter 0 | HMAC | checksum')
    t.equal(Buffer.from(s.refresh_token, 'base64url').length, 38)
    t.equal(await rows(sid), 0)
  })

  t.test('refreshSession through auth-js moves the counter on, in the session row only', async (t) => {
    const c = h.client(a)
    const events: string[] = []
    c.onAuthStateChange((e) => {
      events.push(e)
    })
    const first = (await c.signInWithPassword({ email: user, password })).data.session!
    const sid = decodeJwt(first.access_token).session_id as string
    const { data, error } = await c.refreshSession()
    t.error(error)
    t.ok(events.includes('TOKEN_REFRESHED'))
    const key = (await session(sid))!.key!
    t.equal(data.session!.refresh_token, forge(sid, 1, key))
    t.equal(decodeJwt(data.session!.access_token).session_id, sid)
    t.equal(decodeJwt(data.session!.access_token).amr[0].method, 'password', 'AMR read from the session')
    t.match(await session(sid), { counter: '1', refreshed: true })
    t.equal((await c.getUser()).data.user?.email, user)
    const again = await c.refreshSession()
    t.error(again.error)
    t.equal(again.data.session!.refresh_token, forge(sid, 2, key))
    t.equal(await rows(sid), 0, 'no row per refresh')
    const raw = await token(again.data.session!.refresh_token, 'agent/2')
    t.equal(raw.status, 200)
    t.match(await session(sid), { counter: '3', user_agent: 'agent/2' }, "the refresh's user agent is kept")
  })

  t.test(
    'the engine remembers a session it refreshed: what changes in between shows in the next refresh',
    async (t) => {
      const s = await signIn()
      const sid = decodeJwt(s.access_token).session_id as string
      const uid = decodeJwt(s.access_token).sub as string
      const key = (await session(sid))!.key!
      const lastStatement = async () =>
        (
          await adminQuery<{ query: string }>(
            `SELECT query FROM pg_catalog.pg_stat_activity
            WHERE datname = current_database() AND query LIKE 'UPDATE auth.sessions s SET refresh_token_counter%'
            ORDER BY state_change DESC LIMIT 1`,
            [],
            a.database,
          )
        ).rows[0]?.query ?? ''
      // The statement's text as pg_stat_activity keeps it (its first 1,024 bytes): only the short one finds the row by ctid.
      const short = (q: string) => q.includes('s.ctid = $7::tid')
      let live = s.refresh_token
      const refresh = async () => {
        const r = await token(live)
        t.equal(r.status, 200, r.status === 200 ? 'refreshed' : JSON.stringify(r.body))
        live = r.body.refresh_token
        return { body: r.body, claims: decodeJwt(r.body.access_token), short: short(await lastStatement()) }
      }
      const r1 = await refresh()
      t.notOk(r1.short, 'the first refresh reads everything')
      const r2 = await refresh()
      t.ok(r2.short, 'the next one only checks that the session and user rows are the versions it knew')
      t.same(r2.body.user, r1.body.user, 'and answers the same user')
      t.same(r2.claims.amr, r1.claims.amr)

      await adminQuery(
        `UPDATE auth.users SET raw_app_meta_data = raw_app_meta_data || '{"plan": "pro"}',
              raw_user_meta_data = '{"nick": "v2"}' WHERE id = $1`,
        [uid],
        a.database,
      )
      const r3 = await refresh()
      t.notOk(r3.short, 'a users row changed by SQL: the long statement')
      t.equal(r3.claims.app_metadata.plan, 'pro', "the user's new row in the access token")
      t.match(r3.body.user, { app_metadata: { plan: 'pro' }, user_metadata: { nick: 'v2' } }, 'and in the answer')
      const r4 = await refresh()
      t.ok(r4.short)
      t.match(r4.body.user, { app_metadata: { plan: 'pro' }, user_metadata: { nick: 'v2' } }, 'and after it')

      await adminQuery(
        `UPDATE auth.identities SET identity_data = identity_data || '{"nick": "ident"}' WHERE user_id = $1`,
        [uid],
        a.database,
      )
      const r5 = await refresh()
      t.notOk(r5.short, 'an identity changed by SQL: the long statement (migration 0240)')
      t.equal(r5.body.user.identities[0].identity_data.nick, 'ident', 'with the new identity')
      const factor = randomUUID()
      await adminQuery(
        `INSERT INTO auth.mfa_factors (id, user_id, friendly_name, factor_type, status, created_at, updated_at)
       VALUES ($1, $2, 'sql factor', 'totp', 'verified', now(), now())`,
        [factor, uid],
        a.database,
      )
      const r6 = await refresh()
      t.notOk(r6.short, 'a factor added by SQL: the long statement')
      t.same(
        r6.body.user.factors.map((f: { id: string }) => f.id),
        [factor],
        'with the factor',
      )
      t.ok((await refresh()).short)
      await adminQuery(
        `INSERT INTO auth.mfa_amr_claims (id, session_id, created_at, updated_at, authentication_method)
       VALUES ($1, $2, now(), now(), 'totp')`,
        [randomUUID(), sid],
        a.database,
      )
      const r7 = await refresh()
      t.same(
        r7.claims.amr.map((x: { method: string }) => x.method).sort(),
        ['password', 'totp'],
        'an AMR claim added by SQL: in the next access token',
      )
      t.equal(r7.claims.aal, 'aal2')
      await adminQuery('DELETE FROM auth.mfa_factors WHERE id = $1', [factor], a.database)
      const r8 = await refresh()
      t.same(r8.body.user.factors ?? [], [], 'a factor deleted by SQL: gone from the next answer')
      t.ok((await refresh()).short)

      await adminQuery(
        'UPDATE auth.users SET banned_until = $2 WHERE id = $1',
        [uid, new Date(h.clock.now().getTime() + 3_600_000)],
        a.database,
      )
      const banned = await token(live)
      t.same([banned.status, banned.body.code], [400, 'user_banned'], 'a ban set by SQL holds at once')
      await adminQuery('UPDATE auth.users SET banned_until = NULL WHERE id = $1', [uid], a.database)
      t.ok((await refresh()).body.access_token)
      t.ok((await refresh()).short)

      const counter = BigInt((await session(sid))!.counter!)
      const replaced = randomBytes(32).toString('base64url')
      await adminQuery(
        'UPDATE auth.sessions SET refresh_token_hmac_key = $2 WHERE id = $1',
        [sid, replaced],
        a.database,
      )
      const old = await token(live)
      t.same([old.status, old.body.code], [400, 'refresh_token_not_found'], 'a token of the replaced key is refused')
      t.equal(live, forge(sid, Number(counter), key))
      const next = await token(forge(sid, Number(counter), replaced))
      t.equal(next.status, 200, 'a token of the new key is taken')
      t.equal(next.body.refresh_token, forge(sid, Number(counter) + 1, replaced))
      const forged = await token(tamper(next.body.refresh_token))
      t.same([forged.status, forged.body.code], [400, 'refresh_token_not_found'], 'a tampered one is not')
    },
  )

  t.test("migration 0240's triggers let a user with identities, factors and sessions be deleted", async (t) => {
    const e = email('gone')
    const c = h.client(a)
    t.error((await c.signUp({ email: e, password })).error)
    const signedIn = (await c.signInWithPassword({ email: e, password })).data.session!
    t.equal((await token(signedIn.refresh_token)).status, 200)
    t.error((await c.mfa.enroll({ factorType: 'totp' })).error)
    const uid = decodeJwt(signedIn.access_token).sub as string
    const res = await call(`${h.base(a)}/admin/users/${uid}`, { method: 'DELETE', token: await h.serviceToken(a) })
    t.equal(res.status, 200, JSON.stringify(res.body))
    const left = await adminQuery<{ n: number }>(
      `SELECT ((SELECT count(*) FROM auth.sessions WHERE user_id = $1) + (SELECT count(*) FROM auth.identities
         WHERE user_id = $1) + (SELECT count(*) FROM auth.mfa_factors WHERE user_id = $1))::int AS n`,
      [uid],
      a.database,
    )
    t.equal(left.rows[0]!.n, 0, 'sessions, identities and factors went with the user')
    t.same((await token(signedIn.refresh_token)).body.code, 'refresh_token_not_found')
  })

  t.test('reuse: one behind (lost answer), within the interval, beyond both (session ended)', async (t) => {
    const s = await signIn()
    const sid = decodeJwt(s.access_token).session_id as string
    const key = (await session(sid))!.key!
    const r1 = await token(s.refresh_token)
    t.equal(r1.body.refresh_token, forge(sid, 1, key))
    h.clock.advance(11)
    // Counter 0 is one behind: the client never saw r1's answer; outside the interval too.
    const lost = await token(s.refresh_token)
    t.equal(lost.status, 200)
    t.equal(lost.body.refresh_token, forge(sid, 1, key), 'the current token again, no new counter')
    t.equal((await session(sid))!.counter, '1')
    const r2 = await token(lost.body.refresh_token)
    t.equal(r2.body.refresh_token, forge(sid, 2, key))
    // Counter 0 is now two behind, but the last refresh was just now: concurrent tabs.
    const within = await token(s.refresh_token)
    t.equal(within.status, 200)
    t.equal(within.body.refresh_token, forge(sid, 2, key))
    t.equal(decodeJwt(within.body.access_token).session_id, sid)
    h.clock.advance(11)
    const reused = await token(s.refresh_token)
    t.same(
      [reused.status, reused.body],
      [400, { code: 'refresh_token_already_used', message: 'Invalid Refresh Token: Already Used' }],
    )
    t.equal(await session(sid), undefined, 'the session is gone')
    const last = await token(r2.body.refresh_token)
    t.same([last.status, last.body.code], [400, 'refresh_token_not_found'], 'its newest token with it')
    t.equal((await call(h.base(a) + '/user', { token: r2.body.access_token })).status, 403, 'and its access tokens')
    const viaClient = await h.client(a).refreshSession({ refresh_token: r2.body.refresh_token })
    t.same([viaClient.error?.status, viaClient.error?.code], [400, 'refresh_token_not_found'])
  })

  t.test('concurrent refreshes of one token all get the same next token', async (t) => {
    const s = await signIn()
    const sid = decodeJwt(s.access_token).session_id as string
    const results = await Promise.all(Array.from({ length: 6 }, () => token(s.refresh_token)))
    t.same(
      results.map((r) => r.status),
      [200, 200, 200, 200, 200, 200],
    )
    t.equal(new Set(results.map((r) => r.body.refresh_token)).size, 1)
    t.equal((await session(sid))!.counter, '1')
  })

  t.test('tampered, foreign and forged tokens', async (t) => {
    const s = await signIn()
    const sid = decodeJwt(s.access_token).session_id as string
    const key = (await session(sid))!.key!
    const notFound = [
      400,
      { code: 'refresh_token_not_found', message: 'Invalid Refresh Token: Refresh Token Not Found' },
    ]
    const invalid = [400, { code: 'validation_failed', message: 'Refresh token is not valid' }]
    const bad = await token(tamper(s.refresh_token))
    t.same([bad.status, bad.body], notFound, 'a signature that does not hold')
    const otherKey = await token(forge(sid, 0, Buffer.alloc(32, 7).toString('base64url')))
    t.same([otherKey.status, otherKey.body], notFound, 'signed with another key')
    const noSession = await token(forge('6b3c2d1e-0000-4000-8000-000000000000', 0, key))
    t.same([noSession.status, noSession.body], notFound, 'a session that does not exist')
    const raw = Buffer.from(s.refresh_token, 'base64url')
    raw[20] ^= 1
    const checksum = await token(raw.toString('base64url'))
    t.same([checksum.status, checksum.body], invalid, 'a checksum that does not hold')
    const version = await token(forge(sid, 0, key, 1))
    t.same([version.status, version.body], invalid, 'an unknown version')
    const long = await token(s.refresh_token + 'AAAA')
    t.same([long.status, long.body], invalid, 'bytes after the checksum')
    const ahead = await token(forge(sid, 5, key))
    t.same(
      [ahead.status, ahead.body],
      [400, { code: 'validation_failed', message: 'Invalid Refresh Token: Not Issued By This Server' }],
      'a counter ahead of the session',
    )
    t.equal((await session(sid))!.counter, '0', 'none of them moved the counter')
    t.equal((await token(s.refresh_token)).status, 200, 'and the real token still refreshes')
  })

  t.test('banned user, expired session, sign-out', async (t) => {
    const s = await signIn()
    const sid = decodeJwt(s.access_token).session_id as string
    const uid = decodeJwt(s.access_token).sub as string
    await adminQuery(
      'UPDATE auth.users SET banned_until = $2 WHERE id = $1',
      [uid, new Date(h.clock.now().getTime() + 60_000)],
      a.database,
    )
    const banned = await token(s.refresh_token)
    t.same([banned.status, banned.body.code], [400, 'user_banned'])
    await adminQuery('UPDATE auth.users SET banned_until = NULL WHERE id = $1', [uid], a.database)
    await adminQuery(
      'UPDATE auth.sessions SET not_after = $2 WHERE id = $1',
      [sid, new Date(h.clock.now().getTime() - 1000)],
      a.database,
    )
    const expired = await token(s.refresh_token)
    t.same(
      [expired.status, expired.body],
      [400, { code: 'session_expired', message: 'Invalid Refresh Token: Session Expired' }],
    )
    t.equal((await session(sid))!.counter, '0')

    const c = h.client(a)
    const live = (await c.signInWithPassword({ email: user, password })).data.session!
    t.error((await c.signOut({ scope: 'global' })).error)
    const out = await token(live.refresh_token)
    t.same([out.status, out.body.code], [400, 'refresh_token_not_found'], 'sign-out ends v2 sessions')
  })

  t.test('a v1 session moves to v2 on its next refresh; algorithm 1 keeps issuing v1', async (t) => {
    h.setAuth(a, { refresh_token_algorithm_version: 1 })
    const s = await signIn()
    const sid = decodeJwt(s.access_token).session_id as string
    t.match(s.refresh_token, /^[a-z2-7]{12}$/, 'algorithm 1: a v1 token')
    t.match(await session(sid), { key: null, counter: null })
    const v1 = await token(s.refresh_token)
    t.match(v1.body.refresh_token, /^[a-z2-7]{12}$/)
    t.equal(await rows(sid), 2, 'a row per token')

    h.setAuth(a, { refresh_token_algorithm_version: 2 })
    const up = await token(v1.body.refresh_token)
    t.equal(up.status, 200)
    const row = await session(sid)
    t.match(row, { counter: '0' })
    t.equal(up.body.refresh_token, forge(sid, 0, row!.key!), "the session's first v2 token")
    t.equal(decodeJwt(up.body.access_token).session_id, sid)
    const live = await adminQuery<{ n: number }>(
      'SELECT count(*)::int AS n FROM auth.refresh_tokens WHERE session_id = $1 AND NOT revoked',
      [sid],
      a.database,
    )
    t.equal(live.rows[0]!.n, 0, 'its v1 tokens are all revoked')
    const again = await token(v1.body.refresh_token)
    t.equal(again.body.refresh_token, up.body.refresh_token, 'the v1 token within the interval: the current v2 token')
    const next = await token(up.body.refresh_token)
    t.equal(next.body.refresh_token, forge(sid, 1, row!.key!))
    h.clock.advance(11)
    const late = await token(v1.body.refresh_token)
    t.same([late.status, late.body.code], [400, 'refresh_token_already_used'])

    h.setAuth(a, { refresh_token_algorithm_version: 1 })
    const still = await token(next.body.refresh_token)
    t.equal(still.body.refresh_token, forge(sid, 2, row!.key!), 'v2 tokens keep working under algorithm 1')
    h.setAuth(a, { refresh_token_algorithm_version: 2 })
  })
})

t.test(
  "the one-statement refresh checks the HMAC in SQL as node:crypto does, with pgcrypto's hmac() or without",
  async (t) => {
    const h = await startAuth(t, { tenants: [{ auth: { refresh_token_algorithm_version: 2 } }] })
    const [a] = h.list as [(typeof h.list)[0]]
    const signUp = await call(h.base(a) + '/signup', {
      body: { email: email('hot'), password: 'correct horse battery' },
    })
    const sid = decodeJwt(signUp.body.access_token).session_id as string
    const ext = await adminQuery(
      `SELECT n.nspname AS schema, pg_catalog.has_schema_privilege($1, n.oid, 'USAGE') AS usable
       FROM pg_catalog.pg_extension e JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'pgcrypto'`,
      [a.roles.authn],
      a.database,
    )
    t.same(
      ext.rows,
      [{ schema: 'extensions', usable: true }],
      "migration 0230: pgcrypto in extensions, for the engine's login",
    )
    const connect = async () => {
      const c = new pg.Client({ connectionString: withDatabase(adminUrl(), a.database) })
      await c.connect()
      t.teardown(() => c.end())
      return c
    }
    const info = { now: h.clock.now(), userAgent: null, ip: null }
    const present = (tok: string) => parseRefreshTokenV2(tok)!
    const setKey = (c: pg.Client, key: string, counter: number) =>
      c.query('UPDATE auth.sessions SET refresh_token_hmac_key = $2, refresh_token_counter = $3 WHERE id = $1', [
        sid,
        key,
        counter,
      ])
    const agreement = async (c: pg.Client) => {
      await c.query('BEGIN')
      let agreed = 0
      for (let i = 0; i < 64; i++) {
        // Random keys: every base64url character turns up, '-' and '_' included.
        const key = randomBytes(32).toString('base64url')
        await setKey(c, key, i * 37)
        const good = await rotateSessionToken(c, present(forge(sid, i * 37, key)), info)
        const bad = await rotateSessionToken(c, present(tamper(forge(sid, i * 37 + 1, key))), info)
        if (good?.key === key && bad === null) agreed++
      }
      const hot = await c.query<{ n: string }>(
        "SELECT pg_catalog.pg_stat_get_xact_tuples_hot_updated('auth.sessions'::regclass)::text AS n",
      )
      await c.query('ROLLBACK')
      return { agreed, hot: Number(hot.rows[0]!.n) }
    }
    const first = await connect()
    const withPgcrypto = await agreement(first)
    t.equal(
      withPgcrypto.agreed,
      64,
      'hmac(): a token signed with the key is taken, the same with one bit changed is not',
    )
    t.ok(withPgcrypto.hot >= 64, `the refreshes were HOT updates (${withPgcrypto.hot})`)

    await adminQuery('DROP EXTENSION pgcrypto', [], a.database)
    const key = randomBytes(32).toString('base64url')
    await setKey(first, key, 5)
    const lost = await rotateSessionToken(first, present(forge(sid, 5, key)), info)
    t.equal(lost, null, 'the statement naming the dropped hmac() fails once: the slow path answers')
    const again = await rotateSessionToken(first, present(forge(sid, 5, key)), info)
    t.equal(again?.key, key, 'then the sha256() form')
    const withoutPgcrypto = await agreement(await connect())
    t.equal(withoutPgcrypto.agreed, 64, 'sha256() HMAC: the same answers')
    t.ok(withoutPgcrypto.hot >= 64, `the refreshes were HOT updates (${withoutPgcrypto.hot})`)
  },
)

t.test('MFA verify raises a v2 session: counter on by two, the aal1 token no longer refreshes it', async (t) => {
  const h = await startAuth(t, {
    tenants: [{ auth: { refresh_token_reuse_interval: 10, refresh_token_algorithm_version: 2 } }],
  })
  const [a] = h.list as [(typeof h.list)[0]]
  const c = h.client(a)
  const s = (await c.signUp({ email: email('mfa2'), password: 'secret123' })).data.session!
  const sid = decodeJwt(s.access_token).session_id as string
  const f = (await c.mfa.enroll({ factorType: 'totp' })).data!
  const ch = (await c.mfa.challenge({ factorId: f.id })).data!
  const code = new OTPAuth.TOTP({ secret: OTPAuth.Secret.fromBase32(f.totp.secret), digits: 6, period: 30 }).generate({
    timestamp: h.clock.now().getTime(),
  })
  const ok = await c.mfa.verify({ factorId: f.id, challengeId: ch.id, code })
  t.error(ok.error)
  const key = (
    await adminQuery<{ key: string }>(
      'SELECT refresh_token_hmac_key AS key FROM auth.sessions WHERE id = $1',
      [sid],
      a.database,
    )
  ).rows[0]!.key
  t.equal(ok.data!.refresh_token, forge(sid, 2, key), 'counter 0 -> 2')
  const refreshed = await c.refreshSession()
  t.error(refreshed.error)
  t.equal(decodeJwt(refreshed.data.session!.access_token).aal, 'aal2', 'a refresh keeps aal2')
  t.equal(refreshed.data.session!.refresh_token, forge(sid, 3, key))
  h.clock.advance(11)
  const old = await call(h.base(a) + '/token?grant_type=refresh_token', { body: { refresh_token: s.refresh_token } })
  t.same([old.status, old.body.code], [400, 'refresh_token_already_used'], 'the aal1 token is reuse')
})

t.test('auth.remembered_sessions: 0 remembers nothing: every refresh reads everything', async (t) => {
  const h = await startAuth(t, {
    auth: { remembered_sessions: 0 },
    tenants: [{ auth: { refresh_token_algorithm_version: 2 } }],
  })
  const [a] = h.list as [(typeof h.list)[0]]
  const signUp = await call(h.base(a) + '/signup', {
    body: { email: email('cold'), password: 'correct horse battery' },
  })
  let live = signUp.body.refresh_token as string
  const statements: string[] = []
  for (let i = 0; i < 3; i++) {
    const r = await call(h.base(a) + '/token?grant_type=refresh_token', { body: { refresh_token: live } })
    t.equal(r.status, 200)
    live = r.body.refresh_token
    const q = await adminQuery<{ query: string }>(
      `SELECT query FROM pg_catalog.pg_stat_activity
        WHERE datname = current_database() AND query LIKE 'UPDATE auth.sessions s SET refresh_token_counter%'
        ORDER BY state_change DESC LIMIT 1`,
      [],
      a.database,
    )
    statements.push(q.rows[0]!.query)
  }
  t.ok(
    statements.every((q) => !q.includes('s.ctid = $7::tid') && q.includes('hmac(')),
    'each refresh ran the long statement with the HMAC in SQL',
  )
})

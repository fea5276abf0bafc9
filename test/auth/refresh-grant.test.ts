// The refresh grant's common case is one statement that hands the user back as one json value
// (models/refresh-tokens.ts rotateLiveToken for v1 tokens, models/session-tokens.ts rotateSessionToken for v2): the user it answers must be the user every other
// endpoint reads column by column, whatever the row holds and whatever time zone the engine's
// database sessions run in. The access token is signed with the tenant's ES256 key.
import { createPublicKey } from 'node:crypto'
import { isDeepStrictEqual } from 'node:util'
import t from 'tap'
import { jwtVerify } from 'jose'
import pg from 'pg'
import { startAuth, call, decodeJwt, email } from '../helpers/auth-harness.js'
import { adminQuery, adminUrl } from '../helpers/db.js'
import { withDatabase } from '../../src/shared/index.js'
import { generateRefreshToken } from '../../src/auth/crypto.js'
import { USER_JSON, USER_SELECT, userFromJson, userOf } from '../../src/auth/models/users.js'

// Both algorithms' hot statements and slow paths (v1 tokens, docs/auth-protocol.md §5.2; v2, §5.3).
for (const version of [1, 2] as const) {
  t.test(
    `a refresh grant answers the user GET /user reads, for any row and session time zone (algorithm ${version})`,
    async (t) => {
      const h = await startAuth(t, {
        tenants: [{ auth: { refresh_token_reuse_interval: 10, refresh_token_algorithm_version: version } }],
      })
      const [a] = h.list as [(typeof h.list)[0]]
      // Before the engine's first connection: its sessions print timestamps at -03:30.
      await adminQuery(`ALTER ROLE "${a.roles.authn}" IN DATABASE "${a.database}" SET timezone = 'America/St_Johns'`)
      const address = email('rg')
      const signUp = await call(h.base(a) + '/signup', { body: { email: address, password: 'correct horse battery' } })
      t.equal(signUp.status, 200)
      const userId = signUp.body.user.id as string

      await adminQuery(
        `UPDATE auth.users SET
      invited_at = '2021-03-04 05:06:07.123456+00', banned_until = '2000-01-01 00:00:00.999999+00',
      email_change = 'next@example.com', email_change_sent_at = '1999-12-31 23:59:59.5+00',
      phone = '15551234567', phone_confirmed_at = '0044-03-15 12:00:00+00 BC',
      reauthentication_sent_at = '2021-06-01 00:00:00+05:30',
      raw_user_meta_data = $2::jsonb
    WHERE id = $1`,
        [userId, JSON.stringify({ name: 'Zoë "Q" \u2028', tags: ['a', 1, 2.5, null, true], nested: { deep: {} } })],
        a.database,
      )

      const refreshed = await call(h.base(a) + '/token?grant_type=refresh_token', {
        body: { refresh_token: signUp.body.refresh_token },
      })
      t.equal(refreshed.status, 200)
      const read = await call(h.base(a) + '/user', { token: refreshed.body.access_token })
      t.equal(read.status, 200)
      t.same(refreshed.body.user, read.body, "the refresh grant's user is the one GET /user reads")
      t.equal(refreshed.body.user.invited_at, '2021-03-04T05:06:07.123Z')
      t.equal(refreshed.body.user.new_email, 'next@example.com')
      t.equal(refreshed.body.user.user_metadata.name, 'Zoë "Q" \u2028')

      const claims = decodeJwt(refreshed.body.access_token)
      t.equal(claims.sub, userId)
      t.equal(claims.phone, '15551234567')
      t.same(claims.user_metadata, refreshed.body.user.user_metadata)

      const jwk = a.file.jwt.signing_keys!.find((k) => k.alg === 'ES256')!
      const publicKey = createPublicKey({ key: JSON.parse(jwk.private_key), format: 'jwk' })
      const { protectedHeader } = await jwtVerify(refreshed.body.access_token, publicKey, { algorithms: ['ES256'] })
      t.equal(protectedHeader.kid, jwk.kid, "signed with the tenant's ES256 key")
    },
  )

  t.test(
    `a refresh grant lists the user's identities and factors in creation order, as GET /user does (algorithm ${version})`,
    async (t) => {
      const h = await startAuth(t, {
        tenants: [{ auth: { refresh_token_reuse_interval: 10, refresh_token_algorithm_version: version } }],
      })
      const [a] = h.list as [(typeof h.list)[0]]
      // Its sessions print timestamps at -02:30 in summer and -03:30 in winter: the texts of two
      // moments do not order as the moments do.
      await adminQuery(`ALTER ROLE "${a.roles.authn}" IN DATABASE "${a.database}" SET timezone = 'America/St_Johns'`)
      const signUp = await call(h.base(a) + '/signup', {
        body: { email: email('order'), password: 'correct horse battery' },
      })
      t.equal(signUp.status, 200)
      const userId = signUp.body.user.id as string
      // Inserted in an order unlike their creation: a tie to the microsecond (then by id), one a
      // microsecond apart within the same millisecond, a summer and a winter time, one without.
      const identities: Array<[string, string | null]> = [
        ['00000000-0000-4000-8000-00000000000b', '2024-01-15 12:00:00.000500+00'],
        ['00000000-0000-4000-8000-00000000000a', '2024-01-15 12:00:00.000500+00'],
        ['00000000-0000-4000-8000-00000000000c', '2024-01-15 12:00:00.000499+00'],
        ['00000000-0000-4000-8000-00000000000d', null],
        ['00000000-0000-4000-8000-00000000000e', '2024-07-15 11:00:00+00'],
        ['00000000-0000-4000-8000-00000000000f', '2024-07-15 10:59:59.9+00'],
      ]
      for (const [id, at] of identities) {
        await adminQuery(
          `INSERT INTO auth.identities (id, provider_id, user_id, identity_data, provider, created_at, updated_at)
       VALUES ($1::uuid, $1::text, $2, '{}', 'github', $3, $3)`,
          [id, userId, at],
          a.database,
        )
      }
      const factors: Array<[string, string]> = [
        ['00000000-0000-4000-9000-000000000001', '2024-07-15 11:00:00.000002+00'],
        ['00000000-0000-4000-9000-000000000002', '2024-01-15 12:00:00+00'],
        ['00000000-0000-4000-9000-000000000003', '2024-07-15 11:00:00.000001+00'],
      ]
      for (const [id, at] of factors) {
        await adminQuery(
          `INSERT INTO auth.mfa_factors (id, user_id, friendly_name, factor_type, status, created_at, updated_at)
       VALUES ($1::uuid, $2, $1::text, 'totp', 'unverified', $3, $3)`,
          [id, userId, at],
          a.database,
        )
      }
      const refreshed = await call(h.base(a) + '/token?grant_type=refresh_token', {
        body: { refresh_token: signUp.body.refresh_token },
      })
      t.equal(refreshed.status, 200)
      const ids = (list: Array<{ identity_id?: string; id: string }>): string[] =>
        list.map((x) => x.identity_id ?? x.id)
      const github = ['c', 'a', 'b', 'f', 'e', 'd'].map((x) => `00000000-0000-4000-8000-00000000000${x}`)
      const emailIdentity = ids(refreshed.body.user.identities).filter((x) => !github.includes(x))
      t.equal(emailIdentity.length, 1, "the sign-up's own identity too")
      t.same(
        ids(refreshed.body.user.identities).filter((x) => github.includes(x)),
        github,
        'identities by created_at to the microsecond, then id; none without a time last',
      )
      t.same(
        ids(refreshed.body.user.factors),
        ['2', '3', '1'].map((x) => `00000000-0000-4000-9000-00000000000${x}`),
      )
      const read = await call(h.base(a) + '/user', { token: refreshed.body.access_token })
      t.same(refreshed.body.user, read.body, 'the order GET /user reads')
      // The token presented again within the reuse interval: the slow path answers the same user.
      const again = await call(h.base(a) + '/token?grant_type=refresh_token', {
        body: { refresh_token: signUp.body.refresh_token },
      })
      t.equal(again.status, 200)
      t.same(again.body.user, read.body, 'and so does the reuse path')
    },
  )
}

t.test('refresh tokens are v1-shaped and never repeat, across refills of their entropy', async (t) => {
  const seen = new Set<string>()
  // 256 tokens are drawn per refill: several refills.
  for (let i = 0; i < 2000; i++) {
    const token = generateRefreshToken()
    if (!/^[a-z2-7]{12}$/.test(token)) t.fail(`token ${i} is ${token}`)
    seen.add(token)
  }
  t.equal(seen.size, 2000)
})

t.test('the user json reads back every timestamp as the column read does', async (t) => {
  const h = await startAuth(t)
  const [a] = h.list as [(typeof h.list)[0]]
  const signUp = await call(h.base(a) + '/signup', { body: { email: email('ts'), password: 'correct horse battery' } })
  const userId = signUp.body.user.id as string
  const client = new pg.Client({ connectionString: withDatabase(adminUrl(), a.database) })
  await client.connect()
  t.teardown(() => client.end())
  // Offsets of whole hours, of half hours, and with seconds (local mean time before 1935).
  for (const zone of ['UTC', 'America/St_Johns', 'Asia/Kathmandu']) {
    await client.query(`SET TimeZone = '${zone}'`)
    for (let i = 0; i < 40; i++) {
      const stamps = [
        '1200-06-30 23:59:59.999999+00',
        '0044-03-15 12:00:00+00 BC',
        'infinity',
        '-infinity',
        '1890-01-01 00:00:00+00',
        '2038-01-19 03:14:08.5+00',
        null,
        '9999-12-31 23:59:59.999999+00',
      ]
      const random = () => {
        const ms = Math.floor(Math.random() * 8e12) - 2e12
        return new Date(ms)
          .toISOString()
          .replace('Z', String(Math.floor(Math.random() * 1000)).padStart(3, '0') + '+00')
      }
      const pick = () => (Math.random() < 0.3 ? stamps[Math.floor(Math.random() * stamps.length)] : random())
      await client.query(
        'UPDATE auth.users SET invited_at = $2, last_sign_in_at = $3, banned_until = $4, deleted_at = $5 WHERE id = $1',
        [userId, pick(), pick(), pick(), pick()],
      )
      const columns = (await client.query(`SELECT ${USER_SELECT} FROM auth.users u WHERE u.id = $1`, [userId])).rows[0]
      const json = (await client.query(`SELECT ${USER_JSON} AS j FROM auth.users u WHERE u.id = $1`, [userId])).rows[0]
        .j
      const want = userOf(columns)
      const got = userFromJson(json)
      if (!isDeepStrictEqual(got, want))
        t.fail(`${zone}: ${JSON.stringify(json)} read as ${JSON.stringify(got)}, columns give ${JSON.stringify(want)}`)
    }
  }
  t.pass('every read agreed')
})

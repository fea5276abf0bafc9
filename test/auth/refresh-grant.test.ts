// The refresh grant's common case is one statement that hands the user back as one json value
// (models/refresh-tokens.ts rotateLiveToken): the user it answers must be the user every other
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

t.test('a refresh grant answers the user GET /user reads, for any row and session time zone', async (t) => {
  const h = await startAuth(t, { tenants: [{ auth: { refresh_token_reuse_interval: 10 } }] })
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
})

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

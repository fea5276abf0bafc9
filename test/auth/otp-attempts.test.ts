// A mailed one-time code stops working after 5 wrong codes for its address, from however
// many client IPs (here each guess comes from its own address, so no rate limit is hit):
// the fifth wrong code and every later try, the right code included, answer 403
// otp_expired saying so. The burn is the code's only: the mail's link (its token hash, 224
// bits no one can guess) keeps working until it is used or expires, so strangers typing
// codes never lock a user out. Wrong codes count per address across its codes for a code
// lifetime: asking for new codes gives a guesser no fresh tries. Recovery, magic link (type
// email) and sign-up confirmation; concurrent guesses are counted before they are checked.
import t from 'tap'
import { codeOf, type CaughtMail } from '../helpers/mail.js'
import { call, email, startAuth } from '../helpers/auth-harness.js'

const BURNED =
  'Token has expired or is invalid: after 5 wrong codes this code no longer works; the link in the mail still does'
let ipSeq = 1
const anotherIp = () => ({ 'x-forwarded-for': `203.0.113.${ipSeq++}` })

function linkOf(mail: CaughtMail): string {
  const l = mail.links.find((x) => x.includes('/verify?'))
  if (!l) throw new Error('no verify link in the mail')
  return l
}
const tokenHashOf = (mail: CaughtMail): string => new URL(linkOf(mail)).searchParams.get('token')!
/** A six-digit code that is not `right`. */
const wrongCode = (right: string, i: number) => String((Number(right) + 1 + i) % 1_000_000).padStart(6, '0')

t.test('magic link: 5 wrong codes from strangers burn the code; the mailed link still signs the user in', async (t) => {
  const h = await startAuth(t, { tenants: [{ auth: { magic_link: true } }] })
  const x = h.list[0]!
  const who = email('victim')
  t.equal((await call(`${h.base(x)}/otp`, { body: { email: who } })).status, 200)
  const mail = await h.mail.waitForMail(who)
  const right = codeOf(mail)
  const verify = (token: string) =>
    call(`${h.base(x)}/verify`, { body: { type: 'magiclink', email: who, token }, headers: anotherIp() })
  for (let i = 0; i < 4; i++) {
    const r = await verify(wrongCode(right, i))
    t.same(
      [r.status, r.body],
      [403, { code: 'otp_expired', message: 'Token has expired or is invalid' }],
      `wrong code ${i + 1}`,
    )
  }
  const fifth = await verify(wrongCode(right, 4))
  t.same(
    [fifth.status, fifth.body],
    [403, { code: 'otp_expired', message: BURNED }],
    'the fifth wrong code says the code is spent',
  )
  const late = await verify(right)
  t.same([late.status, late.body], [403, { code: 'otp_expired', message: BURNED }], 'the right code no longer works')

  const res = await fetch(h.engineLink(x, linkOf(mail)), { redirect: 'manual' })
  t.equal(res.status, 303)
  const fragment = new URLSearchParams(new URL(res.headers.get('location')!).hash.slice(1))
  t.equal(fragment.get('error_code'), null, 'no error in the redirect')
  t.ok(fragment.get('access_token'), "the victim's own link signs in")
  t.equal(fragment.get('type'), 'magiclink')
  const again = await fetch(h.engineLink(x, linkOf(mail)), { redirect: 'manual' })
  t.match(again.headers.get('location'), /error_code=otp_expired/, 'a used link works once')
})

t.test(
  'recovery: the link as token_hash works after 5 wrong codes; new codes give no fresh tries until the code lifetime is over',
  async (t) => {
    const h = await startAuth(t, { tenants: [{ auth: { magic_link: true } }] })
    const x = h.list[0]!
    const who = email('victim')
    t.equal((await call(`${h.base(x)}/signup`, { body: { email: who, password: 'password-123' } })).status, 200)
    t.equal((await call(`${h.base(x)}/recover`, { body: { email: who } })).status, 200)
    const first = await h.mail.waitForMail(who)
    const verify = (token: string) =>
      call(`${h.base(x)}/verify`, { body: { type: 'recovery', email: who, token }, headers: anotherIp() })
    for (let i = 0; i < 5; i++) t.equal((await verify(wrongCode(codeOf(first), i))).status, 403)

    // The user (or the guesser) has a new code mailed: the address's five tries are spent.
    h.clock.advance(61)
    t.equal((await call(`${h.base(x)}/recover`, { body: { email: who } })).status, 200)
    const second = await h.mail.waitForMail(who)
    const r = await verify(wrongCode(codeOf(second), 0))
    t.same([r.status, r.body.message], [403, BURNED], 'a wrong guess at the new code: spent at once')
    t.same((await verify(codeOf(second))).body.message, BURNED, 'and the new right code too, within the code lifetime')
    const link = await call(`${h.base(x)}/verify`, {
      body: { type: 'recovery', token_hash: tokenHashOf(second) },
      headers: anotherIp(),
    })
    t.equal(link.status, 200, "the new mail's link works")
    t.ok(link.body.access_token)

    // The link proved the address: the count starts over.
    h.clock.advance(61)
    t.equal((await call(`${h.base(x)}/recover`, { body: { email: who } })).status, 200)
    const third = codeOf(await h.mail.waitForMail(who))
    const ok = await verify(third)
    t.equal(ok.status, 200, 'a new code signs in after the link was used')
    t.ok(ok.body.access_token)
  },
)

t.test('wrong codes spread over new codes count for the address, not the code', async (t) => {
  const h = await startAuth(t, { tenants: [{ auth: { magic_link: true } }] })
  const x = h.list[0]!
  const who = email('spread')
  const verify = (token: string) =>
    call(`${h.base(x)}/verify`, { body: { type: 'email', email: who, token }, headers: anotherIp() })
  const statuses: string[] = []
  // Three wrong codes at each of two mailed codes: the sixth guess is refused unchecked.
  for (let round = 0; round < 2; round++) {
    h.clock.advance(61)
    t.equal((await call(`${h.base(x)}/otp`, { body: { email: who } })).status, 200)
    const right = codeOf(await h.mail.waitForMail(who))
    for (let i = 0; i < 3; i++) statuses.push((await verify(wrongCode(right, i))).body.message)
  }
  t.same(
    statuses.map((m) => m === BURNED),
    [false, false, false, false, true, true],
  )
  // A code lifetime later the address starts over.
  h.clock.advance(3601)
  t.equal((await call(`${h.base(x)}/otp`, { body: { email: who } })).status, 200)
  const right = codeOf(await h.mail.waitForMail(who))
  t.equal(
    (await verify(wrongCode(right, 0))).body.message,
    'Token has expired or is invalid',
    'a wrong code is checked again',
  )
  t.equal((await verify(right)).status, 200, 'and the right one signs in')
})

t.test('four wrong codes leave the right one working', async (t) => {
  const h = await startAuth(t, { tenants: [{ auth: { magic_link: true } }] })
  const x = h.list[0]!
  const who = email('typo')
  t.equal((await call(`${h.base(x)}/otp`, { body: { email: who } })).status, 200)
  const right = codeOf(await h.mail.waitForMail(who))
  for (let i = 0; i < 4; i++) {
    t.equal(
      (
        await call(`${h.base(x)}/verify`, {
          body: { type: 'email', email: who, token: wrongCode(right, i) },
          headers: anotherIp(),
        })
      ).status,
      403,
    )
  }
  const r = await call(`${h.base(x)}/verify`, {
    body: { type: 'email', email: who, token: right },
    headers: anotherIp(),
  })
  t.equal(r.status, 200, 'the fifth try is still checked')
})

t.test('sign-up confirmation, guesses sent all at once', async (t) => {
  const h = await startAuth(t, { tenants: [{ auth: { mail_confirmation: true } }] })
  const x = h.list[0]!
  const who = email('confirm')
  t.equal((await call(`${h.base(x)}/signup`, { body: { email: who, password: 'password-123' } })).status, 200)
  const right = codeOf(await h.mail.waitForMail(who))
  const guesses = await Promise.all(
    Array.from({ length: 25 }, (_, i) =>
      call(`${h.base(x)}/verify`, {
        body: { type: i % 2 ? 'signup' : 'email', email: who, token: wrongCode(right, i) },
        headers: anotherIp(),
      }),
    ),
  )
  t.ok(
    guesses.every((g) => g.status === 403 && g.body.code === 'otp_expired'),
    'every guess refused',
  )
  t.equal(
    guesses.filter((g) => g.body.message === 'Token has expired or is invalid').length,
    4,
    'only 4 guesses were checked and refused as wrong; the fifth burned the code, the rest were never checked',
  )
  const late = await call(`${h.base(x)}/verify`, {
    body: { type: 'signup', email: who, token: right },
    headers: anotherIp(),
  })
  t.same([late.status, late.body.message], [403, BURNED])
})

t.test('the reauthentication nonce of a password change takes 5 tries', async (t) => {
  const h = await startAuth(t, { tenants: [{ auth: { secure_password_change: true } }] })
  const x = h.list[0]!
  const who = email('reauth')
  const up = await call(`${h.base(x)}/signup`, { body: { email: who, password: 'password-123' } })
  t.equal(up.status, 200)
  // A session older than 24 h needs the nonce; its access token is renewed by a refresh.
  h.clock.advance(25 * 3600)
  const refreshed = await call(`${h.base(x)}/token?grant_type=refresh_token`, {
    body: { refresh_token: up.body.refresh_token },
  })
  t.equal(refreshed.status, 200)
  const token = refreshed.body.access_token as string
  t.equal((await call(`${h.base(x)}/reauthenticate`, { token })).status, 200)
  const nonce = /(\d{6})/.exec((await h.mail.waitForMail(who)).text)![1]!
  const change = (n: string) =>
    call(`${h.base(x)}/user`, {
      method: 'PUT',
      token,
      body: { password: 'password-456', nonce: n },
      headers: anotherIp(),
    })
  for (let i = 0; i < 5; i++) {
    const r = await change(wrongCode(nonce, i))
    t.same(
      [r.status, r.body.code, r.body.message],
      [422, 'reauthentication_not_valid', 'Nonce has expired or is invalid'],
      `wrong nonce ${i + 1}`,
    )
  }
  const late = await change(nonce)
  t.same([late.status, late.body.code], [422, 'reauthentication_not_valid'])
  t.match(
    late.body.message,
    /after 5 tries this nonce no longer works, request a new one/,
    'the right nonce is refused and the message says why',
  )
  t.equal((await call(`${h.base(x)}/reauthenticate`, { token })).status, 200)
  const fresh = /(\d{6})/.exec((await h.mail.waitForMail(who)).text)![1]!
  t.equal((await change(fresh)).status, 200, 'a new nonce changes the password')
})

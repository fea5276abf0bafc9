// A mailed one-time code stops working after 5 wrong codes for its address, from however
// many client IPs (here each guess comes from its own address, so no rate limit is hit):
// the fifth wrong code and every later try, the right code and the mail's link included,
// answer 403 otp_expired saying so, until the user asks for a new code. Recovery, magic
// link (type email) and sign-up confirmation; concurrent guesses are counted before they
// are checked.
import t from 'tap'
import { codeOf, type CaughtMail } from '../helpers/mail.js'
import { call, email, startAuth } from '../helpers/auth-harness.js'

const BURNED = 'Token has expired or is invalid: after 5 wrong codes this code no longer works, request a new one'
let ipSeq = 1
const anotherIp = () => ({ 'x-forwarded-for': `203.0.113.${ipSeq++}` })

function tokenHashOf (mail: CaughtMail): string {
  const l = mail.links.find((x) => x.includes('/verify?'))
  if (!l) throw new Error('no verify link in the mail')
  return new URL(l).searchParams.get('token')!
}
/** A six-digit code that is not `right`. */
const wrongCode = (right: string, i: number) => String((Number(right) + 1 + i) % 1_000_000).padStart(6, '0')

t.test('recovery code: 5 wrong codes burn it, a new code works', async (t) => {
  const h = await startAuth(t, { tenants: [{ auth: { magic_link: true } }] })
  const x = h.list[0]!
  const who = email('victim')
  t.equal((await call(`${h.base(x)}/signup`, { body: { email: who, password: 'password-123' } })).status, 200)
  t.equal((await call(`${h.base(x)}/recover`, { body: { email: who } })).status, 200)
  const mail = await h.mail.waitForMail(who)
  const right = codeOf(mail)
  const verify = (token: string) => call(`${h.base(x)}/verify`, { body: { type: 'recovery', email: who, token }, headers: anotherIp() })

  for (let i = 0; i < 4; i++) {
    const r = await verify(wrongCode(right, i))
    t.same([r.status, r.body], [403, { code: 'otp_expired', message: 'Token has expired or is invalid' }], `wrong code ${i + 1}`)
  }
  const fifth = await verify(wrongCode(right, 4))
  t.same([fifth.status, fifth.body], [403, { code: 'otp_expired', message: BURNED }], 'the fifth wrong code says the code is spent')
  const late = await verify(right)
  t.same([late.status, late.body], [403, { code: 'otp_expired', message: BURNED }], 'the right code no longer works')
  const link = await call(`${h.base(x)}/verify`, { body: { type: 'recovery', token_hash: tokenHashOf(mail) }, headers: anotherIp() })
  t.same([link.status, link.body.message], [403, BURNED], 'nor does the mail\'s link')

  t.equal((await call(`${h.base(x)}/recover`, { body: { email: who } })).status, 200, 'the user asks again')
  const fresh = codeOf(await h.mail.waitForMail(who))
  const ok = await verify(fresh)
  t.equal(ok.status, 200, 'the new code signs in')
  t.ok(ok.body.access_token)
})

t.test('four wrong codes leave the right one working', async (t) => {
  const h = await startAuth(t, { tenants: [{ auth: { magic_link: true } }] })
  const x = h.list[0]!
  const who = email('typo')
  t.equal((await call(`${h.base(x)}/otp`, { body: { email: who } })).status, 200)
  const right = codeOf(await h.mail.waitForMail(who))
  for (let i = 0; i < 4; i++) {
    t.equal((await call(`${h.base(x)}/verify`, { body: { type: 'email', email: who, token: wrongCode(right, i) }, headers: anotherIp() })).status, 403)
  }
  const r = await call(`${h.base(x)}/verify`, { body: { type: 'email', email: who, token: right }, headers: anotherIp() })
  t.equal(r.status, 200, 'the fifth try is still checked')
})

t.test('sign-up confirmation, guesses sent all at once', async (t) => {
  const h = await startAuth(t, { tenants: [{ auth: { mail_confirmation: true } }] })
  const x = h.list[0]!
  const who = email('confirm')
  t.equal((await call(`${h.base(x)}/signup`, { body: { email: who, password: 'password-123' } })).status, 200)
  const right = codeOf(await h.mail.waitForMail(who))
  const guesses = await Promise.all(Array.from({ length: 25 }, (_, i) =>
    call(`${h.base(x)}/verify`, { body: { type: i % 2 ? 'signup' : 'email', email: who, token: wrongCode(right, i) }, headers: anotherIp() })))
  t.ok(guesses.every((g) => g.status === 403 && g.body.code === 'otp_expired'), 'every guess refused')
  t.equal(guesses.filter((g) => g.body.message === 'Token has expired or is invalid').length, 4,
    'only 4 guesses were checked and refused as wrong; the fifth burned the code, the rest were never checked')
  const late = await call(`${h.base(x)}/verify`, { body: { type: 'signup', email: who, token: right }, headers: anotherIp() })
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
  const refreshed = await call(`${h.base(x)}/token?grant_type=refresh_token`, { body: { refresh_token: up.body.refresh_token } })
  t.equal(refreshed.status, 200)
  const token = refreshed.body.access_token as string
  t.equal((await call(`${h.base(x)}/reauthenticate`, { token })).status, 200)
  const nonce = /(\d{6})/.exec((await h.mail.waitForMail(who)).text)![1]!
  const change = (n: string) => call(`${h.base(x)}/user`, { method: 'PUT', token, body: { password: 'password-456', nonce: n }, headers: anotherIp() })
  for (let i = 0; i < 5; i++) {
    const r = await change(wrongCode(nonce, i))
    t.same([r.status, r.body.code, r.body.message], [422, 'reauthentication_not_valid', 'Nonce has expired or is invalid'], `wrong nonce ${i + 1}`)
  }
  const late = await change(nonce)
  t.same([late.status, late.body.code], [422, 'reauthentication_not_valid'])
  t.match(late.body.message, /after 5 tries this nonce no longer works, request a new one/, 'the right nonce is refused and the message says why')
  t.equal((await call(`${h.base(x)}/reauthenticate`, { token })).status, 200)
  const fresh = /(\d{6})/.exec((await h.mail.waitForMail(who)).text)![1]!
  t.equal((await change(fresh)).status, 200, 'a new nonce changes the password')
})

// The panel exchange hands a member only an account it established as theirs: the user
// that already has the member's panel identity, or a user whose address was proven by a
// mail round trip. A stranger who signed up with the member's address while mail
// confirmation was off (auto-confirmed) neither gets anything of the member nor blocks the
// exchange: the member gets a user of their own, linked by the panel identity alone,
// without the address (docs/edge.md). Whole stack: supabase-js through the gateway, real mail.
import t from 'tap'
import { randomBytes } from 'node:crypto'
import { adminQuery } from '../helpers/db.js'
import { PUBLIC_URL, startStack, type Stack, type StackTenant } from '../helpers/panel-stack.js'

let stack: Stack
let auto: StackTenant
let confirming: StackTenant

const address = (who: string) => `${who}-${randomBytes(4).toString('hex')}@example.com`
const exchangePath = (x: StackTenant) => `/organizations/org_own/databases/${x.database}/api/app-session`

t.before(async () => {
  stack = await startStack(t)
  auto = await stack.addTenant({
    organization: 'org_own',
    auth: { magic_link: true, site_url: 'https://app.example.com' },
  })
  confirming = await stack.addTenant({
    organization: 'org_own',
    auth: { mail_confirmation: true, site_url: 'https://app.example.com' },
  })
})

async function exchange(x: StackTenant, userId: string, email: string) {
  const session = await stack.panelSession({ userId, email, orgs: ['org_own'] })
  return stack.panel('POST', exchangePath(x), { token: session })
}

async function followMailLink(email: string): Promise<void> {
  const mail = await stack.mail.waitForMail(email)
  const link = mail.links.find((l) => l.includes('/auth/v1/verify'))
  if (link === undefined) throw new Error('no verify link in the mail')
  const res = await fetch(link.replace(PUBLIC_URL, stack.gatewayUrl), { redirect: 'manual' })
  if (res.status !== 303 || !/access_token=/.test(res.headers.get('location') ?? ''))
    throw new Error(`verify answered ${res.status}`)
}

t.test(
  "a stranger's auto-confirmed sign-up with the member's address neither blocks nor captures the exchange",
  async (t) => {
    const email = address('member')
    const stranger = stack.supabase(auto)
    const up = await stranger.auth.signUp({ email, password: 'stranger-password' })
    t.error(up.error)
    t.ok(up.data.session, 'auto-confirmed: the stranger is signed in at once')

    const r = await exchange(auto, 'panel-member-1', email)
    t.equal(r.status, 200, 'the member is served')
    t.not(r.body.user.id, up.data.user?.id, "with a user of their own, not the stranger's")
    t.equal(r.body.user.email, '', 'without the address the stranger holds')
    t.ok(r.body.access_token)
    const me = await stack.supabase(auto).auth.getUser(r.body.access_token)
    t.equal(me.data.user?.id, r.body.user.id, 'the session works')

    const ids = await adminQuery(
      "SELECT user_id::text AS user_id, email FROM auth.identities WHERE provider = 'panel' AND provider_id = 'panel-member-1'",
      [],
      auto.database,
    )
    t.same(
      ids.rows,
      [{ user_id: r.body.user.id, email: null }],
      "the panel identity is the member user's, with no address",
    )
    const again = await stack.supabase(auto).auth.signInWithPassword({ email, password: 'stranger-password' })
    t.error(again.error, 'the stranger keeps their own account')
    t.equal(again.data.user?.id, up.data.user?.id)
    const again2 = await exchange(auto, 'panel-member-1', email)
    t.equal(again2.body.user.id, r.body.user.id, 'a repeated exchange finds the same user')
  },
)

t.test('an address proven by a mailed link links the member to that user', async (t) => {
  const email = address('owner')
  const c = stack.supabase(auto)
  const up = await c.auth.signUp({ email, password: 'own-password-1' })
  t.error(up.error)
  // A mailed link to the address, followed, before the first exchange.
  t.error((await c.auth.signInWithOtp({ email })).error)
  await followMailLink(email)
  const r = await exchange(auto, 'panel-member-2', email)
  t.equal(r.status, 200)
  t.equal(r.body.user.id, up.data.user?.id, 'the same user: its owner proved the address')
  const r2 = await exchange(auto, 'panel-member-2', email)
  t.equal(r2.body.user.id, up.data.user?.id, 'and again through the panel identity')
})

t.test('a sign-up confirmed by mail is linked; an unconfirmed one is not', async (t) => {
  const confirmed = address('confirmed')
  const c = stack.supabase(confirming)
  const up = await c.auth.signUp({ email: confirmed, password: 'own-password-2' })
  t.error(up.error)
  t.equal(up.data.session, null, 'mail confirmation on: no session yet')
  const pending = await exchange(confirming, 'panel-member-3b', confirmed)
  t.equal(pending.status, 200)
  t.not(pending.body.user.id, up.data.user?.id, 'not yet confirmed: not that user')
  await followMailLink(confirmed)
  const r = await exchange(confirming, 'panel-member-3', confirmed)
  t.equal(r.status, 200)
  t.equal(r.body.user.id, up.data.user?.id)
})

t.test('no user with the address: a new user, as before', async (t) => {
  const email = address('fresh')
  const r = await exchange(auto, 'panel-member-4', email)
  t.equal(r.status, 200)
  t.equal(r.body.user.email, email)
  t.equal((await exchange(auto, 'panel-member-4', email)).body.user.id, r.body.user.id)
})

// docs/service.md's panel exchange and tenant isolation, end to end with @supabase/supabase-js
// against the stack `npm start` brings up, this time with the tenant store in Redis (the
// services wrapper's REDIS_URL, a key prefix of its own): the exchange behaves as a sign-in,
// finds the same user twice, refreshes through supabase-js and widens nothing; the two demo
// tenants cannot see each other (keys, tokens, owners, tables, panel organizations).
import t from 'tap'
import pg from 'pg'
import { Redis } from 'ioredis'
import { email, startE2eStack, type E2eStack, type E2eTenant } from '../helpers/e2e-stack.js'

let stack: E2eStack
let a: E2eTenant
let b: E2eTenant

t.before(async () => {
  stack = await startE2eStack(t, { source: 'redis', prefix: 'e2e_ten' })
  a = stack.tenant('demo')
  b = stack.tenant('demo2')
  // A: notes readable by their owner only; whoami shows the role a request runs as.
  await stack.owner(
    a,
    `
    CREATE TABLE public.notes (id int PRIMARY KEY, owner_id uuid NOT NULL DEFAULT auth.uid(), title text NOT NULL);
    INSERT INTO public.notes VALUES (1, gen_random_uuid(), 'not yours');
    SELECT platform.grant('SELECT', 'public.notes', 'auth');
    ALTER TABLE public.notes ENABLE ROW LEVEL SECURITY;
    CREATE POLICY notes_own ON public.notes FOR SELECT TO PUBLIC USING (owner_id = auth.uid());
    CREATE VIEW public.whoami AS SELECT current_user::text AS role_name, auth.role() AS kind, auth.uid() AS uid, auth.email() AS email;
    SELECT platform.grant('SELECT', 'public.whoami', 'anon');
  `,
  )
  // B: a table open to B's public key.
  await stack.owner(
    b,
    `
    CREATE TABLE public.ledger (id int PRIMARY KEY, amount int NOT NULL);
    INSERT INTO public.ledger VALUES (1, 42);
    SELECT platform.grant('SELECT', 'public.ledger', 'anon');
    ALTER TABLE public.ledger ENABLE ROW LEVEL SECURITY;
    CREATE POLICY ledger_all ON public.ledger FOR SELECT TO PUBLIC USING (true);
  `,
  )
})

const exchangePath = (org: string, db: string): string => `/organizations/${org}/databases/${db}/api/app-session`

t.test('the tenant records come from Redis', async (t) => {
  const redis = new Redis(process.env.REDIS_URL!, { maxRetriesPerRequest: 2 })
  t.teardown(() => redis.disconnect())
  const members = await redis.smembers(`${stack.keyPrefix}tenants`)
  t.same(members.sort(), [a.database, b.database].sort())
  const record = JSON.parse((await redis.hget(`${stack.keyPrefix}tenant:${a.database}`, 'record'))!)
  t.equal(record.organization, 'org_demo')
  t.notMatch(JSON.stringify(record), a.secret_key, 'keys are stored hashed')
  t.equal(stack.info.databases.length, 2)
})

t.test('the panel exchange: a session that behaves as a sign-in', async (t) => {
  const first = await stack.panel('POST', exchangePath('org_demo', a.database))
  t.equal(first.status, 200)
  const s = first.body
  t.equal(s.url, `${stack.info.gateway_url}/${a.database}`)
  t.equal(s.url, a.url)
  t.equal(s.expires_in, 3600)
  t.type(s.access_token, 'string')
  t.type(s.refresh_token, 'string')
  t.equal(s.user.email, 'developer@gatehouse.local')
  t.match(s.user.id, /^[0-9a-f-]{36}$/)

  // 1. Sent as a bearer with the public key: role authenticated, auth.uid() set.
  const client = stack.supabase(a, { accessToken: s.access_token })
  const who = await client.from('whoami').select('*').single()
  t.same(who.data, {
    role_name: a.roles.auth,
    kind: 'authenticated',
    uid: s.user.id,
    email: 'developer@gatehouse.local',
  })
  const me = await stack.supabase(a).auth.getUser(s.access_token)
  t.equal(me.data.user?.id, s.user.id)

  // 2. No wider access: the organization's member sees no row of somebody else.
  const notes = await client.from('notes').select('*')
  t.equal(notes.error, null)
  t.same(notes.data, [])
  await stack.owner(a, 'INSERT INTO public.notes VALUES (2, $1, $2)', [s.user.id, 'mine'])
  t.same((await client.from('notes').select('title')).data, [{ title: 'mine' }], 'policies apply as for any user')

  // 3. A repeated exchange returns the same user, and never a second one.
  const second = await stack.panel('POST', exchangePath('org_demo', a.database))
  t.equal(second.status, 200)
  t.equal(second.body.user.id, s.user.id)
  t.not(second.body.access_token, s.access_token, 'a new session')
  const listed = await stack.supabase(a, { key: 'secret' }).auth.admin.listUsers()
  t.equal(listed.error, null)
  t.equal(listed.data.users.filter((u) => u.email === 'developer@gatehouse.local').length, 1)

  // The exchanged session in supabase-js: setSession, then refreshSession.
  const app = stack.supabase(a)
  const set = await app.auth.setSession({
    access_token: second.body.access_token,
    refresh_token: second.body.refresh_token,
  })
  t.equal(set.error, null)
  t.equal(set.data.user?.id, s.user.id)
  const refreshed = await app.auth.refreshSession()
  t.equal(refreshed.error, null)
  t.equal(refreshed.data.user?.id, s.user.id)
  t.not(refreshed.data.session?.refresh_token, second.body.refresh_token, 'the refresh token rotates')
  const after = await app.from('whoami').select('uid').single()
  t.same(after.data, { uid: s.user.id }, 'the refreshed session reads as the same user')

  // Without a panel session, or with a forged one: refused.
  const none = await stack.panel('POST', exchangePath('org_demo', a.database), { token: null })
  t.equal(none.status, 401)
  const forged = await stack.panel('POST', exchangePath('org_demo', a.database), { token: s.access_token })
  t.equal(forged.status, 401, 'a database token is no panel session')
})

t.test('the panel exchange stays inside the organizations of the panel user', async (t) => {
  // The development panel user is a member of org_demo only; demo2 belongs to org_other.
  const other = await stack.panel('POST', exchangePath('org_other', b.database))
  t.equal(other.status, 403)
  t.equal(other.body.code, 'not_a_member')
  const wrongOrg = await stack.panel('POST', exchangePath('org_demo', b.database))
  t.equal(wrongOrg.status, 404)
  t.equal(wrongOrg.body.code, 'database_not_found')
})

t.test('two tenants cannot see each other', async (t) => {
  // Each tenant's own key reads its own table.
  const own = await stack.supabase(b).from('ledger').select('amount')
  t.same(own.data, [{ amount: 42 }])

  // A's keys on B's path: invalid_api_key.
  for (const key of [a.public_key, a.secret_key]) {
    const r = await stack.gateway(b, '/rest/v1/ledger', { apikey: key })
    t.equal(r.status, 401)
    t.equal(r.body.code, 'invalid_api_key')
    const auth = await stack.gateway(b, '/auth/v1/settings', { apikey: key })
    t.equal(auth.status, 401)
    t.equal(auth.body.code, 'invalid_api_key')
  }
  const crossed = stack.supabase({ ...b, public_key: a.public_key })
  const crossedRead = await crossed.from('ledger').select('*')
  t.equal(crossedRead.error?.code, 'invalid_api_key')
  const crossedSignUp = await crossed.auth.signUp({ email: email('cross'), password: 'whatever 123' })
  t.equal(crossedSignUp.data.user, null)
  t.equal(crossedSignUp.error?.status, 401)

  // A's user token on B (with B's own public key): invalid_token, on REST and on auth.
  const address = email('twin')
  const onA = await stack.supabase(a).auth.signUp({ email: address, password: 'twin password 1' })
  t.equal(onA.error, null)
  const tokenA = onA.data.session!.access_token
  const rest = await stack.gateway(b, '/rest/v1/ledger', { token: tokenA })
  t.equal(rest.status, 401)
  t.equal(rest.body.code, 'invalid_token')
  const viaJs = await stack.supabase(b, { accessToken: tokenA }).from('ledger').select('*')
  t.equal(viaJs.status, 401)
  t.equal(viaJs.error?.code, 'invalid_token')
  const user = await stack.supabase(b).auth.getUser(tokenA)
  t.equal(user.data.user, null)
  t.ok(user.error && [401, 403].includes(user.error.status ?? 0), 'the auth area refuses it too')
  // Changing the database name in the address is not enough: the signature is per database.
  const exchanged = await stack.panel('POST', exchangePath('org_demo', a.database))
  const panelOnB = await stack.gateway(b, '/rest/v1/ledger', { token: exchanged.body.access_token })
  t.equal(panelOnB.body.code, 'invalid_token')

  // The same e-mail address on B is another user, with its own password.
  const noAccount = await stack.supabase(b).auth.signInWithPassword({ email: address, password: 'twin password 1' })
  t.equal(noAccount.error?.code, 'invalid_credentials')
  const onB = await stack.supabase(b).auth.signUp({ email: address, password: 'other password 2' })
  t.equal(onB.error, null)
  t.not(onB.data.user?.id, onA.data.user?.id)

  // B's table is not in A's catalog: unknown_table naming A's role, nothing of B in the text.
  const fromA = await stack.gateway(a, '/rest/v1/ledger', { apikey: a.secret_key })
  t.equal(fromA.status, 404)
  t.equal(fromA.body.code, 'unknown_table')
  t.match(fromA.body.message, a.roles.svc)
  const text = JSON.stringify(fromA.body)
  for (const role of Object.values(b.roles)) t.notMatch(text, role)

  // A's owner cannot reach B's database, nor B's roles.
  const url = new URL(a.owner_url)
  url.pathname = `/${b.database}`
  const c = new pg.Client({ connectionString: url.toString() })
  c.on('error', () => {})
  const refused = await c.connect().then(
    () => null,
    (err: Error & { code?: string }) => err,
  )
  await c.end().catch(() => {})
  t.equal(refused?.code, '42501', 'no CONNECT on the other database')
  const ownerA = new pg.Client({ connectionString: a.owner_url })
  ownerA.on('error', () => {})
  await ownerA.connect()
  const setRole = await ownerA.query(`SET ROLE "${b.roles.anon}"`).then(
    () => null,
    (err: Error & { code?: string }) => err,
  )
  await ownerA.end()
  t.equal(setRole?.code, '42501', "not a member of the other tenant's roles")
  const roleOfA = await stack.owner(a, "SELECT platform.role('anon') AS r")
  t.equal(roleOfA.rows[0].r, a.roles.anon, "platform.role() names this database's role")

  // An unknown database on the gateway.
  const missing = await stack.gateway('nosuchdb', '/rest/v1/ledger', { apikey: a.public_key })
  t.equal(missing.status, 404)
  t.equal(missing.body.code, 'tenant_not_found')
})

// The panel exchange (docs/service.md §8): a panel session becomes a database
// session of the tenant's auth.users, found or created like an external provider sign-in.
// Over the whole stack: the same user twice, the token with RLS through the gateway and
// supabase-js (setSession, refreshSession), refusals for outsiders and expired sessions, and
// a token of database A refused by database B.
import t from 'tap'
import { adminQuery } from '../helpers/db.js'
import { tenantIssuer } from '../../src/tenants/index.js'
import { gatewayCall, PUBLIC_URL, startStack, type Stack, type StackTenant } from '../helpers/panel-stack.js'

let stack: Stack
let a: StackTenant
let b: StackTenant

function claimsOf(token: string): Record<string, any> {
  return JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString('utf8'))
}

t.before(async () => {
  stack = await startStack(t)
  ;[a, b] = await Promise.all([stack.addTenant({ organization: 'org_a' }), stack.addTenant({ organization: 'org_b' })])
  for (const x of [a, b]) {
    await stack.owner(
      x,
      `
      CREATE TABLE public.notes (id int PRIMARY KEY, owner_id uuid NOT NULL, body text);
      ALTER TABLE public.notes ENABLE ROW LEVEL SECURITY;
      CREATE POLICY own_notes ON public.notes FOR SELECT TO authenticated USING (owner_id = auth.uid());
      SELECT platform.grant('SELECT', 'public.notes', 'auth');
      INSERT INTO public.notes VALUES (1, gen_random_uuid(), 'not yours');
    `,
    )
  }
})

const exchangePath = (org: string, db: string) => `/organizations/${org}/databases/${db}/api/app-session`

t.test('the exchange returns the session object, and the same user every time', async (t) => {
  const session = await stack.panelSession({ userId: 'panel-user-1', email: 'ada@example.com', orgs: ['org_a'] })
  const r1 = await stack.panel('POST', exchangePath('org_a', a.database), { token: session })
  t.equal(r1.status, 200)
  t.same(Object.keys(r1.body).sort(), ['access_token', 'expires_in', 'refresh_token', 'token_type', 'url', 'user'])
  t.equal(r1.body.url, `${PUBLIC_URL}/${a.database}`)
  t.equal(r1.body.expires_in, 3600)
  t.equal(r1.body.token_type, 'bearer')
  t.same(r1.body.user, { id: r1.body.user.id, email: 'ada@example.com' })
  t.match(r1.body.user.id, /^[0-9a-f-]{36}$/)

  const claims = claimsOf(r1.body.access_token)
  t.equal(claims.role, 'authenticated')
  t.equal(claims.sub, r1.body.user.id)
  t.equal(claims.iss, tenantIssuer(a.tenant, PUBLIC_URL))
  t.equal(claims.aud, 'authenticated')
  t.equal(claims.exp - claims.iat, 3600)

  // With a JSON body too (a client may send {}), the same user.
  const r2 = await stack.panel('POST', exchangePath('org_a', a.database), { token: session, body: {} })
  t.equal(r2.status, 200)
  t.equal(r2.body.user.id, r1.body.user.id)
  t.not(r2.body.refresh_token, r1.body.refresh_token)

  const users = await adminQuery(
    'SELECT count(*)::int AS n FROM auth.users WHERE email = $1',
    ['ada@example.com'],
    a.database,
  )
  t.equal(users.rows[0]!.n, 1, 'one user only')
  const ids = await adminQuery(
    "SELECT user_id, provider_id FROM auth.identities WHERE provider = 'panel'",
    [],
    a.database,
  )
  t.same(ids.rows, [{ user_id: r1.body.user.id, provider_id: 'panel-user-1' }], 'keyed by the panel user id')
})

t.test('the token behaves like a sign-in: RLS applies through the gateway (supabase-js), refresh works', async (t) => {
  const session = await stack.panelSession({
    userId: 'panel-user-2',
    email: 'bob@example.com',
    orgs: ['org_a', 'org_b'],
  })
  const r = await stack.panel('POST', exchangePath('org_a', a.database), { token: session })
  t.equal(r.status, 200)
  await stack.owner(a, 'INSERT INTO public.notes VALUES (2, $1, $2)', [r.body.user.id, 'mine'])

  const client = stack.supabase(a)
  const set = await client.auth.setSession({ access_token: r.body.access_token, refresh_token: r.body.refresh_token })
  t.equal(set.error, null)
  t.equal(set.data.user?.id, r.body.user.id)
  const read = await client.from('notes').select('body')
  t.equal(read.error, null)
  t.same(read.data, [{ body: 'mine' }], 'the organization member sees only what the policy gives the user')

  const refreshed = await client.auth.refreshSession()
  t.equal(refreshed.error, null)
  t.ok(refreshed.data.session?.refresh_token, 'a new refresh token')
  t.not(refreshed.data.session?.refresh_token, r.body.refresh_token, 'rotated')
  const again = await client.from('notes').select('body')
  t.same(again.data, [{ body: 'mine' }])

  // Without the token: anon holds no grant on notes.
  const anon = await stack.supabase(a).from('notes').select('body')
  t.equal(anon.error?.code, 'unknown_table')
})

t.test('a token from the exchange for database A is refused by database B', async (t) => {
  const session = await stack.panelSession({
    userId: 'panel-user-3',
    email: 'cy@example.com',
    orgs: ['org_a', 'org_b'],
  })
  const r = await stack.panel('POST', exchangePath('org_a', a.database), { token: session })
  t.equal(r.status, 200)
  const onA = await gatewayCall(stack, a, '/rest/v1/notes', { token: r.body.access_token })
  t.equal(onA.status, 200)
  const onB = await gatewayCall(stack, b, '/rest/v1/notes', { token: r.body.access_token })
  t.equal(onB.status, 401)
  t.equal(onB.body.code, 'invalid_token')
  const userOnB = await gatewayCall(stack, b, '/auth/v1/user', { token: r.body.access_token })
  t.same(
    [userOnB.status, userOnB.body.error_code],
    [403, 'bad_jwt'],
    "B's auth engine refuses A's token as GoTrue does",
  )
})

t.test('outsiders and bad sessions are refused', async (t) => {
  const outsider = await stack.panelSession({ userId: 'panel-user-4', email: 'eve@example.com', orgs: ['org_b'] })
  const r1 = await stack.panel('POST', exchangePath('org_a', a.database), { token: outsider })
  t.equal(r1.status, 403)
  t.equal(r1.body.code, 'not_a_member')
  const r2 = await stack.panel('POST', exchangePath('org_b', a.database), { token: outsider })
  t.equal(r2.status, 404, 'database of another organization')
  t.equal(r2.body.code, 'database_not_found')

  const expired = await stack.panelSession({
    userId: 'panel-user-1',
    email: 'ada@example.com',
    orgs: ['org_a'],
    expiresIn: -5,
  })
  const r3 = await stack.panel('POST', exchangePath('org_a', a.database), { token: expired })
  t.equal(r3.status, 401)
  t.equal(r3.body.code, 'invalid_session')
  const r4 = await stack.panel('POST', exchangePath('org_a', a.database))
  t.equal(r4.status, 401)

  const eve = await adminQuery(
    'SELECT count(*)::int AS n FROM auth.users WHERE email = $1',
    ['eve@example.com'],
    a.database,
  )
  t.equal(eve.rows[0]!.n, 0, 'no user created for a refused exchange')
})

t.test('the exchanged token lives 3600 s even when the database issues shorter tokens', async (t) => {
  // The panel reads through its own cache, dropped when the store publishes the change.
  const seen = new Promise<void>((resolve) => {
    const off = stack.panelStore.onChange((db) => {
      if (db === b.database) {
        off()
        resolve()
      }
    })
  })
  await stack.store.putAll([{ ...b.tenant, jwt: { ...b.tenant.jwt, expiry: 600 } }])
  await seen
  t.teardown(() => stack.store.putAll([b.tenant]))
  const session = await stack.panelSession({ userId: 'panel-user-5', email: 'dee@example.com', orgs: ['org_b'] })
  const r = await stack.panel('POST', exchangePath('org_b', b.database), { token: session })
  t.equal(r.status, 200)
  t.equal(r.body.expires_in, 3600)
  const c = claimsOf(r.body.access_token)
  t.equal(c.exp - c.iat, 3600)
})

// Tenant isolation of tokens (a token of tenant A is refused on tenant B's engine path,
// whatever it claims) and RLS: the access token's claims, set as request.jwt.claims in a
// transaction under the tenant's authenticated role as the REST engine does, make
// auth.uid() and auth.role() see the signed-in user.
import t from 'tap'
import pg from 'pg'
import { SignJWT } from 'jose'
import { quoteIdent } from '../../src/shared/index.js'
import { startAuth, call, email, decodeJwt } from '../helpers/auth-harness.js'

t.test('isolation and RLS', async (t) => {
  const h = await startAuth(t, { tenants: [{}, {}] })
  const [a, b] = h.list as [(typeof h.list)[0], (typeof h.list)[0]]
  const ua = await h.client(a).signUp({ email: email('a1'), password: 'secret123' })
  const ua2 = await h.client(a).signUp({ email: email('a2'), password: 'secret123' })
  t.error(ua.error)
  const sa = ua.data.session!

  t.test("a token of tenant A is refused by tenant B's engine path", async (t) => {
    const onB = await call(h.base(b) + '/user', { token: sa.access_token })
    t.equal(onB.status, 403)
    t.equal(onB.body.code, 'bad_jwt')
    const onA = await call(h.base(a) + '/user', { token: sa.access_token })
    t.equal(onA.status, 200)
    // Re-signed with B's secret but still naming A's issuer: refused too (iss pinned).
    const claims = decodeJwt(sa.access_token)
    const resigned = await new SignJWT(claims)
      .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
      .sign(new TextEncoder().encode(b.file.jwt.secret))
    const r = await call(h.base(b) + '/user', { token: resigned })
    t.same([r.status, r.body.code], [403, 'bad_jwt'])
    // A's refresh token and A's service token mean nothing on B.
    const refresh = await call(h.base(b) + '/token?grant_type=refresh_token', {
      body: { refresh_token: sa.refresh_token },
    })
    t.same([refresh.status, refresh.body.code], [400, 'refresh_token_not_found'])
    const adminOnB = await call(h.base(b) + '/admin/users', { token: await h.serviceToken(a) })
    t.same([adminOnB.status, adminOnB.body.code], [403, 'bad_jwt'])
    // An alg=none token is refused.
    const none =
      Buffer.from(JSON.stringify({ alg: 'none', typ: 'JWT' })).toString('base64url') +
      '.' +
      Buffer.from(JSON.stringify(claims)).toString('base64url') +
      '.'
    t.equal((await call(h.base(a) + '/user', { token: none })).status, 403)
  })

  t.test('RLS sees auth.uid() from the access token claims', async (t) => {
    await h.ownerQuery(
      a,
      `CREATE TABLE public.notes (
      id uuid PRIMARY KEY DEFAULT gen_random_uuid(), owner uuid NOT NULL DEFAULT auth.uid(), body text NOT NULL)`,
    )
    await h.ownerQuery(a, 'ALTER TABLE public.notes ENABLE ROW LEVEL SECURITY')
    await h.ownerQuery(
      a,
      'CREATE POLICY own_rows ON public.notes FOR ALL TO PUBLIC USING (owner = auth.uid()) WITH CHECK (owner = auth.uid())',
    )
    await h.ownerQuery(a, "SELECT platform.grant('SELECT, INSERT', 'public.notes', 'auth')")
    await h.ownerQuery(a, 'INSERT INTO public.notes (owner, body) VALUES ($1, $2), ($3, $4)', [
      ua.data.user!.id,
      'mine',
      ua2.data.user!.id,
      'theirs',
    ])

    // The REST engine's login: NOINHERIT member of the request roles, reaches them by SET LOCAL ROLE.
    const rest = new pg.Client({ connectionString: a.file.engines!.rest })
    await rest.connect()
    t.teardown(() => rest.end())
    const asUser = async (claims: Record<string, unknown>, sql: string, values: unknown[] = []) => {
      await rest.query('BEGIN')
      try {
        await rest.query(`SET LOCAL ROLE ${quoteIdent(a.tenant.roles.auth)}`)
        await rest.query("SELECT set_config('request.jwt.claims', $1, true)", [JSON.stringify(claims)])
        return (await rest.query(sql, values)).rows
      } finally {
        await rest.query('ROLLBACK')
      }
    }
    const claims = decodeJwt(sa.access_token)
    t.same(await asUser(claims, 'SELECT auth.uid()::text AS uid, auth.role() AS role, auth.email() AS email'), [
      { uid: ua.data.user!.id, role: 'authenticated', email: ua.data.user!.email },
    ])
    t.same(await asUser(claims, 'SELECT body FROM public.notes ORDER BY body'), [{ body: 'mine' }])
    // As the gateway sends them upstream: role = this tenant's Postgres role name.
    const upstream = { ...claims, role: a.tenant.roles.auth }
    t.same(await asUser(upstream, 'SELECT auth.role() AS role'), [{ role: 'authenticated' }])
    t.same(await asUser(upstream, 'SELECT body FROM public.notes'), [{ body: 'mine' }])
    const inserted = await asUser(claims, "INSERT INTO public.notes (body) VALUES ('new') RETURNING owner::text")
    t.same(inserted, [{ owner: ua.data.user!.id }], 'the default owner is auth.uid()')
    await t.rejects(
      asUser(claims, 'INSERT INTO public.notes (owner, body) VALUES ($1, $2)', [ua2.data.user!.id, 'forged']),
      { code: '42501' },
      'a row for another user is refused by the policy',
    )
    const other = decodeJwt(ua2.data.session!.access_token)
    t.same(await asUser(other, 'SELECT body FROM public.notes'), [{ body: 'theirs' }])
  })
})

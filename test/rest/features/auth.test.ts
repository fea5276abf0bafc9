// Callers over HTTP: the upstream token (HS256, exp required, role one of the tenant's
// three), anonymous requests, RLS through auth.uid(), visibility per role (PGRST205),
// missing privileges (42501: 401 anon / 403 otherwise), and the request settings the
// transaction sets (role, claims, method, path, headers, cookies, search_path), those of
// PostgREST 12 and later: no legacy per-claim request.jwt.claim.<name>.
import t from 'tap'
import { CompactSign, SignJWT, generateKeyPair } from 'jose'
import { createRestFixture, ALICE, BOB } from '../../helpers/rest-fixture.js'
import { eventually } from '../../helpers/eventually.js'

const SETTINGS_VIEW = `
CREATE VIEW whoami AS SELECT
  current_user::text AS role,
  current_setting('request.jwt.claims', true)::json AS claims,
  current_setting('request.jwt.claim.sub', true) AS legacy_sub,
  current_setting('request.jwt.claim.role', true) AS legacy_role,
  current_setting('request.jwt.claim.email', true) AS legacy_email,
  current_setting('request.jwt.claim.plan', true) AS legacy_plan,
  current_setting('search_path') AS search_path,
  current_setting('request.method', true) AS method,
  current_setting('request.path', true) AS path,
  current_setting('request.headers', true)::json AS headers,
  current_setting('request.cookies', true)::json AS cookies,
  current_setting('statement_timeout') AS statement_timeout,
  current_setting('transaction_read_only') AS read_only,
  auth.uid() AS uid,
  auth.role() AS auth_role;
SELECT platform.grant('SELECT', 'whoami', 'anon');
`

t.test('callers, RLS and visibility', async (t) => {
  const fx = await createRestFixture(t, { sql: SETTINGS_VIEW })
  const bearer = async (kind: 'anon' | 'auth' | 'svc', claims: Record<string, unknown> = {}) => ({
    authorization: `Bearer ${await fx.token(kind, claims)}`,
  })

  t.test('no token runs as anon; RLS with auth.uid() gives anon nothing', async (t) => {
    const r = await fx.get('/notes?select=id')
    t.equal(r.status, 200)
    t.same(r.json(), [])
    t.equal(r.headers['content-range'], '*/*')
  })

  t.test("a policy using auth.uid() returns only the caller's rows", async (t) => {
    const alice = await fx.get('/notes?select=id,body&order=id', await bearer('auth', { sub: ALICE }))
    t.same(alice.json(), [
      { id: 1, body: 'alice one' },
      { id: 2, body: 'alice two' },
    ])
    const bob = await fx.get('/notes?select=id,body', await bearer('auth', { sub: BOB }))
    t.same(bob.json(), [{ id: 3, body: 'bob one' }])
    const svc = await fx.get('/notes?select=id&order=id', await bearer('svc'))
    t.same(svc.json(), [{ id: 1 }, { id: 2 }, { id: 3 }], 'the secret key role bypasses RLS')
  })

  t.test('the transaction carries role, claims and request settings', async (t) => {
    const r = await fx.get('/whoami?select=*', {
      ...(await bearer('auth', { sub: ALICE, email: 'a@x', app_metadata: { p: 1 }, plan: 'pro' })),
      'X-Custom': 'yes',
      cookie: 'c1=v1; c2=v2',
    })
    t.equal(r.status, 200)
    const row = r.json()[0]
    t.equal(row.role, fx.tenant.roles.auth)
    t.match(row.claims, {
      sub: ALICE,
      email: 'a@x',
      role: fx.tenant.roles.auth,
      app_metadata: { p: 1 },
      plan: 'pro',
    })
    // PostgREST 12 removed db-use-legacy-gucs: request.jwt.claims only, no request.jwt.claim.<name>
    // (unset: NULL, or '' on a connection where some transaction once set it).
    for (const legacy of ['legacy_sub', 'legacy_role', 'legacy_email', 'legacy_plan']) {
      t.ok(row[legacy] === null || row[legacy] === '', `${legacy} is not set (${JSON.stringify(row[legacy])})`)
    }
    t.equal(row.search_path, '"public", "public", "extensions"', "the request's schema, then extra_search_path")
    t.equal(row.method, 'GET')
    t.equal(row.path, '/whoami')
    t.equal(row.headers['x-custom'], 'yes', 'lower-case header names')
    t.notOk('authorization' in row.headers, 'no credentials in request.headers')
    t.notOk('cookie' in row.headers)
    t.same(row.cookies, { c1: 'v1', c2: 'v2' })
    t.equal(row.statement_timeout, '10s')
    t.equal(row.read_only, 'on', 'GET runs read-only')
    t.equal(row.uid, ALICE)
    t.equal(row.auth_role, 'authenticated')
    const anon = (await fx.get('/whoami?select=role,claims,auth_role', {}, 'GET')).json()[0]
    t.same(anon, { role: fx.tenant.roles.anon, claims: { role: fx.tenant.roles.anon }, auth_role: 'anon' })
    const head = await fx.get('/whoami?select=method', {}, 'HEAD')
    t.equal(head.status, 200)
    t.equal(head.body, '')
  })

  t.test('visibility follows the role: no privilege at all is PGRST205', async (t) => {
    const anon = await fx.get('/secrets')
    t.equal(anon.status, 404)
    t.same(anon.json(), {
      code: 'PGRST205',
      message: "Could not find the table 'public.secrets' in the schema cache",
      details: null,
      hint: null,
    })
    t.equal(anon.headers['proxy-status'], 'PostgREST; error=PGRST205')
    const auth = await fx.get('/secrets', await bearer('auth', { sub: ALICE }))
    t.equal(auth.status, 404)
    const svc = await fx.get('/secrets?select=value', await bearer('svc'))
    t.same([svc.status, svc.json()], [200, [{ value: 'hidden' }]], 'the svc role has default privileges')
    const missing = await fx.get('/nothing_here')
    t.same([missing.status, missing.json().code], [404, 'PGRST205'])
  })

  t.test('a privilege but not SELECT: 42501, 401 for anon, 403 otherwise', async (t) => {
    const anon = await fx.get('/insert_only')
    t.equal(anon.status, 401)
    t.same(anon.json(), {
      code: '42501',
      message: 'permission denied for table insert_only',
      details: null,
      hint: null,
    })
    t.equal(anon.headers['www-authenticate'], 'Bearer')
    const anonToken = await fx.get('/insert_only', await bearer('anon'))
    t.equal(anonToken.status, 401, 'a valid token whose role is anon is still anon')
    const auth = await fx.get('/insert_only', await bearer('auth', { sub: ALICE }))
    t.equal(auth.status, 403)
    t.equal(auth.json().code, '42501')
    t.notOk(auth.headers['www-authenticate'])
  })

  t.test('a grant after start is seen (DDL event trigger reloads the cache)', async (t) => {
    t.equal((await fx.get('/tags?select=id')).status, 200)
    await fx.ownerSql(
      "CREATE TABLE late (id int); INSERT INTO late VALUES (1); SELECT platform.grant('SELECT', 'late', 'anon')",
    )
    // The reload is driven by the NOTIFY the DDL sends, which reaches the engine asynchronously.
    const r = await eventually(async () => {
      const answer = await fx.get('/late')
      return answer.status === 200 && answer
    })
    t.same([r.status, r.json()], [200, [{ id: 1 }]])
  })
})

t.test('bad tokens', async (t) => {
  const fx = await createRestFixture(t, { shared: 'rest' })
  const secret = fx.t.file.jwt.upstream_secret
  const key = new TextEncoder().encode(secret)
  const now = Math.floor(Date.now() / 1000)
  const signed = (claims: Record<string, unknown>) =>
    new SignJWT({ role: fx.tenant.roles.auth, ...claims }).setProtectedHeader({ alg: 'HS256' }).sign(key)
  const b64 = (v: unknown): string => Buffer.from(JSON.stringify(v)).toString('base64url')
  const unsigned = (header: unknown, claims: unknown): string => `${b64(header)}.${b64(claims)}.c2ln`
  const rsa = await generateKeyPair('RS256')
  // PostgREST 14's answers (Error.hs JwtError; jose-jwt's KeyError/BadAlgorithm texts as details).
  const cases: Array<[string, string, string, string, string | null]> = [
    ['expired', await signed({ exp: now - 120 }), 'PGRST303', 'JWT expired', null],
    ['not yet valid', await signed({ exp: now + 600, nbf: now + 600 }), 'PGRST303', 'JWT not yet valid', null],
    [
      'issued in the future',
      await signed({ exp: now + 600, iat: now + 600 }),
      'PGRST303',
      'JWT issued at future',
      null,
    ],
    [
      'exp not a number',
      await signed({ exp: String(now + 600) }),
      'PGRST303',
      "The JWT 'exp' claim must be a number",
      null,
    ],
    [
      'nbf not a number',
      await signed({ exp: now + 600, nbf: 'soon' }),
      'PGRST303',
      "The JWT 'nbf' claim must be a number",
      null,
    ],
    [
      'iat not a number',
      await signed({ exp: now + 600, iat: 'then' }),
      'PGRST303',
      "The JWT 'iat' claim must be a number",
      null,
    ],
    [
      'aud not a string',
      await signed({ exp: now + 600, aud: [1] }),
      'PGRST303',
      "The JWT 'aud' claim must be a string or an array of strings",
      null,
    ],
    ['expired before the nbf check', await signed({ exp: now - 120, nbf: 'soon' }), 'PGRST303', 'JWT expired', null],
    [
      'no exp (required upstream)',
      await new SignJWT({ role: fx.tenant.roles.auth }).setProtectedHeader({ alg: 'HS256' }).sign(key),
      'PGRST303',
      "The JWT 'exp' claim must be a number",
      null,
    ],
    [
      'claims not an object',
      await new CompactSign(Buffer.from('[1]')).setProtectedHeader({ alg: 'HS256' }).sign(key),
      'PGRST303',
      'Parsing claims failed',
      null,
    ],
    [
      'wrong secret',
      await fx.token('auth', {}, { secret: 'x'.repeat(40) }),
      'PGRST301',
      'No suitable key or wrong key type',
      'None of the keys was able to decode the JWT',
    ],
    [
      'HS512 (HS256 pinned)',
      await new SignJWT({ role: fx.tenant.roles.auth })
        .setProtectedHeader({ alg: 'HS512' })
        .setExpirationTime('5m')
        .sign(key),
      'PGRST301',
      'No suitable key or wrong key type',
      'None of the keys was able to decode the JWT',
    ],
    [
      'RS256',
      await new SignJWT({ role: fx.tenant.roles.auth })
        .setProtectedHeader({ alg: 'RS256' })
        .setExpirationTime('5m')
        .sign(rsa.privateKey),
      'PGRST301',
      'No suitable key or wrong key type',
      'No suitable key was found to decode the JWT',
    ],
    [
      'alg none',
      'eyJhbGciOiJub25lIn0.' + b64({ role: fx.tenant.roles.svc, exp: now + 600 }) + '.',
      'PGRST301',
      'Wrong or unsupported encoding algorithm',
      "JWT is unsecured but expected 'alg' was not 'none'",
    ],
    [
      'unknown alg',
      unsigned({ alg: 'XS256' }, { exp: now + 600 }),
      'PGRST301',
      'JWT cryptographic operation failed',
      null,
    ],
    ['two parts', 'abc.def', 'PGRST301', 'Expected 3 parts in JWT; got 2', null],
    ['garbage', 'a.b.c', 'PGRST301', 'JWT cryptographic operation failed', null],
  ]
  for (const [name, token, code, message, details] of cases) {
    const r = await fx.get('/authors?select=id', { authorization: `Bearer ${token}` })
    t.equal(r.status, 401, `${name}: status`)
    t.same(r.json(), { code, message, details, hint: null }, `${name}: body`)
    t.equal(
      r.headers['www-authenticate'],
      `Bearer error="invalid_token", error_description="${message}"`,
      `${name}: WWW-Authenticate`,
    )
    t.equal(r.headers['proxy-status'], `PostgREST; error=${code}`, `${name}: Proxy-Status`)
  }
  // A role the token may not take: what PostgREST answers for a role that does not exist.
  const roles: Array<[string, string, string]> = [
    ['foreign role', await fx.token('auth', { role: 'postgres' }), 'postgres'],
    ['another tenant role', await fx.token('auth', { role: 't_0000000000_svc' }), 't_0000000000_svc'],
    ['non-string role (JSON text)', await fx.token('auth', { role: 7 }), '7'],
    ['null role', await fx.token('auth', { role: null }), 'null'],
  ]
  for (const [name, token, role] of roles) {
    const r = await fx.get('/authors?select=id', { authorization: `Bearer ${token}` })
    t.equal(r.status, 401, `${name}: status`)
    t.same(
      r.json(),
      { code: '22023', message: `role "${role}" does not exist`, details: null, hint: null },
      `${name}: body`,
    )
    t.equal(r.headers['www-authenticate'], 'Bearer', `${name}: WWW-Authenticate`)
    t.equal(r.headers['proxy-status'], 'PostgREST; error=22023', `${name}: Proxy-Status`)
  }
  const empty = await fx.get('/authors', { authorization: 'Bearer ' })
  t.same(
    [empty.status, empty.json()],
    [401, { code: 'PGRST301', message: 'Empty JWT is sent in Authorization header', details: null, hint: null }],
  )
  t.equal(
    empty.headers['www-authenticate'],
    'Bearer error="invalid_token", error_description="Empty JWT is sent in Authorization header"',
  )
  const basic = await fx.get('/authors?select=id&limit=1', { authorization: 'Basic abc' })
  t.equal(basic.status, 200, 'a non-bearer Authorization is no token (anon)')
  const noRole = await fx.get('/insert_only', {
    authorization: `Bearer ${await signed({ role: undefined, exp: now + 60 })}`,
  })
  t.equal(noRole.status, 401, 'a token without role is anon (42501 answers 401)')
  const skew = await signed({ exp: now - 20 })
  t.equal(
    (await fx.get('/authors?select=id&limit=1', { authorization: `Bearer ${skew}` })).status,
    200,
    'within the 30 s skew',
  )
})

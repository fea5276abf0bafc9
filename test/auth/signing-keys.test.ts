// Asymmetric signing keys through the whole path (supabase-js and raw HTTP -> gateway ->
// auth engine / REST engine -> tenant database, tenant records in Redis): the JWKS each
// database publishes, `kid` in issued tokens, ES256 and RS256 tokens accepted at /rest/v1
// and by the auth engine, and every token that is not the addressed database's own refused:
// another database's key (its kid, or our kid over its signature), alg confusion (HS256
// keyed with the public key), `alg: none`, no kid. supabase-js's getClaims() verifies
// locally against the JWKS served through the gateway.
import t from 'tap'
import { createPrivateKey } from 'node:crypto'
import { SignJWT, UnsecuredJWT, decodeProtectedHeader, exportSPKI, importJWK, jwtVerify, createLocalJWKSet } from 'jose'
import { createClient } from '@supabase/supabase-js'
import { tenantIssuer } from '../../src/tenants/index.js'
import { startStack, gatewayCall, PUBLIC_URL, type Stack, type StackTenant } from '../helpers/panel-stack.js'
import { email } from '../helpers/auth-harness.js'

// Three provisioned databases and a whole stack: more than the default on a busy machine.
t.setTimeout(300_000)

let stack: Stack
let es: StackTenant // signs with ES256
let rs: StackTenant // signs with RS256
let hs: StackTenant // signs with its HS256 secret (legacy), holds an ES256 key all the same

t.before(async () => {
  stack = await startStack(t)
  es = await stack.addTenant({ signingAlgorithm: 'ES256' })
  rs = await stack.addTenant({ signingAlgorithm: 'RS256' })
  hs = await stack.addTenant({ signingAlgorithm: 'HS256' })
  for (const x of [es, rs, hs]) {
    await stack.owner(
      x,
      `
      CREATE TABLE public.notes (id int PRIMARY KEY, title text NOT NULL);
      INSERT INTO public.notes VALUES (1, 'hello');
      SELECT platform.grant('SELECT', 'public.notes', 'auth');
    `,
    )
  }
})

async function jwks(x: StackTenant) {
  const res = await fetch(`${stack.gatewayUrl}/${x.database}/auth/v1/.well-known/jwks.json`)
  return {
    status: res.status,
    headers: res.headers,
    body: (await res.json()) as { keys: Array<Record<string, unknown>> },
  }
}

async function signUp(x: StackTenant): Promise<string> {
  const sb = stack.supabase(x)
  const r = await sb.auth.signUp({ email: email('keys'), password: 'secret123' })
  if (r.error || !r.data.session) throw r.error ?? new Error('no session')
  return r.data.session.access_token
}

/** A private key of a tenant file as a jose key. */
function privateKeyOf(x: StackTenant, i = 0) {
  const k = x.file.jwt.signing_keys[i]!
  return { kid: k.kid, alg: k.alg, key: createPrivateKey({ key: JSON.parse(k.private_key), format: 'jwk' }) }
}

t.test(
  "the JWKS: every database publishes its own public keys in GoTrue's shape, no private part, no secret",
  async (t) => {
    for (const [x, kty] of [
      [es, 'EC'],
      [rs, 'RSA'],
      [hs, 'EC'],
    ] as const) {
      const r = await jwks(x)
      t.equal(r.status, 200, 'open: no apikey needed')
      t.equal(r.headers.get('cache-control'), 'public, max-age=600')
      t.match(r.headers.get('content-type'), /application\/json/)
      t.equal(r.body.keys.length, 1)
      const k = r.body.keys[0]!
      const file = x.file.jwt.signing_keys[0]!
      t.equal(k.kid, file.kid)
      t.equal(k.alg, file.alg)
      t.equal(k.kty, kty)
      t.equal(k.use, 'sig')
      t.same(k.key_ops, ['verify'])
      for (const priv of ['d', 'p', 'q', 'dp', 'dq', 'qi', 'k']) t.notOk(priv in k, `no "${priv}"`)
      const text = JSON.stringify(r.body)
      t.notOk(text.includes(x.file.jwt.secret), 'the HS256 secret is never published')
      t.notOk(text.includes(x.file.jwt.upstream_secret))
      await t.resolves(importJWK(k as never, String(k.alg)), 'a usable public key')
    }
    t.not((await jwks(es)).body.keys[0]!.kid, (await jwks(rs)).body.keys[0]!.kid, 'each database has its own key')
  },
)

t.test(
  'issued tokens carry the kid of the current key and verify against the JWKS; HS256 databases stay HS256',
  async (t) => {
    for (const x of [es, rs]) {
      const token = await signUp(x)
      const header = decodeProtectedHeader(token)
      t.equal(header.alg, x.file.jwt.signing_algorithm)
      t.equal(header.kid, x.file.jwt.signing_keys[0]!.kid)
      const { payload } = await jwtVerify(token, createLocalJWKSet((await jwks(x)).body as never), {
        issuer: tenantIssuer(x.tenant, PUBLIC_URL),
      })
      t.equal(payload.role, 'authenticated')

      // The gateway accepts it at /rest/v1 (re-signed for the REST engine) and the auth engine at /user.
      const rows = await gatewayCall(stack, x, '/rest/v1/notes?select=title', { token })
      t.equal(rows.status, 200, `${String(header.alg)} accepted at /rest/v1`)
      t.same(rows.body, [{ title: 'hello' }])
      const me = await gatewayCall(stack, x, '/auth/v1/user', { token })
      t.equal(me.status, 200, `${String(header.alg)} accepted by the auth engine`)
      t.equal(me.body.aud, 'authenticated')
    }
    const legacy = await signUp(hs)
    t.same(decodeProtectedHeader(legacy), { alg: 'HS256', typ: 'JWT' }, 'no kid with the HS256 secret')
    t.equal((await gatewayCall(stack, hs, '/rest/v1/notes?select=id', { token: legacy })).status, 200)
  },
)

t.test(
  "only the addressed database's keys verify: another database's key, alg confusion, alg none, no kid",
  async (t) => {
    const iss = tenantIssuer(es.tenant, PUBLIC_URL)
    const claims = { role: 'authenticated', aud: 'authenticated', sub: '00000000-0000-4000-8000-000000000001' }
    const refused = async (name: string, token: string, details: RegExp) => {
      const r = await gatewayCall(stack, es, '/rest/v1/notes?select=id', { token })
      t.equal(r.status, 401, `${name}: 401`)
      t.equal(r.body.code, 'invalid_token', name)
      t.match(r.body.details, details, `${name}: ${String(r.body.details)}`)
      t.match(r.headers.get('www-authenticate'), /invalid_token/)
      const user = await gatewayCall(stack, es, '/auth/v1/user', { token })
      t.equal(user.status, 403, `${name}: the auth engine refuses it too`)
      t.equal(user.body.error_code ?? user.body.code, 'bad_jwt')
    }

    // A token database RS issued, sent to database ES (and one ES2 minted with RS's key and RS's kid).
    const rsToken = await signUp(rs)
    await refused('token of another database', rsToken, /kid|algorithm/)
    const other = privateKeyOf(hs) // an ES256 key of another database
    await refused(
      "ES256 signed with another database's key, its kid, our issuer",
      await new SignJWT(claims)
        .setProtectedHeader({ alg: 'ES256', kid: other.kid })
        .setIssuer(iss)
        .setExpirationTime('1h')
        .sign(other.key),
      /kid/,
    )
    await refused(
      "another database's key under our kid",
      await new SignJWT(claims)
        .setProtectedHeader({ alg: 'ES256', kid: es.file.jwt.signing_keys[0]!.kid })
        .setIssuer(iss)
        .setExpirationTime('1h')
        .sign(other.key),
      /signature is invalid/,
    )
    const own = privateKeyOf(es)
    await refused(
      'our key without a kid',
      await new SignJWT(claims)
        .setProtectedHeader({ alg: 'ES256' })
        .setIssuer(iss)
        .setExpirationTime('1h')
        .sign(own.key),
      /kid/,
    )
    await refused(
      'our key, RS256 claimed with our kid',
      `${Buffer.from(JSON.stringify({ alg: 'RS256', kid: own.kid })).toString('base64url')}.${Buffer.from(JSON.stringify({ ...claims, iss, exp: Math.floor(Date.now() / 1000) + 600 })).toString('base64url')}.AAAA`,
      /algorithm "RS256" is not allowed|kid/,
    )
    // HS256 whose HMAC secret is our own public key (PEM and JWK JSON): the classic confusion.
    const pub = await importJWK((await jwks(es)).body.keys[0] as never, 'ES256')
    const pem = await exportSPKI(pub as never)
    for (const [form, secret] of [
      ['PEM', pem],
      ['JWK', JSON.stringify((await jwks(es)).body.keys[0])],
    ] as const) {
      await refused(
        `HS256 keyed with the public key (${form})`,
        await new SignJWT(claims)
          .setProtectedHeader({ alg: 'HS256', kid: own.kid })
          .setIssuer(iss)
          .setExpirationTime('1h')
          .sign(new TextEncoder().encode(secret)),
        /signature is invalid/,
      )
    }
    await refused(
      'alg none',
      new UnsecuredJWT({ ...claims, iss }).setExpirationTime('1h').encode(),
      /algorithm "none" is not allowed/,
    )
    await refused(
      'expired ES256 token of our own key',
      await new SignJWT(claims)
        .setProtectedHeader({ alg: 'ES256', kid: own.kid })
        .setIssuer(iss)
        .setIssuedAt(Math.floor(Date.now() / 1000) - 7200)
        .setExpirationTime(Math.floor(Date.now() / 1000) - 3600)
        .sign(own.key),
      /expired/,
    )
    await refused(
      "our key, another database's issuer",
      await new SignJWT(claims)
        .setProtectedHeader({ alg: 'ES256', kid: own.kid })
        .setIssuer(tenantIssuer(rs.tenant, PUBLIC_URL))
        .setExpirationTime('1h')
        .sign(own.key),
      /issuer/,
    )

    // Our own key, minted here, is accepted: the refusals above are about the key, not the path.
    const ok = await new SignJWT(claims)
      .setProtectedHeader({ alg: 'ES256', kid: own.kid })
      .setIssuer(iss)
      .setExpirationTime('1h')
      .sign(own.key)
    t.equal((await gatewayCall(stack, es, '/rest/v1/notes?select=id', { token: ok })).status, 200)
    // The legacy HS256 secret keeps verifying on an ES256 database.
    const legacy = await new SignJWT(claims)
      .setProtectedHeader({ alg: 'HS256' })
      .setIssuer(iss)
      .setExpirationTime('1h')
      .sign(new TextEncoder().encode(es.file.jwt.secret))
    t.equal((await gatewayCall(stack, es, '/rest/v1/notes?select=id', { token: legacy })).status, 200)
  },
)

t.test('supabase-js getClaims() verifies locally against the JWKS through the gateway', async (t) => {
  for (const x of [es, rs]) {
    const seen: string[] = []
    const sb = createClient(`${stack.gatewayUrl}/${x.database}`, x.file.keys.public, {
      auth: { persistSession: false, autoRefreshToken: false, detectSessionInUrl: false },
      global: {
        fetch: async (input, init) => {
          seen.push(new URL(String(input instanceof Request ? input.url : input)).pathname)
          return fetch(input, init)
        },
      },
    })
    const address = email('claims')
    const up = await sb.auth.signUp({ email: address, password: 'secret123' })
    t.error(up.error)
    seen.length = 0
    const { data, error } = await sb.auth.getClaims()
    t.error(error)
    t.equal(data?.claims.email, address)
    t.equal(data?.claims.sub, up.data.user?.id)
    t.equal(data?.header.kid, x.file.jwt.signing_keys[0]!.kid)
    t.same(
      seen,
      [`/${x.database}/auth/v1/.well-known/jwks.json`],
      'the JWKS was fetched, the user was not (no /user round trip)',
    )

    // A token of another database is not verified by this one's JWKS.
    const foreign = await signUp(x === es ? rs : es)
    const bad = await sb.auth.getClaims(foreign)
    t.ok(bad.error, "another database's token is refused")
  }
})

// Keys and tokens at the gateway, over real sockets: every refusal with its status and
// JSON body, key kinds, the bearer forms supabase-js sends, open auth routes, the auth
// upstream's Authorization rules, and the verified-token cache honouring exp.
import t from 'tap'
import http from 'node:http'
import { generateKeyPair, exportSPKI, SignJWT, UnsecuredJWT, jwtVerify } from 'jose'
import { tenantIssuer } from '../../src/tenants/index.js'
import {
  makeTenant,
  lookupOf,
  startUpstream,
  startGateway,
  request,
  signToken,
  errorShape,
  PUBLIC_URL,
} from '../helpers/gateway.js'

async function setup(t: { teardown(fn: () => unknown): void }, extra: { now?: () => number } = {}) {
  const auth = await startUpstream(t)
  const rest = await startUpstream(t)
  const acme = makeTenant('acme', { auth: auth.url, rest: rest.url })
  const beta = makeTenant('beta', { auth: auth.url, rest: rest.url })
  const gw = await startGateway(t, { tenants: lookupOf(acme, beta), ...extra })
  return { auth, rest, acme, beta, gw }
}

t.test('API keys: missing, wrong, of another tenant, in the query', async (t) => {
  const { rest, acme, beta, gw } = await setup(t)
  const url = `${gw.url}/acme/rest/v1/items`

  let r = await request(url)
  t.equal(r.status, 401)
  t.same(errorShape(r.json()), {
    code: 'no_api_key',
    message: 'No API key found in request',
    details: null,
    hint: "Send your project's public key in the apikey header (or ?apikey= in links).",
  })
  t.equal(r.headers['x-gatehouse-error-code'], 'no_api_key')

  r = await request(url, { headers: { apikey: 'pk_test_not_a_real_key_000' } })
  t.equal(r.status, 401)
  t.same(errorShape(r.json()), {
    code: 'invalid_api_key',
    message: 'Invalid API key',
    details: 'the key does not belong to this project',
    hint: 'Use the public or secret key of this project.',
  })

  r = await request(url, { headers: { apikey: beta.file.keys.public } })
  t.equal(r.status, 401, 'the public key of another tenant is invalid here')
  t.equal(r.json().code, 'invalid_api_key')
  r = await request(url, { headers: { apikey: beta.file.keys.secret } })
  t.equal(r.json().code, 'invalid_api_key', 'so is its secret key')

  t.equal(rest.received.length, 0, 'no refused request reached the upstream')

  r = await request(`${url}?select=id&apikey=${encodeURIComponent(acme.file.keys.public)}&order=id`)
  t.equal(r.status, 200, '?apikey= is accepted (links in mail)')
  t.equal(rest.last().url, '/acme/items?select=id&order=id&limit=1000', 'and removed before forwarding')
  t.equal(rest.last().headers.apikey, undefined)

  r = await request(`${url}?%61pikey=${encodeURIComponent(acme.file.keys.public)}`)
  t.equal(r.status, 200, 'an encoded parameter name is the same parameter')
  t.notMatch(rest.last().url, /pikey/, 'and is removed too')

  r = await request(`${url}?apikey=${encodeURIComponent(beta.file.keys.public)}`)
  t.equal(r.json().code, 'invalid_api_key')
})

t.test('bearer JWT refusals: each with its status, code and reason', async (t) => {
  const { rest, acme, beta, gw } = await setup(t)
  const url = `${gw.url}/acme/rest/v1/items`
  const key = acme.file.keys.public
  const refuse = async (name: string, token: string, details: RegExp) => {
    const r = await request(url, { headers: { apikey: key, authorization: `Bearer ${token}` } })
    t.equal(r.status, 401, `${name}: 401`)
    const body = r.json()
    t.equal(body.code, 'invalid_token', `${name}: invalid_token`)
    t.equal(body.message, 'Invalid bearer token')
    t.match(body.details, details, `${name}: ${body.details}`)
    t.equal(r.headers['x-gatehouse-error-code'], 'invalid_token')
    t.match(r.headers['www-authenticate'], /Bearer error="invalid_token"/)
  }

  await refuse('token of another tenant', await signToken(beta), /signature is invalid/)
  await refuse(
    'token of another tenant, our iss',
    await signToken(beta, {}, { iss: tenantIssuer(acme.tenant, PUBLIC_URL) }),
    /signature is invalid/,
  )
  await refuse(
    'expired',
    await signToken(acme, {}, { now: Math.floor(Date.now() / 1000) - 7200, expiresIn: 3600 }),
    /expired/,
  )
  await refuse('no exp', await signToken(acme, {}, { expiresIn: null }), /no expiry/)
  await refuse('wrong iss', await signToken(acme, {}, { iss: `${PUBLIC_URL}/beta/auth/v1` }), /issuer \(iss\)/)
  await refuse('no iss', await signToken(acme, {}, { iss: null }), /iss/)
  await refuse('wrong aud', await signToken(acme, {}, { aud: 'somebody-else' }), /audience \(aud\)/)

  const none = new UnsecuredJWT({
    role: 'service_role',
    iss: tenantIssuer(acme.tenant, PUBLIC_URL),
    aud: 'authenticated',
  })
    .setExpirationTime('1h')
    .encode()
  await refuse('alg none', none, /algorithm "none" is not allowed/)

  // HS/RS confusion, both directions: an RS256 token, and an HS256 token whose HMAC key
  // is the RSA public key (the classic attack against verifiers that take the key's type
  // from the token).
  const { privateKey, publicKey } = await generateKeyPair('RS256')
  const claims = { role: 'authenticated', sub: 'u1' }
  const rs = await new SignJWT(claims)
    .setProtectedHeader({ alg: 'RS256' })
    .setIssuer(tenantIssuer(acme.tenant, PUBLIC_URL))
    .setAudience('authenticated')
    .setExpirationTime('1h')
    .sign(privateKey)
  await refuse('RS256 token', rs, /algorithm "RS256" is not allowed/)
  const pem = await exportSPKI(publicKey)
  await refuse(
    'HS256 keyed with the RSA public key',
    await signToken(acme, claims, { secret: pem }),
    /signature is invalid/,
  )

  // Tampered: the payload changed (role raised), the signature kept.
  const good = await signToken(acme, { role: 'authenticated' })
  const [h, p, s] = good.split('.')
  const payload = JSON.parse(Buffer.from(p!, 'base64url').toString())
  payload.role = 'service_role'
  await refuse(
    'tampered payload',
    `${h}.${Buffer.from(JSON.stringify(payload)).toString('base64url')}.${s}`,
    /signature is invalid/,
  )
  await refuse('tampered signature', `${h}.${p}.${s!.slice(0, -4)}AAAA`, /signature is invalid/)

  await refuse('role outside the three', await signToken(acme, { role: 'postgres' }), /role "postgres" is not accepted/)
  await refuse(
    'a Postgres role name as role',
    await signToken(acme, { role: acme.tenant.roles.svc }),
    /is not accepted/,
  )
  await refuse('not a JWT nor a key', 'garbage.abc', /neither a JWT nor this project's API key/)
  await refuse('a broken JWT', 'abc.def.ghi', /malformed|invalid/)

  let r = await request(url, { headers: { apikey: key, authorization: 'Basic dXNlcjpwdw==' } })
  t.equal(r.status, 401)
  t.same(r.json().details, 'the Authorization header must be "Bearer <token>"')

  r = await request(url, { headers: { authorization: `Bearer ${await signToken(acme)}` } })
  t.equal(r.json().code, 'no_api_key', 'a token alone is not enough: the key is required')

  t.equal(rest.received.length, 0, 'nothing refused reached the upstream')
})

t.test('key kinds and bearer forms (supabase-js sends the key as Bearer when signed out)', async (t) => {
  const { rest, acme, beta, gw } = await setup(t)
  const url = `${gw.url}/acme/rest/v1/items`
  const roleSent = async () => {
    const auth = rest.last().headers.authorization!
    const { payload } = await jwtVerify(
      auth.replace(/^Bearer /, ''),
      new TextEncoder().encode(acme.file.jwt.upstream_secret),
      { algorithms: ['HS256'] },
    )
    return payload.role
  }

  let r = await request(url, { headers: { apikey: acme.file.keys.public } })
  t.equal(r.status, 200)
  t.equal(await roleSent(), acme.tenant.roles.anon, 'public key -> anon role')

  await request(url, { headers: { apikey: acme.file.keys.secret } })
  t.equal(await roleSent(), acme.tenant.roles.svc, 'secret key -> svc role')

  r = await request(url, {
    headers: { apikey: acme.file.keys.public, authorization: `Bearer ${acme.file.keys.public}` },
  })
  t.equal(r.status, 200, 'public key in both headers')
  t.equal(await roleSent(), acme.tenant.roles.anon)

  r = await request(url, { headers: { authorization: `Bearer ${acme.file.keys.secret}` } })
  t.equal(r.status, 200, 'a key as bearer alone is a key')
  t.equal(await roleSent(), acme.tenant.roles.svc)

  r = await request(url, {
    headers: { apikey: acme.file.keys.public, authorization: `Bearer ${acme.file.keys.secret}` },
  })
  t.equal(r.status, 401, 'two different keys are refused')
  t.equal(r.json().code, 'invalid_api_key')
  r = await request(url, { headers: { authorization: `Bearer ${beta.file.keys.public}` } })
  t.equal(r.json().code, 'invalid_api_key', "another tenant's key as bearer")

  await request(url, { headers: { apikey: acme.file.keys.public, authorization: `Bearer ${await signToken(acme)}` } })
  t.equal(await roleSent(), acme.tenant.roles.auth, 'user token -> auth role')
  await request(url, {
    headers: { apikey: acme.file.keys.public, authorization: `Bearer ${await signToken(acme, { role: 'anon' })}` },
  })
  t.equal(await roleSent(), acme.tenant.roles.anon, 'anon token -> anon role')
  await request(url, {
    headers: {
      apikey: acme.file.keys.public,
      authorization: `Bearer ${await signToken(acme, { role: 'service_role' })}`,
    },
  })
  t.equal(await roleSent(), acme.tenant.roles.svc, 'service_role token -> svc role')
  await request(url, { headers: { apikey: acme.file.keys.secret, authorization: `Bearer ${await signToken(acme)}` } })
  t.equal(await roleSent(), acme.tenant.roles.auth, 'a user token wins over the secret key (as Supabase)')
})

t.test('auth upstream: Authorization rules and open routes', async (t) => {
  const { auth, acme, gw } = await setup(t)
  const base = `${gw.url}/acme/auth/v1`

  // Secret key, no user JWT: a service_role token signed with the tenant's JWT secret.
  let r = await request(`${base}/admin/users`, { headers: { apikey: acme.file.keys.secret } })
  t.equal(r.status, 200)
  const svc = auth.last().headers.authorization!
  t.match(svc, /^Bearer /)
  const { payload, protectedHeader } = await jwtVerify(svc.slice(7), new TextEncoder().encode(acme.file.jwt.secret), {
    algorithms: ['HS256'],
    issuer: tenantIssuer(acme.tenant, PUBLIC_URL),
    requiredClaims: ['exp'],
  })
  t.equal(payload.role, 'service_role')
  t.equal(protectedHeader.alg, 'HS256')
  t.equal(auth.last().headers.apikey, undefined, 'the key itself is not forwarded')

  // Secret key also sent as bearer (supabase-js admin client): same.
  await request(`${base}/admin/users`, {
    headers: { apikey: acme.file.keys.secret, authorization: `Bearer ${acme.file.keys.secret}` },
  })
  t.equal(auth.last().headers.authorization, svc, 'the service token is cached and re-used')

  // Public key as bearer: removed.
  r = await request(`${base}/signup`, {
    method: 'POST',
    headers: {
      apikey: acme.file.keys.public,
      authorization: `Bearer ${acme.file.keys.public}`,
      'content-type': 'application/json',
    },
    body: '{"email":"a@b.c","password":"pw123456"}',
  })
  t.equal(r.status, 200)
  t.equal(auth.last().headers.authorization, undefined, 'a public key in Authorization is removed')
  t.equal(auth.last().body.toString(), '{"email":"a@b.c","password":"pw123456"}')

  // User JWT: passed through unchanged.
  const user = await signToken(acme, { email: 'a@b.c' })
  await request(`${base}/user`, { headers: { apikey: acme.file.keys.public, authorization: `Bearer ${user}` } })
  t.equal(auth.last().headers.authorization, `Bearer ${user}`, 'a user token reaches the auth engine unchanged')
  await request(`${base}/user`, { headers: { apikey: acme.file.keys.secret, authorization: `Bearer ${user}` } })
  t.equal(auth.last().headers.authorization, `Bearer ${user}`, 'also with the secret key')

  // Open routes: browser redirects carry no key.
  const open: Array<[string, string]> = [
    ['GET', '/verify?token=abc&type=signup&redirect_to=x'],
    ['GET', '/callback?code=1&state=2'],
    ['POST', '/callback'],
    ['GET', '/.well-known/jwks.json'],
    ['GET', '/.well-known/openid-configuration'],
    ['GET', '/authorize?provider=github'],
  ]
  for (const [method, path] of open) {
    const before = auth.received.length
    r = await request(`${base}${path}`, { method })
    t.equal(r.status, 200, `${method} ${path} needs no key`)
    t.equal(auth.received.length, before + 1)
    t.equal(auth.last().headers.authorization, undefined)
  }
  t.equal(auth.last().url, '/acme/authorize?provider=github')
  r = await request(`${base}/verify?apikey=wrong-key-0123456789`)
  t.equal(r.json().code, 'invalid_api_key', 'an open route still refuses a wrong key when one is given')

  for (const [method, path] of [
    ['POST', '/verify'],
    ['GET', '/settings'],
    ['GET', '/user'],
    ['POST', '/token?grant_type=password'],
    ['PUT', '/callback'],
  ] as const) {
    r = await request(`${base}${path}`, { method })
    t.equal(r.json().code, 'no_api_key', `${method} ${path} needs a key`)
  }
})

t.test('verified tokens are cached only until their exp', async (t) => {
  let now = Date.now()
  const { acme, gw, rest } = await setup(t, { now: () => now })
  const nowSec = Math.floor(now / 1000)
  const token = await signToken(acme, {}, { now: nowSec, expiresIn: 60 })
  const headers = { apikey: acme.file.keys.public, authorization: `Bearer ${token}` }
  let r = await request(`${gw.url}/acme/rest/v1/items`, { headers })
  t.equal(r.status, 200)
  now += 30_000
  r = await request(`${gw.url}/acme/rest/v1/items`, { headers })
  t.equal(r.status, 200, 'still valid after 30 s')
  now += 31_000
  r = await request(`${gw.url}/acme/rest/v1/items`, { headers })
  t.equal(r.status, 401, 'refused once exp has passed, although it was cached')
  t.match(r.json().details, /expired/)
  t.equal(rest.received.length, 2)
})

t.test('on one keep-alive connection: a rotated key and an expired token are refused', async (t) => {
  let now = Date.now()
  const rest = await startUpstream(t)
  const v1 = makeTenant('acme', { auth: rest.url, rest: rest.url })
  const v2 = makeTenant('acme', { auth: rest.url, rest: rest.url })
  let current = v1.tenant
  const gw = await startGateway(t, {
    tenants: { get: async (db: string) => (db === 'acme' ? current : null) },
    now: () => now,
  })
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 })
  t.teardown(() => agent.destroy())
  const sockets = new Set<unknown>()
  gw.app.server.on('connection', (s) => sockets.add(s))
  const get = (headers: Record<string, string>) => request(`${gw.url}/acme/rest/v1/items`, { headers, agent })

  t.equal((await get({ apikey: v1.file.keys.public })).status, 200)
  t.equal((await get({ apikey: v1.file.keys.public })).status, 200, 'served twice on the same connection')
  current = v2.tenant // the tenant record changes (keys rotated)
  const r = await get({ apikey: v1.file.keys.public })
  t.equal(r.status, 401, 'the old key is refused on the same connection')
  t.equal(r.json().code, 'invalid_api_key')
  t.equal((await get({ apikey: v2.file.keys.public })).status, 200)

  const token = await signToken(v2, {}, { now: Math.floor(now / 1000), expiresIn: 60 })
  const h = { apikey: v2.file.keys.public, authorization: `Bearer ${token}` }
  t.equal((await get(h)).status, 200)
  t.equal((await get(h)).status, 200)
  now += 61_000
  const expired = await get(h)
  t.equal(expired.status, 401, 'the token is refused once expired, on the same connection')
  t.match(expired.json().details, /expired/)
  t.equal(sockets.size, 1, 'all of it on one connection')
})

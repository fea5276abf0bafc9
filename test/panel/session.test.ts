// Panel sessions and the guard of every database route: no session or a bad one is 401
// (wrong key, expired, wrong algorithm, missing claims, iss/aud when configured), a user
// outside the organization is 403, a database of another organization or none at all is
// 404. Also a panel verifying through a JWKS URL (a real HTTP server serving the keys).
import t from 'tap'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { SignJWT, exportJWK, generateKeyPair } from 'jose'
import { loadConfig } from '../../src/config/index.js'
import { buildPanel, signPanelSession } from '../../src/panel/index.js'
import { parseTenantFile, toTenant, type Tenant } from '../../src/tenants/index.js'

const SECRET = 'panel-secret-of-this-test-0123456789abcdefgh'

function tenant(database: string, organization: string): Tenant {
  return toTenant(
    parseTenantFile(
      {
        database,
        organization,
        postgres: `postgres://owner:pw@127.0.0.1:1/${database}`,
        roles: { anon: 't_0000000000_anon', auth: 't_0000000000_auth', svc: 't_0000000000_svc' },
        jwt: { secret: 'a'.repeat(40), upstream_secret: 'b'.repeat(40) },
        keys: { public: 'pk_' + 'p'.repeat(20), secret: 'sk_' + 's'.repeat(20) },
        upstreams: { auth: 'http://127.0.0.1:1/x', rest: 'http://127.0.0.1:1/x' },
        auth: { providers: { github: { client_id: 'gh-client', secret: 'gh-secret-value' } } },
      },
      `${database}.yaml`,
      {},
    ),
  )
}

const tenants = new Map([
  ['acme', tenant('acme', 'org_acme')],
  ['other', tenant('other', 'org_other')],
])
const lookup = { get: async (db: string) => tenants.get(db) ?? null }

function panelWith(panel: Record<string, unknown>) {
  const config = loadConfig({ env: {}, overrides: { log: { level: 'silent' }, panel: { port: 0, ...panel } } })
  const app = buildPanel({ config, tenants: lookup })
  t.teardown(() => app.close())
  return app
}

const PATH = '/organizations/org_acme/databases/acme/api/auth-settings'

t.test('a valid session of a member reaches the route', async (t) => {
  const app = panelWith({ session_secret: SECRET })
  const token = await signPanelSession({ secret: SECRET, userId: 'u1', email: 'ada@example.com', orgs: ['org_acme'] })
  const r = await app.inject({ method: 'GET', url: PATH, headers: { authorization: `Bearer ${token}` } })
  t.equal(r.statusCode, 200)
  t.equal(r.json().database, 'acme')
})

t.test('no session, or a bad one: 401 with the panel error shape', async (t) => {
  const app = panelWith({ session_secret: SECRET })
  const now = Math.floor(Date.now() / 1000)
  const cases: Array<[string, string | undefined, string]> = [
    ['no header', undefined, 'no_session'],
    ['not a bearer', 'Basic abc', 'no_session'],
    ['garbage', 'Bearer not-a-jwt', 'invalid_session'],
    [
      'wrong key',
      `Bearer ${await signPanelSession({ secret: SECRET + 'x', userId: 'u1', orgs: ['org_acme'] })}`,
      'invalid_session',
    ],
    [
      'expired',
      `Bearer ${await signPanelSession({ secret: SECRET, userId: 'u1', orgs: ['org_acme'], expiresIn: -60 })}`,
      'invalid_session',
    ],
    [
      'no exp',
      `Bearer ${await new SignJWT({ sub: 'u1', orgs: ['org_acme'] }).setProtectedHeader({ alg: 'HS256' }).sign(new TextEncoder().encode(SECRET))}`,
      'invalid_session',
    ],
    [
      'HS512 not pinned',
      `Bearer ${await new SignJWT({ sub: 'u1', orgs: ['org_acme'] })
        .setProtectedHeader({ alg: 'HS512' })
        .setExpirationTime(now + 60)
        .sign(new TextEncoder().encode(SECRET))}`,
      'invalid_session',
    ],
    [
      'alg none',
      `Bearer ${Buffer.from('{"alg":"none"}').toString('base64url')}.${Buffer.from(JSON.stringify({ sub: 'u1', orgs: ['org_acme'], exp: now + 60 })).toString('base64url')}.`,
      'invalid_session',
    ],
    [
      'no orgs',
      `Bearer ${await new SignJWT({ sub: 'u1' })
        .setProtectedHeader({ alg: 'HS256' })
        .setExpirationTime(now + 60)
        .sign(new TextEncoder().encode(SECRET))}`,
      'invalid_session',
    ],
    [
      'no sub',
      `Bearer ${await new SignJWT({ orgs: ['org_acme'] })
        .setProtectedHeader({ alg: 'HS256' })
        .setExpirationTime(now + 60)
        .sign(new TextEncoder().encode(SECRET))}`,
      'invalid_session',
    ],
  ]
  for (const [name, header, code] of cases) {
    const r = await app.inject({
      method: 'GET',
      url: PATH,
      headers: header !== undefined ? { authorization: header } : {},
    })
    t.equal(r.statusCode, 401, name)
    const body = r.json()
    t.equal(body.code, code, name)
    t.same(Object.keys(body), ['code', 'message', 'details', 'hint'], `${name}: error shape`)
  }
  const expired = await app.inject({
    method: 'GET',
    url: PATH,
    headers: {
      authorization: `Bearer ${await signPanelSession({ secret: SECRET, userId: 'u1', orgs: ['org_acme'], expiresIn: -60 })}`,
    },
  })
  t.match(expired.json().message, /expired/)
})

t.test('membership and ownership: 403 outside the organization, 404 for a database it does not own', async (t) => {
  const app = panelWith({ session_secret: SECRET })
  const outsider = await signPanelSession({ secret: SECRET, userId: 'u2', orgs: ['org_other'] })
  const member = await signPanelSession({ secret: SECRET, userId: 'u1', orgs: ['org_acme'] })

  const r1 = await app.inject({ method: 'GET', url: PATH, headers: { authorization: `Bearer ${outsider}` } })
  t.equal(r1.statusCode, 403)
  t.equal(r1.json().code, 'not_a_member')

  // A member of org_other naming its own organization but acme's database.
  const r2 = await app.inject({
    method: 'GET',
    url: '/organizations/org_other/databases/acme/api/auth-settings',
    headers: { authorization: `Bearer ${outsider}` },
  })
  t.equal(r2.statusCode, 404)
  t.equal(r2.json().code, 'database_not_found')

  for (const db of ['nope', 'NOT-A-NAME', 'other']) {
    const r = await app.inject({
      method: 'GET',
      url: `/organizations/org_acme/databases/${db}/api/auth-settings`,
      headers: { authorization: `Bearer ${member}` },
    })
    t.equal(r.statusCode, 404, db)
    t.equal(r.json().code, 'database_not_found', db)
  }

  const unknown = await app.inject({
    method: 'GET',
    url: '/organizations/org_acme/databases/acme/api/nothing',
    headers: { authorization: `Bearer ${member}` },
  })
  t.equal(unknown.statusCode, 404)
  t.equal(unknown.json().code, 'not_found')

  for (const [length, code] of [
    [300, 'database_not_found'],
    [5000, 'not_found'],
  ] as const) {
    const long = await app.inject({
      method: 'GET',
      url: `/organizations/org_acme/databases/${'a'.repeat(length)}/api/auth-settings`,
      headers: { authorization: `Bearer ${member}` },
    })
    t.same([long.statusCode, long.json().code], [404, code], `a database name of ${length} characters`)
  }
})

t.test('iss and aud are checked when configured', async (t) => {
  const app = panelWith({ session_secret: SECRET, issuer: 'https://panel.example', audience: 'gatehouse' })
  const good = await signPanelSession({
    secret: SECRET,
    userId: 'u1',
    orgs: ['org_acme'],
    issuer: 'https://panel.example',
    audience: 'gatehouse',
  })
  const noIss = await signPanelSession({ secret: SECRET, userId: 'u1', orgs: ['org_acme'], audience: 'gatehouse' })
  const wrongAud = await signPanelSession({
    secret: SECRET,
    userId: 'u1',
    orgs: ['org_acme'],
    issuer: 'https://panel.example',
    audience: 'other',
  })
  t.equal(
    (await app.inject({ method: 'GET', url: PATH, headers: { authorization: `Bearer ${good}` } })).statusCode,
    200,
  )
  t.equal(
    (await app.inject({ method: 'GET', url: PATH, headers: { authorization: `Bearer ${noIss}` } })).statusCode,
    401,
  )
  t.equal(
    (await app.inject({ method: 'GET', url: PATH, headers: { authorization: `Bearer ${wrongAud}` } })).statusCode,
    401,
  )
})

t.test('a panel verifying through its JWKS URL (RS256)', async (t) => {
  const { publicKey, privateKey } = await generateKeyPair('RS256')
  const jwk = { ...(await exportJWK(publicKey)), kid: 'k1', alg: 'RS256', use: 'sig' }
  const server = http.createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json' })
    res.end(JSON.stringify({ keys: [jwk] }))
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())))
  const app = panelWith({
    jwks_url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/jwks.json`,
    algorithms: ['RS256'],
  })

  const sign = (claims: Record<string, unknown>) =>
    new SignJWT(claims)
      .setProtectedHeader({ alg: 'RS256', kid: 'k1' })
      .setSubject('u9')
      .setExpirationTime('5m')
      .sign(privateKey)
  const ok = await app.inject({
    method: 'GET',
    url: PATH,
    headers: { authorization: `Bearer ${await sign({ orgs: ['org_acme'] })}` },
  })
  t.equal(ok.statusCode, 200)
  // An HS256 token signed with anything is refused: the algorithm is pinned to RS256.
  const hs = await signPanelSession({ secret: SECRET, userId: 'u1', orgs: ['org_acme'] })
  const bad = await app.inject({ method: 'GET', url: PATH, headers: { authorization: `Bearer ${hs}` } })
  t.equal(bad.statusCode, 401)
})

t.test('a panel without any key refuses to build', async (t) => {
  const config = loadConfig({ env: {}, overrides: { log: { level: 'silent' } } })
  t.throws(() => buildPanel({ config, tenants: lookup }), /session_secret|jwks_url/)
})

t.test(
  'a body the panel will not read: 413 payload_too_large naming the limit, 415 unsupported_media_type naming the type',
  async (t) => {
    const app = panelWith({ session_secret: SECRET })
    const token = await signPanelSession({ secret: SECRET, userId: 'u1', email: 'ada@example.com', orgs: ['org_acme'] })
    const headers = { authorization: `Bearer ${token}` }
    const big = await app.inject({
      method: 'PATCH',
      url: PATH,
      headers: { ...headers, 'content-type': 'application/json' },
      payload: JSON.stringify({ pad: 'x'.repeat(1024 * 1024 + 10) }),
    })
    t.equal(big.statusCode, 413)
    t.equal(big.json().code, 'payload_too_large')
    t.equal(big.headers['x-gatehouse-error-code'], 'payload_too_large')
    t.equal(big.json().message, `The request body is larger than the limit of ${1024 * 1024} bytes`)
    const plain = await app.inject({
      method: 'PATCH',
      url: PATH,
      headers: { ...headers, 'content-type': 'text/plain' },
      payload: 'hello',
    })
    t.equal(plain.statusCode, 415)
    t.equal(plain.json().code, 'unsupported_media_type')
    t.match(plain.json().message, 'not "text/plain"')
  },
)

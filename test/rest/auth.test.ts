// The verified-token cache (pure, injected clock): a token is verified once, served from
// the cache until it expires, and its time claims are checked again on every use.
import t from 'tap'
import { TokenVerifier, bearerToken } from '../../src/rest/auth.js'
import { signHS256 } from '../../src/shared/index.js'
import type { Tenant } from '../../src/tenants/index.js'
import { statusForSqlState } from '../../src/rest/errors.js'

const tenant = {
  database: 'demo',
  roles: { anon: 't_x_anon', auth: 't_x_auth', svc: 't_x_svc' },
  jwt: { upstream_secret: 'u'.repeat(40) },
} as unknown as Tenant

t.test('cached until exp, exp re-checked on each use', async (t) => {
  let now = 1_700_000_000_000
  const v = new TokenVerifier({ now: () => now })
  const token = await signHS256(
    { role: 't_x_auth', sub: 'u1' },
    { secret: tenant.jwt.upstream_secret, expiresInSeconds: 60, now: now / 1000 },
  )
  const c1 = await v.caller(tenant, `Bearer ${token}`)
  t.same([c1.role, c1.kind, c1.isAnon, c1.claims.sub], ['t_x_auth', 'auth', false, 'u1'])
  now += 80_000 // 80 s later: past exp, within the 30 s skew
  t.equal((await v.caller(tenant, `bearer ${token}`)).role, 't_x_auth', 'cached, within skew')
  now += 20_000 // 100 s: beyond exp + skew
  await t.rejects(v.caller(tenant, `Bearer ${token}`), { code: 'PGRST303', message: 'JWT expired', status: 401 })
  const other = { ...tenant, jwt: { upstream_secret: 'v'.repeat(40) } } as unknown as Tenant
  now -= 100_000
  await t.rejects(v.caller(other, `Bearer ${token}`), { code: 'PGRST301' }, 'the cache key includes the secret')
  t.same((await v.caller(tenant, undefined)).claims, { role: 't_x_anon' }, 'no token: anon claims')
  const svc = await signHS256(
    { role: 't_x_svc' },
    { secret: tenant.jwt.upstream_secret, expiresInSeconds: 60, now: now / 1000 },
  )
  t.equal((await v.caller(tenant, `Bearer ${svc}`)).kind, 'svc')
})

t.test('Authorization parsing', async (t) => {
  t.equal(bearerToken(undefined), null)
  t.equal(bearerToken('Bearer abc'), 'abc')
  t.equal(bearerToken('BEARER  abc '), 'abc ', 'as wai-extra: leading blanks dropped, trailing kept')
  t.equal(bearerToken('bearer\tabc'), 'abc')
  t.equal(bearerToken('Bearer\u00a0abc'), 'abc', 'NBSP is a blank (Data.Word8.isSpace)')
  t.equal(bearerToken('\u00a0Bearer abc'), null, 'a blank before the scheme: no Bearer scheme')
  t.equal(bearerToken('Bearerabc'), null)
  t.equal(bearerToken('Bearer'), '')
  t.equal(bearerToken('Basic xyz'), null)
})

t.test('SQLSTATE -> HTTP status', async (t) => {
  const cases: Array<[string, string, boolean, number]> = [
    ['08006', '', false, 503],
    ['09000', '', false, 500],
    ['0L000', '', false, 403],
    ['0P000', '', false, 403],
    ['23503', '', false, 409],
    ['23505', '', false, 409],
    ['25006', '', false, 405],
    ['21000', 'UPDATE requires a WHERE clause', false, 400],
    ['21000', 'more than one row', false, 500],
    ['22023', 'role "x" does not exist', false, 401],
    ['22023', 'invalid value', false, 400],
    ['25001', '', false, 500],
    ['28000', '', false, 403],
    ['2D000', '', false, 500],
    ['38000', '', false, 500],
    ['39000', '', false, 500],
    ['3B000', '', false, 500],
    ['40001', '', false, 500],
    ['53400', '', false, 500],
    ['53100', '', false, 503],
    ['54001', '', false, 500],
    ['55000', '', false, 500],
    ['57P01', '', false, 503],
    ['57014', '', false, 500],
    ['58000', '', false, 500],
    ['F0000', '', false, 500],
    ['HV000', '', false, 500],
    ['P0001', '', false, 400],
    ['P0002', '', false, 500],
    ['XX000', '', false, 500],
    ['42883', 'function foo() does not exist', false, 404],
    ['42883', 'function xmlagg(x) does not exist', false, 406],
    ['42P01', '', false, 404],
    ['42P17', '', false, 500],
    ['42501', '', true, 401],
    ['42501', '', false, 403],
    ['PT402', '', false, 402],
    ['PT40A', '', false, 500],
    ['PTABC', '', false, 500],
    ['22P02', '', false, 400],
    ['42703', '', false, 400],
    ['23502', '', false, 400],
  ]
  for (const [code, message, anon, status] of cases)
    t.equal(statusForSqlState(code, message, anon), status, `${code} ${message}`)
})

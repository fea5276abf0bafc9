// Panel changes survive a restart of the development stack (what `npm start` runs): an auth
// setting, a REST setting, a rotation and a revocation, and 50 concurrent PATCHes of
// different fields. With `tenants.source: files` they are written into the tenant file itself,
// comments kept, and the audit trail is .gatehouse/audit.log; with Redis the stack merges its
// files three ways at start instead of writing them over the store. The revoked key never
// verifies again, not after a restart and not after an edit of the file that lists it again
// and drops its tombstone. The real development stack (startDev) on the test cluster, real
// files, real Redis, every port the kernel's choice at each start.
import t, { type Test } from 'tap'
import { readFileSync, writeFileSync } from 'node:fs'
import path from 'node:path'
import { parse as parseYaml, parseDocument } from 'yaml'
import { startDev, type DevStack } from '../../src/dev/index.js'
import { privateKeyObject } from '../../src/tenants/index.js'
import { signAsymmetric } from '../../src/shared/index.js'
import { createWorkingCopy, KERNEL_PORTS } from '../helpers/e2e-stack.js'
import { adminUrl } from '../helpers/db.js'
import { createTestRedis } from '../helpers/redis.js'
import { until } from '../helpers/eventually.js'

// Whole development stacks start here, three times.
t.setTimeout(400_000)

async function poll(what: string, check: () => Promise<boolean>): Promise<void> {
  await until(check, what, 30_000)
}

async function scenario(t: Test, source: 'files' | 'redis'): Promise<void> {
  const copy = createWorkingCopy(t, `state_${source}`)
  const stateDir = path.join(copy.root, '.gatehouse')
  const redis = source === 'redis' ? createTestRedis(t) : null
  const demo = copy.byName('demo')
  const src = path.join(copy.root, 'config', 'tenants', `${demo.database}.yaml`)
  // A developer's comments, which the panel's writes keep.
  writeFileSync(
    src,
    '# my notes about this tenant\n' +
      readFileSync(src, 'utf8').replace(/^database: (\S+)$/m, 'database: $1 # the URL segment'),
  )
  const start = (): Promise<DevStack> =>
    startDev({
      root: copy.root,
      env: { DATABASE_URL: adminUrl(), ...(redis !== null ? { REDIS_URL: redis.url } : {}) },
      stateDir,
      overrides: {
        ...KERNEL_PORTS,
        ...(redis !== null ? { redis: { key_prefix: redis.prefix } } : {}),
        log: { level: 'silent' },
        auth: { ...KERNEL_PORTS.auth, bcrypt_cost: 4, pool_per_tenant: 2 },
        rest: { ...KERNEL_PORTS.rest, pool_per_tenant: 2 },
      },
    })
  let dev = await start()
  t.teardown(() => dev.stop())
  if (redis !== null)
    t.match(
      dev.info,
      { tenants_source: 'redis', redis_url: redis.url, redis_key_prefix: redis.prefix },
      'dev.json names the Redis store the stack serves (the CLI beside it uses that store)',
    )
  const info = () => dev.info.databases.find((d) => d.database === demo.database)!
  const api = (rest: string) =>
    `${dev.info.panel_url}/organizations/${demo.organization}/databases/${demo.database}/api/${rest}`
  const panel = async (method: string, rest: string, body?: unknown, headers: Record<string, string> = {}) => {
    const res = await fetch(api(rest), {
      method,
      headers: {
        authorization: `Bearer ${dev.info.panel_session}`,
        ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
        ...headers,
      },
      body: body !== undefined ? JSON.stringify(body) : undefined,
    })
    return { status: res.status, etag: res.headers.get('etag'), body: (await res.json()) as any }
  }
  const key0 = (
    parseYaml(readFileSync(src, 'utf8')) as {
      jwt: { signing_keys: Array<{ kid: string; alg: 'ES256'; private_key: string }> }
    }
  ).jwt.signing_keys[0]!
  const serviceToken = (key: { kid: string; alg: 'ES256' | 'RS256'; private_key: string }) =>
    signAsymmetric(
      { role: 'service_role' },
      {
        alg: key.alg,
        kid: key.kid,
        privateKey: privateKeyObject(key.private_key),
        issuer: `${dev.info.gateway_url}/${demo.database}/auth/v1`,
        expiresInSeconds: 600,
      },
    )
  const adminUsers = async (token: string) =>
    (
      await fetch(`${dev.info.gateway_url}/${demo.database}/auth/v1/admin/users`, {
        headers: { apikey: info().public_key, authorization: `Bearer ${token}` },
      })
    ).status
  const old = await serviceToken(key0)
  t.equal(await adminUsers(old), 200, 'the original key signs')

  const got = await panel('GET', 'auth-settings')
  t.match(got.etag, source === 'files' ? /^"[0-9a-f]{20}"$/ : /^"\d+"$/, "the record's version")
  t.equal((await panel('PATCH', 'auth-settings', { pkce: false }, { 'if-match': '"0000"' })).status, 412)
  t.equal((await panel('PATCH', 'auth-settings', { anonymous_sign_in: true }, { 'if-match': got.etag! })).status, 200)
  t.equal((await panel('PATCH', 'rest-settings', { aggregates_enabled: false })).status, 200)
  const patches = await Promise.all(
    Array.from({ length: 50 }, (_, i) =>
      panel('PATCH', 'auth-settings', {
        providers: { [`p${i}`]: { client_id: `client-${i}`, secret: `s3cret-${i}` } },
      }),
    ),
  )
  t.same(
    patches.map((p) => p.status),
    Array(50).fill(200),
    'every concurrent PATCH succeeds',
  )
  const rotated = await panel('POST', 'signing-keys/rotate', {})
  t.equal(rotated.status, 200)
  const revoked = await panel('DELETE', `signing-keys/${key0.kid}`)
  t.equal(revoked.status, 200, JSON.stringify(revoked.body))
  await poll('the revoked key is refused', async () => (await adminUsers(old)) === 403)

  if (source === 'files') checkFile(t, src, stateDir, key0.kid, rotated.body.rotated)
  // 54 changes from the panel (and with Redis the stack's first apply).
  t.equal((await panel('GET', 'history')).body.entries.length, source === 'redis' ? 55 : 54)

  // Restart: every change is still there.
  await dev.stop()
  dev = await start()
  const auth = await panel('GET', 'auth-settings')
  t.equal(auth.body.settings.anonymous_sign_in, true, 'the auth setting survives a restart')
  t.equal(Object.keys(auth.body.settings.providers).length, 50)
  t.equal(
    (await panel('GET', 'rest-settings')).body.settings.aggregates_enabled,
    false,
    'the REST setting survives a restart',
  )
  const keys = await panel('GET', 'signing-keys')
  t.same(
    keys.body.keys.map((k: { kid: string }) => k.kid),
    [rotated.body.rotated],
    'the rotation survives a restart',
  )
  t.equal(await adminUsers(old), 403, 'the revoked key stays refused after a restart')
  const newKey =
    keys.body.keys[0].kid === rotated.body.rotated && source === 'files'
      ? (parseYaml(readFileSync(src, 'utf8')) as any).jwt.signing_keys[0]
      : null
  if (newKey !== null) t.equal(await adminUsers(await serviceToken(newKey)), 200, 'the rotated key signs')

  // An edit that lists the revoked key again and drops its tombstone does not bring it back
  // (with Redis the file never stopped listing it: the store is the record there).
  const doc = parseDocument(readFileSync(src, 'utf8'))
  const listed = (doc.toJS() as { jwt: { signing_keys: Array<{ kid: string }> } }).jwt.signing_keys.some(
    (k) => k.kid === key0.kid,
  )
  t.equal(listed, source === 'redis')
  if (!listed) doc.addIn(['jwt', 'signing_keys'], doc.createNode(key0))
  doc.deleteIn(['jwt', 'revoked_keys'])
  doc.setIn(['auth', 'mail_rate_per_hour'], 99)
  writeFileSync(src, doc.toString())
  await poll(
    'the edit is loaded',
    async () => (await panel('GET', 'auth-settings')).body.settings.mail_rate_per_hour === 99,
  )
  t.equal(await adminUsers(old), 403, 'a file that lists the revoked key does not re-enable it')
  await dev.stop()
  dev = await start()
  t.equal(await adminUsers(old), 403, 'nor after another restart')
  t.same(
    (await panel('GET', 'signing-keys')).body.revoked_keys.map((k: { kid: string }) => k.kid),
    [key0.kid],
  )
  t.equal((await panel('GET', 'auth-settings')).body.settings.anonymous_sign_in, true)
}

/** With tenant files, the file says all of it, comments kept; the audit trail is in the state directory. */
function checkFile(t: Test, src: string, stateDir: string, revokedKid: string, rotatedKid: string): void {
  const text = readFileSync(src, 'utf8')
  t.match(text, /^# my notes about this tenant\n/)
  t.match(text, /^database: \S+ # the URL segment$/m)
  const file = parseYaml(text) as any
  t.equal(file.auth.anonymous_sign_in, true)
  t.equal(file.rest.aggregates_enabled, false)
  t.equal(Object.keys(file.auth.providers).length, 50, 'all 50 concurrent changes are in the file')
  t.same(
    file.jwt.signing_keys.map((k: { kid: string }) => k.kid),
    [rotatedKid],
  )
  t.same(
    file.jwt.revoked_keys.map((k: { kid: string; revoked_by: string }) => [k.kid, k.revoked_by]),
    [[revokedKid, 'panel-user-dev']],
  )
  const audit = readFileSync(path.join(stateDir, 'audit.log'), 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as { action: string; who: string })
  t.equal(audit.length, 54)
  t.same(audit.map((e) => e.action).slice(-2), ['rotate', 'revoke'])
  t.notMatch(readFileSync(path.join(stateDir, 'audit.log'), 'utf8'), /s3cret/, 'no secret in the audit log')
}

t.test('files: panel changes are written into the tenant file and survive restarts', (t) => scenario(t, 'files'))
t.test('redis: panel changes survive restarts of a stack that applies its files at start', (t) => scenario(t, 'redis'))

// One truth for tenant state with the Redis store (docs/tenant-state.md), as an operator sees
// it: panel changes of an auth setting, a REST setting, a rotation and a revocation survive
// the next `gatehouse tenants apply` of the unchanged tenant file (what a deploy job runs); a
// revoked key never verifies again, whatever a file lists; a field changed both in the file
// and from the panel is refused by apply and listed by diff; export -> apply is a no-op; 50
// concurrent panel PATCHes of different fields all land; If-Match is honoured; every change
// is in the history; a retired legacy secret's tokens are refused on REST and auth.
// Real Redis, real files, the real CLI, the gateway and engines on loopback.
import t, { type Test } from 'tap'
import { execFile } from 'node:child_process'
import { randomUUID } from 'node:crypto'
import { readFileSync, writeFileSync } from 'node:fs'
import path from 'node:path'
import { parseDocument } from 'yaml'
import { privateKeyObject, runtimeSigningKey, tenantIssuer, type TenantFile } from '../../src/tenants/index.js'
import { renderTenantFile } from '../../src/platform/index.js'
import { signAsymmetric } from '../../src/shared/index.js'
import { startStack, gatewayCall, userToken, PUBLIC_URL, type Stack, type StackTenant } from '../helpers/panel-stack.js'
import { redisUrl } from '../helpers/redis.js'
import { tempDir, eventually } from '../helpers/tenant-fixtures.js'

interface Run {
  code: number
  stdout: string
  stderr: string
}

// A whole stack plus a dozen CLI starts (each a second or more on a busy machine).
t.setTimeout(400_000)

let stack: Stack
let env: Record<string, string>
const ORG = 'org_state'
let token: string

/** The real CLI against the stack's Redis, as an operator runs it. */
function cli(args: string[]): Promise<Run> {
  const clean = Object.fromEntries(
    Object.entries(process.env).filter(([k]) => !k.startsWith('GATEHOUSE_') && k !== 'REDIS_URL'),
  )
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      ['--import', 'tsx', 'src/cli.ts', ...args],
      { env: { ...clean, ...env }, timeout: 90_000 },
      (err, stdout, stderr) =>
        resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stdout, stderr }),
    )
  })
}

t.before(async () => {
  stack = await startStack(t)
  env = {
    GATEHOUSE_TENANTS_SOURCE: 'redis',
    GATEHOUSE_REDIS_URL: redisUrl(),
    GATEHOUSE_REDIS_KEY_PREFIX: stack.store.keys.set.replace(/tenants$/, ''),
  }
  token = await stack.panelSession({ userId: 'p-state', email: 'ops@example.com', orgs: [ORG] })
})

const api = (x: StackTenant, rest: string) => `/organizations/${ORG}/databases/${x.database}/api/${rest}`

/** The tenant file an operator keeps for `x` (pointed at this stack's engines), applied once. */
async function appliedFile(t: Test, x: StackTenant): Promise<string> {
  const file = path.join(tempDir(t), `${x.database}.yaml`)
  writeFileSync(file, renderTenantFile({ ...x.file, upstreams: x.tenant.upstreams }), { mode: 0o600 })
  const r = await cli(['tenants', 'apply', file])
  t.equal(r.code, 0, r.stderr)
  return file
}

/** A service_role token signed with one of the tenant's asymmetric keys. */
function serviceToken(
  x: StackTenant,
  key: { kid: string; alg: 'ES256' | 'RS256'; private_key: string },
): Promise<string> {
  return signAsymmetric(
    { role: 'service_role' },
    {
      alg: key.alg,
      kid: key.kid,
      privateKey: privateKeyObject(key.private_key),
      issuer: tenantIssuer(x.tenant, PUBLIC_URL),
      expiresInSeconds: 600,
    },
  )
}

const adminUsers = (x: StackTenant, bearer: string) => gatewayCall(stack, x, '/auth/v1/admin/users', { token: bearer })

t.test('panel changes survive apply; a revoked key never verifies again', async (t) => {
  const x = await stack.addTenant({ organization: ORG, signingAlgorithm: 'ES256' })
  const file = await appliedFile(t, x)
  const key0 = x.file.jwt.signing_keys[0]!
  const old = await serviceToken(x, key0)
  t.equal((await adminUsers(x, old)).status, 200, 'the original key signs a working service_role token')

  t.equal(
    (await stack.panel('PATCH', api(x, 'auth-settings'), { token, body: { anonymous_sign_in: true } })).status,
    200,
  )
  t.equal(
    (await stack.panel('PATCH', api(x, 'rest-settings'), { token, body: { aggregates_enabled: true } })).status,
    200,
  )
  const rotated = await stack.panel('POST', api(x, 'signing-keys/rotate'), { token, body: {} })
  t.equal(rotated.status, 200)
  const kid1 = rotated.body.rotated as string
  const revoked = await stack.panel('DELETE', api(x, `signing-keys/${key0.kid}`), { token })
  t.equal(revoked.status, 200, JSON.stringify(revoked.body))
  t.same(
    revoked.body.revoked_keys.map((r: { kid: string; revoked_by: string }) => [r.kid, r.revoked_by]),
    [[key0.kid, 'p-state']],
  )
  t.ok(
    await eventually(async () => (await adminUsers(x, old)).status === 403, 5000),
    'the revoked key is refused at once',
  )

  // The deploy job applies the unchanged tenant file (which still lists the revoked key).
  const applied = await cli(['tenants', 'apply', file])
  t.equal(applied.code, 0, applied.stderr)
  t.match(applied.stderr, `lists signing key ${key0.kid}, which was revoked: applied without it`)
  t.match(applied.stdout, /kept \(changed in the store since the last apply\): .*auth\.anonymous_sign_in/)
  const stored = (await stack.store.get(x.database))!
  t.equal(stored.auth.anonymous_sign_in, true, 'the auth setting survives')
  t.equal(stored.rest.aggregates_enabled, true, 'the REST setting survives')
  t.equal(stored.jwt.signing_algorithm, 'ES256')
  t.same(
    stored.jwt.signing_keys!.map((k) => k.kid),
    [kid1],
    'the rotation survives, the revoked key stays out',
  )
  stack.cache.invalidate(x.database)
  const refused = await adminUsers(x, old)
  t.equal(refused.status, 403, 'the revoked key still does not verify after apply')
  t.equal(refused.body.error_code, 'bad_jwt')
  t.match(refused.body.msg, /kid/)
  t.equal(
    (await adminUsers(x, await serviceToken(x, stored.jwt.signing_keys![0]!))).status,
    200,
    'the rotated key signs',
  )

  // The same key under another kid is no way back either, nor a direct write.
  const doc = parseDocument(readFileSync(file, 'utf8'))
  doc.setIn(['jwt', 'signing_keys', 0, 'kid'], 'same-key-new-kid')
  writeFileSync(file, doc.toString())
  const renamed = await cli(['tenants', 'apply', file])
  t.equal(renamed.code, 0, renamed.stderr)
  t.match(renamed.stderr, 'lists signing key same-key-new-kid, which was revoked')
  t.same(
    (await stack.store.get(x.database))!.jwt.signing_keys!.map((k) => k.kid),
    [kid1],
  )
  const v = (await stack.store.read(x.database))!
  const back = {
    ...v.tenant,
    jwt: { ...v.tenant.jwt, signing_keys: [...v.tenant.jwt.signing_keys!, runtimeSigningKey(key0)] },
  }
  await t.rejects(
    stack.store.write(x.database, v.version, back, {
      audit: { who: 'test', via: 'cli', action: 'add', fields: ['x'] },
    }),
    { message: /was revoked .* and cannot be added again/ },
  )
})

t.test('a field changed on both sides: diff lists it, apply refuses it; export -> apply is a no-op', async (t) => {
  const x = await stack.addTenant({ organization: ORG })
  const file = await appliedFile(t, x)
  t.equal(
    (await stack.panel('PATCH', api(x, 'auth-settings'), { token, body: { mail_rate_per_hour: 55, magic_link: true } }))
      .status,
    200,
  )
  const doc = parseDocument(readFileSync(file, 'utf8'))
  doc.setIn(['auth', 'mail_rate_per_hour'], 77)
  doc.setIn(['rest', 'max_rows'], 500)
  writeFileSync(file, doc.toString())

  const diff = await cli(['tenants', 'diff', file])
  t.equal(diff.code, 1, 'diff exits 1 when the store and files differ')
  t.match(
    diff.stdout,
    /auth\.mail_rate_per_hour: file 77, store 55: CONFLICT: changed in both since the last apply \(changed by p-state via panel/,
  )
  t.match(
    diff.stdout,
    /auth\.magic_link: file false, store true: changed in the store since the last apply \(changed by p-state via panel/,
  )
  t.match(diff.stdout, /rest\.max_rows: file 500, store null: changed in the file since the last apply/)
  t.notMatch(diff.stdout, new RegExp(x.file.jwt.secret), 'no secret printed')

  const before = (await stack.store.read(x.database))!.version
  const refused = await cli(['tenants', 'apply', file])
  t.equal(refused.code, 1)
  t.match(
    refused.stderr,
    `${x.database}: auth.mail_rate_per_hour: the file says 77, the store says 55 (changed by p-state via panel`,
  )
  t.match(refused.stderr, /nothing was written/)
  t.equal((await stack.store.read(x.database))!.version, before, 'nothing written')

  // The GitOps way back: export the effective record, apply it: nothing changes, diff is quiet.
  const exported = path.join(tempDir(t), `${x.database}.yaml`)
  const ex = await cli(['tenants', 'export', x.database, '--include-secrets', '-o', exported])
  t.equal(ex.code, 0, ex.stderr)
  const again = await cli(['tenants', 'apply', exported])
  t.equal(again.code, 0, again.stderr)
  t.match(again.stdout, `${x.database}: unchanged`)
  t.equal((await stack.store.read(x.database))!.version, before, 'export -> apply changes nothing')
  const quiet = await cli(['tenants', 'diff', exported])
  t.equal(quiet.code, 0, quiet.stdout)
  t.match(quiet.stdout, /no differences/)

  const masked = await cli(['tenants', 'export', x.database])
  t.equal(masked.code, 0, masked.stderr)
  t.notMatch(masked.stdout, x.file.jwt.secret, 'no secret without --include-secrets')
  t.match(masked.stdout, /secret: \$\{[A-Z0-9_]+_JWT_SECRET\}/)

  const forced = await cli(['tenants', 'apply', '--force', file])
  t.equal(forced.code, 0, forced.stderr)
  t.equal((await stack.store.get(x.database))!.auth.mail_rate_per_hour, 77, '--force lets the file win')
})

t.test('50 concurrent PATCHes of different fields all land; If-Match; the history', async (t) => {
  const x = await stack.addTenant({ organization: ORG })
  const patches = await Promise.all(
    Array.from({ length: 50 }, (_, i) =>
      stack.panel('PATCH', api(x, 'auth-settings'), {
        token,
        body: { providers: { [`p${i}`]: { client_id: `client-${i}`, secret: `s3cret-${i}` } } },
      }),
    ),
  )
  t.same(
    patches.map((p) => p.status),
    Array(50).fill(200),
  )
  const got = await stack.panel('GET', api(x, 'auth-settings'), { token })
  t.same(
    Object.keys(got.body.settings.providers).sort(),
    Array.from({ length: 50 }, (_, i) => `p${i}`).sort(),
    'every change landed',
  )

  const etag = got.headers.get('etag')!
  t.match(etag, /^"\d+"$/)
  const stale = await stack.panel('PATCH', api(x, 'auth-settings'), {
    token,
    body: { pkce: true },
    headers: { 'if-match': '"1"' },
  })
  t.equal(stale.status, 412)
  t.equal(stale.body.code, 'version_mismatch')
  const ok = await stack.panel('PATCH', api(x, 'auth-settings'), {
    token,
    body: { pkce: true },
    headers: { 'if-match': etag },
  })
  t.equal(ok.status, 200)
  t.not(ok.headers.get('etag'), etag)
  t.equal(
    (
      await stack.panel('PATCH', api(x, 'rest-settings'), {
        token,
        body: { aggregates_enabled: true },
        headers: { 'if-match': etag },
      })
    ).status,
    412,
  )

  const history = await stack.panel('GET', api(x, 'history'), { token })
  t.equal(history.status, 200)
  const entries = history.body.entries as Array<{
    who: string
    via: string
    action: string
    fields: string[]
    old_version: string
    new_version: string
  }>
  t.equal(entries.length, 51)
  t.same(entries[0], { ...entries[0], who: 'p-state', via: 'panel', action: 'auth-settings', fields: ['auth.pkce'] })
  t.equal(Number(entries[0]!.new_version), Number(entries[0]!.old_version) + 1)
  t.ok(
    entries.some((e) => e.fields.includes('auth.providers.p7.secret')),
    'fields are named',
  )
  t.notMatch(JSON.stringify(history.body), /s3cret/, 'never a secret value')
  const h = await cli(['tenants', 'history', x.database])
  t.equal(h.code, 0, h.stderr)
  t.match(h.stdout, /p-state \(panel\)\s+auth-settings\s+\d+ -> \d+\s+auth\.pkce/)
  const unknown = await cli(['tenants', 'history', 'no_such_db'])
  t.equal(unknown.code, 1, 'a database the store never held is an error')
  t.match(unknown.stderr, /no tenant "no_such_db" in the store/)
})

t.test('a retired legacy secret: HS256 tokens refused on REST and auth, the secret key keeps working', async (t) => {
  const x = await stack.addTenant({ organization: ORG, signingAlgorithm: 'HS256' })
  await stack.owner(
    x,
    `CREATE TABLE public.notes (id int PRIMARY KEY); INSERT INTO public.notes VALUES (1);
    SELECT platform.grant('SELECT', 'public.notes', 'auth'); SELECT platform.grant('SELECT', 'public.notes', 'svc');`,
  )
  const signUp = await stack
    .supabase(x)
    .auth.signUp({ email: `legacy-${randomUUID().slice(0, 8)}@example.com`, password: 'secret123' })
  const hs = signUp.data.session!.access_token
  t.equal((await gatewayCall(stack, x, '/rest/v1/notes', { token: hs })).status, 200)

  const early = await stack.panel('DELETE', api(x, 'signing-keys/legacy'), { token })
  t.equal(early.status, 409, 'refused while the legacy secret signs')
  t.equal(early.body.code, 'legacy_secret_retire_refused')
  const cliEarly = await cli([
    'tenants',
    'keys',
    'retire-legacy',
    x.database,
    '--file',
    path.join(tempDir(t), 'none.yaml'),
  ])
  t.equal(cliEarly.code, 1)
  t.match(cliEarly.stderr, /rotate to an ES256 or RS256 key first/)

  t.equal((await stack.panel('POST', api(x, 'signing-keys/rotate'), { token, body: { alg: 'ES256' } })).status, 200)
  const retired = await stack.panel('DELETE', api(x, 'signing-keys/legacy'), { token })
  t.equal(retired.status, 200, JSON.stringify(retired.body))
  t.equal(retired.body.legacy_secret_active, false)

  t.ok(
    await eventually(async () => (await gatewayCall(stack, x, '/rest/v1/notes', { token: hs })).status === 401, 5000),
  )
  const rest = await gatewayCall(stack, x, '/rest/v1/notes', { token: hs })
  t.equal(rest.body.code, 'invalid_token')
  t.match(JSON.stringify(rest.body), /legacy JWT secret \(HS256\), which this project retired/)
  const forged = await userToken(x, randomUUID())
  t.equal((await gatewayCall(stack, x, '/rest/v1/notes', { token: forged })).status, 401, 'a new HS256 token too')
  const auth = await fetch(`${stack.gatewayUrl}/${x.database}/auth/v1/user`, {
    headers: { apikey: x.file.keys.public, authorization: `Bearer ${hs}` },
  })
  t.equal(auth.status, 403)
  const authBody = (await auth.json()) as { error_code: string; msg: string }
  t.equal(authBody.error_code, 'bad_jwt')
  t.match(authBody.msg, /legacy JWT secret \(HS256\), which this project retired/)

  t.equal(
    (await gatewayCall(stack, x, '/rest/v1/notes', { key: 'secret' })).status,
    200,
    'the secret key still reaches REST (upstream secret)',
  )
  t.equal(
    (await gatewayCall(stack, x, '/auth/v1/admin/users', { key: 'secret' })).status,
    200,
    'and the auth admin API',
  )
  const fresh = await stack
    .supabase(x)
    .auth.signInWithPassword({ email: signUp.data.user!.email!, password: 'secret123' })
  t.equal(
    (await gatewayCall(stack, x, '/rest/v1/notes', { token: fresh.data.session!.access_token })).status,
    200,
    'ES256 tokens work',
  )

  // An apply of a file without the retirement does not bring the secret back.
  const file = path.join(tempDir(t), `${x.database}.yaml`)
  writeFileSync(file, renderTenantFile({ ...x.file, upstreams: x.tenant.upstreams } as TenantFile), { mode: 0o600 })
  const applied = await cli(['tenants', 'apply', file])
  t.equal(applied.code, 0, applied.stderr)
  t.ok((await stack.store.get(x.database))!.jwt.legacy_secret_retired, 'still retired')
})

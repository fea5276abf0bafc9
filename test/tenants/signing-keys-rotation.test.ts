// Rotation and revocation of a database's signing keys, by the CLI (`gatehouse tenants keys
// rotate|revoke|list` against the Redis store, mirrored into the tenant file) and by the
// panel (member-authorised endpoints), seen by clients through the gateway: after a rotation
// old tokens keep working and new ones carry the new kid, the JWKS lists every key not
// revoked; after a revocation the old key's tokens get the usual 401 at /rest/v1. Every
// process learns of the change through the tenant record's invalidation.
import t from 'tap'
import { execFile } from 'node:child_process'
import { writeFileSync, readFileSync } from 'node:fs'
import path from 'node:path'
import { decodeProtectedHeader } from 'jose'
import { parse as parseYaml, stringify as stringifyYaml } from 'yaml'
import { parseTenantFile } from '../../src/tenants/index.js'
import { renderTenantFile } from '../../src/platform/index.js'
import { startStack, gatewayCall, type Stack, type StackTenant } from '../helpers/panel-stack.js'
import { email } from '../helpers/auth-harness.js'
import { redisUrl } from '../helpers/redis.js'
import { tempDir, eventually, tenantFile } from '../helpers/tenant-fixtures.js'

interface Run {
  code: number
  stdout: string
  stderr: string
}

/** The real CLI, as an operator runs it. */
function cli(args: string[], env: Record<string, string>): Promise<Run> {
  const clean = Object.fromEntries(
    Object.entries(process.env).filter(([k]) => !k.startsWith('GATEHOUSE_') && k !== 'REDIS_URL'),
  )
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      ['--import', 'tsx', 'src/cli.ts', ...args],
      { env: { ...clean, ...env }, timeout: 60_000 },
      (err, stdout, stderr) =>
        resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stdout, stderr }),
    )
  })
}

// A whole stack plus a dozen CLI starts (each a second or more on a busy machine).
t.setTimeout(300_000)

let stack: Stack

t.before(async () => {
  stack = await startStack(t)
})

async function prepare(x: StackTenant): Promise<void> {
  await stack.owner(
    x,
    `
    CREATE TABLE public.notes (id int PRIMARY KEY);
    INSERT INTO public.notes VALUES (1);
    SELECT platform.grant('SELECT', 'public.notes', 'auth');
  `,
  )
}

async function signIn(x: StackTenant): Promise<string> {
  const r = await stack.supabase(x).auth.signUp({ email: email('rot'), password: 'secret123' })
  if (r.error || !r.data.session) throw r.error ?? new Error('no session')
  return r.data.session.access_token
}

const notes = (x: StackTenant, token: string) => gatewayCall(stack, x, '/rest/v1/notes?select=id', { token })

async function jwksKids(x: StackTenant): Promise<string[]> {
  const res = await fetch(`${stack.gatewayUrl}/${x.database}/auth/v1/.well-known/jwks.json`)
  return ((await res.json()) as { keys: Array<{ kid: string }> }).keys.map((k) => k.kid)
}

const kidOf = (token: string) => decodeProtectedHeader(token).kid

t.test('CLI: tenants keys rotate / revoke / list against the Redis store, the tenant file kept in step', async (t) => {
  const x = await stack.addTenant({ signingAlgorithm: 'ES256' })
  await prepare(x)
  const prefix = stack.store.keys.set.replace(/tenants$/, '')
  const env = { GATEHOUSE_TENANTS_SOURCE: 'redis', GATEHOUSE_REDIS_URL: redisUrl(), GATEHOUSE_REDIS_KEY_PREFIX: prefix }
  const file = path.join(tempDir(t), `${x.database}.yaml`)
  writeFileSync(file, renderTenantFile(x.file), { mode: 0o600 })
  const kid0 = x.file.jwt.signing_keys[0]!.kid

  const old = await signIn(x)
  t.equal(kidOf(old), kid0)

  const rotated = await cli(['tenants', 'keys', 'rotate', x.database, '--file', file], env)
  t.equal(rotated.code, 0, rotated.stderr)
  const kid1 = /new ES256 signing key (\S+) signs from now on/.exec(rotated.stdout)?.[1]
  t.ok(kid1, rotated.stdout)
  t.match(rotated.stdout, `tenant file updated: ${file}`)

  t.ok(await eventually(async () => (await jwksKids(x)).length === 2, 5000), 'the JWKS lists the old and the new key')
  t.same((await jwksKids(x)).sort(), [kid0, kid1].sort())
  const fresh = await signIn(x)
  t.equal(kidOf(fresh), kid1, 'new tokens carry the new kid')
  t.equal((await notes(x, old)).status, 200, "the old key's token keeps working")
  t.equal((await notes(x, fresh)).status, 200)

  const f = parseTenantFile(parseYaml(readFileSync(file, 'utf8')), file, {})
  t.same(
    f.jwt.signing_keys.map((k) => k.kid),
    [kid0, kid1],
    'the file holds both keys and still validates',
  )
  t.equal(f.jwt.signing_algorithm, 'ES256')

  // Independent of each other: run at once.
  const [listed, inUse, unknown] = await Promise.all([
    cli(['tenants', 'keys', 'list', x.database, '--json'], env),
    cli(['tenants', 'keys', 'revoke', x.database, kid1!, '--file', file], env),
    cli(['tenants', 'keys', 'revoke', x.database, 'no-such-kid', '--file', file], env),
  ])
  t.equal(listed.code, 0, listed.stderr)
  t.same(JSON.parse(listed.stdout), {
    database: x.database,
    signing_algorithm: 'ES256',
    keys: [
      { kid: kid0, alg: 'ES256', current: false },
      { kid: kid1, alg: 'ES256', current: true },
    ],
  })
  t.notMatch(listed.stdout, /private|"d"/)

  t.equal(inUse.code, 1)
  t.match(inUse.stderr, /signs this database's tokens now: rotate to a new key first/)
  t.equal(unknown.code, 1)
  t.match(unknown.stderr, /no signing key with kid "no-such-kid"/)
  t.notMatch(unknown.stderr, /\n\s+at /, 'no stack trace')

  const revoked = await cli(['tenants', 'keys', 'revoke', x.database, kid0, '--file', file], env)
  t.equal(revoked.code, 0, revoked.stderr)
  t.ok(await eventually(async () => (await notes(x, old)).status === 401, 5000), "the revoked key's token is refused")
  const r = await notes(x, old)
  t.equal(r.body.code, 'invalid_token')
  t.match(r.body.details, /kid/)
  t.equal((await notes(x, fresh)).status, 200, "the current key's token still works")
  t.same(await jwksKids(x), [kid1], 'the JWKS no longer lists it')
  const after = parseTenantFile(parseYaml(readFileSync(file, 'utf8')), file, {})
  t.same(
    after.jwt.signing_keys.map((k) => k.kid),
    [kid1],
  )

  // An apply of a copy of the file that predates the rotation and the revocation keeps the
  // rotated key (a change made elsewhere) and leaves the revoked one out, naming it.
  const stale = path.join(tempDir(t), `${x.database}.yaml`)
  writeFileSync(stale, renderTenantFile(x.file), { mode: 0o600 })
  const applied = await cli(['tenants', 'apply', stale], env)
  t.equal(applied.code, 0, applied.stderr)
  t.match(
    applied.stderr,
    `warning: ${x.database}: ${stale} lists signing key ${kid0}, which was revoked: applied without it`,
  )
  const stored = await stack.store.get(x.database)
  t.same(
    stored?.jwt.signing_keys?.map((k) => k.kid),
    [kid1],
    'the rotated key is kept, the revoked one stays out',
  )
  t.same(
    stored?.jwt.revoked_keys?.map((k) => k.kid),
    [kid0],
    'its tombstone stays',
  )
})

t.test('panel: list, rotate and revoke signing keys, members only', async (t) => {
  const x = await stack.addTenant({ organization: 'org_keys', signingAlgorithm: 'ES256' })
  await prepare(x)
  const base = `/organizations/org_keys/databases/${x.database}/api/signing-keys`
  const token = await stack.panelSession({ userId: 'member-1', email: 'm@example.com', orgs: ['org_keys'] })
  const outsider = await stack.panelSession({ userId: 'outsider', email: 'o@example.com', orgs: ['org_other'] })
  const kid0 = x.file.jwt.signing_keys[0]!.kid

  let r = await stack.panel('GET', base, { token })
  t.equal(r.status, 200)
  t.equal(r.body.signing_algorithm, 'ES256')
  t.same(
    r.body.keys.map((k: any) => [k.kid, k.alg, k.current]),
    [[kid0, 'ES256', true]],
  )
  t.notOk('d' in r.body.keys[0].public_jwk, 'no private part')
  t.notOk(JSON.stringify(r.body).includes('private_key'))

  for (const [method, p] of [
    ['GET', base],
    ['POST', `${base}/rotate`],
    ['DELETE', `${base}/${kid0}`],
  ] as const) {
    r = await stack.panel(method, p, { token: outsider, body: method === 'POST' ? {} : undefined })
    t.equal(r.status, 403, `${method} by a non-member`)
    t.equal(r.body.code, 'not_a_member')
  }
  t.equal((await stack.panel('POST', `${base}/rotate`, { body: {} })).status, 401, 'no session')
  r = await stack.panel('POST', `${base}/rotate`, { token, body: { alg: 'HS512' } })
  t.equal(r.status, 400)
  t.equal(r.body.code, 'validation_failed')

  const old = await signIn(x)
  r = await stack.panel('POST', `${base}/rotate`, { token, body: {} })
  t.equal(r.status, 200, JSON.stringify(r.body))
  const kid1 = r.body.rotated as string
  t.same(
    r.body.keys.map((k: any) => [k.kid, k.current]),
    [
      [kid0, false],
      [kid1, true],
    ],
  )
  t.ok(await eventually(async () => kidOf(await signIn(x)) === kid1, 5000), 'new tokens carry the new kid')
  t.equal((await notes(x, old)).status, 200, "the old key's token keeps working")

  r = await stack.panel('DELETE', `${base}/${kid1}`, { token })
  t.equal(r.status, 409)
  t.equal(r.body.code, 'signing_key_in_use')
  r = await stack.panel('DELETE', `${base}/no-such-kid`, { token })
  t.equal(r.status, 404)
  t.equal(r.body.code, 'signing_key_not_found')

  r = await stack.panel('DELETE', `${base}/${kid0}`, { token })
  t.equal(r.status, 200)
  t.same(
    r.body.keys.map((k: any) => k.kid),
    [kid1],
  )
  t.ok(
    await eventually(async () => (await notes(x, old)).status === 401, 5000),
    "the revoked key's token gets the usual 401",
  )
  t.same(await jwksKids(x), [kid1])

  // A rotation may switch the algorithm: RS256 from now on, the ES256 key still verifying.
  const es = await signIn(x)
  r = await stack.panel('POST', `${base}/rotate`, { token, body: { alg: 'RS256' } })
  t.equal(r.status, 200)
  t.equal(r.body.signing_algorithm, 'RS256')
  t.ok(
    await eventually(async () => decodeProtectedHeader(await signIn(x)).alg === 'RS256', 5000),
    'new tokens are RS256',
  )
  const rsToken = await signIn(x)
  t.equal((await notes(x, rsToken)).status, 200)
  t.equal((await notes(x, es)).status, 200)
})

t.test(
  'CLI with tenants.source files: the tenant file is the record, edited in place (comments and ${ENV} kept)',
  async (t) => {
    const dir = tempDir(t)
    const file = path.join(dir, 'acme.yaml')
    const secret = 's'.repeat(40)
    const text =
      '# acme: kept as written\n' +
      stringifyYaml(tenantFile('acme')).replace(/secret: jwt-secret-of-acme-\S+/, 'secret: ${ACME_JWT_SECRET}')
    writeFileSync(file, text, { mode: 0o600 })
    const env = {
      GATEHOUSE_TENANTS_SOURCE: 'files',
      GATEHOUSE_TENANTS_DIR: dir,
      GATEHOUSE_TENANTS_STATE_DIR: path.join(dir, '.state'),
      ACME_JWT_SECRET: secret,
    }

    const r = await cli(['tenants', 'keys', 'rotate', 'acme', '--alg', 'RS256'], env)
    t.equal(r.code, 0, r.stderr)
    const after = readFileSync(file, 'utf8')
    t.match(after, /^# acme: kept as written/)
    t.match(after, 'secret: ${ACME_JWT_SECRET}', 'the ${ENV} reference is kept')
    const f = parseTenantFile(parseYaml(after), file, { ACME_JWT_SECRET: secret })
    t.equal(f.jwt.signing_algorithm, 'RS256', 'a database that signed with HS256 signs with the new key')
    t.equal(f.jwt.signing_keys.length, 1)
    t.equal(f.jwt.signing_keys[0]!.alg, 'RS256')
    t.match(r.stdout, `new RS256 signing key ${f.jwt.signing_keys[0]!.kid}`)

    const refused = await cli(['tenants', 'keys', 'revoke', 'acme', f.jwt.signing_keys[0]!.kid], env)
    t.equal(refused.code, 1)
    t.match(refused.stderr, /rotate to a new key first/)
    t.equal(readFileSync(file, 'utf8'), after, 'a refused change leaves the file as it was')

    // A revocation leaves its tombstone in the file; both changes are in the audit trail.
    const first = f.jwt.signing_keys[0]!.kid
    t.equal((await cli(['tenants', 'keys', 'rotate', 'acme', '--alg', 'ES256'], env)).code, 0)
    const revoked = await cli(['tenants', 'keys', 'revoke', 'acme', first], env)
    t.equal(revoked.code, 0, revoked.stderr)
    const g = parseYaml(readFileSync(file, 'utf8')) as {
      jwt: { revoked_keys: Array<{ kid: string; revoked_by: string }> }
    }
    t.same(
      g.jwt.revoked_keys.map((k) => [k.kid, k.revoked_by]),
      [[first, 'cli']],
    )
    t.match(readFileSync(file, 'utf8'), /^# acme: kept as written/)
    const h = await cli(['tenants', 'history', 'acme'], env)
    t.equal(h.code, 0, h.stderr)
    t.match(h.stdout, /cli \(cli\)\s+revoke\s+\S+ -> \S+\s+jwt\.revoked_keys\./)
    t.match(h.stdout, /cli \(cli\)\s+rotate/)
  },
)

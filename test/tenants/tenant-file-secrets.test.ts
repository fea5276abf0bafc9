// Errors about tenant files never print a secret (docs/tenant-state.md): a YAML error is shown
// with the parser's excerpt of the line around it, and validation errors name fields, but a
// connection-string password, an API key, a JWT secret or a private key (PEM or JWK) on those
// lines is masked, whether `tenants apply` reads the file, the development stack reads it at
// start or its watcher reads an edit. Real files, the real CLI.
import t from 'tap'
import { execFile } from 'node:child_process'
import { generateKeyPairSync } from 'node:crypto'
import { writeFileSync } from 'node:fs'
import path from 'node:path'
import {
  displayValue,
  exportTenantFile,
  loadTenantFileEntries,
  parseTenantFile,
  redactSecrets,
  toTenant,
  threeWayMerge,
} from '../../src/tenants/index.js'
import { runtimeTenantRecord } from '../../src/dev/index.js'
import { tempDir, tenantFile } from '../helpers/tenant-fixtures.js'

const PASSWORD = 'p4ss-W0rd-of-the-owner-Zq81'
const JWT_SECRET = 'jwt-secret-0123456789-abcdefghij-KLMNOP'
const PUBLIC_KEY = 'pk_live_0123456789abcdef0123'
const SECRET_KEY = 'sk_live_fedcba9876543210fedc'
const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' })
const PEM = privateKey.export({ format: 'pem', type: 'pkcs8' }).toString()
const PEM_LINE = PEM.split('\n')[1]!
const JWK = privateKey.export({ format: 'jwk' }) as { d: string }
const SECRETS = [PASSWORD, JWT_SECRET, PUBLIC_KEY, SECRET_KEY, PEM_LINE, JWK.d]

/** A tenant file whose line `bad` (0-based, of the body below) is broken so the parser quotes it. */
function brokenFile(database: string, bad: string): string {
  const lines = [
    `database: ${database}`,
    'organization: org_x',
    `postgres: postgres://owner:${PASSWORD}@127.0.0.1:5432/${database}`,
    'jwt:',
    `  secret: ${JWT_SECRET}`,
    '  signing_keys:',
    '    - kid: k1',
    '      alg: ES256',
    `      private_key: '${JSON.stringify(JWK)}'`,
    '    - kid: k2',
    '      alg: ES256',
    '      private_key: |',
    ...PEM.trim()
      .split('\n')
      .map((l) => `        ${l}`),
    `keys: { public: ${PUBLIC_KEY}, secret: ${SECRET_KEY} }`,
  ]
  // `: x` after a value makes a nested mapping in a compact one; a short indent breaks a block;
  // a flow map without its `}` is never closed.
  const broken = (l: string): string =>
    l.startsWith('keys:') ? l.replace(' }', '') : l.startsWith('        ') ? `    ${l.trim()}: x` : `${l}: x`
  return lines.map((l) => (l.includes(bad) ? broken(l) : l)).join('\n') + '\n'
}

function cli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const clean = Object.fromEntries(
    Object.entries(process.env).filter(([k]) => !k.startsWith('GATEHOUSE_') && k !== 'REDIS_URL'),
  )
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      ['--import', 'tsx', 'src/cli.ts', ...args],
      { env: { ...clean, GATEHOUSE_TENANTS_SOURCE: 'files' }, timeout: 60_000 },
      (err, stdout, stderr) =>
        resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stdout, stderr }),
    )
  })
}

const cases: Array<[string, string]> = [
  ['the owner password', PASSWORD],
  ['the JWT secret', JWT_SECRET],
  ['a JWK private key', JWK.d],
  ['a PEM private key', PEM_LINE],
  ['the API keys', PUBLIC_KEY],
]

t.test('YAML errors show the line around them, secrets masked', async (t) => {
  const dir = tempDir(t)
  cases.forEach(([, bad], i) => writeFileSync(path.join(dir, `t${i}.yaml`), brokenFile(`t${i}`, bad)))
  let message = ''
  try {
    loadTenantFileEntries(dir)
  } catch (err) {
    message = (err as Error).message
  }
  t.match(message, /invalid tenant files \(5 of 5 refused\)/)
  cases.forEach(([what], i) => t.match(message, new RegExp(`t${i}\\.yaml: not valid YAML \\(line \\d+\\)`), what))
  t.match(
    message,
    /postgres: postgres:\/\/owner:\*\*\*\*@127\.0\.0\.1:5432\/t0: x/,
    'the excerpt is shown, the password masked',
  )
  t.match(message, /secret: \*\*\*\*/)
  for (const s of SECRETS) t.notOk(message.includes(s), `no secret in the error (${s.slice(0, 6)}...)`)

  const r = await cli(['tenants', 'apply', '--dry-run', dir])
  t.equal(r.code, 1)
  t.match(r.stderr, /not valid YAML/)
  for (const s of SECRETS) t.notOk(r.stderr.includes(s) || r.stdout.includes(s), 'none printed by the CLI either')
})

t.test('the development stack reading a broken file masks them too', async (t) => {
  const dir = tempDir(t)
  for (const [what, bad] of cases) {
    const file = path.join(dir, 'x.yaml')
    writeFileSync(file, brokenFile('x', bad))
    let message = ''
    try {
      runtimeTenantRecord(file, 'postgres://postgres@127.0.0.1:5432/postgres', { rest: 'http://r', auth: 'http://a' })
    } catch (err) {
      message = (err as Error).message
    }
    t.match(message, /not valid YAML/, what)
    for (const s of SECRETS) t.notOk(message.includes(s), `${what}: no secret in the error`)
  }
})

t.test('validation errors name fields, never values', async (t) => {
  const dir = tempDir(t)
  writeFileSync(
    path.join(dir, 'v.yaml'),
    [
      'database: v',
      'organization: o',
      `postgres: postgres://owner:${PASSWORD}@127.0.0.1:5432/other`,
      'roles: { anon: a, auth: b, svc: c }',
      `jwt: { secret: "${JWT_SECRET}", upstream_secret: short, bogus: "${SECRET_KEY}" }`,
      `keys: { public: ${PUBLIC_KEY}, secret: ${PUBLIC_KEY} }`,
      'upstreams: { auth: http://a, rest: http://r }',
      'auth: {}',
    ].join('\n'),
  )
  let message = ''
  try {
    loadTenantFileEntries(dir)
  } catch (err) {
    message = (err as Error).message
  }
  t.match(message, /jwt\.bogus: unknown field/)
  for (const s of SECRETS) t.notOk(message.includes(s), 'no secret in a validation error')
})

t.test('auth hook secrets: masked in diffs and conflicts, references in an export, masked in errors', async (t) => {
  const hook = 'v1,whsec_c2VjcmV0LW9mLXRoZS1ob29rLTAxMjM0NTY3'
  t.equal(displayValue(['auth', 'hooks', 'send_email', 'secrets'], [hook]), '****')
  const tenant = toTenant(
    parseTenantFile(
      {
        ...tenantFile('hk'),
        auth: { hooks: { send_email: { uri: 'https://hooks.example.com/mail', secrets: [hook] } } },
      },
      'hk.yaml',
      {},
    ),
  )
  const { text, env } = exportTenantFile(tenant)
  t.notOk(text.includes(hook), 'not in an export without --include-secrets')
  t.ok(env.includes('HK_HOOK_SEND_EMAIL_SECRET_1'))
  t.ok(exportTenantFile(tenant, { includeSecrets: true }).text.includes(hook), 'with it, as written')
  t.equal(redactSecrets(`      secrets: ["${hook}"]: x`).includes(hook), false)
})

t.test(
  'app_settings are secret: masked in diffs and conflicts, references in an export, escaped with them',
  async (t) => {
    const tenant = toTenant(
      parseTenantFile(
        { ...tenantFile('as'), rest: { app_settings: { leak: '${HOME}|$x', api: 'app-setting-secret-value' } } },
        'as.yaml',
        { HOME: '/home/platform' },
      ),
    )
    t.same(tenant.rest.app_settings, { leak: '/home/platform|$x', api: 'app-setting-secret-value' })
    t.equal(displayValue(['rest', 'app_settings', 'api'], 'app-setting-secret-value'), '****')
    const literal = {
      ...tenant,
      rest: { ...tenant.rest, app_settings: { leak: '${HOME}|$x', api: 'app-setting-secret-value' } },
    }

    const { text, env } = exportTenantFile(literal)
    t.notOk(text.includes('app-setting-secret-value'), 'not in an export without --include-secrets')
    t.notOk(text.includes('${HOME}'))
    t.ok(env.includes('AS_APP_SETTING_LEAK') && env.includes('AS_APP_SETTING_API'), 'the references are listed')
    t.match(text, 'api: ${AS_APP_SETTING_API}')

    // With the secrets, a value holding ${...} is written escaped and an apply reads it back as itself.
    const dir = tempDir(t)
    writeFileSync(path.join(dir, 'as.yaml'), exportTenantFile(literal, { includeSecrets: true }).text)
    const [back] = loadTenantFileEntries(dir, { HOME: '/home/platform' })
    t.same(back!.file.rest.app_settings, { leak: '${HOME}|$x', api: 'app-setting-secret-value' })
  },
)

t.test("an apply's conflict on an app setting names the field, never its values", async (t) => {
  const record = (v: string) =>
    toTenant(parseTenantFile({ ...tenantFile('cf'), rest: { app_settings: { token: v } } }, 'cf.yaml', {}))
  const { conflicts } = threeWayMerge(
    record('file-value-secret'),
    record('last-value-secret'),
    record('store-value-secret'),
  )
  t.same(conflicts, [{ field: 'rest.app_settings.token', file: '****', store: '****', last: '****' }])
})

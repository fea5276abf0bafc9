import t from 'tap'
import path from 'node:path'
import {
  parseTenantFile,
  toTenant,
  keyKind,
  keyMatches,
  hashKey,
  loadTenantFiles,
  loadTenantFileEntries,
  fileValues,
  validateTenantRecord,
  TenantFileSchema,
  RECORD_BOUNDS,
} from '../../src/tenants/index.js'
import type { TSchema } from '@sinclair/typebox'
import { stringify as toYaml } from 'yaml'
import { problemsOf } from '../helpers/config-errors.js'
import { loadConfig } from '../../src/config/index.js'
import { tenantFile, writeTenantDir } from '../helpers/tenant-fixtures.js'

t.test('a valid file gets its defaults', async (t) => {
  const f = parseTenantFile(tenantFile('acme'), 'acme.yaml', {})
  t.equal(f.rest.default_limit, 1000)
  t.equal(f.rest.max_limit, null)
  t.same(f.rest.schemas, ['public'])
  t.equal(f.jwt.expiry, 3600)
  t.equal(f.jwt.aud, 'authenticated')
  t.equal(f.auth.signup_enabled, true)
})

t.test('errors name the file and every bad field', async (t) => {
  const raw = tenantFile('acme', {
    database: 'Acme!',
    jwt: { secret: 'short', upstream_secret: 'x'.repeat(40) },
    extra: 1,
  })
  delete (raw as Record<string, unknown>).organization
  const problems = problemsOf(() => parseTenantFile(raw, 'config/tenants/acme.yaml', {}))
  t.ok(
    problems.every((p) => p.startsWith('config/tenants/acme.yaml: ')),
    'every line names the file',
  )
  const text = problems.join('\n')
  t.match(text, /database: /)
  t.match(text, /jwt\.secret: /)
  t.match(text, /organization: is required/)
  t.match(text, /extra: unknown field/)
})

t.test('${ENV} substitution, and a missing variable named with its field', async (t) => {
  const raw = tenantFile('acme', { jwt: { secret: '${ACME_JWT}', upstream_secret: 'u'.repeat(40) } })
  const f = parseTenantFile(raw, 'acme.yaml', { ACME_JWT: 's'.repeat(40) })
  t.equal(f.jwt.secret, 's'.repeat(40))
  const problems = problemsOf(() => parseTenantFile(raw, 'acme.yaml', {}))
  t.same(problems, ['acme.yaml: jwt.secret: environment variable ACME_JWT is not set'])
})

t.test('${ENV} is expanded only in fields declared secret; $$ is a literal $ there', async (t) => {
  const env = { ACME_JWT: 's'.repeat(40), HOME: '/home/platform', ACME_GH: 'gh-secret' }
  const f = parseTenantFile(
    tenantFile('acme', {
      jwt: { secret: '${ACME_JWT}', upstream_secret: 'u'.repeat(36) + '$$${HOME}' },
      auth: {
        site_url: 'https://app.example.com/${HOME}',
        providers: { github: { client_id: '${HOME}', secret: '${ACME_GH}' } },
      },
      rest: { app_settings: { by_operator: '${HOME}', dollars: 'a$$b$c' } },
    }),
    'acme.yaml',
    env,
  )
  t.equal(f.jwt.secret, env.ACME_JWT, 'a secret field: expanded')
  t.equal(f.jwt.upstream_secret, 'u'.repeat(36) + '$/home/platform', '$$ is a $, then the reference')
  t.equal(f.auth.providers.github?.secret, 'gh-secret')
  t.same(f.rest.app_settings, { by_operator: '/home/platform', dollars: 'a$b$c' })
  t.equal(f.auth.site_url, 'https://app.example.com/${HOME}', 'a field not declared secret: as written')
  t.equal(f.auth.providers.github?.client_id, '${HOME}')
  // A missing variable is a problem only where it would be expanded.
  t.doesNotThrow(() => parseTenantFile(tenantFile('acme', { auth: { site_url: 'http://x/${NOPE}' } }), 'acme.yaml', {}))

  // Values written by a program read back as themselves.
  const literal = validateTenantRecord(
    tenantFile('acme', { rest: { app_settings: { leak: '${HOME}|$$|$' } } }),
    'tenant acme',
  )
  t.equal(literal.rest.app_settings.leak, '${HOME}|$$|$', 'a literal record: nothing expanded')
  const again = parseTenantFile(JSON.parse(JSON.stringify(fileValues(literal))), 'acme.yaml', env)
  t.equal(again.rest.app_settings.leak, '${HOME}|$$|$')
  t.match(toYaml(fileValues(again)), 'leak: $${HOME}|$$$$|$$')
})

t.test('every string, list and map of the record is bounded; so is the whole record', async (t) => {
  const unbounded: string[] = []
  const visit = (s: TSchema, at: string): void => {
    for (const b of (s.anyOf as TSchema[] | undefined) ?? []) visit(b, at)
    if (s.type === 'string' && s.maxLength === undefined && s.const === undefined) unbounded.push(at)
    if (s.type === 'array') {
      if (s.maxItems === undefined) unbounded.push(at)
      visit(s.items as TSchema, `${at}.*`)
    }
    for (const [k, p] of Object.entries((s.properties as Record<string, TSchema> | undefined) ?? {}))
      visit(p, `${at}.${k}`)
    for (const p of Object.values((s.patternProperties as Record<string, TSchema> | undefined) ?? {})) {
      if (s.maxProperties === undefined) unbounded.push(at)
      visit(p, `${at}.*`)
    }
  }
  visit(TenantFileSchema, '')
  t.same(unbounded, [])
  const big = Object.fromEntries(Array.from({ length: 70 }, (_, i) => [`s${i}`, 'v'.repeat(RECORD_BOUNDS.string)]))
  t.match(
    problemsOf(() => parseTenantFile(tenantFile('acme', { rest: { app_settings: big } }), 'acme.yaml', {})),
    [
      /acme\.yaml: \(record\): is \d+ bytes, over the cap of 262144 bytes of a tenant record \(largest: rest\.app_settings/,
    ],
  )
  t.match(
    problemsOf(() =>
      parseTenantFile(
        tenantFile('acme', { auth: { redirect_urls: Array(101).fill('https://a.example') } }),
        'acme.yaml',
        {},
      ),
    ),
    [/auth\.redirect_urls: must NOT have more than 100 items/],
  )
  t.same(
    problemsOf(() =>
      parseTenantFile(tenantFile('acme', { rest: { app_settings: { ['n'.repeat(129)]: 'v' } } }), 'acme.yaml', {}),
    ),
    ["acme.yaml: rest.app_settings: an entry's name must NOT have more than 128 characters"],
  )
})

t.test('keys are hashed and compared by kind', async (t) => {
  const tenant = toTenant(parseTenantFile(tenantFile('acme'), 'acme.yaml', {}))
  t.match(tenant.keys.public, /^sha256:[0-9a-f]{64}$/)
  t.notOk(JSON.stringify(tenant).includes('pk_test_acme'), 'no plaintext key in the runtime record')
  t.equal(keyKind(tenant, 'pk_test_acme_0123456789'), 'anon')
  t.equal(keyKind(tenant, 'sk_test_acme_0123456789'), 'svc')
  t.equal(keyKind(tenant, 'sk_test_acme_012345678'), null)
  t.equal(keyKind(tenant, ''), null)
  t.equal(keyMatches('abc', hashKey('abc')), true)
  t.equal(keyMatches('abc', 'not-a-hash'), false)
})

t.test('loader: a directory of .yaml and .yml files, others ignored', async (t) => {
  const dir = writeTenantDir(t, {
    'acme.yaml': tenantFile('acme'),
    'beta.yml': tenantFile('beta'),
    'README.md': '# not a tenant',
    'notes.txt': 'ignored',
  })
  const files = loadTenantFiles(dir, {})
  t.same(
    files.map((f) => f.database),
    ['acme', 'beta'],
  )
  t.same(
    loadTenantFileEntries(dir, {}).map((e) => path.basename(e.path)),
    ['acme.yaml', 'beta.yml'],
  )
  t.same(
    loadTenantFiles(path.join(dir, 'beta.yml'), {}).map((f) => f.database),
    ['beta'],
    'a single file',
  )
})

t.test('loader: ${ENV} inside YAML text', async (t) => {
  const dir = writeTenantDir(t, {
    'acme.yaml':
      'database: acme\norganization: org_acme\npostgres: ${ACME_PG}\n' +
      'roles: { anon: a_anon, auth: a_auth, svc: a_svc }\n' +
      'jwt:\n  secret: ${ACME_JWT_SECRET}\n  upstream_secret: uuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuu\n' +
      'keys: { public: pk_aaaaaaaaaaaaaaaa, secret: sk_aaaaaaaaaaaaaaaa }\n' +
      'upstreams: { auth: "http://127.0.0.1:9999/acme", rest: "http://127.0.0.1:3000/acme" }\nauth: {}\n',
  })
  const [f] = loadTenantFiles(dir, { ACME_PG: 'postgres://o:p@h/acme', ACME_JWT_SECRET: 'j'.repeat(32) })
  t.equal(f?.postgres, 'postgres://o:p@h/acme')
  t.equal(f?.jwt.secret, 'j'.repeat(32))
})

t.test('loader: every bad file reported, with file and field', async (t) => {
  const dir = writeTenantDir(t, {
    'acme.yaml': tenantFile('acme'),
    'bad.yaml': tenantFile('bad', { upstreams: { auth: 'http://x/bad' } }),
    'broken.yaml': 'database: [unclosed\n',
    'list.yaml': '- a\n- b\n',
  })
  const problems = problemsOf(() => loadTenantFiles(dir, {}))
  const text = problems.join('\n')
  t.match(text, new RegExp(`${path.join(dir, 'bad.yaml')}: upstreams\\.rest: is required`))
  t.match(text, new RegExp(`${path.join(dir, 'broken.yaml')}: not valid YAML \\(line \\d+\\)`))
  t.match(text, new RegExp(`${path.join(dir, 'list.yaml')}: must hold a mapping`))
  t.notMatch(text, /acme\.yaml/, 'the good file is not blamed')
})

t.test('loader: unquoted ${ENV} inside a flow mapping gets a hint', async (t) => {
  const dir = writeTenantDir(t, { 'acme.yaml': 'database: acme\njwt: { secret: ${ACME_JWT_SECRET}, expiry: 3600 }\n' })
  const problems = problemsOf(() => loadTenantFiles(dir, {}))
  t.match(problems.join('\n'), /acme\.yaml: not valid YAML \(line 2\): .*quote \$\{ENV\} values/)
})

t.test('loader: the file name must match the database', async (t) => {
  const dir = writeTenantDir(t, { 'acme.yaml': tenantFile('other') })
  const problems = problemsOf(() => loadTenantFiles(dir, {}))
  t.match(problems.join('\n'), /acme\.yaml: database: is "other" but the file is named acme\.yaml/)
})

t.test('loader: a database defined twice is an error', async (t) => {
  const dir = writeTenantDir(t, { 'acme.yaml': tenantFile('acme'), 'acme.yml': tenantFile('acme') })
  const problems = problemsOf(() => loadTenantFiles(dir, {}))
  t.match(problems.join('\n'), /acme\.yml: database: "acme" is already defined by .*acme\.yaml/)
})

t.test('loader: a missing path is a clear error', async (t) => {
  t.throws(() => loadTenantFiles('/nonexistent/tenants', {}), {
    name: 'ConfigError',
    message: /\/nonexistent\/tenants does not exist/,
  })
})

t.test('the example tenant files of config/tenants are valid', async (t) => {
  const files = loadTenantFiles('config/tenants', {})
  t.ok(files.length >= 1)
})

t.test('config/gatehouse.example.yaml is a valid process config', async (t) => {
  const config = loadConfig({ file: 'config/gatehouse.example.yaml', env: {} })
  t.equal(config.tenants.source, 'files')
  t.equal(config.tenants.dir, 'config/tenants')
})

t.test("connection URLs must name the tenant's own database", async (t) => {
  const { parseTenantFile } = await import('../../src/tenants/index.js')
  const base = {
    database: 'acme',
    organization: 'org',
    postgres: 'postgres://o:p@h:5432/acme',
    roles: { anon: 't_0123456789_anon', auth: 't_0123456789_auth', svc: 't_0123456789_svc' },
    jwt: { secret: 'x'.repeat(40), upstream_secret: 'y'.repeat(40) },
    keys: { public: 'pk_' + 'a'.repeat(20), secret: 'sk_' + 'b'.repeat(20) },
    upstreams: { auth: 'http://a/acme', rest: 'http://r/acme' },
    auth: {},
  }
  t.ok(parseTenantFile(structuredClone(base), 'acme.yaml', {}))
  t.throws(
    () =>
      parseTenantFile({ ...structuredClone(base), engines: { rest: 'postgres://r:p@h:5432/demo' } }, 'acme.yaml', {}),
    /acme\.yaml: engines\.rest: connects to database "demo", not to "acme"/,
  )
  t.throws(
    () => parseTenantFile({ ...structuredClone(base), postgres: 'postgres://o:p@h:5432/other' }, 'acme.yaml', {}),
    /postgres: connects to database "other"/,
  )
})

t.test('passkeys need a relying party; its fields are checked', async (t) => {
  const f = parseTenantFile(tenantFile('acme'), 'acme.yaml', {})
  t.equal(f.auth.passkeys, false, 'off by default')
  t.equal(f.auth.max_passkeys_per_user, 10)
  t.match(
    problemsOf(() => parseTenantFile(tenantFile('acme', { auth: { passkeys: true } }), 'acme.yaml', {})),
    [/acme\.yaml: auth\.passkeys: needs auth\.webauthn \(rp_id, rp_display_name, rp_origins\)/],
  )
  t.match(
    problemsOf(() => parseTenantFile(tenantFile('acme', { auth: { mfa_webauthn_enroll: true } }), 'acme.yaml', {})),
    [/auth\.mfa_webauthn_enroll: needs auth\.webauthn/],
  )
  const rp = { rp_id: 'example.com', rp_display_name: 'Acme', rp_origins: ['https://app.example.com'] }
  const on = parseTenantFile(tenantFile('acme', { auth: { passkeys: true, webauthn: rp } }), 'acme.yaml', {})
  t.same(on.auth.webauthn, { ...rp, challenge_expiry_seconds: 300 })
  const bad = problemsOf(() =>
    parseTenantFile(
      tenantFile('acme', { auth: { webauthn: { ...rp, rp_origins: ['app.example.com/path'], colour: 1 } } }),
      'acme.yaml',
      {},
    ),
  )
  t.match(bad.join('\n'), /auth\.webauthn\.rp_origins\.0/)
  t.match(bad.join('\n'), /auth\.webauthn\.colour: unknown field/)
})

t.test('a value outside a field choices is one line naming them', async (t) => {
  const cases: Array<[Record<string, unknown>, string]> = [
    [
      { jwt: { ...(tenantFile('acme').jwt as object), signing_algorithm: 'XX256' } },
      'acme.yaml: jwt.signing_algorithm: must be one of "HS256", "ES256", "RS256"',
    ],
    [
      { auth: { site_url: 'http://localhost:3000', refresh_token_algorithm_version: 3 } },
      'acme.yaml: auth.refresh_token_algorithm_version: must be one of 1, 2',
    ],
    [{ rest: { max_limit: 'abc' } }, 'acme.yaml: rest.max_limit: must be integer or null'],
  ]
  for (const [override, line] of cases) {
    t.same(
      problemsOf(() => parseTenantFile(tenantFile('acme', override), 'acme.yaml', {})),
      [line],
      line,
    )
  }
})

import t from 'tap'
import { writeFileSync, rmSync } from 'node:fs'
import path from 'node:path'
import { stringify } from 'yaml'
import {
  createMemoryStore,
  createTenantStore,
  parseTenantFile,
  toTenant,
  writeTenantChanges,
} from '../../src/tenants/index.js'
import { readFileSync } from 'node:fs'
import { loadConfig as loadProcessConfig } from '../../src/config/index.js'
import { tenantFile, writeTenantDir } from '../helpers/tenant-fixtures.js'

const tenant = (db: string, over: Record<string, unknown> = {}) =>
  toTenant(parseTenantFile(tenantFile(db, over), `${db}.yaml`, {}))

t.test('files source: tenants of the directory, keys hashed', async (t) => {
  const dir = writeTenantDir(t, { 'acme.yaml': tenantFile('acme'), 'beta.yaml': tenantFile('beta') })
  const config = loadProcessConfig({ env: { GATEHOUSE_TENANTS_DIR: dir } })
  const store = createTenantStore(config, { env: {} })
  t.teardown(() => store.close())
  t.equal(store.kind, 'files')
  t.same(await store.list(), ['acme', 'beta'])
  const acme = await store.get('acme')
  t.equal(acme?.organization, 'org_acme')
  t.match(acme?.keys.public, /^sha256:/)
  t.equal(await store.get('nope'), null)
})

t.test('files source: a bad file refuses to start, naming file and field', async (t) => {
  const dir = writeTenantDir(t, { 'acme.yaml': tenantFile('acme', { roles: { anon: 'a' } }) })
  const config = loadProcessConfig({ env: { GATEHOUSE_TENANTS_DIR: dir } })
  t.throws(() => createTenantStore(config, { env: {} }), { message: /acme\.yaml: roles\.auth: is required/ })
})

t.test('putAll, delete and change notifications', async (t) => {
  const store = createMemoryStore()
  const seen: string[] = []
  const off = store.onChange((db) => seen.push(db))
  await store.putAll([tenant('acme'), tenant('beta')])
  t.same(seen, ['acme', 'beta'], 'one change per database, after all are written')
  t.same(await store.list(), ['acme', 'beta'])
  t.equal(await store.delete('acme'), true)
  t.equal(await store.delete('acme'), false)
  t.same(seen, ['acme', 'beta', 'acme'])
  off()
  await store.putAll([tenant('gamma')])
  t.equal(seen.length, 3, 'unsubscribed listener not called')
  // What get() returns is a copy: editing it does not edit the store.
  const g = await store.get('gamma')
  if (g) g.organization = 'changed'
  t.equal((await store.get('gamma'))?.organization, 'org_gamma')
})

t.test('reload re-reads the directory and notifies what changed', async (t) => {
  const dir = writeTenantDir(t, { 'acme.yaml': tenantFile('acme'), 'beta.yaml': tenantFile('beta') })
  const store = createMemoryStore({ dir, env: {} })
  const seen: string[] = []
  store.onChange((db) => seen.push(db))
  writeFileSync(path.join(dir, 'acme.yaml'), stringify(tenantFile('acme', { organization: 'org_new' })))
  rmSync(path.join(dir, 'beta.yaml'))
  writeFileSync(path.join(dir, 'gamma.yaml'), stringify(tenantFile('gamma')))
  t.same(await store.reload(), ['acme', 'beta', 'gamma'])
  t.same(seen, ['acme', 'beta', 'gamma'])
  t.equal((await store.get('acme'))?.organization, 'org_new')
  t.equal(await store.get('beta'), null)
  t.same(await store.reload(), [], 'nothing changed')
  // A bad file: reload refuses and keeps what it had.
  writeFileSync(path.join(dir, 'gamma.yaml'), 'database: gamma\n')
  await t.rejects(store.reload(), { message: /gamma\.yaml: organization: is required/ })
  t.same(await store.list(), ['acme', 'gamma'])
})

t.test('a change is written into the file only when the new text reads back as the change', async (t) => {
  const dir = writeTenantDir(t, {
    'acme.yaml': tenantFile('acme', { jwt: { secret: '${ACME_JWT}', upstream_secret: 'u'.repeat(40) } }),
  })
  const file = path.join(dir, 'acme.yaml')
  const env = { ACME_JWT: 'j'.repeat(40) }
  const before = toTenant(
    parseTenantFile(
      tenantFile('acme', { jwt: { secret: 'j'.repeat(40), upstream_secret: 'u'.repeat(40) } }),
      'acme.yaml',
      {},
    ),
  )
  const after = { ...before, auth: { ...before.auth, magic_link: true } }
  const text = readFileSync(file, 'utf8')
  // Without ACME_JWT the new text would not load: refused, nothing written.
  t.throws(() => writeTenantChanges(file, before, after, {}), {
    code: 'tenant_file_round_trip',
    message: /acme\.yaml: the change was not written: .*jwt\.secret: environment variable ACME_JWT is not set/,
  })
  t.equal(readFileSync(file, 'utf8'), text)
  writeTenantChanges(file, before, after, env)
  t.match(readFileSync(file, 'utf8'), /magic_link: true/)
  t.match(readFileSync(file, 'utf8'), 'secret: ${ACME_JWT}')
})

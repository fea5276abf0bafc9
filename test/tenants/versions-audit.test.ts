// Versions, compare-and-set and the audit trail of both tenant stores (docs/tenant-state.md),
// on real Redis and real files: a write made on a stale version is refused and changes
// nothing; updateTenant makes a change again on the fresh record (without If-Match) or
// refuses it (with); every change leaves one audit entry naming fields and versions, and
// only the last 100 per database are kept. With files the change lands in the tenant file,
// its comments kept.
import t, { type Test } from 'tap'
import { readFileSync, writeFileSync } from 'node:fs'
import path from 'node:path'
import { stringify } from 'yaml'
import {
  createMemoryStore,
  createRedisStore,
  parseTenantFile,
  toTenant,
  updateTenant,
  AUDIT_KEEP,
  type TenantStore,
} from '../../src/tenants/index.js'
import { tenantFile, tempDir } from '../helpers/tenant-fixtures.js'
import { createTestRedis } from '../helpers/redis.js'

const audit = { who: 'tester', via: 'cli', action: 'test', fields: ['auth.site_url'] }

async function exercise(t: Test, store: TenantStore, versionShape: RegExp): Promise<void> {
  const v1 = (await store.read('acme'))!
  t.match(v1.version, versionShape)
  const changed = { ...v1.tenant, auth: { ...v1.tenant.auth, site_url: 'https://one.example' } }
  const w = await store.write('acme', v1.version, changed, { audit })
  t.equal(w.ok, true)
  const stale = await store.write(
    'acme',
    v1.version,
    { ...v1.tenant, auth: { ...v1.tenant.auth, site_url: 'https://two.example' } },
    { audit },
  )
  t.same(
    stale,
    { ok: false, version: w.ok ? w.version : '' },
    'a write on a stale version is refused, naming the current one',
  )
  t.equal((await store.get('acme'))!.auth.site_url, 'https://one.example', 'and changes nothing')

  // updateTenant: without If-Match it lands whatever came between; with a stale one it is refused.
  const [a, b] = await Promise.all([
    updateTenant(store, 'acme', (x) => ({ ...x, auth: { ...x.auth, magic_link: true } }), {
      who: 'u1',
      via: 'panel',
      action: 'a',
    }),
    updateTenant(store, 'acme', (x) => ({ ...x, auth: { ...x.auth, pkce: true } }), {
      who: 'u2',
      via: 'panel',
      action: 'b',
    }),
  ])
  t.ok(a.entry && b.entry)
  const now = (await store.get('acme'))!
  t.same([now.auth.magic_link, now.auth.pkce], [true, true], 'both concurrent changes landed')
  await t.rejects(
    updateTenant(store, 'acme', (x) => x, { who: 'u3', via: 'panel', action: 'c', ifMatch: v1.version }),
    { code: 'version_mismatch', status: 412 },
  )

  const history = await store.history('acme')
  t.equal(history.length, 3)
  t.same(history.map((e) => e.who).sort(), ['tester', 'u1', 'u2'])
  const last = history[0]!
  t.same(last.fields.length, 1)
  t.match(last, { database: 'acme', via: 'panel', old_version: versionShape, new_version: versionShape })

  for (let i = 0; i < AUDIT_KEEP + 5; i++) {
    await updateTenant(store, 'acme', (x) => ({ ...x, auth: { ...x.auth, mail_rate_per_hour: 1000 + i } }), {
      who: 'loop',
      via: 'cli',
      action: 'n',
    })
  }
  const kept = await store.history('acme')
  t.equal(kept.length, AUDIT_KEEP, `only the last ${AUDIT_KEEP} are kept`)
  t.same(kept[0]!.fields, ['auth.mail_rate_per_hour'])
}

t.test('redis', async (t) => {
  const { url, prefix } = createTestRedis(t)
  const store = createRedisStore({ url, prefix })
  t.teardown(() => store.close())
  await store.putAll([toTenant(parseTenantFile(tenantFile('acme'), 'acme.yaml', {}))])
  await exercise(t, store, /^\d+$/)
})

t.test('files', async (t) => {
  const dir = tempDir(t)
  const file = path.join(dir, 'acme.yaml')
  writeFileSync(file, '# acme: notes kept\n' + stringify(tenantFile('acme')))
  const store = createMemoryStore({ dir, env: {}, stateDir: path.join(dir, '.state') })
  t.teardown(() => store.close())
  await exercise(t, store, /^[0-9a-f]{20}$/)
  const text = readFileSync(file, 'utf8')
  t.match(text, /^# acme: notes kept\n/)
  t.match(text, /site_url: https:\/\/one\.example/)
  t.match(text, /mail_rate_per_hour: 1104/)
  const reread = createMemoryStore({ dir, env: {}, stateDir: path.join(dir, '.state') })
  t.same(await reread.read('acme'), await store.read('acme'), 'a restart reads the same record and version')
  t.equal((await reread.history('acme')).length, AUDIT_KEEP)
})

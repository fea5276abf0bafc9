// The tenant store through Redis Sentinel (docs/operating.md, "Redis Sentinel"): configured as
// redis.sentinels + redis.name, it follows a failover to the promoted replica; with
// redis.write_replicas a record write is acknowledged only once a replica holds it, so what was
// acknowledged before a failover is there after it; a write no replica confirms is undone and
// refused with 503, the record as it was. A real primary, replica and three Sentinels.
import t from 'tap'
import { loadConfig } from '../../src/config/index.js'
import { createTenantStore, parseTenantFile, toTenant, type Tenant } from '../../src/tenants/index.js'
import { startSentinelGroup, type SentinelGroup } from '../helpers/sentinel.js'
import { tenantFile, eventually } from '../helpers/tenant-fixtures.js'

t.setTimeout(180_000)

let group: SentinelGroup

t.before(async () => {
  group = await startSentinelGroup(t)
})

function storeOn(g: SentinelGroup, prefix: string) {
  const config = loadConfig({
    env: {},
    overrides: {
      tenants: { source: 'redis' },
      // A loaded machine may take a while to acknowledge; the refusal below does not wait on it.
      redis: {
        sentinels: g.sentinels,
        name: g.name,
        key_prefix: prefix,
        write_replicas: 1,
        write_replicas_timeout_ms: 5000,
      },
    },
  })
  return { config, store: createTenantStore(config) }
}

const record = (database: string): Tenant => toTenant(parseTenantFile(tenantFile(database), `${database}.yaml`, {}))
const audit = { audit: { who: 'test', via: 'panel' as const, action: 'update', fields: ['rest.default_limit'] } }

t.test('redis.sentinels and redis.name become the sentinel URL every client reads', async (t) => {
  const { config, store } = storeOn(group, 'gh-cfg:')
  await store.close()
  t.equal(config.redis.url, group.url)
  t.throws(
    () => loadConfig({ env: {}, overrides: { redis: { name: 'x' } } }),
    /redis\.sentinels and redis\.name go together/,
  )
})

t.test('a write acknowledged before a failover is there after it, and writes go on', async (t) => {
  const { store } = storeOn(group, 'gh-failover:')
  t.teardown(() => store.close())
  const db = 'failover_one'
  const first = await store.write(db, null, record(db), audit)
  t.ok(first.ok)
  const changed = { ...record(db), rest: { ...record(db).rest, default_limit: 77 } }
  const second = await store.write(db, first.version, changed, audit)
  t.ok(second.ok, 'acknowledged: a replica holds it')

  const before = await group.primaryPort()
  const after = await group.failover()
  t.not(after, before, 'the replica is the primary now')

  const read = await eventually(async () => (await store.read(db)) ?? false, 30_000)
  t.equal(read.tenant.rest.default_limit, 77, 'the acknowledged write survived the failover')
  // The old primary follows the new one as its replica: a write is confirmed again once it has synced.
  const third = await eventually(async () => {
    const now = (await store.read(db))!
    const next = { ...now.tenant, rest: { ...now.tenant.rest, default_limit: 78 } }
    const r = await store.write(db, now.version, next, audit).catch(() => null)
    return r?.ok === true ? r : false
  }, 60_000)
  t.ok(third.ok, 'the store writes to the new primary')
  t.equal((await store.read(db))?.tenant.rest.default_limit, 78, 'the write acknowledged after it is read back')
})

// The order seen at load, forced. In a failover the old primary stays a primary for a while, its
// replicas gone to the promoted one: a write made there waits in WAIT. Its connection then closes
// (here at +switch-master; at the latest when the Sentinels re-point the old primary), ioredis
// reconnects to the promoted replica and sends the WAIT again, where the replicas answer for a
// write that server never had. The store writes again where it is connected now instead.
t.test('a write waiting on the old primary in a failover is made on the new one', async (t) => {
  const pair = await startSentinelGroup(t, 'pair', { replicas: 2 })
  const { store } = storeOn(pair, 'gh-pair:')
  t.teardown(() => store.close())
  const db = 'pair_one'
  const first = await store.write(db, null, record(db), audit)
  t.ok(first.ok)
  const old = await pair.primaryPort()
  const failingOver = pair.failover()
  await eventually(
    async () => /connected_slaves:0/.test(await pair.command<string>(old, ['INFO', 'replication'])),
    30_000,
    5,
  )
  const changed = { ...record(db), rest: { ...record(db).rest, default_limit: 91 } }
  const second = await store.write(db, first.version, changed, audit)
  t.ok(second.ok, 'acknowledged')
  t.not(await failingOver, old)
  t.equal((await store.read(db))?.tenant.rest.default_limit, 91, 'and read back from the new primary')
})

t.test('a write no replica confirms is undone and answered 503', async (t) => {
  const lonely = await startSentinelGroup(t, 'lonely')
  const { store } = storeOn(lonely, 'gh-nodurable:')
  t.teardown(() => store.close())
  const db = 'lonely_one'
  const created = await store.write(db, null, record(db), audit)
  t.ok(created.ok)
  lonely.stopReplica()
  const changed = { ...record(db), rest: { ...record(db).rest, default_limit: 5 } }
  const err = await store.write(db, created.version, changed, audit).then(
    () => null,
    (e: Error & { code?: string; status?: number }) => e,
  )
  t.match(err, { code: 'tenant_store_not_durable', status: 503, message: /was undone: nothing changed/ })
  const now = await store.read(db)
  t.equal(now?.tenant.rest.default_limit, record(db).rest.default_limit, 'the record is as it was')
  const history = await store.history(db)
  t.match(history[0], { reason: 'not confirmed by a replica' }, 'the undoing is in the audit trail')
})

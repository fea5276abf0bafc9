// Supabase's default privileges, opted in per database (rest.supabase_default_privileges,
// docs/supabase.md "Default privileges"): off by default (a table the owner creates is not
// reachable with the public key); the panel switches them on (the owner's ALTER DEFAULT
// PRIVILEGES, then new tables are granted to anon, authenticated and service_role) and off
// again; `gatehouse tenants check` reports a database that differs from its setting and warns
// while the opt-in is on; provisioning with the setting applies it.
import t from 'tap'
import { Command } from 'commander'
import { loadConfig, type Config } from '../../src/config/index.js'
import { registerPanelCommands } from '../../src/panel/commands.js'
import { createRedisStore, type RedisTenantStore } from '../../src/tenants/index.js'
import { createTestRedis } from '../helpers/redis.js'
import { provisionTenant, dropTenant } from '../../src/platform/index.js'
import { adminUrl, randomName } from '../helpers/db.js'
import { withClient } from '../helpers/tenants.js'
import { startStack, type Stack, type StackTenant } from '../helpers/panel-stack.js'

let stack: Stack
let x: StackTenant
let token: string
// `tenants check` reads the tenant from a store of its own, given the panel's record each time.
let checkStore: RedisTenantStore
let checkConfig: Config
const path = () => `/organizations/org_dp/databases/${x.database}/api/rest-settings`

t.before(async () => {
  stack = await startStack(t)
  x = await stack.addTenant({ organization: 'org_dp' })
  token = await stack.panelSession({ userId: 'p1', orgs: ['org_dp'] })
  const { url, prefix } = createTestRedis(t)
  checkStore = createRedisStore({ url, prefix })
  t.teardown(() => checkStore.close())
  checkConfig = loadConfig({
    env: {},
    overrides: { log: { level: 'silent' }, tenants: { source: 'redis' }, redis: { url, key_prefix: prefix } },
  })
})

/** Whether the public key's role may read a table the owner creates now. */
async function newTableReadable(name: string): Promise<boolean> {
  await stack.owner(x, `CREATE TABLE public.${name} (id int)`)
  const r = await stack.owner<{ ok: boolean }>(x, `SELECT has_table_privilege($1, 'public.${name}', 'SELECT') AS ok`, [
    x.roles.anon,
  ])
  return r.rows[0]!.ok
}

async function check(args: string[]): Promise<{ out: string; exitCode: number | undefined }> {
  await checkStore.putAll([(await stack.panelStore.get(x.database))!])
  const program = new Command('gatehouse').exitOverride()
  registerPanelCommands(program.command('tenants'), () => checkConfig)
  const chunks: string[] = []
  const write = process.stdout.write
  const before = process.exitCode
  process.stdout.write = ((s: string) => {
    chunks.push(String(s))
    return true
  }) as typeof process.stdout.write
  let exitCode: number | undefined
  try {
    await program.parseAsync(['node', 'gatehouse', 'tenants', 'check', ...args])
  } finally {
    process.stdout.write = write
    exitCode = process.exitCode as number | undefined
    process.exitCode = before
  }
  return { out: chunks.join(''), exitCode }
}

t.test('off by default: a new table is not granted to the public key', async (t) => {
  const r = await stack.panel('GET', path(), { token })
  t.equal(r.body.settings.supabase_default_privileges, false)
  t.equal(await newTableReadable('before_opt_in'), false)
  const c = await check([x.database, '--json'])
  t.same(JSON.parse(c.out).default_privileges, { setting: false, database: 'off' })
  t.not(c.exitCode, 1)
})

t.test('the panel switches them on and off; check warns while on', async (t) => {
  const bad = await stack.panel('PATCH', path(), { token, body: { supabase_default_privileges: 'yes' } })
  t.match(bad, {
    status: 400,
    body: { code: 'validation_failed', message: /supabase_default_privileges: must be boolean/ },
  })

  const on = await stack.panel('PATCH', path(), { token, body: { supabase_default_privileges: true } })
  t.equal(on.status, 200)
  t.equal(on.body.settings.supabase_default_privileges, true)
  t.equal(await newTableReadable('after_opt_in'), true, 'a table created now is granted to anon')
  const warned = await check([x.database])
  t.match(warned.out, /warning: rest\.supabase_default_privileges is on: .*readable and writable with the public key/)
  t.not(warned.exitCode, 1, 'as the setting says: nothing to review')

  const off = await stack.panel('PATCH', path(), { token, body: { supabase_default_privileges: false } })
  t.equal(off.body.settings.supabase_default_privileges, false)
  t.equal(await newTableReadable('after_opt_out'), false, 'switched off: new tables are not granted again')
})

t.test('check reports a database whose default privileges differ from the setting', async (t) => {
  const on = await stack.panel('PATCH', path(), { token, body: { supabase_default_privileges: true } })
  t.equal(on.status, 200)
  // The owner takes one of them back by hand.
  await stack.owner(x, `ALTER DEFAULT PRIVILEGES IN SCHEMA public REVOKE ALL ON SEQUENCES FROM anon`)
  const c = await check([x.database])
  t.equal(c.exitCode, 1, 'something to review')
  t.match(c.out, /partly granted to anon, authenticated and service_role, but rest\.supabase_default_privileges is on/)
  const again = await stack.panel('PATCH', path(), { token, body: { supabase_default_privileges: true } })
  t.equal(again.status, 200)
  const repaired = await check([x.database])
  t.not(repaired.exitCode, 1, 'set again from the panel: the database says it again')
  t.notMatch(repaired.out, /partly granted/)
  await stack.panel('PATCH', path(), { token, body: { supabase_default_privileges: false } })
})

t.test('provisioning with the setting applies it', async (t) => {
  const database = randomName('tenant')
  const made = await provisionTenant({
    adminUrl: adminUrl(),
    database,
    organization: 'org_dp',
    rest: { supabase_default_privileges: true },
  })
  t.teardown(() => dropTenant({ adminUrl: adminUrl(), database, roles: Object.values(made.roles) }))
  t.equal(made.file.rest.supabase_default_privileges, true, 'the file says it')
  const readable = await withClient(made.ownerUrl, async (c) => {
    await c.query('CREATE TABLE public.items (id int)')
    return (await c.query("SELECT has_table_privilege($1, 'public.items', 'SELECT') AS ok", [made.roles.anon])).rows[0]
      .ok
  })
  t.equal(readable, true, "the owner's new table is granted to anon")
})

// A request role's own settings (ALTER ROLE ... SET), which PostgREST 12 and later set in every
// request's transaction for the role it runs as (roleSettingsSql of txVarQuery,
// src/PostgREST/Query/PreQuery.hs), its default_transaction_isolation as the transaction's
// isolation level (planIsoLvl, src/PostgREST/MainTx.hs); read with the schema cache and read
// again on NOTIFY pgrst, 'reload config' (docs/rest-protocol.md §6.2). The owner sets them with
// platform.set_role_setting (docs/supabase.md). Seen as a user sees them: supabase-js through
// the gateway.
import t from 'tap'
import { startRestGateway } from '../../helpers/rest-gateway.js'
import { adminQuery } from '../../helpers/db.js'
import { eventually } from '../../helpers/eventually.js'
import { rejection } from '../../helpers/tenants.js'
import { quoteIdent, withDatabase } from '../../../src/shared/index.js'
import { migrateDatabase } from '../../../src/platform/index.js'
import { adminUrl } from '../../helpers/db.js'

const SQL = `
CREATE FUNCTION slow() RETURNS text LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_sleep(0.5); RETURN 'done'; END $$;
CREATE FUNCTION slow_own_timeout() RETURNS text LANGUAGE plpgsql SET statement_timeout = '4s'
  AS $$ BEGIN PERFORM pg_sleep(0.5); RETURN 'done'; END $$;
CREATE FUNCTION settings() RETURNS json LANGUAGE sql AS $$
  SELECT json_build_object('lock_timeout', current_setting('lock_timeout'),
    'statement_timeout', current_setting('statement_timeout'),
    'isolation', current_setting('transaction_isolation')) $$;
CREATE FUNCTION serializable_settings() RETURNS json LANGUAGE sql SET default_transaction_isolation = 'serializable'
  AS $$ SELECT json_build_object('isolation', current_setting('transaction_isolation')) $$;
GRANT EXECUTE ON FUNCTION slow(), slow_own_timeout(), settings(), serializable_settings() TO PUBLIC;
SELECT platform.set_role_setting('anon', 'statement_timeout', '100ms');
SELECT platform.set_role_setting('anon', 'lock_timeout', '1234ms');
SELECT platform.set_role_setting('auth', 'default_transaction_isolation', 'repeatable read');
SELECT platform.set_role_setting('auth', 'statement_timeout', '9min');
`

t.test("a request role's own settings apply to its requests", async (t) => {
  const stack = await startRestGateway(t, { sql: SQL, restConfig: { statement_timeout_ms: 5000 } })
  const anon = stack.client()
  const user = stack.client(await stack.userToken('00000000-0000-4000-8000-000000000001'))

  const slowAnon = await anon.rpc('slow')
  t.match(
    slowAnon.error,
    { code: '57014', message: 'canceling statement due to statement timeout' },
    "the anon role's statement_timeout cancels a slow call",
  )
  t.equal(slowAnon.status, 500)
  const slowUser = await user.rpc('slow')
  t.same([slowUser.error, slowUser.data], [null, 'done'], 'the signed-in role has no such setting: the call ends')

  const own = await anon.rpc('slow_own_timeout')
  t.same([own.error, own.data], [null, 'done'], "the function's own statement_timeout wins over the role's")

  t.same((await anon.rpc('settings')).data, {
    lock_timeout: '1234ms',
    statement_timeout: '100ms',
    isolation: 'read committed',
  })
  t.same(
    (await user.rpc('settings')).data,
    { lock_timeout: '0', statement_timeout: '5s', isolation: 'repeatable read' },
    "the signed-in role: its own isolation level; the engine's timeout (the role's 9min is longer)",
  )
  t.same(
    (await user.rpc('serializable_settings')).data,
    { isolation: 'serializable' },
    "a function's default_transaction_isolation wins over the role's",
  )
})

t.test('reloaded on NOTIFY pgrst, reload config; this database over all databases', async (t) => {
  const stack = await startRestGateway(t, { sql: SQL, restConfig: { statement_timeout_ms: 5000 } })
  const anon = stack.client()
  const lockTimeout = async () => ((await anon.rpc('settings')).data as { lock_timeout: string }).lock_timeout
  t.equal(await lockTimeout(), '1234ms')

  // platform.set_role_setting sends the notification itself.
  await stack.owner("SELECT platform.set_role_setting('anon', 'lock_timeout', '2s')")
  await eventually(async () => (await lockTimeout()) === '2s', 15_000)

  // Changed by the operator without a notification: seen once one is sent.
  const anonRole = stack.tenant.roles.anon
  await adminQuery(
    `ALTER ROLE ${quoteIdent(anonRole)} IN DATABASE ${quoteIdent(stack.database)} SET lock_timeout = '3s'`,
  )
  t.equal(await lockTimeout(), '2s', 'not before the notification')
  await stack.owner("NOTIFY pgrst, 'reload config'")
  await eventually(async () => (await lockTimeout()) === '3s', 15_000)
  t.pass("this database's setting wins over the one for all databases")

  await stack.owner("SELECT platform.set_role_setting('anon', 'statement_timeout', NULL)")
  await eventually(async () => (await anon.rpc('slow')).data === 'done')
  t.pass('a NULL value resets the setting')
})

t.test('platform.set_role_setting: the owner only, listed settings only', async (t) => {
  const stack = await startRestGateway(t, { sql: 'SELECT 1' })
  const { anon, auth, svc, owner } = stack.tenant.roles
  t.match(await stack.owner("SELECT platform.set_role_setting('auth', 'statement_timeout', '8s') AS s"), [
    { s: `ALTER ROLE ${auth} SET statement_timeout = '8s'` },
  ])
  const rows = await adminQuery(
    'SELECT setconfig FROM pg_db_role_setting WHERE setrole = $1::regrole AND setdatabase = 0',
    [auth],
  )
  t.same(rows.rows[0]?.setconfig, ['statement_timeout=8s'])

  const bad = async (sql: string) => rejection(stack.owner(sql))
  t.match(await bad("SELECT platform.set_role_setting('auth', 'search_path', 'x')"), { code: '22023' })
  t.match(await bad("SELECT platform.set_role_setting('auth', 'statement_timeout', 'soon')"), { code: '22023' })
  t.match(await bad("SELECT platform.set_role_setting('owner', 'statement_timeout', '1s')"), { code: '22023' })
  t.match(
    await bad(`ALTER ROLE ${quoteIdent(auth)} SET statement_timeout = '8s'`),
    { code: '42501' },
    'the owner cannot ALTER ROLE the request roles itself',
  )
  t.match(await bad("ALTER ROLE authenticated SET statement_timeout = '8s'"), { code: '42501' }, 'nor the group role')

  const can = await adminQuery(
    `SELECT r AS role, has_function_privilege(r, 'platform.set_role_setting(text, text, text)', 'EXECUTE') AS ok
     FROM unnest($1::text[]) AS r`,
    [[anon, auth, svc, owner]],
    stack.database,
  )
  t.same(
    can.rows.map((r) => r.ok),
    [false, false, false, true],
    'only the owner may call it',
  )
})

t.test('platform.set_role_setting: values above the caps are refused, naming the cap', async (t) => {
  const stack = await startRestGateway(t, { sql: 'SELECT 1' })
  const { anon } = stack.tenant.roles
  const set = (kind: string, setting: string, value: string) =>
    stack.owner('SELECT platform.set_role_setting($1, $2, $3) AS s', [kind, setting, value])
  const refused: Array<[string, string, string]> = [
    ['work_mem', '1TB', '256MB'],
    ['work_mem', '262145kB', '256MB'],
    ['work_mem', '0.3GB', '256MB'],
    ['statement_timeout', '1h', '10min'],
    ['statement_timeout', '600001', '10min'],
    ['statement_timeout', '0', '10min'],
    ['lock_timeout', '11min', '10min'],
    ['idle_in_transaction_session_timeout', '1d', '10min'],
    ['idle_in_transaction_session_timeout', '0', '10min'],
  ]
  for (const [setting, value, cap] of refused) {
    const err = await rejection(set('anon', setting, value))
    t.match(err, { code: '22023', message: `${setting} = '${value}' is above the cap of ${cap} for a request role` })
  }
  t.match(await rejection(set('anon', 'work_mem', 'lots')), { code: '22023' }, 'a value Postgres refuses')
  const settings = async () =>
    (
      await adminQuery<{ setconfig: string[] | null }>(
        'SELECT setconfig FROM pg_db_role_setting WHERE setrole = $1::regrole AND setdatabase = 0',
        [anon],
      )
    ).rows[0]?.setconfig ?? []
  t.same(await settings(), [], 'nothing was set')

  for (const [setting, value] of [
    ['work_mem', '256MB'],
    ['statement_timeout', '10min'],
    ['lock_timeout', '600000'],
    ['idle_in_transaction_session_timeout', '30s'],
  ])
    await set('anon', setting!, value!)
  t.same(await settings(), [
    'work_mem=256MB',
    'statement_timeout=10min',
    'lock_timeout=600000',
    'idle_in_transaction_session_timeout=30s',
  ])
  const own = await stack.owner(
    "SELECT platform.set_role_setting('anon', 'lock_timeout', '1ms') AS s, current_setting('lock_timeout') AS l",
  )
  t.match(own, [{ l: '0' }], "the caller's own lock_timeout is untouched by the check")
})

t.test('migration 0276 resets request role settings above the caps set before it', async (t) => {
  const stack = await startRestGateway(t, { sql: 'SELECT 1' })
  const { anon, auth } = stack.tenant.roles
  // Back to before 0276 (its record and its new function gone), with values 0270 accepted.
  await adminQuery(
    `DELETE FROM platform.schema_migrations WHERE version = 276;
     DROP FUNCTION platform.role_setting_over_cap(text, text);
     ALTER ROLE ${quoteIdent(anon)} SET work_mem = '1TB';
     ALTER ROLE ${quoteIdent(anon)} SET lock_timeout = '2s';
     ALTER ROLE ${quoteIdent(auth)} SET statement_timeout = 0;`,
    [],
    stack.database,
  )
  const r = await migrateDatabase(withDatabase(adminUrl(), stack.database))
  t.same(r.applied, ['0276_role_setting_caps.sql'])
  const rows = await adminQuery<{ role: string; setconfig: string[] }>(
    `SELECT setrole::regrole::text AS role, setconfig FROM pg_db_role_setting
     WHERE setrole IN ($1::regrole, $2::regrole) AND setdatabase = 0 ORDER BY 1`,
    [anon, auth],
  )
  t.same(
    rows.rows.map((x) => [x.role, x.setconfig]),
    [[anon, ['lock_timeout=2s']]],
    'only the setting within its cap is left',
  )
})

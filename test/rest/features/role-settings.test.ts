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
import { quoteIdent } from '../../../src/shared/index.js'

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
SELECT platform.set_role_setting('auth', 'statement_timeout', '1h');
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
    "the signed-in role: its own isolation level; the engine's timeout (the role's 1h is longer)",
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
  await eventually(async () => (await lockTimeout()) === '2s')

  // Changed by the operator without a notification: seen once one is sent.
  const anonRole = stack.tenant.roles.anon
  await adminQuery(
    `ALTER ROLE ${quoteIdent(anonRole)} IN DATABASE ${quoteIdent(stack.database)} SET lock_timeout = '3s'`,
  )
  t.equal(await lockTimeout(), '2s', 'not before the notification')
  await stack.owner("NOTIFY pgrst, 'reload config'")
  await eventually(async () => (await lockTimeout()) === '3s')
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

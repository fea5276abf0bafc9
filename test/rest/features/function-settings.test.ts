// A called function's settings that PostgREST sets for the whole transaction (its
// db-hoisted-tx-settings, by default statement_timeout, plan_filter.statement_cost_limit and
// default_transaction_isolation: funcSettings of txVarQuery in PostgREST's
// src/PostgREST/Query/PreQuery.hs), so `SET statement_timeout` on a function bounds the call.
// The engine's rest.statement_timeout_ms stays the upper bound (docs/rest-protocol.md §6.2).
// Seen through the gateway: a pre-request function reports the transaction's settings as
// response headers, before the function itself (whose own SET clauses apply inside it) runs.
import t from 'tap'
import { startRestGateway } from '../../helpers/rest-gateway.js'

const SQL = `
CREATE TABLE notes (id int PRIMARY KEY);
SELECT platform.grant('SELECT', 'public.notes', 'anon');
CREATE FUNCTION show_settings() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  PERFORM set_config('response.headers', json_build_array(
    json_build_object('X-Timeout', current_setting('statement_timeout')),
    json_build_object('X-Iso', current_setting('default_transaction_isolation')),
    json_build_object('X-Work-Mem', current_setting('work_mem')))::text, true);
END $$;
CREATE FUNCTION short_timeout() RETURNS int LANGUAGE sql SET statement_timeout = '250ms' AS $$ SELECT 1 $$;
CREATE FUNCTION long_timeout() RETURNS int LANGUAGE sql SET statement_timeout = '1h' AS $$ SELECT 1 $$;
CREATE FUNCTION no_timeout() RETURNS int LANGUAGE sql SET statement_timeout = 0 AS $$ SELECT 1 $$;
CREATE FUNCTION tiny_timeout() RETURNS int LANGUAGE sql SET statement_timeout = '0.4ms' AS $$ SELECT 1 $$;
CREATE FUNCTION others() RETURNS int LANGUAGE sql
  SET default_transaction_isolation = 'serializable' SET work_mem = '6000kB' AS $$ SELECT 1 $$;
CREATE FUNCTION slow() RETURNS text LANGUAGE plpgsql SET statement_timeout = '50ms'
  AS $$ BEGIN PERFORM pg_sleep(0.3); RETURN 'done'; END $$;
GRANT EXECUTE ON FUNCTION show_settings(), short_timeout(), long_timeout(), no_timeout(), tiny_timeout(), others(), slow() TO PUBLIC;
`

t.test("a called function's statement_timeout and the other hoisted settings", async (t) => {
  const stack = await startRestGateway(t, {
    sql: SQL,
    rest: { pre_request: 'public.show_settings' },
    restConfig: { statement_timeout_ms: 1000 },
  })
  const base = `${stack.gatewayUrl}/${stack.database}/rest/v1`
  const headers = { apikey: stack.tenant.file.keys.public, 'content-type': 'application/json' }
  const call = async (fn: string) => {
    const r = await fetch(`${base}/rpc/${fn}`, { method: 'POST', headers, body: '{}' })
    const h = (name: string) => r.headers.get(name)
    return {
      status: r.status,
      body: await r.json(),
      timeout: h('x-timeout'),
      cost: h('x-cost'),
      iso: h('x-iso'),
      mem: h('x-work-mem'),
    }
  }
  const read = await fetch(`${base}/notes`, { headers })
  t.equal(read.status, 200)
  const engine = read.headers.get('x-timeout')
  t.equal(engine, '1s', "a table read: the engine's statement_timeout")
  const defaults = { iso: read.headers.get('x-iso'), mem: read.headers.get('x-work-mem') }

  t.match(await call('short_timeout'), { status: 200, body: 1, timeout: '250ms', ...defaults }, 'a shorter one is set')
  t.match(await call('long_timeout'), { status: 200, timeout: '1s' }, "a longer one is not: the engine's bounds it")
  t.match(await call('no_timeout'), { status: 200, timeout: '1s' }, 'nor 0 (no timeout)')
  t.match(await call('tiny_timeout'), { status: 200, timeout: '1s' }, 'nor below 1 ms (Postgres rounds it to 0)')
  t.match(
    await call('others'),
    { status: 200, timeout: '1s', iso: 'serializable', mem: defaults.mem },
    'default_transaction_isolation is set, work_mem is not (not a hoisted setting)',
  )
  const slow = await call('slow')
  t.equal(slow.status, 500, 'the function is cancelled by its own statement_timeout')
  t.same(slow.body, {
    code: '57014',
    details: null,
    hint: null,
    message: 'canceling statement due to statement timeout',
  })
})

// A Postgres custom access token hook costs a token grant one round trip: the call itself.
// What the function sees shows it: no statement_timeout was set before it (that took a
// `SET LOCAL` round trip in the request's transaction, and on a refresh grant, which runs in
// autocommit, a BEGIN before and a COMMIT after); its 2 s limit is kept by cancelling the
// call from another connection instead (a smaller limit here). A hook that catches the cancel
// is in auth-hooks-boundary.test.ts.
import t from 'tap'
import { startAuth, call, decodeJwt, email } from '../helpers/auth-harness.js'
import { adminQuery } from '../helpers/db.js'

const HOOK = `
CREATE FUNCTION public.stamp_claims(event jsonb) RETURNS jsonb LANGUAGE plpgsql VOLATILE AS $$
BEGIN
  RETURN jsonb_build_object('claims', event->'claims' || jsonb_build_object(
    'hook_statement_timeout', pg_catalog.current_setting('statement_timeout')));
END $$;`

t.test(
  'the custom access token hook is one statement: no timeout set before it, no transaction of its own on a refresh',
  async (t) => {
    const h = await startAuth(t, {
      tenants: [
        { auth: { hooks: { custom_access_token: { uri: 'pg-functions://postgres/public/stamp_claims' } } } as never },
      ],
    })
    const x = h.list[0]!
    await h.ownerQuery(x, HOOK)
    await h.ownerQuery(x, "SELECT platform.grant_hook('public.stamp_claims(jsonb)'::regprocedure)")

    const auth = h.client(x)
    const signUp = await auth.signUp({ email: email('rt'), password: 'correct horse battery' })
    t.error(signUp.error)
    const first = decodeJwt(signUp.data.session!.access_token)
    t.equal(
      first.hook_statement_timeout,
      '0',
      "sign-up: the hook ran in the request's transaction with no statement_timeout set for it",
    )

    const refreshed = await auth.refreshSession({ refresh_token: signUp.data.session!.refresh_token })
    t.error(refreshed.error)
    const claims = decodeJwt(refreshed.data.session!.access_token)
    t.equal(
      claims.hook_statement_timeout,
      '0',
      'refresh: no statement_timeout was set before the call (and so no BEGIN/COMMIT around it)',
    )
  },
)

t.test(
  "a function hook past its limit is cancelled: the grant answers GoTrue's hook_timeout, nothing is kept, the pool serves on",
  async (t) => {
    const hooks = { custom_access_token: { uri: 'pg-functions://postgres/public/slow_claims' } }
    const h = await startAuth(t, { auth: { hook_function_timeout_ms: 300 }, tenants: [{ auth: { hooks } as never }] })
    const x = h.list[0]!
    await h.ownerQuery(
      x,
      `
    CREATE FUNCTION public.slow_claims(event jsonb) RETURNS jsonb LANGUAGE plpgsql VOLATILE AS $$
    BEGIN PERFORM pg_catalog.pg_sleep(30); RETURN jsonb_build_object('claims', event->'claims'); END $$;`,
    )
    await h.ownerQuery(x, "SELECT platform.grant_hook('public.slow_claims(jsonb)'::regprocedure)")
    await h.ownerQuery(x, HOOK)
    await h.ownerQuery(x, "SELECT platform.grant_hook('public.stamp_claims(jsonb)'::regprocedure)")

    const auth = h.client(x)
    const address = email('slow')
    const refused = await call(`${h.base(x)}/signup`, { body: { email: address, password: 'correct horse battery' } })
    t.match(
      refused,
      {
        status: 422,
        body: { code: 'hook_timeout', message: 'Failed to reach hook within maximum time of 0.300000 seconds' },
      },
      "GoTrue's answer to a hook past its time",
    )
    const users = await call(`${h.base(x)}/admin/users`, { token: await h.serviceToken(x) })
    t.notOk(
      users.body.users.some((u: { email: string }) => u.email === address),
      "the sign-up's transaction was rolled back: no user",
    )
    const running = await adminQuery(
      "SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND query LIKE '%call_hook%' AND state = 'active' AND pid <> pg_backend_pid()",
      [],
      x.database,
    )
    t.equal(running.rows[0].n, 0, 'the call is not left running in the database')

    h.setAuth(x, { hooks: { custom_access_token: { uri: 'pg-functions://postgres/public/stamp_claims' } } } as never)
    const served = await auth.signUp({ email: email('after'), password: 'correct horse battery' })
    t.error(served.error, 'the next grant on the same pool is served')
    t.equal(decodeJwt(served.data.session!.access_token).hook_statement_timeout, '0')

    // On a refresh grant the call runs in autocommit on a pooled connection of its own: cancelled
    // there too, and that connection is not handed out again.
    h.setAuth(x, { hooks } as never)
    const slowRefresh = await call(`${h.base(x)}/token?grant_type=refresh_token`, {
      body: { refresh_token: served.data.session!.refresh_token },
    })
    t.match(slowRefresh, { status: 422, body: { code: 'hook_timeout' } }, 'refresh: the same answer')
    h.setAuth(x, { hooks: { custom_access_token: { uri: 'pg-functions://postgres/public/stamp_claims' } } } as never)
    for (let i = 0; i < 3; i++) {
      const again = await auth.signUp({ email: email('again'), password: 'correct horse battery' })
      t.error(again.error, `grant ${i + 1} after it is served`)
    }
  },
)

t.test(
  'a function hook is called as a prepared statement, and one replaced with another return type keeps working',
  async (t) => {
    const uri = 'pg-functions://postgres/public/counted_claims'
    // One connection: the refresh statement and the hook call share it, so the second call meets
    // the statement the first one prepared.
    const h = await startAuth(t, {
      poolPerTenant: 1,
      tenants: [{ auth: { hooks: { custom_access_token: { uri } } } as never }],
    })
    const x = h.list[0]!
    // What the function sees of its own session: the hook's prepared statements.
    const prepared = `(SELECT count(*) FROM pg_catalog.pg_prepared_statements WHERE name LIKE 'gatehouse\\_auth\\_hook\\_%')`
    await h.ownerQuery(
      x,
      `CREATE FUNCTION public.counted_claims(event jsonb) RETURNS jsonb LANGUAGE sql AS $$
        SELECT jsonb_build_object('claims', event->'claims' || jsonb_build_object('prepared_hook_calls', ${prepared}))
      $$`,
    )
    await h.ownerQuery(x, "SELECT platform.grant_hook('public.counted_claims(jsonb)'::regprocedure)")
    const auth = h.client(x)
    const signUp = await auth.signUp({ email: email('prep'), password: 'correct horse battery' })
    t.error(signUp.error)
    t.equal(decodeJwt(signUp.data.session!.access_token).prepared_hook_calls, 1, 'the call is a prepared statement')

    // Another return type (json): the prepared call is planned again and still answers.
    await h.ownerQuery(
      x,
      `DROP FUNCTION public.counted_claims(jsonb);
       CREATE FUNCTION public.counted_claims(event jsonb) RETURNS json LANGUAGE sql AS $$
        SELECT json_build_object('claims', event->'claims' || jsonb_build_object('replaced', true, 'prepared_hook_calls', ${prepared}))
      $$;
       SELECT platform.grant_hook('public.counted_claims(jsonb)'::regprocedure)`,
    )
    const refreshed = await call(`${h.base(x)}/token?grant_type=refresh_token`, {
      body: { refresh_token: signUp.data.session!.refresh_token },
    })
    t.equal(refreshed.status, 200, JSON.stringify(refreshed.body))
    const claims = decodeJwt(refreshed.body.access_token)
    t.equal(claims.replaced, true, "the replaced function's claims")
    t.equal(claims.prepared_hook_calls, 1, 'the same prepared statement, planned again')
  },
)

// The refusal rewriter in front of a real PostgREST: no PostgREST runs in these tests, so the
// rewriter is called directly with the error bodies PostgREST v14 sends (docs/rest-protocol.md §7.5:
// 42501 401/403 for a missing privilege, PGRST205 404, 42501 "new row violates row-level
// security policy" for both RLS cases) against a real tenant's catalog.
import t from 'tap'
import { createRefusalRewriter, type Caller, type UpstreamErrorContext } from '../../src/gateway/index.js'
import type { RoleKind } from '../../src/tenants/index.js'
import { createTestTenant, type TestTenant } from '../helpers/tenants.js'
import pg from 'pg'

let x: TestTenant
const rewrite = createRefusalRewriter()
t.teardown(() => rewrite.close())

const log = {
  debug() {},
  info() {},
  warn() {},
  error() {},
  fatal() {},
  trace() {},
  child() {
    return log
  },
  level: 'silent',
  silent() {},
}

function caller(kind: RoleKind): Caller {
  return { kind, claims: null, token: null, exp: null, keyKind: kind === 'svc' ? 'svc' : 'anon', cacheKey: kind }
}

function ctx(
  kind: RoleKind,
  method: string,
  path: string,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): UpstreamErrorContext {
  return {
    tenant: x.tenant,
    service: 'rest',
    caller: caller(kind),
    method,
    path,
    query: '',
    status,
    headers: { 'content-type': 'application/json; charset=utf-8', ...headers },
    body,
    raw: Buffer.from(JSON.stringify(body)),
    requestId: 'r1',
    log: log as never,
  }
}

t.before(async () => {
  x = await createTestTenant(t)
  const c = new pg.Client({ connectionString: x.ownerUrl })
  await c.connect()
  await c.query(`
    CREATE TABLE public.todos (id int);
    SELECT platform.grant('SELECT', 'public.todos', 'auth');
  `)
  await c.end()
})

t.test('42501 for a table the role holds nothing on (PostgREST: 401 for anon): unknown_table', async (t) => {
  const r = await rewrite(
    ctx(
      'anon',
      'GET',
      '/todos',
      401,
      { code: '42501', message: 'permission denied for table todos', details: null, hint: null },
      { 'www-authenticate': 'Bearer' },
    ),
  )
  t.equal(r?.status, 404)
  t.match(r?.body, { code: 'unknown_table', role: 'anon', table: 'public.todos' })
  t.match((r?.body as { message: string }).message, x.roles.anon)
})

t.test('42501 for a missing privilege of a visible table: no_table_grant with the statement', async (t) => {
  const r = await rewrite(
    ctx('auth', 'POST', '/todos', 403, {
      code: '42501',
      message: 'permission denied for table todos',
      details: null,
      hint: null,
    }),
  )
  t.equal(r?.status, 403)
  t.match(r?.body, {
    code: 'no_table_grant',
    hint: 'GRANT INSERT ON public.todos TO authenticated;',
    privilege: 'INSERT',
    sqlstate: '42501',
  })
})

t.test("PGRST205 for a missing table: unknown_table, PostgREST's suggestion kept", async (t) => {
  const r = await rewrite(
    ctx('anon', 'GET', '/todo', 404, {
      code: 'PGRST205',
      message: "Could not find the table 'public.todo' in the schema cache",
      details: null,
      hint: "Perhaps you meant the table 'public.todos'",
    }),
  )
  t.equal(r?.status, 404)
  t.match(r?.body, { code: 'unknown_table', table: 'public.todo' })
  t.match((r?.body as { details: string }).details, "Perhaps you meant the table 'public.todos'")
})

t.test('PGRST205 for a table the role can see (a stale schema cache): unchanged', async (t) => {
  const r = await rewrite(
    ctx('auth', 'GET', '/todos', 404, {
      code: 'PGRST205',
      message: "Could not find the table 'public.todos' in the schema cache",
      details: null,
      hint: null,
    }),
  )
  t.equal(r, null)
})

t.test('"new row violates row-level security policy" from PostgREST: permission_denied (it rolled back)', async (t) => {
  const body = {
    code: '42501',
    message: 'new row violates row-level security policy for table "todos"',
    details: null,
    hint: null,
  }
  const r = await rewrite(ctx('auth', 'POST', '/todos', 403, body))
  t.equal(r?.status, 403)
  t.match(r?.body, { code: 'permission_denied', sqlstate: '42501' })
  t.match((r?.body as { hint: string }).hint, /Nothing was written/)
  const anon = await rewrite(ctx('anon', 'POST', '/todos', 401, body))
  t.equal(anon?.status, 401)
  t.equal(anon?.headers?.['www-authenticate'], 'Bearer')
})

t.test('only the body field row_written on a table write says the row was written', async (t) => {
  const written = {
    code: '42501',
    message: 'new row was written but the SELECT policy hides it from role authenticated',
    details: '1 row was written to public.todos and committed.',
    hint: null,
  }
  const marked = await rewrite(ctx('auth', 'POST', '/todos', 403, { ...written, row_written: true }))
  t.match(marked?.body, { code: 'rls_refusal', row_written: true, table: 'public.todos' })
  const patched = await rewrite(ctx('auth', 'PATCH', '/todos', 403, { ...written, row_written: true }))
  t.match(patched?.body, { code: 'rls_refusal' })

  // What a function can send (RAISE SQLSTATE 'PGRST' sets any message and headers, no other
  // body field): the wording, a header of ours. Neither is the engine's marker.
  const worded = await rewrite(ctx('auth', 'POST', '/todos', 403, written))
  t.match(worded?.body, { code: 'permission_denied' })
  t.notOk((worded?.body as Record<string, unknown>).row_written)
  const headed = await rewrite(ctx('auth', 'POST', '/todos', 403, written, { 'x-gatehouse-row-written': 'true' }))
  t.match(headed?.body, { code: 'permission_denied' })
  // A function's own JSON answer (response.status) is no table write, whatever its body says.
  const rpc = await rewrite(ctx('auth', 'POST', '/rpc/f', 403, { ...written, row_written: true }))
  t.match(rpc?.body, { code: 'permission_denied' })
  t.notOk((rpc?.body as Record<string, unknown>).row_written)
  const read = await rewrite(ctx('auth', 'GET', '/todos', 403, { ...written, row_written: true }))
  t.notOk((read?.body as Record<string, unknown> | undefined)?.row_written, 'a read writes nothing')
})

t.test('other errors, and auth responses, pass through', async (t) => {
  t.equal(
    await rewrite(
      ctx('anon', 'GET', '/todos', 406, {
        code: 'PGRST116',
        message: 'Cannot coerce the result to a single JSON object',
        details: 'The result contains 0 rows',
        hint: null,
      }),
    ),
    null,
  )
  t.equal(
    await rewrite(
      ctx('anon', 'GET', '/todos', 400, {
        code: '22P02',
        message: 'invalid input syntax for type integer: "x"',
        details: null,
        hint: null,
      }),
    ),
    null,
  )
  t.equal(await rewrite(ctx('anon', 'GET', '/todos', 500, 'not json')), null)
  const auth = ctx('anon', 'POST', '/token', 403, { code: '42501', message: 'permission denied for table todos' })
  t.equal(await rewrite({ ...auth, service: 'auth' }), null)
})

t.test("another tenant's role name in an upstream text is scrubbed", async (t) => {
  const r = await rewrite(
    ctx('anon', 'POST', '/rpc/f', 401, {
      code: '42501',
      message: 'permission denied to set role "t_0123456789_svc"',
      details: null,
      hint: null,
    }),
  )
  t.equal(r?.status, 401)
  t.match(r?.body, { code: 'permission_denied' })
  t.notMatch(JSON.stringify(r?.body), 't_0123456789_svc')
})

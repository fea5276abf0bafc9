// The role a test query runs as is a boundary: nothing inside the SQL switches to another
// request role (set_config('role', ...), SET ROLE, RESET ROLE then SET ROLE,
// set_config('role', 'none', ...), SET SESSION AUTHORIZATION), so a query "as anon" never
// reads what only the secret key's role may. Postgres refuses it: the query logs in as a
// login that is a member of the chosen role only.
import t from 'tap'
import { startStack, type Stack, type StackTenant } from '../helpers/panel-stack.js'
import { adminQuery, adminUrl } from '../helpers/db.js'
import { withDatabase } from '../../src/shared/index.js'
import { migrateDatabase } from '../../src/platform/index.js'

const SECRET = 'the-vault-combination-4711'

let stack: Stack
let x: StackTenant
let token: string
const path = () => `/organizations/org_lock/databases/${x.database}/api/test-query`
const query = (sql: string, as = 'anon') => stack.panel('POST', path(), { token, body: { sql, as } })

t.before(async () => {
  stack = await startStack(t)
  x = await stack.addTenant({ organization: 'org_lock' })
  token = await stack.panelSession({ userId: 'p1', email: 'ops@example.com', orgs: ['org_lock'] })
  // Readable by the secret key's role only (its default privileges on the owner's tables).
  await stack.owner(x, `CREATE TABLE public.vault (secret text); INSERT INTO public.vault VALUES ('${SECRET}')`)
})

/** A DO block that runs `steps`, then reads the vault and raises what it read. */
function exfiltrate(steps: string): string {
  return `DO $$ DECLARE v text; BEGIN ${steps}; SELECT string_agg(secret, ',') INTO v FROM public.vault; RAISE EXCEPTION 'leaked: %', v; END $$`
}

t.test('the test query as svc reads the vault (the control)', async (t) => {
  const r = await query('SELECT secret FROM public.vault', 'service_role')
  t.equal(r.status, 200)
  t.same(r.body.rows, [{ secret: SECRET }])
})

t.test('no way out of the chosen role', async (t) => {
  const svc = x.roles.svc
  const attempts: Array<[string, string]> = [
    [
      'set_config role in the select list',
      `SELECT set_config('role', '${svc}', true) AS r, current_setting('role') AS now_role`,
    ],
    ['set_config role, then read', exfiltrate(`PERFORM set_config('role', '${svc}', true)`)],
    ['SET ROLE', exfiltrate(`EXECUTE 'SET ROLE "${svc}"'`)],
    ['SET LOCAL ROLE', exfiltrate(`EXECUTE 'SET LOCAL ROLE "${svc}"'`)],
    ['RESET ROLE, then SET ROLE', exfiltrate(`EXECUTE 'RESET ROLE'; EXECUTE 'SET ROLE "${svc}"'`)],
    [
      'set_config role none, then set_config role',
      exfiltrate(`PERFORM set_config('role', 'none', true); PERFORM set_config('role', '${svc}', true)`),
    ],
    ['SET SESSION AUTHORIZATION', exfiltrate(`EXECUTE 'SET SESSION AUTHORIZATION "${svc}"'`)],
    ['RESET ROLE alone', exfiltrate("EXECUTE 'RESET ROLE'")],
    ['set_config role none alone', exfiltrate("PERFORM set_config('role', 'none', true)")],
  ]
  for (const as of ['anon', 'authenticated']) {
    for (const [what, sql] of attempts) {
      const r = await query(sql, as)
      t.not(r.status, 200, `${as}, ${what}: refused`)
      t.notMatch(JSON.stringify(r.body), SECRET, `${as}, ${what}: nothing leaked`)
      t.match(r.body.message ?? '', /permission denied/, `${as}, ${what}: Postgres refused (${r.body.message})`)
    }
  }
})

t.test('within the role everything works as before', async (t) => {
  const who = await query('SELECT current_user AS u, auth.role() AS r')
  t.equal(who.status, 200)
  t.same(who.body.rows, [{ u: x.roles.anon, r: 'anon' }])
  t.same(who.body.role, { as: 'anon', name: x.roles.anon })
  const sp = await query("SELECT current_setting('search_path') AS p")
  t.match(sp.body.rows[0].p, /public/, 'unqualified names resolve as in a REST request')
  t.equal(
    sp.body.rows[0].p,
    '"public", "extensions"',
    "the REST engine's: the exposed schema, then rest.extra_search_path",
  )
})

t.test('a test-query login that cannot log in is a 409 naming the fix', async (t) => {
  const y = await stack.addTenant({ organization: 'org_lock' })
  await adminQuery(`ALTER ROLE "${y.roles.anon}_probe" PASSWORD NULL`)
  const r = await stack.panel('POST', `/organizations/org_lock/databases/${y.database}/api/test-query`, {
    token,
    body: { sql: 'SELECT 1', as: 'anon' },
  })
  t.equal(r.status, 409)
  t.equal(r.body.code, 'test_query_login_unavailable')
  t.match(r.body.message, `${y.roles.anon}_probe`)
  t.match(r.body.hint, `gatehouse tenants migrate ${y.database}`)
  await migrateDatabaseAgain(y.database)
  const ok = await stack.panel('POST', `/organizations/org_lock/databases/${y.database}/api/test-query`, {
    token,
    body: { sql: 'SELECT 1 AS one', as: 'anon' },
  })
  t.equal(ok.status, 200, 'after the migration the login works again')
})

/** `gatehouse tenants migrate <db>` on an up-to-date database. */
async function migrateDatabaseAgain(database: string): Promise<void> {
  const r = await migrateDatabase(withDatabase(adminUrl(), database))
  if (r.applied.length !== 0) throw new Error('expected an up-to-date database')
}

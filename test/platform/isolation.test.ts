// Roles and isolation (docs/service.md §3): a fresh database exposes
// zero tables, platform.role()/platform.grant() work on this tenant only, and another
// tenant's roles can neither connect nor be reached, even though pg_roles lists them.
import t from 'tap'
import { createTestTenant, asRole, rejection, withClient } from '../helpers/tenants.js'
import { adminQuery } from '../helpers/db.js'

const SYSTEM = "('pg_catalog', 'information_schema', 'pg_toast')"

t.test('isolation between two tenants', async (t) => {
  const [a, b] = await Promise.all([createTestTenant(t), createTestTenant(t)])
  const restA = a.file.engines!.rest!
  const restB = b.file.engines!.rest!
  const idA = a.roles.anon.replace(/_anon$/, '')

  await t.test('a fresh database exposes zero tables to anon and auth', async (t) => {
    for (const kind of ['anon', 'auth'] as const) {
      const seen = await asRole(
        restA,
        a.roles[kind],
        async (c) =>
          (
            await c.query(
              `SELECT table_schema, table_name FROM information_schema.tables WHERE table_schema NOT IN ${SYSTEM}`,
            )
          ).rows,
      )
      t.same(seen, [], `information_schema.tables as ${kind}`)
    }
    // Every relation of every non-system schema (auth and platform included), checked by the admin.
    const r = await adminQuery<{ role: string; rel: string }>(
      `
      SELECT r.role, c.oid::regclass::text AS rel
        FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace,
             unnest($1::text[]) AS r(role)
       WHERE n.nspname NOT IN ${SYSTEM} AND c.relkind IN ('r', 'p', 'v', 'm', 'f')
         AND has_table_privilege(r.role, c.oid, 'SELECT, INSERT, UPDATE, DELETE, TRUNCATE, REFERENCES, TRIGGER')`,
      [[a.roles.anon, a.roles.auth]],
      a.database,
    )
    t.same(r.rows, [], 'has_table_privilege over all schemas')
    const tables = await adminQuery(
      `SELECT count(*)::int AS n FROM pg_tables WHERE schemaname = 'auth'`,
      [],
      a.database,
    )
    t.ok(tables.rows[0].n >= 7, 'while auth holds the GoTrue tables')
  })

  await t.test("platform.role() returns this database's roles, named after the tenant id", async (t) => {
    const rows = await withClient(
      a.ownerUrl,
      async (c) =>
        (
          await c.query(
            "SELECT platform.role('anon') AS anon, platform.role('auth') AS auth, platform.role('svc') AS svc",
          )
        ).rows[0],
    )
    t.same(rows, { anon: a.roles.anon, auth: a.roles.auth, svc: a.roles.svc })
    for (const name of Object.values(rows) as string[]) t.ok(name.includes(idA), `${name} contains ${idA}`)
    t.same(a.file.roles, rows, 'the tenant file names the same roles')
    const asAnon = await asRole(
      restA,
      a.roles.anon,
      async (c) => (await c.query("SELECT platform.role('svc') AS r")).rows[0].r,
    )
    t.equal(asAnon, a.roles.svc, 'request roles may call it too')
    for (const bad of ['owner', 'rest', 'ANON', '', a.roles.anon]) {
      const err = await rejection(withClient(a.ownerUrl, (c) => c.query('SELECT platform.role($1)', [bad])))
      t.equal(err.code, '22023', `kind ${JSON.stringify(bad)} is refused with 22023`)
      t.match(err.message, /unknown role kind/)
    }
  })

  await t.test('a grant through platform.grant opens the table to that role', async (t) => {
    await withClient(a.ownerUrl, async (c) => {
      await c.query('CREATE TABLE public.notes (id int PRIMARY KEY, body text)')
      await c.query("INSERT INTO public.notes VALUES (1, 'hello')")
    })
    const denied = await rejection(asRole(restA, a.roles.anon, (c) => c.query('SELECT * FROM public.notes')))
    t.equal(denied.code, '42501', 'no grant yet: permission denied')
    const stmt = await withClient(
      a.ownerUrl,
      async (c) => (await c.query("SELECT platform.grant('select', 'public.notes', 'anon') AS s")).rows[0].s,
    )
    t.equal(stmt, `GRANT SELECT ON TABLE public.notes TO ${a.roles.anon}`)
    for (const kind of ['anon', 'auth'] as const) {
      const rows = await asRole(
        restA,
        a.roles[kind],
        async (c) => (await c.query('SELECT id, body FROM public.notes')).rows,
      )
      t.same(rows, [{ id: 1, body: 'hello' }], `readable as ${kind} (auth inherits anon)`)
    }
    const write = await rejection(
      asRole(restA, a.roles.anon, (c) => c.query("INSERT INTO public.notes VALUES (2, 'x')")),
    )
    t.equal(write.code, '42501', 'only the granted privilege')
    const svc = await asRole(
      restA,
      a.roles.svc,
      async (c) => (await c.query('SELECT count(*)::int AS n FROM public.notes')).rows[0].n,
    )
    t.equal(svc, 1, 'svc reaches new owner tables through default privileges')

    const bad = await rejection(
      withClient(a.ownerUrl, (c) =>
        c.query("SELECT platform.grant('select; drop table public.notes', 'public.notes', 'anon')"),
      ),
    )
    t.equal(bad.code, '22023', 'a privilege list outside the allow-list is refused')
    const many = await withClient(
      a.ownerUrl,
      async (c) => (await c.query("SELECT platform.grant(' insert ,UPDATE,insert', 'notes', 'auth') AS s")).rows[0].s,
    )
    t.equal(many, `GRANT INSERT, UPDATE ON TABLE public.notes TO ${a.roles.auth}`, 'normalised and de-duplicated')

    await adminQuery('CREATE TABLE public.admin_only (x int)', [], a.database)
    const notOwner = await rejection(
      withClient(a.ownerUrl, (c) => c.query("SELECT platform.grant('select', 'public.admin_only', 'anon')")),
    )
    t.equal(notOwner.code, '42501', 'a table the owner does not own is refused, not silently skipped')
  })

  await t.test("a grant to another tenant's role opens nothing", async (t) => {
    await withClient(a.ownerUrl, (c) => c.query('CREATE TABLE public.secrets (v text)'))
    await withClient(a.ownerUrl, (c) => c.query("INSERT INTO public.secrets VALUES ('a-only')"))
    const viaHelper = await rejection(
      withClient(a.ownerUrl, (c) =>
        c.query('SELECT platform.grant($1, $2, $3)', ['select', 'public.secrets', b.roles.anon]),
      ),
    )
    t.equal(viaHelper.code, '22023', 'platform.grant takes a kind, never a role name')
    // Granting directly to B's role works as SQL, but B's logins cannot connect to A's
    // database and A's login cannot become B's role.
    await withClient(a.ownerUrl, (c) => c.query(`GRANT SELECT ON public.secrets TO "${b.roles.anon}"`))
    const connect = await rejection(
      withClient(`${restB.replace(/\/[^/?]+(\?|$)/, `/${a.database}$1`)}`, (c) => c.query('SELECT 1')),
    )
    t.equal(connect.code, '42501', "B's engine login cannot connect to A's database")
    const become = await rejection(asRole(restA, b.roles.anon, (c) => c.query('SELECT * FROM public.secrets')))
    t.equal(become.code, '42501', "A's engine login cannot SET ROLE to B's role")
    const stillClosed = await rejection(asRole(restA, a.roles.anon, (c) => c.query('SELECT * FROM public.secrets')))
    t.equal(stillClosed.code, '42501', "A's own anon still sees nothing")
  })

  await t.test("tenant A's engine roles cannot connect to tenant B's database", async (t) => {
    const onB = (url: string) => {
      const u = new URL(url)
      u.pathname = '/' + b.database
      return u.toString()
    }
    for (const [what, url] of [
      ['rest', restA],
      ['authn', a.file.engines!.auth!],
      ['owner', a.ownerUrl],
    ] as const) {
      const err = await rejection(withClient(onB(url), (c) => c.query('SELECT 1')))
      t.equal(err.code, '42501', `A's ${what} login is refused by B's database`)
      t.match(err.message, /permission denied for database/)
    }
    const own = await withClient(restB, async (c) => (await c.query('SELECT current_user AS u')).rows[0].u)
    t.equal(own, b.roles.rest, "while B's own login connects")
  })

  await t.test("pg_roles lists other tenants' roles (the trap), using one fails", async (t) => {
    const listed = await asRole(restA, a.roles.anon, async (c) =>
      (await c.query("SELECT rolname FROM pg_roles WHERE rolname LIKE 't\\_%\\_anon' ORDER BY rolname")).rows.map(
        (r) => r.rolname as string,
      ),
    )
    t.ok(listed.includes(a.roles.anon), "A's role is listed")
    t.ok(listed.includes(b.roles.anon), "and so is B's: a pattern cannot tell them apart")
    for (const kind of ['anon', 'auth', 'svc'] as const) {
      const err = await rejection(asRole(restA, b.roles[kind], (c) => c.query('SELECT 1')))
      t.equal(err.code, '42501', `SET ROLE to B's ${kind} from A's login fails`)
    }
    const other = await rejection(withClient(a.ownerUrl, (c) => c.query(`SET ROLE "${b.roles.svc}"`)))
    t.equal(other.code, '42501', "A's owner cannot become B's svc either")
  })

  await t.test('the engine login reaches request roles by SET ROLE only', async (t) => {
    const rows = await withClient(restA, async (c) => {
      const noInherit = await rejection(c.query('SELECT 1 FROM public.notes'))
      return { code: noInherit.code }
    })
    t.equal(rows.code, '42501', "without SET ROLE the login has none of the roles' privileges")
    const attrs = await adminQuery<{
      rolname: string
      rolcanlogin: boolean
      rolinherit: boolean
      rolbypassrls: boolean
    }>(
      'SELECT rolname, rolcanlogin, rolinherit, rolbypassrls FROM pg_roles WHERE rolname = ANY ($1) ORDER BY rolname',
      [Object.values(a.roles)],
    )
    const by = Object.fromEntries(attrs.rows.map((r) => [r.rolname, r]))
    t.equal(by[a.roles.rest].rolcanlogin && !by[a.roles.rest].rolinherit, true, 'rest: LOGIN NOINHERIT')
    t.equal(by[a.roles.svc].rolbypassrls, true, 'svc: BYPASSRLS')
    t.equal(
      by[a.roles.anon].rolcanlogin || by[a.roles.auth].rolcanlogin || by[a.roles.svc].rolcanlogin,
      false,
      'request roles: NOLOGIN',
    )
    const members = await adminQuery<{ role: string; member: string }>(
      `
      SELECT r.rolname AS role, m.rolname AS member FROM pg_auth_members am
        JOIN pg_roles r ON r.oid = am.roleid JOIN pg_roles m ON m.oid = am.member
       WHERE m.rolname = ANY ($1) ORDER BY 2, 1`,
      [Object.values(a.roles)],
    )
    t.same(
      members.rows,
      [
        { role: 'anon', member: a.roles.anon },
        { role: 'authenticated', member: a.roles.auth },
        { role: 'service_role', member: a.roles.svc },
        { role: a.roles.anon, member: a.roles.auth },
        { role: a.roles.anon, member: a.roles.rest },
        { role: a.roles.auth, member: a.roles.rest },
        { role: a.roles.svc, member: a.roles.rest },
        // The slots reserved_connections keeps (docs/security.md "The tenant boundary").
        { role: 'pg_use_reserved_connections', member: a.roles.authn },
        { role: 'pg_use_reserved_connections', member: a.roles.rest },
      ].sort((x, y) => x.member.localeCompare(y.member) || x.role.localeCompare(y.role)),
      'memberships as designed',
    )
  })
})

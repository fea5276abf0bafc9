// A Supabase project moves over as written (docs/supabase.md, "Moving a Supabase project"):
// `gatehouse db push` applies its migrations as the database's owner, each file in one
// transaction, recorded in supabase_migrations.schema_migrations as the Supabase CLI records
// them; the owner reads, writes and triggers on the auth tables as Supabase's `postgres` does;
// `postgres` in a migration means the owner; Storage and Realtime statements are skipped.
// supabase-js through the gateway and real engines (test/helpers/panel-stack.ts); the projects
// under test/fixtures/supabase-projects are written for these tests in Supabase apps' style.
import t from 'tap'
import { mkdtempSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { createRequire } from 'node:module'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { decodeJwt } from 'jose'
import pg from 'pg'
import { spawnSync } from 'node:child_process'
import { pushMigrations } from '../../src/platform/db-push.js'
import { resetDatabase } from '../../src/platform/db-commands.js'
import { adminUrl } from '../helpers/db.js'
import { startStack, type Stack, type StackTenant } from '../helpers/panel-stack.js'

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..')
const PROJECTS = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../fixtures/supabase-projects')
const migrations = (project: string): string => path.join(PROJECTS, project, 'supabase/migrations')

let stack: Stack

t.before(async () => {
  stack = await startStack(t)
})

async function push(x: StackTenant, dir: string, o: { seed?: string; dryRun?: boolean } = {}) {
  const lines: string[] = []
  const applied = await pushMigrations({ url: x.ownerUrl, dir, out: (l) => lines.push(l), ...o })
  return { applied, lines }
}

const email = (label: string): string => `${label}-${Math.random().toString(36).slice(2, 10)}@example.com`

t.test('the profile-on-sign-up project: trigger on auth.users, Storage and Realtime skipped', async (t) => {
  const x = await stack.addTenant()
  const { applied, lines } = await push(x, migrations('profiles'))
  t.same(applied, ['20240301090000_profiles.sql', '20240301093000_realtime.sql'])
  t.equal(lines.filter((l) => l.includes('Storage is not offered')).length, 3, 'the bucket and two policies')
  t.ok(lines.some((l) => /Realtime is not offered/.test(l)))
  t.ok(
    lines.some((l) => /already runs in one transaction/.test(l)),
    'begin; ... commit; inside the file',
  )

  const history = await stack.owner<{ version: string; name: string; n: number }>(
    x,
    'SELECT version, name, cardinality(statements) AS n FROM supabase_migrations.schema_migrations ORDER BY version',
  )
  t.same(history.rows, [
    { version: '20240301090000', name: 'profiles', n: 10 },
    { version: '20240301093000', name: 'realtime', n: 7 },
  ])

  const address = email('ada')
  const signUp = await stack.supabase(x).auth.signUp({
    email: address,
    password: 'correct horse battery',
    options: { data: { handle: 'ada', display: 'Ada' } },
  })
  t.equal(signUp.error, null)
  const id = signUp.data.user!.id
  const row = await stack.supabase(x).from('members').select('id, handle, display')
  t.same(row.data, [{ id, handle: 'ada', display: 'Ada' }], 'the trigger wrote the profile row')
  const count = await stack.supabase(x).rpc('member_count')
  t.equal(count.data, 1, 'a SECURITY DEFINER function of the owner joins auth.users')

  const again = await push(x, migrations('profiles'))
  t.same(again.applied, [])
  t.ok(again.lines.includes('Remote database is up to date.'))
})

t.test('a dumped schema: postgres means the owner, preinstalled extensions, a seed that signs in', async (t) => {
  const x = await stack.addTenant()
  const dir = migrations('dump')
  const { applied, lines } = await push(x, dir, { seed: path.join(dir, '../seed.sql') })
  t.same(applied, ['20240410120000_remote_schema.sql'])
  t.ok(lines.some((l) => /extension pg_graphql \(preinstalled by Supabase\) is not offered here/.test(l)))
  t.ok(lines.some((l) => /extension pgcrypto is installed already/.test(l)))
  t.ok(lines.some((l) => /extension uuid-ossp is installed already/.test(l)))

  const owner = await stack.owner<{ owner: string; me: string }>(
    x,
    "SELECT tableowner AS owner, current_user AS me FROM pg_tables WHERE schemaname = 'public' AND tablename = 'tasks'",
  )
  t.equal(owner.rows[0]!.owner, owner.rows[0]!.me, 'OWNER TO "postgres" made the owner the owner')
  const defaults = await stack.owner<{ n: number }>(
    x,
    'SELECT count(*)::int AS n FROM pg_default_acl WHERE defaclrole = current_user::regrole',
  )
  t.ok(defaults.rows[0]!.n >= 2, 'ALTER DEFAULT PRIVILEGES FOR ROLE "postgres" is the owner\'s')

  const signIn = await stack
    .supabase(x)
    .auth.signInWithPassword({ email: 'ada@example.com', password: 'lovelace-1815' })
  t.equal(signIn.error, null, 'a user the seed inserted with crypt() signs in')
  const tasks = await stack.supabase(x, 'public', signIn.data.session!.access_token).from('tasks').select('title')
  t.same(tasks.data, [{ title: 'analytical engine notes' }], 'and reads their own rows under RLS')
  const id = await stack.owner<{ id: string }>(x, 'SELECT extensions.uuid_generate_v4()::text AS id')
  t.match(id.rows[0]!.id, /^[0-9a-f-]{36}$/, 'uuid_generate_v4() is there')
})

t.test('a failing file is rolled back and named with its statement and line', async (t) => {
  const x = await stack.addTenant()
  const dir = mkdtempSync(path.join(os.tmpdir(), 'gatehouse-push-'))
  writeFileSync(path.join(dir, '20240101000000_ok.sql'), 'create table public.kept (id int);\n')
  writeFileSync(
    path.join(dir, '20240102000000_broken.sql'),
    'create table public.half (id int);\n\n-- a typo\ninsert into public.half\n  values (1, 2, 3);\n',
  )
  const lines: string[] = []
  const err = await pushMigrations({ url: x.ownerUrl, dir, out: (l) => lines.push(l) }).then(
    () => null,
    (e: Error & { code?: string }) => e,
  )
  t.match(err, { code: 'db_push_failed' })
  t.match(
    err!.message,
    /20240102000000_broken\.sql was rolled back: line 5: INSERT has more expressions than target columns \(SQLSTATE 42601\)/,
  )
  t.match(err!.message, /at statement: insert into public\.half/)
  const left = await stack.owner<{ half: string | null; kept: string | null; v: string[] }>(
    x,
    `SELECT to_regclass('public.half')::text AS half, to_regclass('public.kept')::text AS kept,
            ARRAY(SELECT version FROM supabase_migrations.schema_migrations ORDER BY 1) AS v`,
  )
  t.same(
    left.rows[0],
    { half: null, kept: 'kept', v: ['20240101000000'] },
    'the first file stays, the second left nothing',
  )
})

t.test('a dry run lists the pending files and changes nothing', async (t) => {
  const x = await stack.addTenant()
  const { applied, lines } = await push(x, migrations('profiles'), { dryRun: true })
  t.same(applied, [])
  t.ok(lines.includes(' • 20240301090000_profiles.sql'))
  const r = await stack.owner<{ t: string | null }>(x, "SELECT to_regclass('public.members')::text AS t")
  t.equal(r.rows[0]!.t, null)
})

t.test('the owner reads and writes the auth tables; another database owner cannot', async (t) => {
  const x = await stack.addTenant()
  const other = await stack.addTenant()
  await stack.supabase(x).auth.signUp({ email: email('own'), password: 'correct horse battery' })
  const r = await stack.owner<{ n: number }>(x, 'SELECT count(*)::int AS n FROM auth.users')
  t.equal(r.rows[0]!.n, 1, 'RLS on auth.users lets the owner through')
  await stack.owner(x, 'UPDATE auth.users SET raw_app_meta_data = raw_app_meta_data || \'{"plan":"pro"}\'')
  // As a seed's helper function does it (a SECURITY DEFINER function of the owner): id and email only.
  await stack.owner(x, "insert into auth.users (id, email) values (gen_random_uuid(), 'seeded@example.com')")
  const n = await stack.owner<{ n: number }>(x, 'SELECT count(*)::int AS n FROM auth.users')
  t.equal(n.rows[0]!.n, 2)
  const u = new URL(other.ownerUrl)
  u.pathname = `/${x.database}`
  const c = new pg.Client({ connectionString: u.toString() })
  c.on('error', () => {})
  const refused = await c.connect().then(
    () => null,
    (e: Error) => e,
  )
  t.match(refused?.message, /permission denied for database|not permitted to log in|does not exist/)
  await c.end().catch(() => {})
})

t.test('a trigger on auth.users must be SECURITY DEFINER; one that raises fails sign-up as GoTrue does', async (t) => {
  const x = await stack.addTenant()
  await stack.owner(
    x,
    `create function public.invoker_hook() returns trigger language plpgsql as $$ begin return new; end $$`,
  )
  const refused = await stack
    .owner(x, 'create trigger t after insert on auth.users for each row execute function public.invoker_hook()')
    .then(
      () => null,
      (e: Error & { code?: string; hint?: string }) => e,
    )
  t.match(refused, { code: '42501', message: /not SECURITY DEFINER/, hint: /SECURITY DEFINER/ })
  await stack.owner(
    x,
    `create function public.refuse() returns trigger language plpgsql security definer set search_path = '' as $$
     begin raise exception 'no sign-ups today'; end $$;
     create trigger refuse before insert on auth.users for each row execute function public.refuse()`,
  )
  const altered = await stack.owner(x, 'alter function public.refuse() security invoker').then(
    () => null,
    (e: Error) => e,
  )
  t.match(altered?.message, /not SECURITY DEFINER/, 'nor can the function be made an invoker afterwards')

  const address = email('refused')
  const res = await fetch(`${stack.gatewayUrl}/${x.database}/auth/v1/signup`, {
    method: 'POST',
    headers: { apikey: x.file.keys.public, 'content-type': 'application/json' },
    body: JSON.stringify({ email: address, password: 'correct horse battery' }),
  })
  t.equal(res.status, 500)
  t.match(await res.json(), { code: 500, error_code: 'unexpected_failure', msg: 'Database error saving new user' })
  const left = await stack.owner<{ n: number }>(x, 'SELECT count(*)::int AS n FROM auth.users WHERE email = $1', [
    address,
  ])
  t.equal(left.rows[0]!.n, 0, 'nothing of the user is left')
})

t.test('uuid-ossp is in extensions, and the owner may ask for it again', async (t) => {
  const x = await stack.addTenant()
  await stack.owner(x, 'create extension if not exists "uuid-ossp" with schema extensions')
  const r = await stack.owner<{ n: number }>(x, 'SELECT length(extensions.uuid_generate_v4()::text) AS n')
  t.equal(r.rows[0]!.n, 36)
})

t.test("Supabase's access token hook SQL: grants and a policy to supabase_auth_admin", async (t) => {
  const x = await stack.addTenant({
    auth: { hooks: { custom_access_token: { uri: 'pg-functions://postgres/public/custom_access_token_hook' } } },
  })
  const { applied } = await push(x, migrations('hook'))
  t.same(applied, ['20240501080000_roles.sql', '20240501081000_access_token_hook.sql'])
  const editor = await stack.supabase(x).auth.signUp({ email: email('editor'), password: 'correct horse battery' })
  t.equal(editor.error, null)
  await stack.owner(x, "insert into public.user_roles values ($1, 'editor')", [editor.data.user!.id])
  const signIn = await stack
    .supabase(x)
    .auth.signInWithPassword({ email: editor.data.user!.email!, password: 'correct horse battery' })
  t.equal(signIn.error, null)
  t.equal(
    decodeJwt(signIn.data.session!.access_token).user_role,
    'editor',
    'the hook read the row its policy lets through',
  )
  const nobody = await stack.supabase(x).auth.signUp({ email: email('nobody'), password: 'correct horse battery' })
  t.equal(decodeJwt(nobody.data.session!.access_token).user_role, null)
  const anon = await stack.supabase(x).from('user_roles').select('*')
  t.match(anon.error, { code: 'unknown_table' }, 'revoked from anon and authenticated as the file says')
})

t.test('db reset starts the database over from its migrations and seed', async (t) => {
  const x = await stack.addTenant()
  const dir = migrations('dump')
  await push(x, dir, { seed: path.join(dir, '../seed.sql') })
  await stack.owner(
    x,
    "insert into public.tasks (owner_id, title) values ('a1d5c0de-0000-4000-8000-000000000001', 'extra')",
  )
  await stack.owner(x, 'create table public.scratch (id int)')
  const lines: string[] = []
  const applied = await resetDatabase({ adminUrl: adminUrl(), file: x.file, dir, out: (l) => lines.push(l) })
  t.same(applied, ['20240410120000_remote_schema.sql'])
  t.ok(lines.includes('Seeding data from seed.sql...'))
  const r = await stack.owner<{ titles: string[]; scratch: string | null }>(
    x,
    `SELECT ARRAY(SELECT title FROM public.tasks ORDER BY title) AS titles, to_regclass('public.scratch')::text AS scratch`,
  )
  t.same(r.rows[0], { titles: ['analytical engine notes', 'compiler'], scratch: null })
  const signIn = await stack
    .supabase(x)
    .auth.signInWithPassword({ email: 'grace@example.com', password: 'hopper-1906' })
  t.equal(signIn.error, null, 'the seeded users sign in again')
})

t.test('db reset is refused outside the development stack', async (t) => {
  const tsx = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href
  const r = spawnSync(process.execPath, ['--import', tsx, path.join(ROOT, 'src/cli.ts'), 'db', 'reset', 'demo'], {
    cwd: os.tmpdir(),
    encoding: 'utf8',
  })
  t.equal(r.status, 1)
  t.match(r.stderr, /db reset starts a database over and is for the development stack only/)
})

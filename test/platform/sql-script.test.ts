// How `gatehouse db push` reads a migration file (src/platform/sql-script.ts): statements split
// as the Supabase CLI splits them, `postgres` named as a role meaning the owner, and the
// statements skipped because Gatehouse does not offer their service.
import t from 'tap'
import {
  extensionOf,
  isTransactionControl,
  rewritePostgresRole,
  splitStatements,
  unofferedService,
} from '../../src/platform/sql-script.js'

t.test('splits at top-level semicolons only, with the line each statement starts on', async (t) => {
  const sql = [
    '-- header; not a statement',
    "create table a (t text default 'x;y');",
    '/* a /* nested */ comment; */',
    'create function f() returns int language plpgsql as $body$ begin return 1; end $body$;',
    "select E'it\\'s; fine', \"odd;name\" from a;",
    'create function g() returns int language sql begin atomic select 1; select case when true then 2 end; end;',
    '  ',
  ].join('\n')
  const s = splitStatements(sql)
  t.same(
    s.map((x) => x.line),
    [1, 3, 5, 6],
  )
  t.same(
    s.map((x) => x.at),
    [2, 4, 5, 6],
    'the line of the first word after the comments',
  )
  t.match(s[0]!.text, /^-- header; not a statement\ncreate table a \(t text default 'x;y'\)$/)
  t.match(s[1]!.text, /^\/\* a \/\* nested \*\/ comment; \*\/\ncreate function f/)
  t.match(s[1]!.text, /end \$body\$$/)
  t.match(s[3]!.text, /select case when true then 2 end; end$/)
  t.same(splitStatements('-- only a comment\n;;\n'), [])
})

t.test('`postgres` where a role goes means the owner; elsewhere it stays', async (t) => {
  const o = 't_0123456789_owner'
  t.equal(
    rewritePostgresRole('ALTER TABLE "public"."x" OWNER TO "postgres"', o),
    `ALTER TABLE "public"."x" OWNER TO "${o}"`,
  )
  t.equal(
    rewritePostgresRole(
      'ALTER DEFAULT PRIVILEGES FOR ROLE postgres IN SCHEMA public GRANT ALL ON TABLES TO anon, postgres',
      o,
    ),
    `ALTER DEFAULT PRIVILEGES FOR ROLE "${o}" IN SCHEMA public GRANT ALL ON TABLES TO anon, "${o}"`,
  )
  t.equal(
    rewritePostgresRole('grant all on table x to anon, authenticated, "postgres", service_role', o),
    `grant all on table x to anon, authenticated, "${o}", service_role`,
  )
  t.equal(rewritePostgresRole('revoke all on x from postgres', o), `revoke all on x from "${o}"`)
  t.equal(rewritePostgresRole('create schema s authorization postgres', o), `create schema s authorization "${o}"`)
  t.equal(
    rewritePostgresRole('create policy p on x to postgres using (true)', o),
    `create policy p on x to "${o}" using (true)`,
  )
  for (const kept of [
    'select postgres from t',
    'create table t (postgres text)',
    'grant select on x to anon -- postgres',
    "comment on table x is 'owned to postgres'",
    'grant select on postgres to anon',
  ])
    t.equal(rewritePostgresRole(kept, o), kept, kept)
})

t.test('Storage and Realtime statements are named as such', async (t) => {
  t.match(unofferedService("insert into storage.buckets (id, name) values ('a', 'a')"), /Storage/)
  t.match(unofferedService('create policy "p" on "storage"."objects" for select using (true)'), /Storage/)
  t.match(unofferedService('alter publication supabase_realtime add table public.x'), /Realtime/)
  t.match(unofferedService('select realtime.send(1)'), /Realtime/)
  t.equal(unofferedService('create table public.storage (id int)'), null)
  t.equal(unofferedService("select 'storage.buckets'"), null)
})

t.test('extensions and transaction control', async (t) => {
  t.equal(extensionOf('CREATE EXTENSION IF NOT EXISTS "uuid-ossp" WITH SCHEMA "extensions"'), 'uuid-ossp')
  t.equal(extensionOf('create extension pg_graphql'), 'pg_graphql')
  t.equal(extensionOf('COMMENT ON EXTENSION "pgjwt" IS \'x\''), 'pgjwt')
  t.equal(extensionOf('create table e (id int)'), null)
  for (const s of ['begin', 'BEGIN TRANSACTION', 'commit', 'end', 'start transaction']) t.ok(isTransactionControl(s), s)
  for (const s of ['begin atomic select 1; end', 'select 1', 'end_date']) t.notOk(isTransactionControl(s), s)
})

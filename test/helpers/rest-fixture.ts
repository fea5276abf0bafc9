// REST test fixture (not a test file): a provisioned tenant with an authors / books /
// tags / book_tags schema (RLS on notes with auth.uid()), created through the tenant's
// owner connection with grants through platform.grant, and a REST engine serving it.
import type { FastifyInstance } from 'fastify'
import { signHS256 } from '../../src/shared/index.js'
import { buildRestEngine } from '../../src/rest/index.js'
import type { Config } from '../../src/config/index.js'
import type { Tenant } from '../../src/tenants/index.js'
import { createTestTenant, withClient, type TestTenant } from './tenants.js'

interface Teardown {
  teardown(fn: () => unknown): void
}

export const ALICE = '11111111-1111-1111-1111-111111111111'
export const BOB = '22222222-2222-2222-2222-222222222222'

/** The fixture schema, run as the tenant owner. */
export const FIXTURE_SQL = `
CREATE TABLE authors (
  id int PRIMARY KEY,
  name text NOT NULL,
  country text,
  profile jsonb,
  born date
);
CREATE TABLE author_profiles (
  author_id int PRIMARY KEY REFERENCES authors (id),
  website text
);
CREATE TABLE books (
  id int PRIMARY KEY,
  title text NOT NULL,
  author_id int REFERENCES authors (id),
  year int,
  price numeric(6,2),
  tags text[],
  meta jsonb,
  during int4range,
  body text
);
CREATE TABLE tags (
  id int PRIMARY KEY,
  name text UNIQUE NOT NULL
);
CREATE TABLE book_tags (
  book_id int REFERENCES books (id),
  tag_id int REFERENCES tags (id),
  PRIMARY KEY (book_id, tag_id)
);
CREATE TABLE employees (
  id int PRIMARY KEY,
  name text,
  manager_id int REFERENCES employees (id)
);
CREATE TABLE people (id int PRIMARY KEY, name text);
CREATE TABLE messages (
  id int PRIMARY KEY,
  body text,
  sender_id int CONSTRAINT messages_sender_fkey REFERENCES people (id),
  receiver_id int CONSTRAINT messages_receiver_fkey REFERENCES people (id)
);
CREATE TABLE notes (
  id int PRIMARY KEY,
  owner_id uuid NOT NULL,
  body text
);
ALTER TABLE notes ENABLE ROW LEVEL SECURITY;
CREATE POLICY notes_own ON notes FOR SELECT USING (owner_id = auth.uid());
CREATE TABLE secrets (id int PRIMARY KEY, value text);
CREATE TABLE insert_only (id int PRIMARY KEY);
CREATE TABLE "Odd ""Name"" table" ("weird col" int, "x""y" text);
CREATE VIEW book_list AS SELECT b.id, b.title, b.author_id, b.year FROM books b;

INSERT INTO authors VALUES
  (1, 'Ursula Le Guin', 'US', '{"tags": ["sf", "fantasy"], "stats": {"books": 23}, "alias": "UKL"}', '1929-10-21'),
  (2, 'Stanislaw Lem', 'PL', '{"tags": ["sf"], "stats": {"books": 17}}', '1921-09-12'),
  (3, 'Octavia Butler', 'US', null, '1947-06-22'),
  (4, 'Nobody', null, null, null);
INSERT INTO author_profiles VALUES (1, 'https://ursula.example'), (2, 'https://lem.example');
INSERT INTO books VALUES
  (1, 'A Wizard of Earthsea', 1, 1968, 9.99, '{fantasy,classic}', '{"pages": 183, "isbn": "0-395"}', '[1960,1970)', 'a young wizard named Ged'),
  (2, 'The Left Hand of Darkness', 1, 1969, 12.50, '{sf,classic}', '{"pages": 286}', '[1960,1970)', 'an envoy on the planet Gethen'),
  (3, 'The Dispossessed', 1, 1974, 11.00, '{sf}', '{"pages": 387}', '[1970,1980)', 'an anarchist physicist'),
  (4, 'Solaris', 2, 1961, 8.75, '{sf,classic}', '{"pages": 204}', '[1960,1970)', 'a sentient ocean planet'),
  (5, 'The Cyberiad', 2, 1965, null, '{sf,humor}', null, '[1960,1970)', 'robot constructors'),
  (6, 'Kindred', 3, 1979, 10.00, '{}', '{"pages": 264}', '[1970,1980)', 'a woman travels in time'),
  (7, 'Anonymous Pamphlet', null, null, null, null, null, null, null);
INSERT INTO tags VALUES (1, 'classic'), (2, 'award'), (3, 'unused');
INSERT INTO book_tags VALUES (1, 1), (2, 1), (2, 2), (4, 1), (6, 2);
INSERT INTO employees VALUES (1, 'Boss', null), (2, 'Mid', 1), (3, 'Low', 2);
INSERT INTO people VALUES (1, 'Ann'), (2, 'Ben');
INSERT INTO messages VALUES (1, 'hi', 1, 2), (2, 'yo', 2, 1);
INSERT INTO notes VALUES (1, '${ALICE}', 'alice one'), (2, '${ALICE}', 'alice two'), (3, '${BOB}', 'bob one');
INSERT INTO secrets VALUES (1, 'hidden');

SELECT platform.grant('SELECT', 'authors', 'anon');
SELECT platform.grant('SELECT', 'author_profiles', 'anon');
SELECT platform.grant('SELECT', 'books', 'anon');
SELECT platform.grant('SELECT', 'tags', 'anon');
SELECT platform.grant('SELECT', 'book_tags', 'anon');
SELECT platform.grant('SELECT', 'employees', 'anon');
SELECT platform.grant('SELECT', 'people', 'anon');
SELECT platform.grant('SELECT', 'messages', 'anon');
SELECT platform.grant('SELECT', 'notes', 'anon');
SELECT platform.grant('SELECT', 'book_list', 'anon');
SELECT platform.grant('SELECT', '"Odd ""Name"" table"', 'anon');
SELECT platform.grant('INSERT', 'insert_only', 'anon');
`

export interface RestFixture {
  t: TestTenant
  tenant: Tenant
  app: FastifyInstance
  database: string
  /** An upstream token as the gateway would sign it. */
  token(
    kind: 'anon' | 'auth' | 'svc',
    claims?: Record<string, unknown>,
    opts?: { expiresIn?: number; secret?: string },
  ): Promise<string>
  /** GET (or another method) on `/<database><path>` through fastify inject. */
  get(path: string, headers?: Record<string, string>, method?: 'GET' | 'HEAD'): Promise<InjectResult>
  ownerSql(sql: string, values?: unknown[]): Promise<Array<Record<string, unknown>>>
}

export interface InjectResult {
  status: number
  headers: Record<string, string | string[] | number | undefined>
  body: string
  json(): any
}

export const TEST_CONFIG: Pick<Config, 'rest'> = {
  rest: {
    host: '127.0.0.1',
    port: 0,
    admin_host: '127.0.0.1',
    admin_port: 0,
    pool_budget: 8,
    pool_cluster_share: 0.5,
    pool_per_tenant: 4,
    pool_idle_ms: 60_000,
    pool_max_tenants: 1000,
    max_body_bytes: 1_048_576,
    max_json_depth: 100,
    reconnect_backoff_ms: 1_000,
    reconnect_backoff_max_ms: 32_000,
    statement_timeout_ms: 10_000,
  },
}

export interface FixtureOptions {
  rest?: Partial<TestTenant['file']['rest']>
  config?: Partial<Config['rest']>
  /** Extra SQL run as the owner after the fixture. */
  sql?: string
  poolAcquireTimeoutMs?: number
}

export async function createRestFixture(tap: Teardown, opts: FixtureOptions = {}): Promise<RestFixture> {
  const t = await createTestTenant(tap, { rest: opts.rest })
  await withClient(t.ownerUrl, async (c) => {
    await c.query(FIXTURE_SQL)
    if (opts.sql) await c.query(opts.sql)
  })
  const tenants = new Map([[t.database, t.tenant]])
  const app = buildRestEngine({
    config: { rest: { ...TEST_CONFIG.rest, ...opts.config } },
    tenants: { get: async (db) => tenants.get(db) ?? null },
    poolAcquireTimeoutMs: opts.poolAcquireTimeoutMs,
  })
  tap.teardown(() => app.close())
  const fx: RestFixture = {
    t,
    tenant: t.tenant,
    app,
    database: t.database,
    async token(kind, claims = {}, o = {}) {
      return signHS256(
        { role: t.tenant.roles[kind], ...claims },
        {
          secret: o.secret ?? t.file.jwt.upstream_secret,
          expiresInSeconds: o.expiresIn ?? 300,
        },
      )
    },
    async get(path, headers = {}, method = 'GET') {
      const res = await app.inject({ method, url: `/${t.database}${path}`, headers })
      return {
        status: res.statusCode,
        headers: res.headers,
        body: res.body,
        json: () => JSON.parse(res.body),
      }
    },
    ownerSql: (sql, values = []) => withClient(t.ownerUrl, async (c) => (await c.query(sql, values)).rows),
  }
  return fx
}

export { eventually } from './eventually.js'

// The scale bench's Postgres cluster: a persistent embedded cluster in a directory kept
// between runs (BENCH_TENANTS_DIR, default .gatehouse/bench-tenants), holding tenant
// databases made through the real provisioning path (provisionTenant: database, six roles,
// CONNECT grants, platform and auth schemas by migration) plus a small application schema
// per tenant. Made once: a later run starts the same cluster and provisions only what is
// missing (a larger BENCH_TENANTS), and migrates the kept databases when migrations were
// added since. state.json keeps the tenant files (with their plaintext keys and passwords:
// the directory is 0700) and how long each tenant took to provision.
import { randomBytes } from 'node:crypto'
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs'
import net from 'node:net'
import path from 'node:path'
import pg from 'pg'
import { startEmbeddedPostgres, type EmbeddedPostgres } from '../../src/dev/index.js'
import {
  dropTenant,
  engineVerifier,
  listMigrations,
  migrateDatabase,
  provisionTenant,
  tenantRoleNames,
  tenantIdOf,
} from '../../src/platform/index.js'
import { parseTenantFile, type TenantFile } from '../../src/tenants/index.js'
import { quoteIdent, quoteLiteral, withDatabase } from '../../src/shared/index.js'

/**
 * Engine logins of kept tenants made before provisioning set their verifiers itself
 * (engineVerifier: few SCRAM iterations) get such a verifier now, as provisioning would.
 */
async function refreshEngineVerifiers(adminUrl: string, tenants: readonly BenchTenant[]): Promise<void> {
  const admin = new pg.Client({ connectionString: adminUrl })
  await admin.connect()
  try {
    const r = await admin.query<{ rolname: string }>(
      `SELECT rolname FROM pg_authid WHERE rolname ~ '^t_[0-9a-f]{10}_(rest|authn)$' AND rolpassword NOT LIKE $1`,
      [`${engineVerifier('x').split(':')[0]}:%`],
    )
    const stale = new Set(r.rows.map((row) => row.rolname))
    for (const t of tenants) {
      for (const url of [t.file.engines?.rest, t.file.engines?.auth]) {
        const u = new URL(url ?? 'postgres://x@localhost')
        const role = decodeURIComponent(u.username)
        if (!stale.has(role)) continue
        const verifier = engineVerifier(decodeURIComponent(u.password))
        await admin.query(`ALTER ROLE ${quoteIdent(role)} PASSWORD ${quoteLiteral(verifier)}`)
      }
    }
  } finally {
    await admin.end()
  }
}

/** The application every bench tenant has: three tables, a foreign key, a view, 50 rows readable by anon. */
export const APP_SCHEMA = `
CREATE TABLE categories (id int PRIMARY KEY, name text NOT NULL UNIQUE);
CREATE TABLE items (
  id int PRIMARY KEY,
  category_id int NOT NULL REFERENCES categories (id),
  name text NOT NULL,
  price numeric(8,2) NOT NULL,
  tags text[] NOT NULL DEFAULT '{}',
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE orders (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  item_id int NOT NULL REFERENCES items (id),
  quantity int NOT NULL CHECK (quantity > 0),
  owner_id uuid DEFAULT auth.uid(),
  created_at timestamptz NOT NULL DEFAULT now()
);
ALTER TABLE orders ENABLE ROW LEVEL SECURITY;
CREATE POLICY own_orders ON orders USING (owner_id = auth.uid());
CREATE VIEW cheap_items AS SELECT id, name, price FROM items WHERE price < 20;
INSERT INTO categories SELECT i, 'category ' || i FROM generate_series(1, 5) i;
INSERT INTO items (id, category_id, name, price) SELECT i, 1 + i % 5, 'item ' || i, (i % 40) + 0.5 FROM generate_series(1, 50) i;
SELECT platform.grant('SELECT', 'categories', 'anon');
SELECT platform.grant('SELECT', 'items', 'anon');
SELECT platform.grant('SELECT', 'cheap_items', 'anon');
SELECT platform.grant('SELECT, INSERT', 'orders', 'auth');
`
/** Bumped when APP_SCHEMA changes: kept tenants of another version are dropped and made again. */
const APP_SCHEMA_VERSION = 1

export interface BenchTenant {
  file: TenantFile
  /** Wall time provisionTenant + the application schema took for this tenant, ms. */
  provisionMs: number
}

interface State {
  appSchema: number
  /** Highest migration version the kept databases are at. */
  migrations: number
  tenants: BenchTenant[]
}

export interface BenchCluster {
  adminUrl: string
  port: number
  /** The first `count` tenants, their URLs pointing at this run's port. */
  tenants: BenchTenant[]
  /** Tenants provisioned by this run (0 when all were kept). */
  provisionedNow: number
  /** Wall time of this run's provisioning, ms. */
  provisionWallMs: number
  /** Databases brought up to date by this run (migrations added since they were made). */
  migratedNow: number
  dir: string
  /** The postmaster's process id (its children are the backends). */
  pid: number | undefined
  stop(): Promise<void>
}

export function tenantName(i: number): string {
  return `bt_${String(i).padStart(5, '0')}`
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer()
    srv.unref()
    srv.on('error', reject)
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as net.AddressInfo
      srv.close(() => resolve(port))
    })
  })
}

function atPort(url: string, port: number): string {
  const u = new URL(url)
  u.port = String(port)
  return u.toString()
}

/** A kept tenant file with its connection URLs moved to this run's port. */
function rebase(file: TenantFile, port: number): TenantFile {
  return {
    ...file,
    postgres: atPort(file.postgres, port),
    engines: {
      ...(file.engines?.rest !== undefined ? { rest: atPort(file.engines.rest, port) } : {}),
      ...(file.engines?.auth !== undefined ? { auth: atPort(file.engines.auth, port) } : {}),
    },
  }
}

function readState(file: string): State {
  if (!existsSync(file)) return { appSchema: APP_SCHEMA_VERSION, migrations: 0, tenants: [] }
  const s = JSON.parse(readFileSync(file, 'utf8')) as State
  return {
    appSchema: s.appSchema,
    migrations: s.migrations ?? 0,
    tenants: s.tenants.map((t) => ({ ...t, file: parseTenantFile(t.file, 'bench state', {}) })),
  }
}

function writeState(file: string, s: State): void {
  const tmp = `${file}.tmp`
  writeFileSync(tmp, JSON.stringify(s) + '\n', { mode: 0o600 })
  renameSync(tmp, file)
}

async function provisionOne(adminUrl: string, i: number): Promise<BenchTenant> {
  const t0 = performance.now()
  const { file, ownerUrl } = await provisionTenant({
    adminUrl,
    database: tenantName(i),
    organization: 'org_bench',
    upstreams: { auth: 'http://127.0.0.1:9/unused', rest: `http://127.0.0.1:9/${tenantName(i)}` },
  })
  const owner = new pg.Client({ connectionString: ownerUrl })
  await owner.connect()
  try {
    await owner.query(APP_SCHEMA)
  } finally {
    await owner.end()
  }
  return { file, provisionMs: Math.round(performance.now() - t0) }
}

/**
 * Starts the kept cluster (initialised on first use) with room for `maxConnections`, and
 * makes sure tenants bt_00000 .. bt_<count-1> exist. `log` hears progress.
 */
export async function openBenchCluster(opts: {
  dir: string
  count: number
  maxConnections: number
  concurrency?: number
  log: (line: string) => void
}): Promise<BenchCluster> {
  mkdirSync(opts.dir, { recursive: true, mode: 0o700 })
  const pwFile = path.join(opts.dir, 'pg-superuser-password')
  if (!existsSync(pwFile)) writeFileSync(pwFile, randomBytes(18).toString('base64url') + '\n', { mode: 0o600 })
  const password = readFileSync(pwFile, 'utf8').trim()
  const port = await freePort()
  const server: EmbeddedPostgres = await startEmbeddedPostgres({
    dir: path.join(opts.dir, 'pg'),
    port,
    persistent: true,
    password,
    initdbFlags: ['--nosync'],
    settings: {
      // Bench data, made again when lost: no durability work competing with the measurements.
      fsync: 'off',
      synchronous_commit: 'off',
      full_page_writes: 'off',
      max_connections: String(opts.maxConnections),
      shared_buffers: process.env.BENCH_PG_SHARED_BUFFERS ?? '256MB',
      // Idle sessions hold little; the default (64 locks per connection) is plenty.
      max_locks_per_transaction: '64',
    },
  })
  const adminUrl = server.url
  const stateFile = path.join(opts.dir, 'state.json')
  try {
    let state = readState(stateFile)
    const admin = new pg.Client({ connectionString: adminUrl })
    await admin.connect()
    const existing = new Set(
      (await admin.query<{ datname: string }>("SELECT datname FROM pg_database WHERE datname LIKE 'bt\\_%'")).rows.map(
        (r) => r.datname,
      ),
    )
    await admin.end()
    if (state.appSchema !== APP_SCHEMA_VERSION) {
      opts.log(`bench tenants: application schema changed, dropping ${state.tenants.length} kept tenants`)
      for (const t of state.tenants) await dropTenant({ adminUrl, database: t.file.database, roles: t.file.roles })
      state = { appSchema: APP_SCHEMA_VERSION, migrations: 0, tenants: [] }
      writeState(stateFile, state)
    }
    // Kept tenants whose database is gone (a cluster made again) are forgotten.
    state.tenants = state.tenants.filter((t) => existing.has(t.file.database))
    const known = new Set(state.tenants.map((t) => t.file.database))
    // A database without a state entry was cut short by an interrupted run: made again.
    for (const name of existing) {
      // (dropTenant finds its roles in the database's platform.roles)
      if (!known.has(name)) await dropTenant({ adminUrl, database: name })
    }

    // Migrations added since the kept databases were made.
    const latest = Math.max(0, ...listMigrations().map((m) => m.version))
    let migratedNow = 0
    if (state.tenants.length > 0 && state.migrations < latest) {
      opts.log(`bench tenants: migrating ${state.tenants.length} kept databases to ${latest}`)
      for (const t of state.tenants) {
        const id = tenantIdOf(t.file.roles.anon)
        await migrateDatabase(
          withDatabase(adminUrl, t.file.database),
          id === null ? {} : { roles: tenantRoleNames(id) },
        )
        migratedNow++
      }
    }
    state.migrations = latest
    writeState(stateFile, state)
    await refreshEngineVerifiers(adminUrl, state.tenants)

    const byName = new Map(state.tenants.map((t) => [t.file.database, t]))
    const missing: number[] = []
    for (let i = 0; i < opts.count; i++) if (!byName.has(tenantName(i))) missing.push(i)
    const t0 = performance.now()
    if (missing.length > 0) {
      opts.log(
        `bench tenants: provisioning ${missing.length} tenant databases (${state.tenants.length} kept in ${opts.dir})`,
      )
      let next = 0
      let done = 0
      const worker = async (): Promise<void> => {
        while (next < missing.length) {
          const i = missing[next++] as number
          const t = await provisionOne(adminUrl, i)
          state.tenants.push(t)
          byName.set(t.file.database, t)
          if (++done % 50 === 0 || done === missing.length) {
            writeState(stateFile, state)
            opts.log(
              `bench tenants: ${done}/${missing.length} provisioned (${Math.round((performance.now() - t0) / done)} ms each)`,
            )
          }
        }
      }
      try {
        await Promise.all(Array.from({ length: Math.max(1, opts.concurrency ?? 2) }, worker))
      } finally {
        writeState(stateFile, state)
      }
    }
    const tenants: BenchTenant[] = []
    for (let i = 0; i < opts.count; i++) {
      const t = byName.get(tenantName(i)) as BenchTenant
      tenants.push({ ...t, file: rebase(t.file, port) })
    }
    return {
      adminUrl,
      port,
      tenants,
      provisionedNow: missing.length,
      provisionWallMs: Math.round(performance.now() - t0),
      migratedNow,
      dir: opts.dir,
      pid: server.pid,
      stop: () => server.stop(),
    }
  } catch (err) {
    await server.stop()
    throw err
  }
}

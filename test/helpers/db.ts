// Per-test-file Postgres databases on the cluster the services wrapper started.
// Not a test file (excluded in .taprc).
import { randomBytes } from 'node:crypto'
import pg from 'pg'
import { quoteIdent, withDatabase } from '../../src/shared/index.js'

export function adminUrl(): string {
  const url = process.env.DATABASE_URL
  if (!url) throw new Error('DATABASE_URL is not set: run the tests through `npm test` (scripts/with-services.mjs)')
  return url
}

export function randomName(prefix = 't'): string {
  return `${prefix}_${randomBytes(5).toString('hex')}`
}

export async function adminQuery<T extends pg.QueryResultRow = pg.QueryResultRow>(
  sql: string,
  values: unknown[] = [],
  database?: string,
): Promise<pg.QueryResult<T>> {
  const client = new pg.Client({ connectionString: database ? withDatabase(adminUrl(), database) : adminUrl() })
  await client.connect()
  try {
    return await client.query<T>(sql, values)
  } finally {
    await client.end()
  }
}

interface Teardown {
  teardown(fn: () => unknown): void
}

/** Creates an empty database dropped when the test ends. Returns its admin URL. */
export async function createTestDatabase(t: Teardown, prefix = 'test'): Promise<{ name: string; url: string }> {
  const name = randomName(prefix)
  await adminQuery(`CREATE DATABASE ${quoteIdent(name)}`)
  t.teardown(async () => {
    await adminQuery(`DROP DATABASE IF EXISTS ${quoteIdent(name)} WITH (FORCE)`).catch(() => {})
  })
  return { name, url: withDatabase(adminUrl(), name) }
}

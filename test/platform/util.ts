// Small helpers of the platform tests: run SQL as a login, or as a request role the way
// the engines do (one transaction, SET LOCAL ROLE, claims via set_config). Not a test file.
import pg from 'pg'
import { quoteIdent } from '../../src/shared/pg.js'

export async function withClient<T> (url: string, fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const c = new pg.Client({ connectionString: url })
  c.on('error', () => {})
  await c.connect()
  try { return await fn(c) } finally { await c.end().catch(() => {}) }
}

/** As the engines do: BEGIN; SET LOCAL ROLE; claims; fn; ROLLBACK (or COMMIT). */
export async function asRole<T> (loginUrl: string, role: string, fn: (c: pg.Client) => Promise<T>,
  claims?: Record<string, unknown>): Promise<T> {
  return withClient(loginUrl, async (c) => {
    await c.query('BEGIN')
    try {
      await c.query(`SET LOCAL ROLE ${quoteIdent(role)}`)
      if (claims) await c.query("SELECT set_config('request.jwt.claims', $1, true)", [JSON.stringify(claims)])
      return await fn(c)
    } finally {
      await c.query('ROLLBACK').catch(() => {})
    }
  })
}

/** The error a promise rejects with (fails when it resolves). */
export async function rejection (p: Promise<unknown>): Promise<Error & { code?: string }> {
  try {
    await p
  } catch (err) {
    return err as Error & { code?: string }
  }
  throw new Error('expected a rejection')
}

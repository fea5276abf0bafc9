// Small Postgres helpers shared by the parts: identifier quoting, connection URLs and a
// transaction wrapper (pools: tenant-pools.ts). Values always travel as parameters.
import pg from 'pg'

/** Quotes an identifier: wrap in double quotes, double any quote inside. */
export function quoteIdent(name: string): string {
  if (typeof name !== 'string' || name.length === 0 || name.includes('\u0000')) {
    throw new TypeError('invalid SQL identifier')
  }
  return '"' + name.replace(/"/g, '""') + '"'
}

/** An identifier as Postgres prints it: bare when it is a plain lower-case name, else quoted. */
export function displayIdent(name: string): string {
  return /^[a-z_][a-z0-9_$]*$/.test(name) ? name : '"' + name.replace(/"/g, '""') + '"'
}

/** `schema.name` as Postgres prints it (a regclass literal body: `public.todos`). */
export function displayQualified(schema: string, name: string): string {
  return `${displayIdent(schema)}.${displayIdent(name)}`
}

/** Quotes a string literal (only for statements that cannot take parameters, e.g. CREATE ROLE ... PASSWORD). */
export function quoteLiteral(value: string): string {
  if (value.includes('\u0000')) throw new TypeError('invalid SQL literal')
  return "'" + value.replace(/'/g, "''") + "'"
}

export type Queryable = Pick<pg.Pool | pg.PoolClient | pg.Client, 'query'>

/**
 * Runs fn in one transaction on `client` (BEGIN, or `begin` such as 'BEGIN ISOLATION LEVEL
 * SERIALIZABLE'); COMMIT when it resolves, ROLLBACK when it throws. The one transaction helper:
 * withTransaction runs it on a client of a pool.
 */
export async function inTransaction<C extends Queryable, T>(
  client: C,
  fn: (client: C) => Promise<T>,
  begin = 'BEGIN',
): Promise<T> {
  await client.query(begin)
  try {
    const out = await fn(client)
    await client.query('COMMIT')
    return out
  } catch (err) {
    await client.query('ROLLBACK').catch(() => {})
    throw err
  }
}

/** Runs fn in one transaction on a pooled client (inTransaction); rolls back on error. */
export async function withTransaction<T>(
  pool: Pick<pg.Pool, 'connect'>,
  fn: (client: pg.PoolClient) => Promise<T>,
  begin = 'BEGIN',
): Promise<T> {
  const client = await pool.connect()
  try {
    return await inTransaction(client, fn, begin)
  } finally {
    client.release()
  }
}

/** Replaces the database name of a connection URL. */
export function withDatabase(url: string, database: string): string {
  const u = new URL(url)
  u.pathname = '/' + encodeURIComponent(database)
  return u.toString()
}

/** Replaces user and password of a connection URL. */
export function withCredentials(url: string, user: string, password: string): string {
  const u = new URL(url)
  u.username = encodeURIComponent(user)
  u.password = encodeURIComponent(password)
  return u.toString()
}

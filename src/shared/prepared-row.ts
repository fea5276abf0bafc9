// One row of a named prepared statement, its fields as the text Postgres sent, for hot paths
// (the auth engine's refresh grant): pg parses the statement once per connection, and the row
// comes as an array of text fields (rowMode 'array', no type parsers), read by position. Errors
// are the driver's (DatabaseError with code and severity).
import type pg from 'pg'
import type { Queryable } from './pg.js'

/** A row's fields, in the statement's column order: text, or null for SQL NULL. */
export type RowFields = ReadonlyArray<string | null>

const identity = (v: string): string => v
const TEXT_TYPES = { getTypeParser: () => identity }

/**
 * Runs the named prepared statement `name` (prepared on first use per connection) with text
 * values (null for SQL NULL) and answers its first row's fields as text, or null when it
 * returns no row. Works on a pool facade, a pool client or a client.
 */
export async function preparedRow(
  q: Queryable,
  name: string,
  text: string,
  values: ReadonlyArray<string | null>,
): Promise<RowFields | null> {
  const config = { name, text, values: values as Array<string | null>, rowMode: 'array' as const, types: TEXT_TYPES }
  const r = (await q.query(config as pg.QueryArrayConfig)) as pg.QueryArrayResult<Array<string | null>>
  return r.rows[0] ?? null
}

// One row of a named prepared statement, its fields as the text Postgres sent, for hot paths
// (the auth engine's refresh grant). It goes through pg's Submittable interface (a query
// object with submit(), as pg-cursor and pg-query-stream are): Parse once per connection, then
// Bind, Execute and Sync in one write, without the Describe that pg's own Query sends on every
// execution. So Postgres sends no RowDescription, and the driver builds no result object: no
// copy of the query config, no field list and parser table, no row object per row. The caller
// knows its statement's columns and reads the fields by position. Errors are the driver's
// (DatabaseError with code and severity), delivered as its own queries deliver them.
import type pg from 'pg'
import type { Queryable } from './pg.js'

/** The parts of pg's Connection a query object drives (pg/lib/connection.js). */
interface WireConnection {
  readonly stream: { cork?: () => void; uncork?: () => void }
  parsedStatements: Record<string, string | undefined>
  submittedNamedStatements?: Record<string, string | undefined>
  parse(query: { name: string; text: string; types: [] }): void
  bind(config: { statement: string; values: ReadonlyArray<string | null> }): void
  execute(config: { portal: string; rows: number }): void
  sync(): void
}

/** A row's fields, in the statement's column order: text, or null for SQL NULL. */
export type RowFields = ReadonlyArray<string | null>

/**
 * The query object: pg calls submit() when the connection is free, then the handle* methods
 * for the backend's messages. Awaiting it (it is what client.query returns) gives the first
 * row's fields, or null. A `callback` pg sets on it (a caller's callback, or its read-timeout
 * wrapper) is called too, once, as pg's own queries call theirs.
 */
class PreparedRowQuery {
  readonly name: string
  readonly text: string
  callback: ((err: Error | null, row?: RowFields | null) => void) | undefined = undefined
  readonly #values: ReadonlyArray<string | null>
  #row: RowFields | null = null
  #done = false
  readonly #promise: Promise<RowFields | null>
  #settle!: (err: Error | null, row: RowFields | null) => void

  constructor(name: string, text: string, values: ReadonlyArray<string | null>) {
    this.name = name
    this.text = text
    this.#values = values
    this.#promise = new Promise<RowFields | null>((resolve, reject) => {
      this.#settle = (err, row) => (err ? reject(err) : resolve(row))
    })
  }

  #finish(err: Error | null, row: RowFields | null): void {
    if (this.#done) return
    this.#done = true
    this.callback?.(err, row)
    this.#settle(err, row)
  }

  /** Parse (first use on this connection), Bind, Execute, Sync in one write; an Error pg hands back to handleError. */
  submit(connection: WireConnection): Error | null {
    const known = connection.parsedStatements[this.name] ?? connection.submittedNamedStatements?.[this.name]
    if (known !== undefined && known !== this.text) {
      return new Error(`prepared statement ${this.name} was prepared with another text on this connection`)
    }
    const stream = connection.stream
    stream.cork?.()
    try {
      if (known === undefined) {
        connection.parse({ name: this.name, text: this.text, types: [] })
        if (connection.submittedNamedStatements) connection.submittedNamedStatements[this.name] = this.text
      }
      connection.bind({ statement: this.name, values: this.#values })
      connection.execute({ portal: '', rows: 0 })
      connection.sync()
    } finally {
      stream.uncork?.()
    }
    return null
  }

  handleRowDescription(): void {}

  handleDataRow(msg: { fields: RowFields }): void {
    this.#row ??= msg.fields
  }

  handleCommandComplete(): void {}

  handleEmptyQuery(): void {}

  handlePortalSuspended(): void {}

  handleCopyInResponse(connection: { sendCopyFail(msg: string): void }): void {
    connection.sendCopyFail('COPY is not supported here')
  }

  handleCopyData(): void {}

  handleError(err: Error): void {
    this.#finish(err, null)
  }

  handleReadyForQuery(): void {
    this.#finish(null, this.#row)
  }

  then<A, B = never>(
    onFulfilled?: ((row: RowFields | null) => A | PromiseLike<A>) | null,
    onRejected?: ((reason: unknown) => B | PromiseLike<B>) | null,
  ): Promise<A | B> {
    return this.#promise.then(onFulfilled, onRejected)
  }
}

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
  const query = new PreparedRowQuery(name, text, values)
  return (await (q.query as unknown as (s: pg.Submittable) => PromiseLike<RowFields | null>)(
    query as unknown as pg.Submittable,
  )) as RowFields | null
}

/**
 * Forgets the statements the driver holds as prepared on q's connection, once the server's were
 * deallocated behind its back (`DEALLOCATE ALL`): the next use of each prepares it again.
 */
export function forgetPreparedStatements(q: Queryable): void {
  const connection = (q as { connection?: Partial<WireConnection> }).connection
  if (connection === undefined) return
  connection.parsedStatements = {}
  if (connection.submittedNamedStatements !== undefined) connection.submittedNamedStatements = {}
}

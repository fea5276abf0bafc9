// Several statements in one round trip on one pg.Client: the extended-protocol messages
// of all of them (Parse only the first time a named statement is used on the connection,
// Bind, Describe only when the row shape is not known yet, Execute) and one Sync, written
// at once; Postgres answers with one ReadyForQuery. After an error Postgres skips the rest
// up to the Sync; the caller then sends a recovery batch (ROLLBACK) through `recover`.
// Implemented as a pg "submittable" (the interface pg-cursor uses): pg hands it every
// message of the backend until ReadyForQuery.
import { createRequire } from 'node:module'
import pg from 'pg'

const require = createRequire(import.meta.url)
/** pg's own value serialisation (arrays, dates, buffers, JSON), as client.query uses it. */
const { prepareValue } = require('pg/lib/utils.js') as { prepareValue: (v: unknown) => unknown }

export interface BatchStatement {
  /** Prepared once per connection under this name; unnamed statements are parsed each time. */
  readonly name?: string
  readonly text: string
  readonly values: readonly unknown[]
  /** Columns as the text Postgres sent (no type parsers). */
  readonly textResult?: boolean
}

type Row = Record<string, unknown>
type Parser = (value: string) => unknown

interface Field {
  name: string
  dataTypeID: number
}
interface Shape {
  names: string[]
  parsers: Parser[]
  odd: boolean
}

interface ProtocolConnection {
  stream: { cork?: () => void; uncork?: () => void }
  parse(q: { name?: string; text: string }): void
  bind(c: {
    portal?: string
    statement?: string
    values: readonly unknown[]
    valueMapper: (v: unknown) => unknown
  }): void
  describe(m: { type: 'P' | 'S'; name?: string }): void
  execute(c: { portal?: string; rows?: number }): void
  close(m: { type: 'P' | 'S'; name: string }): void
  sync(): void
}

interface ConnectionState {
  /** Named statements prepared on the connection and their row shapes (null: no rows). */
  statements: Map<string, Shape | null>
}

const states = new WeakMap<pg.Client, ConnectionState>()

function stateOf(client: pg.Client): ConnectionState {
  let s = states.get(client)
  if (s === undefined) {
    s = { statements: new Map() }
    states.set(client, s)
  }
  return s
}

/** How many named statements this batch code has prepared on a connection. */
export function preparedCount(client: pg.Client): number {
  return states.get(client)?.statements.size ?? 0
}

// What a function the owner wrote may leave in the session outlives the transaction: a
// session-level SET or set_config(..., false), and prepared statements (PREPARE/DEALLOCATE),
// which the engine's next statements would run or resolve names under as its own login,
// before the request's role is set (docs/security.md "The tenant boundary"). Every
// transaction's last round trip ends with these: the settings go back to the session's
// defaults, and the session's prepared statements are counted against the engine's
// (sessionIntact). Unnamed, so neither is a statement a function could have swapped.
const RESET_TEXT = 'RESET ALL'
const PREPARED_TEXT =
  'SELECT pg_catalog.count(*) FILTER (WHERE p.from_sql) AS sql, pg_catalog.count(*) AS n FROM pg_catalog.pg_prepared_statements p'

/** Statements that end each transaction's last batch; pass their last result to sessionIntact. */
export const SESSION_END: readonly BatchStatement[] = [
  { text: RESET_TEXT, values: [] },
  { text: PREPARED_TEXT, values: [], textResult: true },
]

/** Whether the session holds exactly the statements this code prepared, none prepared in SQL. */
export function sessionIntact(client: pg.Client, prepared: readonly Row[] | undefined): boolean {
  const row = prepared?.[0]
  return row !== undefined && row.sql === '0' && row.n === String(preparedCount(client))
}

const identity: Parser = (v) => v

function shapeOf(fields: readonly Field[], textResult: boolean): Shape {
  return {
    names: fields.map((f) => f.name),
    // A column named __proto__ is set as an own property, not as the row's prototype.
    odd: fields.some((f) => f.name === '__proto__'),
    parsers: fields.map((f) => (textResult ? identity : (pg.types.getTypeParser(f.dataTypeID, 'text') as Parser))),
  }
}

/** The rows of each statement of a batch, in order. */
export type BatchResult = Row[][]

class Batch {
  readonly #statements: readonly BatchStatement[]
  readonly #state: ConnectionState
  readonly #resolve: (r: BatchResult) => void
  readonly #reject: (err: unknown) => void
  /** Named statements parsed by this batch (known prepared only once it succeeded). */
  readonly #parsed: Array<[string, Shape | null]> = []
  readonly #shapes: Array<Shape | null | undefined> = []
  readonly #rows: BatchResult = []
  #at = 0
  #failed: unknown = null
  #settled = false

  constructor(
    statements: readonly BatchStatement[],
    state: ConnectionState,
    resolve: (r: BatchResult) => void,
    reject: (err: unknown) => void,
  ) {
    this.#statements = statements
    this.#state = state
    this.#resolve = resolve
    this.#reject = reject
  }

  /** Names this batch parsed: after an error it is unknown whether Postgres kept them. */
  get parsed(): string[] {
    return this.#parsed.map(([n]) => n)
  }

  /** The rows of the statements that completed (before an error). */
  get completed(): BatchResult {
    return this.#rows.slice(0, this.#at)
  }

  submit(connection: ProtocolConnection): Error | null {
    const stream = connection.stream
    stream.cork?.()
    try {
      for (const s of this.#statements) {
        const known = s.name === undefined ? undefined : this.#state.statements.get(s.name)
        if (known === undefined) {
          connection.parse({ name: s.name, text: s.text })
          if (s.name !== undefined) this.#parsed.push([s.name, null])
        }
        connection.bind({ statement: s.name, values: s.values, valueMapper: prepareValue })
        // The row shape of a prepared statement is learnt once (its first Describe).
        if (known === undefined) connection.describe({ type: 'P' })
        this.#shapes.push(known)
        this.#rows.push([])
        connection.execute({})
      }
      connection.sync()
    } catch (err) {
      // A value pg cannot serialise: nothing of the batch was flushed yet; end it cleanly.
      connection.sync()
      this.#failed = err
    } finally {
      stream.uncork?.()
    }
    return null
  }

  handleRowDescription(msg: { fields: Field[] }): void {
    const s = this.#statements[this.#at]
    const shape = shapeOf(msg.fields, s?.textResult === true)
    this.#shapes[this.#at] = shape
    const p = this.#parsed.find(([n]) => n === s?.name)
    if (p !== undefined) p[1] = shape
  }

  handleDataRow(msg: { fields: Array<string | null> }): void {
    if (this.#failed !== null) return
    const shape = this.#shapes[this.#at]
    if (shape === undefined || shape === null) return
    const row: Row = {}
    const { names, parsers, odd } = shape
    try {
      for (let i = 0; i < msg.fields.length; i++) {
        const v = msg.fields[i]
        const value = v === null || v === undefined ? null : parsers[i]!(v)
        if (odd) Object.defineProperty(row, names[i]!, { value, enumerable: true, writable: true, configurable: true })
        else row[names[i]!] = value
      }
    } catch (err) {
      this.#failed = err
      return
    }
    this.#rows[this.#at]!.push(row)
  }

  handleCommandComplete(): void {
    this.#at++
  }
  handleEmptyQuery(): void {
    this.#at++
  }
  handlePortalSuspended(): void {
    /* never asked for (Execute without a row limit) */
  }
  handleCopyInResponse(): void {
    /* no COPY statements */
  }
  handleCopyData(): void {
    /* no COPY statements */
  }

  handleError(err: unknown): void {
    if (this.#settled) return
    this.#settled = true
    this.#reject(err)
  }

  handleReadyForQuery(): void {
    if (this.#settled) return
    this.#settled = true
    if (this.#failed !== null) {
      this.#reject(this.#failed)
      return
    }
    for (const [name, shape] of this.#parsed) this.#state.statements.set(name, shape)
    this.#resolve(this.#rows)
  }
}

/**
 * Sends the statements in one round trip and resolves with the rows of each. Rejects with
 * the first error (pg's error, or a socket error); the statements after it did not run.
 * `onFailure` hears, before the rejection, the names the batch parsed (pass them to
 * `recover`) and the rows of the statements that completed before the error.
 */
export function runBatch(
  client: pg.Client,
  statements: readonly BatchStatement[],
  onFailure?: (parsed: readonly string[], completed: BatchResult) => void,
): Promise<BatchResult> {
  const state = stateOf(client)
  return new Promise<BatchResult>((resolve, reject) => {
    const batch: Batch = new Batch(statements, state, resolve, (err) => {
      onFailure?.(batch.parsed, batch.completed)
      reject(err)
    })
    // pg queues it behind any statement still running and hands it the connection.
    void (client as unknown as { query: (q: Batch) => unknown }).query(batch)
  })
}

class Recovery {
  readonly #names: readonly string[]
  readonly #expected: number
  readonly #done: (err: unknown) => void
  #settled = false
  #prepared: ReadonlyArray<string | null> | null = null
  constructor(names: readonly string[], expected: number, done: (err: unknown) => void) {
    this.#names = names
    this.#expected = expected
    this.#done = done
  }
  submit(connection: ProtocolConnection): Error | null {
    connection.stream.cork?.()
    try {
      // Closing a statement that does not exist is no error: those a failed batch may have kept go.
      for (const name of this.#names) connection.close({ type: 'S', name })
      for (const text of ['ROLLBACK', RESET_TEXT, PREPARED_TEXT]) {
        connection.parse({ text })
        connection.bind({ values: [], valueMapper: prepareValue })
        connection.execute({})
      }
      connection.sync()
    } finally {
      connection.stream.uncork?.()
    }
    return null
  }

  handleRowDescription(): void {}
  handleDataRow(msg: { fields: ReadonlyArray<string | null> }): void {
    this.#prepared = msg.fields
  }
  handleCommandComplete(): void {}
  handleEmptyQuery(): void {}
  handlePortalSuspended(): void {}
  handleCopyInResponse(): void {}
  handleCopyData(): void {}
  handleError(err: unknown): void {
    if (!this.#settled) {
      this.#settled = true
      this.#done(err)
    }
  }
  handleReadyForQuery(): void {
    if (this.#settled) return
    this.#settled = true
    const p = this.#prepared
    const intact = p !== null && p[0] === '0' && p[1] === String(this.#expected)
    this.#done(intact ? null : new Error("the session's prepared statements changed"))
  }
}

/**
 * After a failed batch or a refused step: rolls back whatever transaction is open (a
 * warning when none is), closes the statements a failed batch may have prepared and puts
 * the session back (SESSION_END), in one round trip. Rejects when that fails too, or when
 * the session's prepared statements are not the engine's (the connection is then not to be
 * reused).
 */
export function recover(client: pg.Client, parsed: readonly string[] = []): Promise<void> {
  const state = stateOf(client)
  for (const name of parsed) state.statements.delete(name)
  return new Promise<void>((resolve, reject) => {
    void (client as unknown as { query: (q: Recovery) => unknown }).query(
      new Recovery(parsed, state.statements.size, (err) => {
        if (err === null) resolve()
        else reject(err)
      }),
    )
  })
}

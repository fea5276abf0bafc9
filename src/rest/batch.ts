// Several statements in one round trip on one pg.Client, through pg's pipeline mode
// (https://node-postgres.com/features/pipelining; the engine's clients are made with
// `pipeline: true`): every statement of a batch is written at once, each with its own Sync,
// and Postgres answers them in order. pg parses a named statement once per connection and
// serialises the values. After an error the statements behind it still reach Postgres: inside
// the transaction they fail (25P02) and a COMMIT among them rolls it back, so nothing of a
// failed transaction stays; outside one, each statement stands alone. The caller hears the
// first error and the rows of the statements before it.
import net from 'node:net'
import pg from 'pg'

export interface BatchStatement {
  /** Prepared once per connection under this name; unnamed statements are parsed each time. */
  readonly name?: string
  readonly text: string
  readonly values: readonly unknown[]
  /** Columns as the text Postgres sent (no type parsers). */
  readonly textResult?: boolean
  /**
   * A fixed text of ours without values (BEGIN, LISTEN, COMMIT, RESET ALL, the session check):
   * sent with the fixed ones beside it as one simple-protocol query, its rows parsed as pg's
   * simple queries are (bigint as text).
   */
  readonly fixed?: true
}

/** A fixed statement of ours (see BatchStatement.fixed). */
export const fixed = (text: string): BatchStatement => ({ text, values: [], fixed: true })

type Row = Record<string, unknown>

/** Per connection: the names this code asked pg to prepare, and those that ran (so were parsed). */
interface ConnectionState {
  readonly named: Set<string>
  readonly ran: Set<string>
}

const states = new WeakMap<pg.Client, ConnectionState>()

function stateOf(client: pg.Client): ConnectionState {
  let s = states.get(client)
  if (s === undefined) {
    s = { named: new Set(), ran: new Set() }
    states.set(client, s)
  }
  return s
}

/** The socket of each client made by createBatchClient: corked while a batch is handed to pg. */
const sockets = new WeakMap<pg.Client, net.Socket>()

/**
 * A client for runBatch: pg's pipeline mode, on a socket of ours (pg's documented `stream`
 * option), corked while a batch's queries are handed to pg so that they leave in one write.
 */
export function createBatchClient(config: pg.ClientConfig): pg.Client {
  const socket = new net.Socket()
  const client = new pg.Client({ ...config, pipeline: true, stream: () => socket })
  sockets.set(client, socket)
  return client
}

/** How many named statements this batch code has prepared (or tried to) on a connection. */
export function preparedCount(client: pg.Client): number {
  return states.get(client)?.named.size ?? 0
}

// What a function the owner wrote may leave in the session outlives the transaction: a
// session-level SET or set_config(..., false), and prepared statements (PREPARE/DEALLOCATE),
// which the engine's next statements would run or resolve names under as its own login,
// before the request's role is set (docs/security.md "The tenant boundary"). Every
// transaction's last round trip ends with these: the settings go back to the session's
// defaults, and the session's prepared statements are checked (sessionIntact). A statement
// prepared in SQL can only come from such a function (pg prepares at the protocol level);
// one of the engine's that a function deallocated fails its next use with 26000, and the
// connection is then dropped (isLostStatement).
const RESET_TEXT = 'RESET ALL'
const PREPARED_TEXT =
  'SELECT pg_catalog.count(*) FILTER (WHERE p.from_sql) AS sql, pg_catalog.count(*) FILTER (WHERE NOT p.from_sql) AS n ' +
  'FROM pg_catalog.pg_prepared_statements p'

/** Statements that end each transaction's last batch; pass their last result to sessionIntact. */
export const SESSION_END: readonly BatchStatement[] = [fixed(RESET_TEXT), fixed(PREPARED_TEXT)]

/** Whether the session holds no statement prepared in SQL and every engine statement that ran. */
export function sessionIntact(client: pg.Client, prepared: readonly Row[] | undefined): boolean {
  const row = prepared?.[0]
  return row !== undefined && row.sql === '0' && Number(row.n) >= (states.get(client)?.ran.size ?? 0)
}

/** A named statement the session no longer has (a function deallocated it): drop the connection. */
export function isLostStatement(err: unknown): boolean {
  return (err as { code?: unknown } | null)?.code === '26000'
}

const identity = (v: string): string => v
const TEXT_TYPES = { getTypeParser: () => identity }

/** The rows of each statement of a batch, in order. */
export type BatchResult = Row[][]

/**
 * A run of fixed statements goes as one simple-protocol query (`BEGIN ...; LISTEN pgrst`, one
 * message and one Sync for the run), any other statement as an extended query of its own:
 * fewer queries for pg to track and Postgres to sync. A run fails as a whole.
 */
function groupsOf(statements: readonly BatchStatement[]): BatchStatement[][] {
  const groups: BatchStatement[][] = []
  for (const s of statements) {
    const last = groups[groups.length - 1]
    if (s.fixed === true && last?.[0]?.fixed === true) last.push(s)
    else groups.push([s])
  }
  return groups
}

function send(client: pg.Client, state: ConnectionState, group: readonly BatchStatement[]): Promise<Row[][]> {
  const s = group[0]!
  if (s.fixed === true) {
    return client
      .query<Row>(group.map((g) => g.text).join('; '))
      .then((r) => (Array.isArray(r) ? (r as pg.QueryResult<Row>[]).map((x) => x.rows) : [r.rows]))
  }
  if (s.name !== undefined) state.named.add(s.name)
  const config: pg.QueryConfig = { text: s.text, values: s.values as unknown[] }
  if (s.name !== undefined) config.name = s.name
  if (s.textResult === true) (config as { types?: unknown }).types = TEXT_TYPES
  const name = s.name
  return client.query<Row>(config).then((r) => {
    if (name !== undefined) state.ran.add(name)
    return [r.rows]
  })
}

/**
 * Sends the statements in one round trip and resolves with the rows of each. Rejects with
 * the first error (pg's error, or a socket error). `onFailure` hears, before the rejection,
 * the rows of the statements that completed before the error (a run of statements without
 * values fails as a whole).
 */
export async function runBatch(
  client: pg.Client,
  statements: readonly BatchStatement[],
  onFailure?: (completed: BatchResult) => void,
): Promise<BatchResult> {
  const state = stateOf(client)
  const socket = sockets.get(client)
  socket?.cork()
  let sent: Array<Promise<Row[][]>>
  try {
    sent = groupsOf(statements).map((g) => send(client, state, g))
  } finally {
    socket?.uncork()
  }
  const settled = await Promise.allSettled(sent)
  const rows: BatchResult = []
  for (const r of settled) {
    if (r.status === 'rejected') {
      onFailure?.(rows)
      throw r.reason
    }
    rows.push(...r.value)
  }
  return rows
}

/**
 * After a failed batch or a refused step: rolls back whatever transaction is open (a
 * warning when none is) and puts the session back (SESSION_END), in one round trip. Rejects
 * when that fails too, or when the session is not the engine's (the connection is then not
 * to be reused).
 */
export async function recover(client: pg.Client): Promise<void> {
  const r = await runBatch(client, [fixed('ROLLBACK'), ...SESSION_END])
  if (!sessionIntact(client, r[r.length - 1])) throw new Error("the session's prepared statements changed")
}

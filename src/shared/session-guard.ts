// Puts a tenant-database connection's session back after code of the database's owner may
// have run in it (docs/security.md "The tenant boundary"). Triggers of the owner on auth
// tables, and the owner's code a foreign key to an auth table reaches, run inside the engine's
// statements: a plain SET or set_config(..., false) there outlives the function, and
// PREPARE/DEALLOCATE outlive the transaction. Migration 0320 makes each statement that can run
// such code send the notice GH427 first. After that statement, before any other on the
// connection, the guard runs RESET ALL and looks for statements prepared in SQL (pg prepares
// at the protocol level, so those can only be the owner's). When there are any, it deallocates
// them all; the connection then sends its statements unnamed until it is released, and is
// closed then (`tainted`), as after an error that says the session lost statements. Deferred triggers fire at COMMIT, so a transaction that got the
// notice is guarded once more when it ends. Connections without the notice run nothing more.
// The guard is a pg.Client whose query() runs the caller's statements one after another (as
// pg's own queue does), with the guard's between them when it is due.
import pg from 'pg'

/** The SQLSTATE of migration 0320's notice. */
const OWNER_CODE_NOTICE = 'GH427'

/**
 * Errors after which the session lacks statements pg holds as prepared: platform.call_hook's
 * GH426 (a hook changed them; all deallocated, migration 0282) and 26000 (one is missing).
 */
const LOST_STATEMENTS = new Set(['GH426', '26000'])

const GUARD =
  'RESET ALL; SELECT pg_catalog.count(*) FILTER (WHERE p.from_sql)::int AS sql FROM pg_catalog.pg_prepared_statements p'

export class GuardedClient extends pg.Client {
  /** The notice came since the last guard. */
  #dirty = false
  /** The notice came within the open transaction. */
  #inTransaction = false
  #tainted = false
  /** Why the guard could not put the session back: no statement runs after that. */
  #failed: unknown = null
  #last: Promise<unknown> = Promise.resolve()

  constructor(config: pg.ClientConfig) {
    super(config)
    this.on('notice', (msg: { code?: string }) => {
      if (msg.code !== OWNER_CODE_NOTICE) return
      this.#dirty = true
      this.#inTransaction = true
    })
  }

  /** Whether the session's prepared statements were replaced: the pool must not reuse the connection. */
  get tainted(): boolean {
    return this.#tainted
  }

  // pg's query() takes a text, a config or a submittable, with or without a callback; the
  // engines use the promise forms, which are guarded. The others go to pg unchanged.
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  override query(config: any, values?: any, callback?: any): any {
    if (typeof config?.submit === 'function' || typeof values === 'function' || typeof callback === 'function') {
      return super.query(config, values, callback)
    }
    const run = this.#last.then(() => this.#run(config as string | pg.QueryConfig, values as unknown[] | undefined))
    this.#last = run.catch(() => {})
    return run
  }

  async #run(config: string | pg.QueryConfig, values: unknown[] | undefined): Promise<unknown> {
    if (this.#failed !== null) throw this.#failed
    const c =
      this.#tainted && typeof config === 'object' && config.name !== undefined ? { ...config, name: undefined } : config
    try {
      return await super.query(c as pg.QueryConfig, values)
    } catch (err) {
      if (LOST_STATEMENTS.has((err as { code?: string }).code ?? '')) this.#tainted = true
      throw err
    } finally {
      if (this.#due()) await this.#guard()
    }
  }

  #due(): boolean {
    const status = this.getTransactionStatus()
    if (status === 'E') return false // only ROLLBACK runs next
    const ended = status === 'I' && this.#inTransaction
    return this.#dirty || ended
  }

  async #guard(): Promise<void> {
    this.#dirty = false
    if (this.getTransactionStatus() === 'I') this.#inTransaction = false
    try {
      const results = (await super.query(GUARD)) as unknown as pg.QueryResult[]
      const row = results[1]?.rows[0] as { sql: number } | undefined
      if (row?.sql === 0) return
      await super.query('DEALLOCATE ALL')
      this.#tainted = true
    } catch (err) {
      // The session could not be put back: it must not serve another statement.
      this.#tainted = true
      this.#failed = err
    }
  }
}

// The Redis tenant store (ioredis): a hash per tenant `<prefix>tenant:<database>` (the record
// as JSON in `record`, plus `version`, `updated_at`, `applied`, the tenant file as last
// applied, for the next apply's three-way merge, and `write`, a random id of the last write that
// an undo checks), its audit list
// `<prefix>tenant:<database>:audit` (newest first, AUDIT_KEEP kept), a set `<prefix>tenants` of every
// database, the marker `<prefix>tenants:applied` (time of the last apply; `tenants delete`
// leaves it), and the pub/sub channel `<prefix>tenants:changed` carrying database names.
// A look-up that misses while the marker this process saw is gone means Redis lost its data
// (restarted without persistence, flushed): that is an error (the cache keeps serving its
// last good records), never "no such tenant".
// Changes are compare-and-set (a Lua script checks the version and writes record, version
// and audit entry at once; docs/tenant-state.md). Only hashed keys are ever written. Commands fail fast while Redis is down (the cache
// serves what it holds); the subscriber has its own connection and resyncs on reconnect.
import { randomUUID } from 'node:crypto'
import { once } from 'node:events'
import { maskUrlPassword } from '../shared/index.js'
import { Redis, type RedisOptions } from 'ioredis'
import { DATABASE_NAME, KEY_HASH, type Tenant } from './schema.js'
import {
  TenantStoreBackendError,
  TenantStoreConfigError,
  TenantStoreEmptyError,
  TenantStoreNotDurableError,
} from './errors.js'
import {
  ALL_TENANTS,
  AUDIT_KEEP,
  auditEntries,
  notifyListeners,
  silentLogger,
  type AuditEntry,
  type ChangeListener,
  type StoreLogger,
  type TenantStore,
  type VersionedTenant,
  type WriteOptions,
  type WriteResult,
} from './types.js'
import { revivalProblem } from './signing-keys.js'
import { keepRevocations } from './fields.js'

export interface RedisStoreOptions {
  /** redis:// URL; required unless `redis` is given. */
  url?: string
  /** Prefix of every key and of the channel. Default `gatehouse:`. */
  prefix?: string
  /** An existing client to use (not closed by close()); the subscriber is its duplicate. */
  redis?: Redis
  logger?: StoreLogger
  /** Default 2000. */
  connectTimeoutMs?: number
  /** Default 2000. */
  commandTimeoutMs?: number
  /** Replicas that must hold a record write before it is acknowledged (Redis WAIT); default 0. */
  writeReplicas?: number
  /** How long WAIT waits for them (default 1000). */
  writeReplicasTimeoutMs?: number
}

interface TenantMeta {
  version: number
  updated_at: string | null
}

export interface RedisTenantStore extends TenantStore {
  readonly kind: 'redis'
  /** Key names, for operators and tests. */
  readonly keys: {
    tenant(database: string): string
    audit(database: string): string
    set: string
    channel: string
    marker: string
  }
  /** `version` and `updated_at` of a stored tenant, or null. */
  meta(database: string): Promise<TenantMeta | null>
  /** Resolves once the change subscription is active (starts it when needed). */
  subscribed(): Promise<void>
}

// KEYS: record hash, tenant set, apply marker, audit list. ARGV: expected version ('' = no
// record), record JSON, time, audit entry JSON without versions, database, last applied JSON
// ('' = leave it), '1' to write the record or '0' to record the last applied file only, the
// write's id. Returns {1, new version} or {0, the version found}. The same write sent again (after
// a reconnect) that finds its id is done already: it writes the id again, so that the WAIT of its
// new connection counts the replicas holding it.
const CAS_SCRIPT = `
local cur = ''
if redis.call('HEXISTS', KEYS[1], 'record') == 1 then cur = redis.call('HGET', KEYS[1], 'version') or '0' end
if redis.call('HGET', KEYS[1], 'write') == ARGV[8] then
  redis.call('HSET', KEYS[1], 'write', ARGV[8])
  return {1, cur}
end
if cur ~= ARGV[1] then return {0, cur} end
if ARGV[7] == '0' then
  redis.call('HSET', KEYS[1], 'applied', ARGV[6], 'write', ARGV[8])
  return {1, cur}
end
redis.call('HSET', KEYS[1], 'record', ARGV[2], 'updated_at', ARGV[3], 'write', ARGV[8])
if ARGV[6] ~= '' then redis.call('HSET', KEYS[1], 'applied', ARGV[6]) end
local nv = tostring(redis.call('HINCRBY', KEYS[1], 'version', 1))
redis.call('SADD', KEYS[2], ARGV[5])
redis.call('SET', KEYS[3], ARGV[3])
local old = 'null'
if cur ~= '' then old = '"' .. cur .. '"' end
redis.call('LPUSH', KEYS[4], '{"old_version":' .. old .. ',"new_version":"' .. nv .. '",' .. string.sub(ARGV[4], 2))
redis.call('LTRIM', KEYS[4], 0, ${AUDIT_KEEP - 1})
return {1, nv}
`

// Undoes a write no replica confirmed (docs/operating.md, "Redis Sentinel"): when the record is
// still the one that very write made (its random id, not its version: after a failover the new
// primary counts versions again from what it had, so a version can name another write), the
// record it replaced comes back (a new version, with an audit entry), or the record goes when the
// write created it. ARGV: the write's id, the record it replaced ('' = none), time, database,
// audit entry.
const UNDO_SCRIPT = `
if redis.call('HGET', KEYS[1], 'write') ~= ARGV[1] then return 0 end
if ARGV[2] == '' then
  redis.call('DEL', KEYS[1])
  redis.call('SREM', KEYS[2], ARGV[4])
else
  redis.call('HSET', KEYS[1], 'record', ARGV[2], 'updated_at', ARGV[3])
  redis.call('HDEL', KEYS[1], 'write')
  redis.call('HINCRBY', KEYS[1], 'version', 1)
end
redis.call('LPUSH', KEYS[3], ARGV[5])
redis.call('LTRIM', KEYS[3], 0, ${AUDIT_KEEP - 1})
return 1
`

function safeUrl(url: string | undefined): string {
  if (!url) return 'redis'
  return url.startsWith('/') ? url : maskUrlPassword(url) // a unix socket path, or a URL
}

/**
 * A client for `redis://`, `rediss://`, a unix socket path, or Sentinel:
 * `redis+sentinel://[:password@]host1:26379,host2:26379/<master name>` (Redis Sentinel
 * finds the current master; ioredis follows fail-overs).
 */
export function connectRedis(url: string, options: RedisOptions = {}): Redis {
  const m = /^redis\+sentinel:\/\/(?:(?:[^:@/]*):([^@/]*)@)?([^/]+)\/([^/?#]+)$/.exec(url)
  if (!m) return new Redis(url, options)
  const password = m[1] ? decodeURIComponent(m[1]) : undefined
  const sentinels = m[2].split(',').map((hp) => {
    const at = hp.lastIndexOf(':')
    const [host, port] = at > hp.lastIndexOf(']') ? [hp.slice(0, at), hp.slice(at + 1)] : [hp, '']
    return { host: host.replace(/^\[(.*)\]$/, '$1'), port: Number(port || 26379) }
  })
  // On a failover the sentinels re-point the old primary and close its clients only once it has
  // reported the master role for a while (seconds; redis' sentinel.c), and it takes writes until
  // then: failoverDetector closes the connection when a sentinel announces +switch-master, and
  // ioredis asks the sentinels for the new primary (test/tenants/sentinel-failover.test.ts).
  return new Redis({
    ...options,
    sentinels,
    name: decodeURIComponent(m[3]),
    password,
    sentinelPassword: password,
    failoverDetector: true,
  })
}

function checkRecord(t: Tenant, database: string): void {
  if (!DATABASE_NAME.test(t.database) || t.database !== database)
    throw new TenantStoreConfigError(`tenant store: "${t.database}" is not a valid database name`)
  // Plain keys never reach the store.
  if (!KEY_HASH.test(t.keys.public) || !KEY_HASH.test(t.keys.secret)) {
    throw new TenantStoreConfigError(`tenant store: keys of ${t.database} are not hashed (use toTenant)`)
  }
}

/** A stored record, checked: JSON, its own database, hashed keys, well-formed signing keys. */
function decodeRecord(database: string, json: string): Tenant {
  let t: Tenant
  try {
    t = JSON.parse(json) as Tenant
  } catch (err) {
    throw new TenantStoreBackendError(`tenant store: the record of ${database} in redis is not JSON`, { cause: err })
  }
  const signingKeys: unknown = t?.jwt?.signing_keys
  const keysOk =
    signingKeys === undefined ||
    (Array.isArray(signingKeys) &&
      signingKeys.every(
        (k: { kid?: unknown; private_key?: unknown; public_jwk?: unknown } | null) =>
          typeof k?.kid === 'string' &&
          typeof k.private_key === 'string' &&
          typeof k.public_jwk === 'object' &&
          k.public_jwk !== null,
      ))
  if (
    !t ||
    typeof t !== 'object' ||
    t.database !== database ||
    !KEY_HASH.test(t.keys?.public) ||
    !KEY_HASH.test(t.keys?.secret) ||
    !keysOk
  ) {
    throw new TenantStoreBackendError(
      `tenant store: the record of ${database} in redis is malformed; re-apply its tenant file`,
    )
  }
  return t
}

/** Checks a batch for putAll: valid records with hashed keys, each database once. */
function checkedBatch(given: Tenant[]): void {
  const seen = new Set<string>()
  for (const t of given) {
    checkRecord(t, t.database)
    if (seen.has(t.database)) throw new TenantStoreConfigError(`tenant store: ${t.database} given twice`)
    seen.add(t.database)
  }
}

function storeKeys(prefix: string): RedisTenantStore['keys'] {
  return {
    tenant: (database: string) => `${prefix}tenant:${database}`,
    audit: (database: string) => `${prefix}tenant:${database}:audit`,
    set: `${prefix}tenants`,
    channel: `${prefix}tenants:changed`,
    marker: `${prefix}tenants:applied`,
  }
}

/**
 * The Redis store. The interface's methods are arrow properties: a wrapper made with
 * Object.create(store) (tests) still reaches the instance's state.
 */
class RedisStore implements RedisTenantStore {
  readonly kind = 'redis' as const
  readonly keys: RedisTenantStore['keys']
  readonly #log: StoreLogger
  readonly #where: string
  readonly #connectTimeout: number
  readonly #clientOptions: RedisOptions
  /** Whether the client is ours to close. */
  readonly #owned: boolean
  readonly #client: Redis
  #subscriber: Redis | null = null
  #subscribing: Promise<void> | null = null
  #closed = false
  /** This process saw the apply marker: a later miss without it means the data was lost. */
  #sawMarker = false
  readonly #listeners = new Set<ChangeListener>()
  readonly #writeReplicas: number
  readonly #writeReplicasTimeoutMs: number
  /** How often the command connection closed: a reply after a close may come from another server. */
  #closes = 0
  #closedAt = 0
  /**
   * The calls in flight, each rejected at the next close: ioredis leaves a command it does not
   * send again unsettled. A set (not one promise every call races): a settled call leaves nothing.
   */
  readonly #inFlight = new Set<(err: Error) => void>()

  constructor(opts: RedisStoreOptions) {
    if (!opts.redis && !opts.url)
      throw new TenantStoreConfigError('the redis tenant store needs redis.url (GATEHOUSE_REDIS_URL)')
    this.keys = storeKeys(opts.prefix ?? 'gatehouse:')
    this.#log = opts.logger ?? silentLogger
    this.#where = safeUrl(opts.url)
    this.#connectTimeout = opts.connectTimeoutMs ?? 2000
    this.#clientOptions = {
      lazyConnect: true,
      connectTimeout: this.#connectTimeout,
      // WAIT holds the connection for up to its timeout: a command may take that long, and more.
      commandTimeout: opts.commandTimeoutMs ?? Math.max(2000, (opts.writeReplicasTimeoutMs ?? 1000) + 1000),
      maxRetriesPerRequest: 1,
      // A command cut by a close is not sent again on the next connection, maybe to another
      // server (a WAIT there would answer for what that server holds, and hold that connection
      // for its timeout): #run tries it once more where that is safe.
      autoResendUnfulfilledCommands: false,
    }
    this.#writeReplicas = opts.writeReplicas ?? 0
    this.#writeReplicasTimeoutMs = opts.writeReplicasTimeoutMs ?? 1000
    this.#owned = !opts.redis
    this.#client = opts.redis ?? connectRedis(opts.url as string, this.#clientOptions)
    this.#client.on('close', () => {
      this.#closes++
      this.#closedAt = Date.now()
      const cut = [...this.#inFlight]
      this.#inFlight.clear()
      for (const reject of cut) reject(new Error('the connection closed'))
    })
    if (this.#owned) this.#watch(this.#client, 'commands')
  }

  get = async (database: string): Promise<Tenant | null> => (await this.read(database))?.tenant ?? null

  read = async (database: string): Promise<VersionedTenant | null> => {
    if (!DATABASE_NAME.test(database)) return null
    // One round trip: the record, its version and whether the store still holds what was applied.
    const [json, version, marker] = await this.#run('get', async () => {
      const res = await this.#client
        .pipeline()
        .hmget(this.keys.tenant(database), 'record', 'version')
        .exists(this.keys.marker)
        .exec()
      const failed = res?.find(([err]) => err)
      if (!res || failed) throw failed?.[0] ?? new Error('pipeline aborted')
      const [rec, ver] = res[0]![1] as Array<string | null>
      return [rec ?? null, ver ?? '0', Number(res[1]![1])] as const
    })
    if (marker === 1) this.#sawMarker = true
    else if (json === null && this.#sawMarker) throw new TenantStoreEmptyError(this.#where)
    return json === null ? null : { tenant: decodeRecord(database, json), version }
  }

  write = async (database: string, expected: string | null, next: Tenant, opts: WriteOptions): Promise<WriteResult> => {
    checkRecord(next, database)
    const current = expected === null ? null : await this.get(database)
    const problem = revivalProblem(current?.jwt ?? null, next.jwt)
    if (problem !== null) throw new TenantStoreConfigError(`${database}: ${problem}`)
    const at = new Date().toISOString()
    const entry = { at, ...opts.audit, database }
    // Nothing of the record changes (an apply that only records the file it applied).
    const recordOnly = opts.audit.fields.length === 0 && opts.lastApplied !== undefined && expected !== null
    const args = [
      expected ?? '',
      JSON.stringify(next),
      at,
      JSON.stringify(entry),
      database,
      opts.lastApplied ? JSON.stringify(opts.lastApplied) : '',
      recordOnly ? '0' : '1',
      randomUUID(), // the write's id
    ]
    let res = await this.#compareAndSet(database, args)
    let held = res.ok ? await this.#replicas(res.closes) : 0
    if (held === null) {
      // The connection closed under the WAIT (a failover, a reconnect): the write again where the
      // store is connected now; the script knows its own write if it is there already.
      res = await this.#compareAndSet(database, args)
      held = res.ok ? await this.#replicas(res.closes) : 0
    }
    if (!res.ok) return { ok: false, version: res.version }
    if ((held ?? 0) < this.#writeReplicas) {
      const write = { id: args[7]!, version: res.version, closes: res.closes, replicas: held ?? 0 }
      await this.#notDurable(database, write, expected === null ? null : current, entry)
    }
    if (recordOnly) return { ok: true, version: res.version, entry: null }
    await this.#run('publish', () => this.#publishAll([database]))
    return { ok: true, version: res.version, entry: { ...entry, old_version: expected, new_version: res.version } }
  }

  /** CAS_SCRIPT; `closes` as it was when it was sent, for #replicas. */
  async #compareAndSet(
    database: string,
    args: string[],
  ): Promise<{ ok: true; version: string; closes: number } | { ok: false; version: string | null }> {
    const k = this.keys
    const closes = this.#closes
    const res = (await this.#run('write', () =>
      this.#client.eval(CAS_SCRIPT, 4, k.tenant(database), k.set, k.marker, k.audit(database), ...args),
    )) as [number, string]
    if (Number(res[0]) !== 1) return { ok: false, version: res[1] === '' ? null : String(res[1]) }
    return { ok: true, version: String(res[1]), closes }
  }

  history = async (database: string): Promise<AuditEntry[]> => {
    if (!DATABASE_NAME.test(database)) return []
    const lines = await this.#run('history', () => this.#client.lrange(this.keys.audit(database), 0, AUDIT_KEEP - 1))
    return auditEntries(lines)
  }

  lastApplied = async (database: string): Promise<Tenant | null> => {
    if (!DATABASE_NAME.test(database)) return null
    const json = await this.#run('get', () => this.#client.hget(this.keys.tenant(database), 'applied'))
    if (json === null) return null
    try {
      return JSON.parse(json) as Tenant
    } catch {
      return null
    }
  }

  meta = async (database: string): Promise<TenantMeta | null> => {
    if (!DATABASE_NAME.test(database)) return null
    const [version, updated] = await this.#run('meta', () =>
      this.#client.hmget(this.keys.tenant(database), 'version', 'updated_at'),
    )
    return version === null ? null : { version: Number(version), updated_at: updated }
  }

  ping = async (): Promise<void> => {
    await this.#run('ping', () => this.#client.ping())
  }

  list = async (): Promise<string[]> => {
    const names = await this.#run('list', () => this.#client.smembers(this.keys.set))
    return names.sort()
  }

  putAll = async (given: Tenant[]): Promise<void> => {
    checkedBatch(given)
    if (given.length === 0) return
    const tenants = await this.#withStoredRevocations(given)
    const now = new Date().toISOString()
    await this.#run('write', async () => {
      const m = this.#client.multi()
      for (const t of tenants) {
        m.hset(this.keys.tenant(t.database), 'record', JSON.stringify(t), 'updated_at', now)
        m.hdel(this.keys.tenant(t.database), 'write')
        m.hincrby(this.keys.tenant(t.database), 'version', 1)
        m.sadd(this.keys.set, t.database)
      }
      m.set(this.keys.marker, now)
      const res = await m.exec()
      const failed = res?.find(([err]) => err)
      if (!res || failed) throw new Error(failed?.[0]?.message ?? 'transaction aborted')
    })
    await this.#run('publish', () => this.#publishAll(tenants.map((t) => t.database)))
  }

  delete = async (database: string): Promise<boolean> => {
    if (!DATABASE_NAME.test(database)) return false
    const res = await this.#run('delete', () =>
      this.#client.multi().del(this.keys.tenant(database)).srem(this.keys.set, database).exec(),
    )
    const removed = (res ?? []).some(([, n]) => Number(n) > 0)
    if (removed) await this.#run('publish', () => this.#publishAll([database]))
    return removed
  }

  onChange = (listener: ChangeListener): (() => void) => {
    this.#listeners.add(listener)
    this.#subscribe().catch(() => {})
    return () => {
      this.#listeners.delete(listener)
    }
  }

  subscribed = (): Promise<void> => this.#subscribe()

  close = async (): Promise<void> => {
    if (this.#closed) return
    this.#closed = true
    this.#listeners.clear()
    const end = async (conn: Redis): Promise<void> => {
      if (conn.status === 'ready') await conn.quit().catch(() => {})
      conn.disconnect() // after QUIT too: it also ends a sentinel client's failover detector
    }
    if (this.#subscriber) await end(this.#subscriber)
    if (this.#owned) await end(this.#client)
  }

  /** One warning per outage and per connection, not one per failed reconnect. */
  #watch(conn: Redis, role: string): void {
    let down = false
    let everReady = conn.status === 'ready'
    conn.on('error', (err: Error) => {
      if (!down) {
        down = true
        this.#log.warn({ redis: this.#where, role, err: err.message }, 'tenant store: redis connection failed')
      }
    })
    conn.on('ready', () => {
      if (down) this.#log.info?.({ redis: this.#where, role }, 'tenant store: redis connection restored')
      down = false
      if (role === 'subscriber' && everReady) notifyListeners(this.#listeners, ALL_TENANTS) // messages may have been missed
      everReady = true
    })
  }

  /**
   * Waits for the first connection, and for a command connection closed less than the connect
   * timeout ago (a failover's switch to the new primary); fails at once while a known connection
   * is down.
   */
  async #connected(conn: Redis): Promise<void> {
    if (this.#closed) throw new TenantStoreBackendError('tenant store is closed')
    if (conn.status === 'ready') return
    const switching =
      conn === this.#client && conn.status === 'reconnecting' && Date.now() - this.#closedAt < this.#connectTimeout
    if (conn.status === 'wait') conn.connect().catch(() => {})
    else if (conn.status !== 'connecting' && conn.status !== 'connect' && !switching) {
      throw new TenantStoreBackendError(`tenant store unreachable: redis at ${this.#where} is ${conn.status}`)
    }
    // Rejected by an 'error' of the connection, or by the timeout (an AbortError).
    try {
      await once(conn, 'ready', { signal: AbortSignal.timeout(this.#connectTimeout) })
    } catch (err) {
      const why =
        (err as Error).name === 'AbortError' ? `no connection after ${this.#connectTimeout} ms` : (err as Error).message
      throw new TenantStoreBackendError(`tenant store unreachable: redis at ${this.#where}: ${why}`, { cause: err })
    }
  }

  /** `fn` once connected; once more when the connection closed under it, unless `again` is false. */
  async #run<T>(what: string, fn: () => Promise<T>, again = true): Promise<T> {
    await this.#connected(this.#client)
    const closes = this.#closes
    try {
      return await this.#untilClose(fn())
    } catch (err) {
      if (again && this.#closes !== closes) return this.#run(what, fn, false)
      if (err instanceof TenantStoreBackendError) throw err
      throw new TenantStoreBackendError(
        `tenant store: ${what} failed on redis at ${this.#where}: ${(err as Error).message}`,
        { cause: err },
      )
    }
  }

  /** `attempt`, or a rejection at the next close of the command connection, whichever comes first. */
  #untilClose<T>(attempt: Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.#inFlight.add(reject)
      attempt.then(
        (v) => {
          this.#inFlight.delete(reject)
          resolve(v)
        },
        (err: unknown) => {
          this.#inFlight.delete(reject)
          reject(err as Error)
        },
      )
    })
  }

  /** Tombstones and a retired legacy secret stay whatever is put (docs/tenant-state.md). */
  async #withStoredRevocations(given: Tenant[]): Promise<Tenant[]> {
    const stored = await this.#run('get', () =>
      this.#client.pipeline(given.map((t) => ['hget', this.keys.tenant(t.database), 'record'])).exec(),
    )
    return given.map((t, i) => {
      const json = stored?.[i]?.[1] as string | null | undefined
      return json ? keepRevocations(decodeRecord(t.database, json), t) : t
    })
  }

  /**
   * A write is acknowledged once `writeReplicas` replicas hold it (WAIT): a failover then keeps
   * it. WAIT counts the replicas holding what its own connection wrote: on another connection
   * (ioredis sends an unanswered command again after a reconnect, maybe to a new primary that
   * never had the write, whose replicas then answer for it), it proves nothing. A WAIT cut or
   * answered after the write's connection closed counts nothing (null), and is not tried again.
   * `closes`: #closes when the write was sent.
   */
  async #replicas(closes: number): Promise<number | null> {
    if (this.#writeReplicas === 0) return 0
    const answer = await this.#run(
      'write',
      () => this.#client.call('WAIT', String(this.#writeReplicas), String(this.#writeReplicasTimeoutMs)),
      false,
    ).catch(() => 0)
    return this.#closes === closes ? Number(answer) : null
  }

  /**
   * A write no replica confirmed: undone while the record is still that write's, and refused with
   * 503. The undo is sent only on the write's connection, never queued for a later one; one that
   * ioredis sends again elsewhere finds another write's id there and changes nothing.
   */
  async #notDurable(
    database: string,
    write: { id: string; version: string; closes: number; replicas: number },
    previous: Tenant | null,
    entry: object,
  ): Promise<never> {
    const sameConnection = this.#closes === write.closes && this.#client.status === 'ready'
    const undone = sameConnection && (await this.#undo(database, write.id, previous, entry))
    this.#log.warn({ redis: this.#where, database, ...write, undone }, 'tenant store: write not confirmed by a replica')
    throw new TenantStoreNotDurableError(database, this.#writeReplicas, write.replicas, undone)
  }

  /** Puts back the record a write replaced, if the record is still that write's (UNDO_SCRIPT). */
  async #undo(database: string, id: string, previous: Tenant | null, entry: object): Promise<boolean> {
    const k = this.keys
    const undo = { ...entry, at: new Date().toISOString(), undone_write: id, reason: 'not confirmed by a replica' }
    const undone = await this.#client
      .eval(
        UNDO_SCRIPT,
        3,
        k.tenant(database),
        k.set,
        k.audit(database),
        id,
        previous === null ? '' : JSON.stringify(previous),
        undo.at,
        database,
        JSON.stringify(undo),
      )
      .then((n) => Number(n) === 1)
      .catch(() => false)
    if (undone) await this.#publishAll([database]).catch(() => {})
    return undone
  }

  async #publishAll(databases: string[]): Promise<void> {
    const p = this.#client.pipeline()
    for (const d of databases) p.publish(this.keys.channel, d)
    await p.exec()
    for (const d of databases) notifyListeners(this.#listeners, d)
  }

  /** The subscriber connection, made once: change messages to the listeners, a resubscribe when it comes back. */
  #subscriberConnection(): Redis {
    if (this.#subscriber) return this.#subscriber
    const sub = this.#client.duplicate({
      ...this.#clientOptions,
      commandTimeout: undefined,
      maxRetriesPerRequest: null,
    })
    this.#subscriber = sub
    this.#watch(sub, 'subscriber')
    sub.on('message', (channel: string, message: string) => {
      if (channel !== this.keys.channel) return
      if (message === ALL_TENANTS || DATABASE_NAME.test(message)) notifyListeners(this.#listeners, message)
    })
    // The first subscribe failed (Redis was down): subscribe once it is up, and resync.
    sub.on('ready', () => {
      if (this.#subscribing || this.#closed) return
      this.#subscribe().then(
        () => notifyListeners(this.#listeners, ALL_TENANTS),
        () => {},
      )
    })
    return sub
  }

  #subscribe(): Promise<void> {
    if (this.#subscribing) return this.#subscribing
    const conn = this.#subscriberConnection()
    const attempt = (async () => {
      await this.#connected(conn)
      await conn.subscribe(this.keys.channel)
    })()
    this.#subscribing = attempt
    attempt.catch((err: Error) => {
      if (this.#subscribing === attempt) this.#subscribing = null
      if (!this.#closed)
        this.#log.warn(
          { redis: this.#where, err: err.message },
          'tenant store: change subscription not active yet; retrying when redis is back',
        )
    })
    return attempt
  }
}

export function createRedisStore(opts: RedisStoreOptions): RedisTenantStore {
  return new RedisStore(opts)
}

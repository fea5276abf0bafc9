// The Redis tenant store (ioredis): a hash per tenant `<prefix>tenant:<database>` (the record
// as JSON in `record`, plus `version`, `updated_at` and `applied`, the tenant file as last
// applied, for the next apply's three-way merge), its audit list
// `<prefix>tenant:<database>:audit` (newest first, AUDIT_KEEP kept), a set `<prefix>tenants` of every
// database, the marker `<prefix>tenants:applied` (time of the last apply; `tenants delete`
// leaves it), and the pub/sub channel `<prefix>tenants:changed` carrying database names.
// A look-up that misses while the marker this process saw is gone means Redis lost its data
// (restarted without persistence, flushed): that is an error (the cache keeps serving its
// last good records), never "no such tenant".
// Changes are compare-and-set (a Lua script checks the version and writes record, version
// and audit entry at once; docs/tenant-state.md). Only hashed keys are ever written. Commands fail fast while Redis is down (the cache
// serves what it holds); the subscriber has its own connection and resyncs on reconnect.
import { Redis, type RedisOptions } from 'ioredis'
import { DATABASE_NAME, type Tenant } from './schema.js'
import { TenantStoreBackendError, TenantStoreConfigError, TenantStoreEmptyError } from './errors.js'
import {
  ALL_TENANTS, AUDIT_KEEP, silentLogger, type AuditEntry, type ChangeListener, type StoreLogger, type TenantStore, type WriteResult
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
}

export interface TenantMeta { version: number, updated_at: string | null }

export interface RedisTenantStore extends TenantStore {
  readonly kind: 'redis'
  /** Key names, for operators and tests. */
  readonly keys: { tenant (database: string): string, audit (database: string): string, set: string, channel: string, marker: string }
  /** `version` and `updated_at` of a stored tenant, or null. */
  meta (database: string): Promise<TenantMeta | null>
  /** Resolves once the change subscription is active (starts it when needed). */
  subscribed (): Promise<void>
}

const KEY_HASH = /^sha256:[0-9a-f]{64}$/

// KEYS: record hash, tenant set, apply marker, audit list. ARGV: expected version ('' = no
// record), record JSON, time, audit entry JSON without versions, database, last applied JSON
// ('' = leave it), '1' to write the record or '0' to record the last applied file only. Returns {1, new version} or {0, the version found}.
const CAS_SCRIPT = `
local cur = ''
if redis.call('HEXISTS', KEYS[1], 'record') == 1 then cur = redis.call('HGET', KEYS[1], 'version') or '0' end
if cur ~= ARGV[1] then return {0, cur} end
if ARGV[7] == '0' then
  redis.call('HSET', KEYS[1], 'applied', ARGV[6])
  return {1, cur}
end
redis.call('HSET', KEYS[1], 'record', ARGV[2], 'updated_at', ARGV[3])
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


function safeUrl (url: string | undefined): string {
  if (!url) return 'redis'
  if (url.startsWith('/')) return url // a unix socket path
  try { const u = new URL(url); if (u.password) u.password = '****'; return u.toString() } catch { return 'redis' }
}

/**
 * A client for `redis://`, `rediss://`, a unix socket path, or Sentinel:
 * `redis+sentinel://[:password@]host1:26379,host2:26379/<master name>` (Redis Sentinel
 * finds the current master; ioredis follows fail-overs).
 */
export function connectRedis (url: string, options: RedisOptions = {}): Redis {
  const m = /^redis\+sentinel:\/\/(?:(?:[^:@/]*):([^@/]*)@)?([^/]+)\/([^/?#]+)$/.exec(url)
  if (!m) return new Redis(url, options)
  const password = m[1] ? decodeURIComponent(m[1]) : undefined
  const sentinels = m[2].split(',').map((hp) => {
    const [host, port] = hp.split(':')
    return { host, port: Number(port || 26379) }
  })
  return new Redis({ ...options, sentinels, name: decodeURIComponent(m[3]), password, sentinelPassword: password })
}

function checkRecord (t: Tenant, database: string): void {
  if (!DATABASE_NAME.test(t.database) || t.database !== database) throw new TenantStoreConfigError(`tenant store: "${t.database}" is not a valid database name`)
  // Plain keys never reach the store.
  if (!KEY_HASH.test(t.keys.public) || !KEY_HASH.test(t.keys.secret)) {
    throw new TenantStoreConfigError(`tenant store: keys of ${t.database} are not hashed (use toTenant)`)
  }
}

export function createRedisStore (opts: RedisStoreOptions): RedisTenantStore {
  if (!opts.redis && !opts.url) throw new TenantStoreConfigError('the redis tenant store needs redis.url (GATEHOUSE_REDIS_URL)')
  const prefix = opts.prefix ?? 'gatehouse:'
  const log = opts.logger ?? silentLogger
  const where = safeUrl(opts.url)
  const connectTimeout = opts.connectTimeoutMs ?? 2000
  const clientOptions = {
    lazyConnect: true,
    connectTimeout,
    commandTimeout: opts.commandTimeoutMs ?? 2000,
    maxRetriesPerRequest: 1
  }
  const owned = !opts.redis
  const client: Redis = opts.redis ?? connectRedis(opts.url as string, clientOptions)
  let subscriber: Redis | null = null
  let subscribing: Promise<void> | null = null
  let closed = false
  /** This process saw the apply marker: a later miss without it means the data was lost. */
  let sawMarker = false
  const listeners = new Set<ChangeListener>()

  const keys = {
    tenant: (database: string) => `${prefix}tenant:${database}`,
    audit: (database: string) => `${prefix}tenant:${database}:audit`,
    set: `${prefix}tenants`,
    channel: `${prefix}tenants:changed`,
    marker: `${prefix}tenants:applied`
  }

  // One warning per outage and per connection, not one per failed reconnect.
  const watch = (conn: Redis, role: string) => {
    let down = false
    let everReady = conn.status === 'ready'
    conn.on('error', (err: Error) => {
      if (!down) { down = true; log.warn({ redis: where, role, err: err.message }, 'tenant store: redis connection failed') }
    })
    conn.on('ready', () => {
      if (down) log.info?.({ redis: where, role }, 'tenant store: redis connection restored')
      down = false
      if (role === 'subscriber' && everReady) notify(ALL_TENANTS) // messages may have been missed
      everReady = true
    })
  }
  if (owned) watch(client, 'commands')

  const notify = (database: string) => {
    for (const l of [...listeners]) {
      try { l(database) } catch { /* a listener's failure is its own */ }
    }
  }

  /** Waits for the first connection; fails at once while a known connection is down. */
  const connected = async (conn: Redis): Promise<void> => {
    if (closed) throw new TenantStoreBackendError('tenant store is closed')
    if (conn.status === 'ready') return
    if (conn.status === 'wait') conn.connect().catch(() => {})
    else if (conn.status !== 'connecting' && conn.status !== 'connect') {
      throw new TenantStoreBackendError(`tenant store unreachable: redis at ${where} is ${conn.status}`)
    }
    await new Promise<void>((resolve, reject) => {
      const done = (err?: Error) => {
        clearTimeout(timer)
        conn.off('ready', onReady)
        conn.off('error', onError)
        if (err) reject(err); else resolve()
      }
      const onReady = () => done()
      const onError = (err: Error) => done(new TenantStoreBackendError(`tenant store unreachable: redis at ${where}: ${err.message}`, { cause: err }))
      const timer = setTimeout(() => done(new TenantStoreBackendError(`tenant store unreachable: redis at ${where}: no connection after ${connectTimeout} ms`)), connectTimeout)
      conn.on('ready', onReady)
      conn.on('error', onError)
    })
  }

  const run = async <T>(what: string, fn: () => Promise<T>): Promise<T> => {
    await connected(client)
    try {
      return await fn()
    } catch (err) {
      if (err instanceof TenantStoreBackendError) throw err
      throw new TenantStoreBackendError(`tenant store: ${what} failed on redis at ${where}: ${(err as Error).message}`, { cause: err })
    }
  }

  const decode = (database: string, json: string): Tenant => {
    let t: Tenant
    try { t = JSON.parse(json) as Tenant } catch (err) {
      throw new TenantStoreBackendError(`tenant store: the record of ${database} in redis is not JSON`, { cause: err })
    }
    const signingKeys: unknown = t?.jwt?.signing_keys
    const keysOk = signingKeys === undefined || (Array.isArray(signingKeys) && signingKeys.every((k: { kid?: unknown, private_key?: unknown, public_jwk?: unknown } | null) =>
      typeof k?.kid === 'string' && typeof k.private_key === 'string' && typeof k.public_jwk === 'object' && k.public_jwk !== null))
    if (!t || typeof t !== 'object' || t.database !== database || !KEY_HASH.test(t.keys?.public) || !KEY_HASH.test(t.keys?.secret) || !keysOk) {
      throw new TenantStoreBackendError(`tenant store: the record of ${database} in redis is malformed; re-apply its tenant file`)
    }
    return t
  }

  const publishAll = async (databases: string[]) => {
    const p = client.pipeline()
    for (const d of databases) p.publish(keys.channel, d)
    await p.exec()
    for (const d of databases) notify(d)
  }

  const subscribe = (): Promise<void> => {
    if (subscribing) return subscribing
    let sub = subscriber
    if (!sub) {
      sub = client.duplicate({ ...clientOptions, commandTimeout: undefined, maxRetriesPerRequest: null })
      subscriber = sub
      watch(sub, 'subscriber')
      sub.on('message', (channel: string, message: string) => {
        if (channel !== keys.channel) return
        if (message === ALL_TENANTS || DATABASE_NAME.test(message)) notify(message)
      })
      // The first subscribe failed (Redis was down): subscribe once it is up, and resync.
      sub.on('ready', () => {
        if (subscribing || closed) return
        subscribe().then(() => notify(ALL_TENANTS), () => {})
      })
    }
    const conn = sub
    const attempt = (async () => {
      await connected(conn)
      await conn.subscribe(keys.channel)
    })()
    subscribing = attempt
    attempt.catch((err: Error) => {
      if (subscribing === attempt) subscribing = null
      if (!closed) log.warn({ redis: where, err: err.message }, 'tenant store: change subscription not active yet; retrying when redis is back')
    })
    return attempt
  }

  return {
    kind: 'redis',
    keys,
    async get (database) {
      return (await this.read(database))?.tenant ?? null
    },
    async read (database) {
      if (!DATABASE_NAME.test(database)) return null
      // One round trip: the record, its version and whether the store still holds what was applied.
      const [json, version, marker] = await run('get', async () => {
        const res = await client.pipeline().hmget(keys.tenant(database), 'record', 'version').exists(keys.marker).exec()
        const failed = res?.find(([err]) => err)
        if (!res || failed) throw failed?.[0] ?? new Error('pipeline aborted')
        const [rec, ver] = res[0]![1] as Array<string | null>
        return [rec ?? null, ver ?? '0', Number(res[1]![1])] as const
      })
      if (marker === 1) sawMarker = true
      else if (json === null && sawMarker) throw new TenantStoreEmptyError(where)
      return json === null ? null : { tenant: decode(database, json), version }
    },
    async write (database, expected, next, opts): Promise<WriteResult> {
      checkRecord(next, database)
      const current = expected === null ? null : await this.get(database)
      const problem = revivalProblem(current?.jwt ?? null, next.jwt)
      if (problem !== null) throw new TenantStoreConfigError(`${database}: ${problem}`)
      const at = new Date().toISOString()
      const entry = { at, ...opts.audit, database }
      // Nothing of the record changes (an apply that only records the file it applied).
      const recordOnly = opts.audit.fields.length === 0 && opts.lastApplied !== undefined && expected !== null
      const res = await run('write', () => client.eval(CAS_SCRIPT, 4, keys.tenant(database), keys.set, keys.marker, keys.audit(database),
        expected ?? '', JSON.stringify(next), at, JSON.stringify(entry), database, opts.lastApplied ? JSON.stringify(opts.lastApplied) : '',
        recordOnly ? '0' : '1')) as [number, string]
      if (Number(res[0]) !== 1) return { ok: false, version: res[1] === '' ? null : String(res[1]) }
      if (recordOnly) return { ok: true, version: String(res[1]), entry: null }
      await run('publish', () => publishAll([database]))
      return { ok: true, version: String(res[1]), entry: { ...entry, old_version: expected, new_version: String(res[1]) } }
    },
    async history (database) {
      if (!DATABASE_NAME.test(database)) return []
      const lines = await run('history', () => client.lrange(keys.audit(database), 0, AUDIT_KEEP - 1))
      return lines.flatMap((l) => { try { return [JSON.parse(l) as AuditEntry] } catch { return [] } })
    },
    async lastApplied (database) {
      if (!DATABASE_NAME.test(database)) return null
      const json = await run('get', () => client.hget(keys.tenant(database), 'applied'))
      if (json === null) return null
      try { return JSON.parse(json) as Tenant } catch { return null }
    },
    async meta (database) {
      if (!DATABASE_NAME.test(database)) return null
      const [version, updated] = await run('meta', () => client.hmget(keys.tenant(database), 'version', 'updated_at'))
      return version === null ? null : { version: Number(version), updated_at: updated }
    },
    async ping () {
      await run('ping', () => client.ping())
    },
    async list () {
      const names = await run('list', () => client.smembers(keys.set))
      return names.sort()
    },
    async putAll (given) {
      const seen = new Set<string>()
      for (const t of given) {
        checkRecord(t, t.database)
        if (seen.has(t.database)) throw new TenantStoreConfigError(`tenant store: ${t.database} given twice`)
        seen.add(t.database)
      }
      if (given.length === 0) return
      // Tombstones and a retired legacy secret stay whatever is put (docs/tenant-state.md).
      const stored = await run('get', () => client.pipeline(given.map((t) => ['hget', keys.tenant(t.database), 'record'])).exec())
      const tenants = given.map((t, i) => {
        const json = stored?.[i]?.[1] as string | null | undefined
        return json ? keepRevocations(decode(t.database, json), t) : t
      })
      const now = new Date().toISOString()
      await run('write', async () => {
        const m = client.multi()
        for (const t of tenants) {
          m.hset(keys.tenant(t.database), 'record', JSON.stringify(t), 'updated_at', now)
          m.hincrby(keys.tenant(t.database), 'version', 1)
          m.sadd(keys.set, t.database)
        }
        m.set(keys.marker, now)
        const res = await m.exec()
        const failed = res?.find(([err]) => err)
        if (!res || failed) throw new Error(failed?.[0]?.message ?? 'transaction aborted')
      })
      await run('publish', () => publishAll(tenants.map((t) => t.database)))
    },
    async delete (database) {
      if (!DATABASE_NAME.test(database)) return false
      const res = await run('delete', () => client.multi().del(keys.tenant(database)).srem(keys.set, database).exec())
      const removed = (res ?? []).some(([, n]) => Number(n) > 0)
      if (removed) await run('publish', () => publishAll([database]))
      return removed
    },
    onChange (listener) {
      listeners.add(listener)
      subscribe().catch(() => {})
      return () => { listeners.delete(listener) }
    },
    subscribed () {
      return subscribe()
    },
    async close () {
      if (closed) return
      closed = true
      listeners.clear()
      const end = async (conn: Redis) => {
        if (conn.status === 'ready') await conn.quit().catch(() => conn.disconnect())
        else conn.disconnect()
      }
      if (subscriber) await end(subscriber)
      if (owned) await end(client)
    }
  }
}

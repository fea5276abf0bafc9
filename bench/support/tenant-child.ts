// The processes of the scale bench (bench/tenants.ts), forked with --expose-gc so heap
// numbers are taken after a full collection:
// - `engine`: a REST engine (buildRestEngine, the process config's defaults) whose tenants
//   come from the Redis tenant store through the per-process tenant cache, as under
//   `gatehouse serve rest`; answers heap and pool questions, counts its log lines by message.
// - `records`: a tenant cache over the Redis store: fills it with every record, reports
//   the heap per cached record and the time of warm look-ups.
// - `listener`: a tenant cache over the Redis store that reports, for each change it is
//   told of, when it resolved the new record (the invalidation scenario).
import type { AddressInfo } from 'node:net'
import { Writable } from 'node:stream'
import { pino } from 'pino'
import { loadConfig } from '../../src/config/index.js'
import { loggerOptions } from '../../src/shared/index.js'
import { createRedisStore, createTenantCache } from '../../src/tenants/index.js'
import { buildRestEngine, restEngineOf } from '../../src/rest/index.js'

export type ChildStart =
  | { type: 'start'; role: 'engine'; redisUrl: string; prefix: string; overrides: Record<string, unknown> }
  | { type: 'start'; role: 'records'; redisUrl: string; prefix: string; databases: string[]; passes: number }
  | { type: 'start'; role: 'listener'; redisUrl: string; prefix: string; databases: string[] }
export type ChildMessage = ChildStart | { type: 'heap' } | { type: 'pools' } | { type: 'cpu' } | { type: 'close' }

export interface HeapNumbers {
  heapUsed: number
  external: number
  arrayBuffers: number
  rss: number
}
export interface PoolNumbers {
  open: number
  budget: number
  pools: number
  waiting: number
  logs: Record<string, number>
}
export interface RecordNumbers {
  records: number
  heapBefore: HeapNumbers
  heapAfter: HeapNumbers
  lookupsUs: number[]
}
export type ChildReply =
  | { type: 'listening'; port: number }
  | { type: 'ready' }
  | { type: 'heap'; heap: HeapNumbers }
  | { type: 'pools'; pools: PoolNumbers }
  | { type: 'cpu'; us: number }
  | { type: 'records'; result: RecordNumbers }
  | { type: 'seen'; database: string; limit: number; at: number }
  | { type: 'error'; message: string }

const send = (m: ChildReply): void => {
  process.send?.(m)
}
let close: (() => Promise<void>) | null = null
const heapOf: () => Promise<HeapNumbers> = heap
let poolsOf: (() => PoolNumbers) | null = null

/** Heap after full collections (the process runs with --expose-gc). */
async function heap(): Promise<HeapNumbers> {
  const gc = (globalThis as { gc?: () => void }).gc
  if (gc === undefined) throw new Error('run with --expose-gc')
  for (let i = 0; i < 3; i++) {
    gc()
    await new Promise((resolve) => setImmediate(resolve))
  }
  const m = process.memoryUsage()
  return { heapUsed: m.heapUsed, external: m.external, arrayBuffers: m.arrayBuffers, rss: m.rss }
}

process.on('message', (m: ChildMessage) => {
  const fail = (err: unknown): void =>
    send({ type: 'error', message: err instanceof Error ? (err.stack ?? err.message) : String(err) })
  if (m.type === 'cpu') {
    const c = process.cpuUsage()
    send({ type: 'cpu', us: c.user + c.system })
  } else if (m.type === 'heap') heapOf().then((h) => send({ type: 'heap', heap: h }), fail)
  else if (m.type === 'pools') {
    if (poolsOf !== null) send({ type: 'pools', pools: poolsOf() })
  } else if (m.type === 'close') void (close?.() ?? Promise.resolve()).finally(() => process.exit(0))
  else if (m.role === 'engine') startEngine(m).catch(fail)
  else if (m.role === 'records') runRecords(m).catch(fail)
  else startListener(m).catch(fail)
})

async function startEngine(m: Extract<ChildStart, { role: 'engine' }>): Promise<void> {
  const config = loadConfig({ env: {}, overrides: m.overrides })
  // The production logger; lines are counted by message instead of written.
  const logs: Record<string, number> = {}
  const sink = new Writable({
    write(chunk: Buffer, _enc, cb) {
      for (const line of chunk.toString('utf8').split('\n')) {
        if (line === '') continue
        try {
          const o = JSON.parse(line) as { msg?: string }
          const k = o.msg ?? '?'
          logs[k] = (logs[k] ?? 0) + 1
        } catch {
          logs['?'] = (logs['?'] ?? 0) + 1
        }
      }
      cb()
    },
  })
  const logger = pino(loggerOptions(config.log), sink)
  const store = createRedisStore({ url: m.redisUrl, prefix: m.prefix })
  const tenants = createTenantCache(store)
  const engine = buildRestEngine({ config, tenants, logger: logger as never })
  await engine.listen({ port: 0, host: '127.0.0.1' })
  const handle = restEngineOf(engine)
  poolsOf = () => {
    const s = handle.poolSnapshot()
    return { open: s.open, budget: s.budget, pools: s.tenants.length, waiting: s.waiting, logs: { ...logs } }
  }
  close = async () => {
    await engine.close()
    tenants.close()
    await store.close()
  }
  send({ type: 'listening', port: (engine.server.address() as AddressInfo).port })
}

async function runRecords(m: Extract<ChildStart, { role: 'records' }>): Promise<void> {
  const store = createRedisStore({ url: m.redisUrl, prefix: m.prefix })
  const cache = createTenantCache(store, { max: Math.max(10_000, m.databases.length) })
  close = async () => {
    cache.close()
    await store.close()
  }
  await store.subscribed()
  // Everything but the records themselves exists before the first heap number.
  const first = m.databases[0] as string
  if ((await cache.get(first)) === null) throw new Error(`no record for ${first}`)
  cache.invalidate(first)
  await new Promise((resolve) => setTimeout(resolve, 600)) // the second invalidation passes
  const heapBefore = await heap()
  for (const d of m.databases) if ((await cache.get(d)) === null) throw new Error(`no record for ${d}`)
  const heapAfter = await heap()
  // Warm look-ups, one at a time, each timed alone.
  const lookupsUs: number[] = []
  for (let pass = 0; pass < m.passes; pass++) {
    for (const d of m.databases) {
      const t0 = process.hrtime.bigint()
      const t = await cache.get(d)
      const dt = process.hrtime.bigint() - t0
      if (t === null) throw new Error(`lost ${d}`)
      lookupsUs.push(Number(dt) / 1000)
    }
  }
  send({ type: 'records', result: { records: m.databases.length, heapBefore, heapAfter, lookupsUs } })
}

async function startListener(m: Extract<ChildStart, { role: 'listener' }>): Promise<void> {
  const store = createRedisStore({ url: m.redisUrl, prefix: m.prefix })
  const cache = createTenantCache(store)
  close = async () => {
    cache.close()
    await store.close()
  }
  // Registered after the cache's own listener: runs once the cache dropped its copy.
  store.onChange((database) => {
    cache.get(database).then(
      (t) => {
        if (t !== null)
          send({ type: 'seen', database, limit: t.rest.default_limit, at: performance.timeOrigin + performance.now() })
      },
      () => {},
    )
  })
  await store.subscribed()
  for (const d of m.databases) await cache.get(d)
  send({ type: 'ready' })
}

// A gateway in a process of its own, as it is deployed (`gatehouse serve gateway`): a bench
// forks this file, sends { config overrides, tenant files }, and gets back the port. The
// parent asks for this process's CPU time ('cpu') around each measurement, and ends it with
// 'close'. Tenants: the per-process cache over a memory store, as served. Logs: the
// production logger at the given level, batched, to /dev/null. With `bare`, a bare
// passthrough proxy (bare-proxies.ts) runs here instead of the gateway.
import type { AddressInfo } from 'node:net'
import { Session } from 'node:inspector/promises'
import { writeFileSync } from 'node:fs'
import { loadConfig } from '../../src/config/index.js'
import {
  createMemoryStore,
  createTenantCache,
  parseTenantFile,
  tenantCacheOptions,
  toTenant,
} from '../../src/tenants/index.js'
import { buildGateway } from '../../src/gateway/index.js'
import { devNullLogger } from '../lib.js'
import { startBareProxy, type BareKind } from './bare-proxies.js'

export interface GatewayProcessStart {
  type: 'start'
  overrides: Record<string, unknown>
  /** Tenant files as parsed objects (the YAML's content). */
  tenants: unknown[]
  /** Run this bare proxy instead of the gateway. */
  bare?: { kind: BareKind; target: string; keepAliveMs: number }
  /** false: the gateway with its node:http fast path off (every request through fastify's routing). */
  fastPath?: boolean
}
export type GatewayProcessMessage = GatewayProcessStart | { type: 'cpu' } | { type: 'close' }
export type GatewayProcessReply =
  | { type: 'listening'; port: number }
  | { type: 'cpu'; user: number; system: number }
  | { type: 'error'; message: string }

const send = (m: GatewayProcessReply): void => {
  process.send?.(m)
}
let close: (() => Promise<void>) | null = null

process.on('message', (m: GatewayProcessMessage) => {
  if (m.type === 'cpu') {
    const c = process.cpuUsage()
    send({ type: 'cpu', user: c.user, system: c.system })
  } else if (m.type === 'close') {
    void (close?.() ?? Promise.resolve()).then(stopHeapSampling).finally(() => process.exit(0))
  } else if (m.type === 'start') {
    start(m).catch((err: unknown) => send({ type: 'error', message: err instanceof Error ? err.message : String(err) }))
  }
})

// BENCH_GATEWAY_HEAP=<dir>: the V8 sampling heap profiler over the process's life, counting
// objects that were collected too (allocation sites by bytes allocated, not only live ones),
// written as <dir>/<pid>.heapprofile when the process is closed.
let heapSession: Session | null = null
async function startHeapSampling(): Promise<void> {
  if (process.env.BENCH_GATEWAY_HEAP === undefined) return
  heapSession = new Session()
  heapSession.connect()
  await heapSession.post('HeapProfiler.startSampling', {
    samplingInterval: 4096,
    includeObjectsCollectedByMajorGC: true,
    includeObjectsCollectedByMinorGC: true,
  } as never)
}
async function stopHeapSampling(): Promise<void> {
  if (heapSession === null) return
  const { profile } = await heapSession.post('HeapProfiler.stopSampling')
  writeFileSync(`${process.env.BENCH_GATEWAY_HEAP}/${process.pid}.heapprofile`, JSON.stringify(profile))
}

async function start(m: GatewayProcessStart): Promise<void> {
  await startHeapSampling()
  if (m.bare !== undefined) {
    const bare = await startBareProxy(m.bare.kind, m.bare.target, m.bare.keepAliveMs)
    close = bare.close
    send({ type: 'listening', port: bare.port })
    return
  }
  const config = loadConfig({ env: {}, overrides: m.overrides })
  // The tenants as `gatehouse serve gateway` reads them: the per-process cache in front of a
  // store (here the memory store a tenants directory is loaded into).
  const store = createMemoryStore({ tenants: m.tenants.map((t) => toTenant(parseTenantFile(t, 'bench.yaml', {}))) })
  const tenants = createTenantCache(store, tenantCacheOptions(config.tenants))
  const log = devNullLogger(config.log)
  const gateway = buildGateway({
    config,
    tenants,
    logger: log.logger as never,
    ...(m.fastPath === false ? { fastPath: false } : {}),
  })
  await gateway.listen({ port: 0, host: '127.0.0.1' })
  close = async () => {
    await gateway.close()
    tenants.close()
    log.close()
  }
  send({ type: 'listening', port: (gateway.server.address() as AddressInfo).port })
}

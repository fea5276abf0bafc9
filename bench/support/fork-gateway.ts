// The parent side of gateway-process.ts: forks a gateway process (with the tsx loader this
// process runs under), starts it with the given config overrides and tenant files, and
// exposes its port, its CPU time and close(). BENCH_GATEWAY_PROF=<dir> profiles the gateway
// process (--cpu-prof into <dir>), BENCH_GATEWAY_PROF=perf starts it for `perf record`;
// BENCH_GATEWAY_NODE_ARGS adds Node options to it (space-separated, e.g. --trace-deopt);
// BENCH_GATEWAY_EXEC runs it with another executable in place of this Node (a script that
// execs Node under a tool, e.g. `valgrind --tool=callgrind`: instructions per request, a
// count that other processes on a busy machine do not inflate).
import { fork, type ChildProcess } from 'node:child_process'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import type { GatewayProcessMessage, GatewayProcessReply, GatewayProcessStart } from './gateway-process.js'

export interface ForkedGateway {
  port: number
  pid: number
  /** CPU time (user + system) of the gateway process so far, microseconds. */
  cpu: () => Promise<{ user: number; system: number }>
  close: () => Promise<void>
}

const ENTRY = path.join(path.dirname(fileURLToPath(import.meta.url)), 'gateway-process.ts')

function next(child: ChildProcess, type: GatewayProcessReply['type']): Promise<GatewayProcessReply> {
  return new Promise((resolve, reject) => {
    const onMessage = (m: GatewayProcessReply): void => {
      if (m.type === 'error') {
        cleanup()
        reject(new Error(`gateway process: ${m.message}`))
      } else if (m.type === type) {
        cleanup()
        resolve(m)
      }
    }
    const onExit = (code: number | null): void => {
      cleanup()
      reject(new Error(`gateway process exited with ${String(code)}`))
    }
    const cleanup = (): void => {
      child.off('message', onMessage)
      child.off('exit', onExit)
    }
    child.on('message', onMessage)
    child.on('exit', onExit)
  })
}

/** `bare`: a bare passthrough proxy in that process instead of the gateway; `fastPath` false: the gateway with its fast path off. */
/** `entry`: another checkout's bench/support/gateway-process.ts (its gateway, for A/B runs). */
export async function forkGateway(
  overrides: Record<string, unknown>,
  tenants: unknown[],
  bare?: GatewayProcessStart['bare'],
  fastPath?: boolean,
  entry = ENTRY,
): Promise<ForkedGateway> {
  const extra = (process.env.BENCH_GATEWAY_NODE_ARGS ?? '').split(' ').filter((a) => a !== '')
  const child = fork(entry, [], {
    execArgv: [
      '--import',
      'tsx',
      ...extra,
      ...(process.env.BENCH_GATEWAY_PROF !== undefined
        ? process.env.BENCH_GATEWAY_PROF === 'perf'
          ? ['--perf-basic-prof']
          : ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_GATEWAY_PROF}`]
        : []),
    ],
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    ...(process.env.BENCH_GATEWAY_EXEC !== undefined ? { execPath: process.env.BENCH_GATEWAY_EXEC } : {}),
  })
  const listening = next(child, 'listening')
  child.send({
    type: 'start',
    overrides,
    tenants,
    ...(bare !== undefined ? { bare } : {}),
    ...(fastPath === false ? { fastPath } : {}),
  } satisfies GatewayProcessMessage)
  const r = await listening
  if (r.type !== 'listening') throw new Error('unexpected reply')
  return {
    port: r.port,
    pid: child.pid ?? 0,
    cpu: async () => {
      const p = next(child, 'cpu')
      child.send({ type: 'cpu' } satisfies GatewayProcessMessage)
      const c = await p
      return c.type === 'cpu' ? { user: c.user, system: c.system } : { user: 0, system: 0 }
    },
    close: async () => {
      if (child.exitCode !== null) return
      const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()))
      child.send({ type: 'close' } satisfies GatewayProcessMessage)
      await exited
    },
  }
}

// A Redis primary, one or more replicas and three Sentinels on loopback (redis-server from the
// system, `redis-server <conf> --sentinel` for each sentinel), for failover tests. Ports are the
// kernel's (bound, released, then given to redis-server). Not a test file.
import { spawn, type ChildProcess } from 'node:child_process'
import { writeFileSync } from 'node:fs'
import path from 'node:path'
import { Redis } from 'ioredis'
import { eventually } from './eventually.js'
import { tempDir } from './tenant-fixtures.js'
import { closedPort } from './ports.js'

interface Teardown {
  teardown(fn: () => unknown): void
}

function startServer(t: Teardown, args: string[]): Promise<ChildProcess> {
  const child = spawn('redis-server', args, { stdio: ['ignore', 'pipe', 'ignore'] })
  t.teardown(() => {
    if (child.exitCode === null) child.kill('SIGKILL')
  })
  return new Promise((resolve, reject) => {
    let out = ''
    const onData = (chunk: Buffer): void => {
      out += chunk.toString('utf8')
      if (!/ready to accept connections|Sentinel ID is/i.test(out)) return
      child.stdout!.off('data', onData)
      child.stdout!.resume()
      resolve(child)
    }
    child.stdout!.on('data', onData)
    child.once('exit', (code) => reject(new Error(`redis-server ${args[0]} exited (${code}): ${out.slice(-400)}`)))
  })
}

/** One command on a new connection to 127.0.0.1:port. */
async function command<T>(port: number, cmd: string[]): Promise<T> {
  const c = new Redis({ host: '127.0.0.1', port, lazyConnect: true, maxRetriesPerRequest: 1 })
  c.on('error', () => {})
  try {
    return (await c.call(cmd[0]!, ...cmd.slice(1))) as T
  } finally {
    c.disconnect()
  }
}

export interface SentinelGroup {
  /** redis+sentinel://127.0.0.1:s1,.../<name> */
  url: string
  name: string
  sentinels: Array<{ host: string; port: number }>
  /** The port of the current primary, as the sentinels say. */
  primaryPort(): Promise<number>
  /** SENTINEL FAILOVER; resolves once the sentinels name another server as primary. */
  failover(): Promise<number>
  /** Kills every replica (the primary then has none to confirm writes). */
  stopReplica(): void
  /** One command to the server on that port (a new connection). */
  command<T>(port: number, cmd: string[]): Promise<T>
}

/**
 * `replicas`: how many servers replicate the primary (default 1). With one, the promoted replica
 * has no replica of its own until the Sentinels re-point the old primary, seconds later; with
 * two, the other replica follows the promoted one within the failover (docs/operating.md).
 */
export async function startSentinelGroup(
  t: Teardown,
  name = 'gatehouse',
  { replicas = 1 }: { replicas?: number } = {},
): Promise<SentinelGroup> {
  const dir = tempDir(t)
  const primary = await closedPort()
  const common = ['--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir]
  await startServer(t, ['--port', String(primary), ...common])
  const replicaPorts: number[] = []
  const replicaProcesses: ChildProcess[] = []
  for (let i = 0; i < replicas; i++) {
    const port = await closedPort()
    replicaPorts.push(port)
    replicaProcesses.push(
      await startServer(t, ['--port', String(port), ...common, '--replicaof', '127.0.0.1', String(primary)]),
    )
  }
  const sentinels: Array<{ host: string; port: number }> = []
  for (let i = 0; i < 3; i++) {
    const port = await closedPort()
    const conf = path.join(dir, `sentinel-${i}.conf`)
    writeFileSync(
      conf,
      [
        `port ${port}`,
        'bind 127.0.0.1',
        `dir ${dir}`,
        `sentinel monitor ${name} 127.0.0.1 ${primary} 2`,
        `sentinel down-after-milliseconds ${name} 5000`,
        `sentinel failover-timeout ${name} 10000`,
        '',
      ].join('\n'),
    )
    await startServer(t, [conf, '--sentinel'])
    sentinels.push({ host: '127.0.0.1', port })
  }
  const ask = <T>(cmd: string[], port = sentinels[0]!.port): Promise<T> => command<T>(port, cmd)
  const primaryPort = async (): Promise<number> =>
    Number((await ask<string[]>(['SENTINEL', 'get-master-addr-by-name', name]))[1])
  // Ready: every sentinel knows the replicas and the other sentinels, and the replicas are in sync.
  await eventually(async () => {
    const known = await ask<unknown[]>(['SENTINEL', 'replicas', name])
    const others = await ask<unknown[]>(['SENTINEL', 'sentinels', name])
    const infos = await Promise.all(replicaPorts.map((p) => command<string>(p, ['INFO', 'replication'])))
    if (known.length !== replicas || others.length !== 2 || !infos.every((i) => /master_link_status:up/.test(i)))
      return false
    // and they acknowledge writes (what WAIT counts)
    return Number(await command<number>(primary, ['WAIT', String(replicas), '1000'])) === replicas
  }, 30_000)
  return {
    url: `redis+sentinel://${sentinels.map((s) => `${s.host}:${s.port}`).join(',')}/${name}`,
    name,
    sentinels,
    primaryPort,
    async failover() {
      const before = await primaryPort()
      await ask(['SENTINEL', 'FAILOVER', name])
      return eventually(async () => {
        const now = await primaryPort()
        return now !== before ? now : false
      }, 30_000)
    },
    stopReplica() {
      for (const p of replicaProcesses) p.kill('SIGKILL')
    },
    command,
  }
}

// Log writes: the CPU per access-log line of pino through the parts' batched destination
// (src/shared/logger.ts, createBatchedDestination) against pino's own pino.destination
// (sonic-boom) with a write buffer, both to /dev/null, in one process, rounds alternating.
// The question it answers: whether the hand-written destination still earns its keep
// (docs/benchmarks.md). Knobs: BENCH_LOG_LINES (200,000 per round), BENCH_ROUNDS (3).
import { openSync, closeSync } from 'node:fs'
import pino, { type DestinationStream } from 'pino'
import { createBatchedDestination, createLogger } from '../src/shared/index.js'
import { environment, writeResult, type BenchReport } from './lib.js'

/** A gateway access line's fields (about 400 bytes as JSON). */
const LINE = {
  reqId: '5b8a3c2e-0f4d-4f1e-9b7a-2d3c4e5f6a7b',
  tenant: 'tenant_0123456789',
  service: 'rest',
  method: 'GET',
  url: '/tenant_0123456789/rest/v1/items?select=id,name,price,categories(name)&order=id&limit=10',
  status: 200,
  ms: 3.417,
  upstreamMs: 2.981,
  bytes: 1873,
  role: 'anon',
  ip: '203.0.113.7',
}

interface Side {
  name: string
  open(fd: number): { dest: DestinationStream; end(): Promise<void> }
}

const SIDES: Side[] = [
  {
    name: 'batched destination (ours)',
    open: (fd) => {
      const dest = createBatchedDestination({ fd })
      return {
        dest,
        end: async () => {
          await dest.settled(5_000)
          dest.end()
        },
      }
    },
  },
  {
    name: 'pino.destination (sonic-boom, minLength 4096)',
    open: (fd) => {
      const dest = pino.destination({ dest: fd, minLength: 4096, sync: false })
      return {
        dest,
        end: () => new Promise<void>((resolve) => dest.flush(() => resolve())),
      }
    },
  },
  {
    // A larger buffer, as ours: sonic-boom measures its whole pending string on every write.
    name: 'pino.destination (sonic-boom, minLength 65536, maxWrite 1 MiB)',
    open: (fd) => {
      const dest = pino.destination({ dest: fd, minLength: 65536, maxWrite: 1 << 20, sync: false })
      return {
        dest,
        end: () => new Promise<void>((resolve) => dest.flush(() => resolve())),
      }
    },
  },
]

async function round(side: Side, lines: number): Promise<number> {
  const fd = openSync('/dev/null', 'w')
  const { dest, end } = side.open(fd)
  const log = createLogger({ level: 'info' }, dest)
  const before = process.cpuUsage()
  for (let i = 0; i < lines; i++) {
    log.info(LINE, 'request completed')
    // Let writes complete now and then, as a server's event loop does between requests.
    if (i % 1000 === 999) await new Promise((r) => setImmediate(r))
  }
  await end()
  const used = process.cpuUsage(before)
  closeSync(fd)
  return (used.user + used.system) / lines
}

export async function run(): Promise<BenchReport> {
  const lines = Number(process.env.BENCH_LOG_LINES ?? 200_000)
  const rounds = Number(process.env.BENCH_ROUNDS ?? 3)
  const perLine = new Map<string, number[]>(SIDES.map((s) => [s.name, []]))
  for (const s of SIDES) await round(s, lines / 10)
  for (let r = 0; r < rounds; r++) for (const s of SIDES) perLine.get(s.name)!.push(await round(s, lines))
  const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? 0
  const ours = median(perLine.get(SIDES[0]!.name)!)
  const theirs = median(perLine.get(SIDES[1]!.name)!)
  const report: BenchReport = {
    name: 'logger',
    title: 'Log writes: CPU per access line, our batched destination against pino.destination',
    startedAt: new Date().toISOString(),
    secondsPerScenario: 0,
    connections: 1,
    scenarios: [],
    ratios: [
      {
        name: 'pino.destination / batched destination (CPU per line)',
        description: 'above 1: the hand-written destination costs less per line',
        value: theirs / ours,
      },
    ],
    goals: [],
    notes: [...perLine].map(
      ([name, xs]) => `${name}: ${xs.map((x) => x.toFixed(2)).join(', ')} µs CPU per line (${lines} lines a round)`,
    ),
    environment: environment(),
  }
  writeResult(report)
  return report
}

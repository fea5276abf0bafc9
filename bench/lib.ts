// Benchmark plumbing shared by every bench/<name>.ts: the BenchReport type, an autocannon
// runner (a child process: warm-up, then N seconds against one URL -> req/s, p50, p99,
// errors, and our CPU per request), ratios, and bench/results/<name>.json. Scenarios run
// one after another, never together.
import { createRequire } from 'node:module'
import { spawn } from 'node:child_process'
import { closeSync, mkdirSync, openSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { performance } from 'node:perf_hooks'
import { pino, type Logger } from 'pino'
import { createBatchedDestination, loggerOptions, type LogSettings } from '../src/shared/index.js'

/** One measured scenario. */
export interface BenchScenario {
  name: string
  description: string
  requestsPerSec: number
  p50Ms: number
  p99Ms: number
  /** Requests completed in the measured window. */
  requests: number
  errors: number
  timeouts: number
  non2xx: number
  /**
   * Busy time of the main thread (event loop utilisation) per request, microseconds.
   * Inflated on a loaded machine (a descheduled busy thread still counts).
   */
  mainThreadUsPerRequest?: number
  /**
   * CPU time (user + system) of this process per request, microseconds, with the load
   * generator in another process: what the servers under test cost, whatever the
   * machine's load. The ratio of two of these predicts the req/s ratio on a free machine.
   */
  cpuUsPerRequest?: number
  /**
   * The part of cpuUsPerRequest spent by the other processes under test (MeasureOptions
   * otherCpu, e.g. a gateway in its own process), per request, microseconds.
   */
  otherCpuUsPerRequest?: number
  /** The system (kernel) part of otherCpuUsPerRequest: socket reads and writes, wake-ups. */
  otherSystemUsPerRequest?: number
}

/** A ratio between two scenarios (e.g. gateway / bare proxy req/s), with an optional target. */
export interface BenchRatio {
  name: string
  description: string
  value: number
  /** The value must be at least this (at most, when `atMost`). */
  target?: number
  /** The target is an upper bound. */
  atMost?: boolean
  ok?: boolean
}

/** A goal stated in its own unit (p99 under 150 ms, under 4 KB per record ...) and whether it was met. */
export interface BenchGoal {
  name: string
  /** The goal as a person reads it: `< 150 ms`, `0 errors`. */
  goal: string
  /** The measured value with its unit. */
  value: string
  met: boolean
}

/** What every bench/<name>.ts run() returns; bench/run.ts collects them. */
export interface BenchReport {
  name: string
  title: string
  startedAt: string
  secondsPerScenario: number
  connections: number
  scenarios: BenchScenario[]
  ratios: BenchRatio[]
  /** Goals in their own units (latency bounds, bytes, counts); rendered as a table. */
  goals?: BenchGoal[]
  notes: string[]
  environment: { node: string; platform: string; cpus: number; cpuModel: string; loadavg: number[] }
}

export interface MeasureOptions {
  url: string
  seconds?: number
  warmupSeconds?: number
  connections?: number
  pipelining?: number
  method?: string
  headers?: Record<string, string>
  body?: string
  /**
   * CPU time of other processes under test (e.g. a gateway in its own process), read before
   * and after the measured window and added to cpuUsPerRequest.
   */
  otherCpu?: Array<() => Promise<{ user: number; system: number }>>
}

export interface AutocannonResult {
  requests: { average: number; total: number }
  latency: { p50: number; p99: number }
  errors: number
  timeouts: number
  non2xx: number
  statusCodeStats?: Record<string, { count: number }>
}

const require = createRequire(import.meta.url)
const AUTOCANNON_CLI = path.join(path.dirname(require.resolve('autocannon/package.json')), 'autocannon.js')

/** Runs the autocannon CLI in a child process (its own CPU, not ours) and returns its JSON result. */
export function autocannonProcess(o: MeasureOptions, seconds: number): Promise<AutocannonResult> {
  const args = [
    AUTOCANNON_CLI,
    '--json',
    '--no-progress',
    '-c',
    String(o.connections ?? 32),
    '-p',
    String(o.pipelining ?? 1),
    '-d',
    String(seconds),
    '-m',
    o.method ?? 'GET',
  ]
  for (const [k, v] of Object.entries(o.headers ?? {})) args.push('-H', `${k}=${v}`)
  if (o.body !== undefined) args.push('-b', o.body)
  // BENCH_RATE: a fixed offered load (requests per second over all connections), so that
  // two proxies' CPU per request is compared at the same throughput (a busier proxy batches
  // more per wake-up and spends less per request). Off by default.
  const rate = Number(process.env.BENCH_RATE)
  if (Number.isFinite(rate) && rate > 0) args.push('-R', String(rate))
  args.push(o.url)
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'] })
    let out = ''
    let err = ''
    child.stdout.on('data', (c: Buffer) => {
      out += c.toString()
    })
    child.stderr.on('data', (c: Buffer) => {
      err += c.toString()
    })
    child.on('error', reject)
    child.on('exit', (code) => {
      try {
        resolve(JSON.parse(out.slice(out.indexOf('{'))) as AutocannonResult)
      } catch {
        reject(new Error(`autocannon exited with ${String(code)}: ${err.slice(0, 500)}`))
      }
    })
  })
}

export const BENCH_DIR = path.dirname(fileURLToPath(import.meta.url))
export const RESULTS_DIR = path.join(BENCH_DIR, 'results')

/** Seconds per scenario: BENCH_SECONDS or the given default. */
export function benchSeconds(fallback = 10): number {
  const v = Number(process.env.BENCH_SECONDS)
  return Number.isFinite(v) && v > 0 ? v : fallback
}

/**
 * Runs autocannon against `url`: a warm-up (not measured), then `seconds` measured. The
 * load generator is a separate process, so this process's CPU time over the window is what
 * the servers under test spent (cpuUsPerRequest).
 */
export async function measure(name: string, description: string, o: MeasureOptions): Promise<BenchScenario> {
  const warm = o.warmupSeconds ?? 2
  if (warm > 0) await autocannonProcess(o, warm)
  const others = o.otherCpu ?? []
  const other0 = await Promise.all(others.map((f) => f()))
  const cpu0 = process.cpuUsage()
  const elu0 = performance.eventLoopUtilization()
  const r = await autocannonProcess(o, o.seconds ?? benchSeconds())
  const elu = performance.eventLoopUtilization(elu0)
  const cpu = process.cpuUsage(cpu0)
  const other1 = await Promise.all(others.map((f) => f()))
  let otherCpu = 0
  let otherSystem = 0
  other1.forEach((c, i) => {
    otherCpu += c.user - other0[i]!.user + c.system - other0[i]!.system
    otherSystem += c.system - other0[i]!.system
  })
  const total = r.requests.total
  return {
    name,
    description,
    requestsPerSec: Math.round(r.requests.average),
    p50Ms: r.latency.p50,
    p99Ms: r.latency.p99,
    requests: total,
    errors: r.errors,
    timeouts: r.timeouts,
    non2xx: r.non2xx,
    mainThreadUsPerRequest: total > 0 ? Math.round((elu.active * 1000) / total) : 0,
    cpuUsPerRequest: total > 0 ? Math.round((cpu.user + cpu.system + otherCpu) / total) : 0,
    ...(others.length > 0
      ? {
          otherCpuUsPerRequest: total > 0 ? Math.round(otherCpu / total) : 0,
          otherSystemUsPerRequest: total > 0 ? Math.round(otherSystem / total) : 0,
        }
      : {}),
  }
}

/** A measured value against a goal it must not exceed (e.g. a share of CPU). */
export function atMost(name: string, description: string, value: number, target: number): BenchRatio {
  const v = Math.round(value * 1000) / 1000
  return { name, description, value: v, target, atMost: true, ok: v <= target }
}

/** A measured value against a goal it must reach. */
export function atLeast(name: string, description: string, value: number, target: number): BenchRatio {
  const v = Math.round(value * 1000) / 1000
  return { name, description, value: v, target, ok: v >= target }
}

export function ratio(
  name: string,
  description: string,
  num: BenchScenario,
  den: BenchScenario,
  target?: number,
): BenchRatio {
  const value = den.requestsPerSec === 0 ? 0 : Math.round((num.requestsPerSec / den.requestsPerSec) * 1000) / 1000
  return target === undefined ? { name, description, value } : { name, description, value, target, ok: value >= target }
}

/** `den` CPU per request over `num`'s: how many of num's requests fit in den's CPU budget. */
export function cpuRatio(
  name: string,
  description: string,
  num: BenchScenario,
  den: BenchScenario,
  target?: number,
): BenchRatio {
  const a = num.cpuUsPerRequest ?? 0
  const b = den.cpuUsPerRequest ?? 0
  const value = a === 0 ? 0 : Math.round((b / a) * 1000) / 1000
  return target === undefined ? { name, description, value } : { name, description, value, target, ok: value >= target }
}

export function environment(): BenchReport['environment'] {
  const cpus = os.cpus()
  return {
    node: process.version,
    platform: `${os.platform()} ${os.release()}`,
    cpus: cpus.length,
    cpuModel: cpus[0]?.model ?? 'unknown',
    loadavg: os.loadavg().map((x) => Math.round(x * 100) / 100),
  }
}

/** Writes bench/results/<name>.json and returns its path. */
export function writeResult(report: BenchReport, name = report.name): string {
  mkdirSync(RESULTS_DIR, { recursive: true })
  const file = path.join(RESULTS_DIR, `${name}.json`)
  writeFileSync(file, JSON.stringify(report, null, 2) + '\n')
  return file
}

/** A plain-text table of a report, for the console and latest.md. */
export function formatReport(r: BenchReport): string {
  const lines = [
    `## ${r.title} (${r.name})`,
    '',
    `${r.secondsPerScenario} s per scenario, ${r.connections} connections, ${r.environment.cpus} CPUs (${r.environment.cpuModel}), Node ${r.environment.node}, load ${r.environment.loadavg.join(' ')}`,
    '',
    '| scenario | req/s | p50 ms | p99 ms | CPU µs/req | errors | non-2xx |',
    '|---|---:|---:|---:|---:|---:|---:|',
    ...r.scenarios.map(
      (s) =>
        `| ${s.name} | ${s.requestsPerSec} | ${s.p50Ms} | ${s.p99Ms} | ${s.cpuUsPerRequest ?? s.mainThreadUsPerRequest ?? '-'}${s.otherCpuUsPerRequest !== undefined ? ` (${s.otherCpuUsPerRequest})` : ''} | ${s.errors + s.timeouts} | ${s.non2xx} |`,
    ),
    '',
  ]
  if (r.goals !== undefined && r.goals.length > 0) {
    lines.push('| goal | target | value | met |', '|---|---|---:|---|')
    for (const g of r.goals) lines.push(`| ${g.name} | ${g.goal} | ${g.value} | ${g.met ? 'met' : '**NOT met**'} |`)
    lines.push('')
  }
  for (const q of r.ratios) {
    lines.push(
      `- ${q.name}: **${q.value}**${q.target !== undefined ? ` (target ${q.atMost === true ? '<=' : '>='} ${q.target}: ${q.ok ? 'met' : 'NOT met'})` : ''} - ${q.description}`,
    )
  }
  if (r.notes.length) {
    lines.push('')
    for (const n of r.notes) lines.push(`- ${n}`)
  }
  return lines.join('\n') + '\n'
}

/**
 * The production logger (our options, batched like bufferedStdout()) writing to /dev/null,
 * so a bench pays for its log lines without printing them. close() ends the destination
 * before the fd is closed: a destination that flushes at exit into a closed fd (re-used by
 * then, perhaps by a non-blocking socket) can spin forever.
 */
export function devNullLogger(log: LogSettings): { logger: Logger; close: () => void } {
  const fd = openSync('/dev/null', 'w')
  const dest = createBatchedDestination({ fd })
  return {
    logger: pino(loggerOptions(log), dest),
    close: () => {
      dest.end()
      closeSync(fd)
    },
  }
}

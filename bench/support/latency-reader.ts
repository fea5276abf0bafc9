// Request latencies in microseconds, measured in a process of its own (so the process under
// test does not time itself): `connections` loops of GET requests over keep-alive undici
// connections for `seconds`, each timed with performance.now(). autocannon's percentiles
// are whole milliseconds, too coarse to compare a ~1 ms median with another (a 1 ms step
// is a 2x "change"); these are not. The parent side is readLatencies(); the child runs this
// file's main when forked.
import { fork } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { performance } from 'node:perf_hooks'
import { Pool } from 'undici'

export interface LatencyResult {
  /** Median and 99th percentile, microseconds. */
  p50Us: number
  p99Us: number
  requests: number
  non2xx: number
  errors: number
}

interface Job {
  url: string
  headers: Record<string, string>
  connections: number
  seconds: number
}

/** Forks this file and measures `url` from there. */
export function readLatencies(job: Job): Promise<LatencyResult> {
  return new Promise((resolve, reject) => {
    const child = fork(fileURLToPath(import.meta.url), [], {
      execArgv: ['--import', 'tsx'],
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    })
    child.once('message', (m: LatencyResult) => {
      resolve(m)
      child.disconnect()
    })
    child.once('exit', (code) => {
      if (code !== 0) reject(new Error(`latency reader exited with ${String(code)}`))
    })
    child.send(job)
  })
}

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return 0
  return Math.round(sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))]!)
}

async function measure(job: Job): Promise<LatencyResult> {
  const u = new URL(job.url)
  const pool = new Pool(u.origin, { connections: job.connections })
  const path = u.pathname + u.search
  const durations: number[] = []
  let non2xx = 0
  let errors = 0
  const end = performance.now() + job.seconds * 1000
  const loop = async (): Promise<void> => {
    while (performance.now() < end) {
      const t0 = performance.now()
      try {
        const r = await pool.request({ path, method: 'GET', headers: job.headers })
        await r.body.dump()
        durations.push((performance.now() - t0) * 1000)
        if (r.statusCode < 200 || r.statusCode > 299) non2xx++
      } catch {
        errors++
      }
    }
  }
  await Promise.all(Array.from({ length: job.connections }, loop))
  await pool.close()
  durations.sort((a, b) => a - b)
  return {
    p50Us: percentile(durations, 0.5),
    p99Us: percentile(durations, 0.99),
    requests: durations.length,
    non2xx,
    errors,
  }
}

if (process.send !== undefined && process.argv[1] === fileURLToPath(import.meta.url)) {
  process.once('message', (job: Job) => {
    void measure(job).then((r) => {
      process.send!(r)
    })
  })
}

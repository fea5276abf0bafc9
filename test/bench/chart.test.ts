// The benchmark chart renders every scenario of every report with its numbers.
import t from 'tap'
import { renderChart } from '../../bench/chart.js'
import type { BenchReport } from '../../bench/lib.js'

const env = { node: 'v20', platform: 'linux', cpus: 2, cpuModel: 'x', loadavg: [0, 0, 0] }
const scenario = (name: string, rps: number, p50: number, p99: number) => ({
  name,
  description: name,
  requestsPerSec: rps,
  p50Ms: p50,
  p99Ms: p99,
  requests: rps,
  errors: 0,
  timeouts: 0,
  non2xx: 0,
})

t.test('one bar per scenario, values printed, text escaped', async (t) => {
  const reports: BenchReport[] = [
    {
      name: 'gateway',
      title: 'g',
      startedAt: '',
      secondsPerScenario: 1,
      connections: 1,
      ratios: [],
      notes: [],
      environment: env,
      scenarios: [scenario('bare-proxy', 6000, 4, 10), scenario('gateway <jwt>', 5000, 5, 12)],
    },
    {
      name: 'rest-read',
      title: 'r',
      startedAt: '',
      secondsPerScenario: 1,
      connections: 1,
      ratios: [],
      notes: [],
      environment: env,
      scenarios: [scenario('engine', 2000, 10, 40)],
    },
  ]
  const svg = renderChart(reports)
  t.match(svg, /^<svg /)
  t.equal((svg.match(/fill="#3b82f6"/g) ?? []).length, 3, 'three throughput bars')
  t.match(svg, />6000</)
  t.match(svg, />10 \/ 40</)
  t.match(svg, /gateway &lt;jwt&gt;/)
  t.notMatch(svg, /<jwt>/)
})

t.test('latencies from microseconds to seconds all get bars of increasing width (log scale)', async (t) => {
  const reports: BenchReport[] = [
    {
      name: 'tenants',
      title: 't',
      startedAt: '',
      secondsPerScenario: 1,
      connections: 1,
      ratios: [],
      notes: [],
      environment: env,
      scenarios: [
        scenario('resolve', 100000, 0.001, 0.004),
        scenario('cold', 5, 90, 140),
        scenario('all at once', 50, 9000, 14000),
      ],
    },
  ]
  const svg = renderChart(reports)
  // p99 bars are the light ones, one per scenario in row order.
  const widths = [...svg.matchAll(/width="(\d+)" height="\d+" fill="#fca5a5"/g)].map((m) => Number(m[1]))
  t.equal(widths.length, 3)
  t.ok(widths[0]! > 10, `a 4 µs p99 is visible (${widths[0]} px)`)
  t.ok(widths[0]! < widths[1]! && widths[1]! < widths[2]!, `widths grow with the latency: ${widths.join(', ')}`)
  t.match(svg, /log scale/)
})

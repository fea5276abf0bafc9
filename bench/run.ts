// `npm run bench`: imports every bench/<name>.ts (all but lib.ts, run.ts, chart.ts and
// rehearse.ts, which is `npm run rehearse`), runs their
// run() one after another, prints each report, and writes bench/results/latest.json and
// latest.md with the chart latest.svg. Arguments narrow the set: `npm run bench -- gateway auth`
// (the other sections of latest.* are kept from the previous run).
import { readdirSync, readFileSync, writeFileSync, mkdirSync } from 'node:fs'
import path from 'node:path'
import { pathToFileURL } from 'node:url'
import { BENCH_DIR, RESULTS_DIR, formatReport, type BenchReport } from './lib.js'
import { renderChart } from './chart.js'

interface Failure {
  name: string
  error: string
}

const wanted = new Set(process.argv.slice(2))
const names = readdirSync(BENCH_DIR)
  .filter(
    (f) => f.endsWith('.ts') && !f.endsWith('.d.ts') && !['lib.ts', 'run.ts', 'chart.ts', 'rehearse.ts'].includes(f),
  )
  .map((f) => f.slice(0, -3))
  .filter((n) => wanted.size === 0 || wanted.has(n))
  .sort()

const reports: BenchReport[] = []
const failures: Failure[] = []
for (const name of names) {
  process.stdout.write(`# bench ${name} ...\n`)
  try {
    const mod = (await import(pathToFileURL(path.join(BENCH_DIR, `${name}.ts`)).href)) as {
      run?: () => Promise<BenchReport>
    }
    if (typeof mod.run !== 'function') throw new Error('exports no run()')
    const report = await mod.run()
    reports.push(report)
    process.stdout.write(formatReport(report) + '\n')
  } catch (err) {
    const error = err instanceof Error ? (err.stack ?? err.message) : String(err)
    failures.push({ name, error })
    process.stdout.write(`bench ${name} failed: ${error}\n\n`)
  }
}

mkdirSync(RESULTS_DIR, { recursive: true })
const at = new Date().toISOString()
// A narrowed run (`npm run bench -- gateway`) replaces its own sections of latest.* and
// keeps the others from the previous run (each report carries its own startedAt).
if (wanted.size > 0) {
  try {
    const previous = JSON.parse(readFileSync(path.join(RESULTS_DIR, 'latest.json'), 'utf8')) as {
      reports?: BenchReport[]
    }
    const fresh = new Set(reports.map((r) => r.name))
    const failed = new Set(failures.map((f) => f.name))
    const kept = (previous.reports ?? []).filter((r) => !fresh.has(r.name) && !failed.has(r.name))
    reports.push(...kept)
    reports.sort((a, b) => a.name.localeCompare(b.name))
  } catch {
    /* no previous results */
  }
}
writeFileSync(path.join(RESULTS_DIR, 'latest.json'), JSON.stringify({ at, reports, failures }, null, 2) + '\n')
const md = [
  `# Benchmarks (${at})`,
  '',
  'Written by `npm run bench` (bench/run.ts). One section per bench/<name>.ts.',
  '',
  '![throughput and latency per scenario](latest.svg)',
  '',
  ...reports.map(formatReport),
  ...failures.map((f) => `## ${f.name}: FAILED\n\n\`\`\`\n${f.error}\n\`\`\`\n`),
].join('\n')
writeFileSync(path.join(RESULTS_DIR, 'latest.md'), md)
writeFileSync(path.join(RESULTS_DIR, 'latest.svg'), renderChart(reports))
process.stdout.write(
  `wrote ${path.relative(process.cwd(), path.join(RESULTS_DIR, 'latest.md'))} and latest.json (${reports.length} reports, ${failures.length} failed)\n`,
)
const missed = reports.flatMap((r) => [
  ...r.ratios
    .filter((q) => q.ok === false)
    .map((q) => `${r.name}: ${q.name} ${q.value} ${q.atMost === true ? '>' : '<'} ${q.target}`),
  ...(r.goals ?? []).filter((g) => !g.met).map((g) => `${r.name}: ${g.name} ${g.value}, goal ${g.goal}`),
])
if (missed.length) process.stdout.write(`targets not met:\n  ${missed.join('\n  ')}\n`)
process.exit(failures.length ? 1 : 0)

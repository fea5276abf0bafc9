// The SVG chart of `npm run bench`: one row per scenario of every report, a bar of
// requests per second (left panel) and of p50/p99 latency (right panel), both on a log
// scale (the scenarios span microsecond look-ups to seconds-long waits under load). Pure:
// reports in, SVG text out; bench/run.ts writes it to bench/results/latest.svg.
import type { BenchReport } from './lib.js'

function esc(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;')
}

export function renderChart(reports: BenchReport[]): string {
  const rows = reports.flatMap((r) => r.scenarios.map((s) => ({ report: r.name, s })))
  const rowH = 22
  const top = 48
  const labelW = 260
  const panelW = 360
  const gap = 40
  const width = labelW + panelW * 2 + gap + 40
  const groupGap = 10
  let y = top
  const placed: Array<{ y: number; report: string; s: BenchReport['scenarios'][number]; first: boolean }> = []
  let last = ''
  for (const row of rows) {
    const first = row.report !== last
    if (first && last !== '') y += groupGap
    placed.push({ y, report: row.report, s: row.s, first })
    last = row.report
    y += rowH
  }
  const height = y + 30
  const maxRps = Math.max(1, ...rows.map((r) => r.s.requestsPerSec))
  const maxLat = Math.max(1, ...rows.map((r) => r.s.p99Ms))
  // Log scales: 1 req/s and 1 µs are the left edges.
  const rpsFrac = (v: number): number => (v <= 1 ? 0 : Math.log10(v) / Math.log10(Math.max(10, maxRps)))
  const minLat = 0.001
  const latFrac = (v: number): number =>
    v <= minLat ? 0 : Math.log10(v / minLat) / Math.log10(Math.max(10 * minLat, maxLat) / minLat)
  const x1 = labelW
  const x2 = labelW + panelW + gap
  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="sans-serif" font-size="12">`,
    `<rect width="100%" height="100%" fill="#fff"/>`,
    `<text x="${x1}" y="20" font-weight="bold">throughput (req/s, log scale)</text>`,
    `<text x="${x2}" y="20" font-weight="bold">latency (ms, log scale from 1 µs): p50 dark, p99 light</text>`,
    `<text x="8" y="20" font-weight="bold">scenario</text>`,
  ]
  for (const p of placed) {
    const cy = p.y + rowH / 2 + 4
    const label = `${p.first ? p.report + ': ' : ''}${p.s.name}`
    out.push(`<text x="8" y="${cy}" ${p.first ? 'font-weight="bold"' : ''}>${esc(label)}</text>`)
    const w = Math.max(1, Math.round(rpsFrac(p.s.requestsPerSec) * (panelW - 60)))
    out.push(`<rect x="${x1}" y="${p.y + 3}" width="${w}" height="${rowH - 6}" fill="#3b82f6"/>`)
    out.push(`<text x="${x1 + w + 4}" y="${cy}">${p.s.requestsPerSec}</text>`)
    const w99 = Math.max(1, Math.round(latFrac(p.s.p99Ms) * (panelW - 70)))
    const w50 = Math.max(1, Math.round(latFrac(p.s.p50Ms) * (panelW - 70)))
    out.push(`<rect x="${x2}" y="${p.y + 3}" width="${w99}" height="${rowH - 6}" fill="#fca5a5"/>`)
    out.push(`<rect x="${x2}" y="${p.y + 3}" width="${w50}" height="${rowH - 6}" fill="#dc2626"/>`)
    out.push(`<text x="${x2 + w99 + 4}" y="${cy}">${p.s.p50Ms} / ${p.s.p99Ms}</text>`)
  }
  out.push(
    `<text x="8" y="${height - 10}" fill="#555">${esc(`${rows.length} scenarios from ${reports.length} benchmarks`)}</text>`,
    '</svg>',
  )
  return out.join('\n') + '\n'
}

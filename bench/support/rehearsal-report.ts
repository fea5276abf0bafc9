// The figures and the picture of `npm run rehearse` (bench/rehearse.ts): per event the
// requests failed (for the cluster outage, apart by cluster: only cluster b's tenants may
// fail), what they failed with, and the time from the event's start until the last failure
// of its window (0: nothing failed); the SVG of requests over time (answered and failed per
// half second, the events shaded). Pure: samples in, text out.
import type { Sample } from './rehearsal-load.js'

export interface EventSpan {
  name: 'rolling reload' | 'redis failover' | 'cluster b stopped' | 'engine worker killed'
  start: number
  end: number
}

interface EventFigures {
  name: string
  seconds: number
  requests: number
  failed: number
  /** Failures of tenants on cluster a (the live cluster): goal 0 in every event. */
  failedOnA: number
  /** Status or error -> count. */
  failures: Record<string, number>
  /** ms from the event's start until the last failure of its window. */
  recoveredMs: number
  /**
   * ms from the event's end (the fault removed: reloaded, failed over, cluster restarted) until
   * the last failed data request (read, write, sign-in, refresh), and panel change.
   */
  afterEndMs: { data: number; panel: number }
}

interface Extra {
  writesLost: number
  panelLost: number
  writes: number
  loadavg: number[]
}

export interface RehearsalReport {
  events: EventFigures[]
  requests: number
  writes: number
  writesLost: number
  panelChanges: number
  panelLost: number
  loadavg: number[]
  markdown: string
}

/**
 * An event's window runs from its start to the next one's; a request counts for the window in
 * which it was answered (or failed), so a request sent just before the next event and failed
 * by it counts for that event, not for the one before.
 */
function figures(samples: Sample[], span: EventSpan, until: number): EventFigures {
  const window = samples.filter((s) => s.at + s.ms >= span.start && s.at + s.ms < until)
  const failed = window.filter((s) => !s.ok)
  const failures: Record<string, number> = {}
  for (const f of failed) {
    const key = `${f.cluster}: ${f.kind} ${f.outcome}`
    failures[key] = (failures[key] ?? 0) + 1
  }
  const lastOf = (list: Sample[], from: number): number => list.reduce((m, s) => Math.max(m, s.at + s.ms), from)
  const last = lastOf(failed, span.start)
  const panel = failed.filter((s) => s.kind === 'panel')
  const data = failed.filter((s) => s.kind !== 'panel')
  return {
    name: span.name,
    seconds: Math.round((span.end - span.start) / 100) / 10,
    requests: window.length,
    failed: failed.length,
    failedOnA: failed.filter((s) => s.cluster === 'a').length,
    failures,
    recoveredMs: Math.round(last - span.start),
    afterEndMs: {
      data: Math.round(lastOf(data, span.end) - span.end),
      panel: Math.round(lastOf(panel, span.end) - span.end),
    },
  }
}

export function summarize(samples: Sample[], spans: EventSpan[], extra: Extra): RehearsalReport {
  const end = samples.reduce((m, s) => Math.max(m, s.at + s.ms), 0) + 1
  const events = spans.map((s, i) => figures(samples, s, spans[i + 1]?.start ?? end))
  const panel = samples.filter((s) => s.kind === 'panel' && s.ok).length
  const rows = events.map(
    (e) =>
      `| ${e.name} | ${e.seconds} s | ${e.requests} | ${e.failed} (${e.failedOnA} on cluster a) | ${
        Object.entries(e.failures)
          .map(([k, n]) => `${k}: ${n}`)
          .join(', ') || '-'
      } | ${e.recoveredMs} ms | ${e.afterEndMs.data} / ${e.afterEndMs.panel} ms |`,
  )
  const markdown = [
    '| event | took | requests in its window | failed | failed with (cluster: request status code) | last failure after its start | after its end (data / panel) |',
    '|---|---|---|---|---|---|---|',
    ...rows,
    '',
    `${samples.length} requests in all; ${extra.writes} acknowledged inserts, ${extra.writesLost} lost; ` +
      `${panel} acknowledged panel changes, ${extra.panelLost} lost (per tenant, the last acknowledged value is in the store); ` +
      `load average during the run ${extra.loadavg.map((l) => l.toFixed(2)).join(' / ')} (1/5/15 min).`,
  ].join('\n')
  return {
    events,
    requests: samples.length,
    writes: extra.writes,
    writesLost: extra.writesLost,
    panelChanges: panel,
    panelLost: extra.panelLost,
    loadavg: extra.loadavg,
    markdown,
  }
}

function esc(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;')
}

/** Requests answered (blue) and failed (red) per half second, the events shaded and named. */
export function renderTimeline(samples: Sample[], spans: EventSpan[]): string {
  const bin = 500
  const end = samples.reduce((m, s) => Math.max(m, s.at), 0)
  const bins = Math.max(1, Math.ceil(end / bin))
  const ok = new Array<number>(bins).fill(0)
  const bad = new Array<number>(bins).fill(0)
  for (const s of samples) (s.ok ? ok : bad)[Math.min(bins - 1, Math.floor(s.at / bin))]! += 1
  const max = Math.max(1, ...ok.map((n, i) => n + bad[i]!))
  const [left, top, w, h] = [50, 40, 900, 220]
  const r1 = (v: number): number => Math.round(v * 10) / 10
  const x = (ms: number): number => r1(left + (ms / (bins * bin)) * w)
  // A square-root scale: the steady load and the fast refusals of an outage on one picture.
  const y = (n: number): number => r1(top + h - Math.sqrt(n / max) * h)
  const out = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${left + w + 20}" height="${top + h + 50}" font-family="sans-serif" font-size="11">`,
    '<rect width="100%" height="100%" fill="#fff"/>',
    `<text x="${left}" y="16" font-weight="bold">npm run rehearse: requests per 0.5 s, answered (blue) and failed (red), square-root scale</text>`,
  ]
  for (const s of spans) {
    out.push(
      `<rect x="${x(s.start)}" y="${top}" width="${r1(Math.max(2, x(s.end) - x(s.start)))}" height="${h}" fill="#fde68a"/>`,
    )
    out.push(`<text x="${x(s.start) + 2}" y="${top - 4}">${esc(s.name)}</text>`)
  }
  const bw = r1(w / bins)
  ok.forEach((n, i) => {
    const b = bad[i]!
    if (n > 0)
      out.push(`<rect x="${x(i * bin)}" y="${y(n)}" width="${bw}" height="${r1(y(0) - y(n))}" fill="#3b82f6"/>`)
    if (b > 0)
      out.push(`<rect x="${x(i * bin)}" y="${y(n + b)}" width="${bw}" height="${r1(y(n) - y(n + b))}" fill="#dc2626"/>`)
  })
  out.push(`<line x1="${left}" y1="${top + h}" x2="${left + w}" y2="${top + h}" stroke="#333"/>`)
  for (const n of [max, Math.round(max / 4), Math.round(max / 16)]) out.push(`<text x="4" y="${y(n) + 4}">${n}</text>`)
  out.push(`<text x="4" y="${top + h}">0</text>`)
  for (let s = 0; s * 1000 <= bins * bin; s += 10)
    out.push(`<text x="${x(s * 1000)}" y="${top + h + 14}">${s} s</text>`)
  out.push('</svg>')
  return out.join('\n') + '\n'
}

// DbResult -> {status, headers, body} (PostgREST's Response.hs, spec §2.6, §5.6, §6.3):
// status from the count and range, Content-Range, Content-Location, Content-Profile,
// Preference-Applied, our cut-result header, and the response.* settings a function may
// set. Pure: knows HTTP, not SQL.
import { RangeNotSatisfiableError, ResponseHeadersGucError, ResponseStatusGucError } from '../errors.js'
import type { ApiRequest } from '../api-request/types.js'
import type { ReadPlan } from '../plan/types.js'
import { contentRange } from './content-range.js'

export { contentRange } from './content-range.js'

/** The header of ours saying a result was cut by a limit the caller did not give. */
export const LIMIT_APPLIED_HEADER = 'x-gatehouse-limit-applied'

export interface RestResponse {
  status: number
  headers: Record<string, string>
  /** null: no body (HEAD, 204). */
  body: string | null
}

/** What the main statement of a read returned, plus the planned count when asked. */
export interface ReadResult {
  totalResultSet: number | null
  pageTotal: number
  body: string
  responseHeaders: string | null
  responseStatus: string | null
  cut: boolean
  /** `Plan Rows` of the count query's EXPLAIN, when run. */
  plannedTotal: number | null
}

/** The row count of an `EXPLAIN (FORMAT JSON)` result. */
export function plannedRows (explain: unknown): number | null {
  const doc = typeof explain === 'string' ? JSON.parse(explain) as unknown : explain
  const rows = (Array.isArray(doc) ? (doc[0] as { Plan?: { 'Plan Rows'?: unknown } })?.Plan?.['Plan Rows'] : undefined)
  return typeof rows === 'number' ? rows : null
}

/** `response.headers` as a function set it: a JSON array of single-key objects (else PGRST111). */
export function parseResponseHeaders (value: string | null): Array<[string, string]> {
  if (value === null) return []
  let doc: unknown
  try { doc = JSON.parse(value) } catch { throw new ResponseHeadersGucError() }
  if (!Array.isArray(doc)) throw new ResponseHeadersGucError()
  const out: Array<[string, string]> = []
  for (const item of doc) {
    if (!item || typeof item !== 'object' || Array.isArray(item)) throw new ResponseHeadersGucError()
    const entries = Object.entries(item as Record<string, unknown>)
    if (entries.length !== 1 || typeof entries[0][1] !== 'string') throw new ResponseHeadersGucError()
    const [k, v] = entries[0] as [string, string]
    if (!/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(k) || /[\r\n]/.test(v)) throw new ResponseHeadersGucError()
    out.push([k.toLowerCase(), v])
  }
  return out
}

/** `response.status` as a function set it (else PGRST112). */
export function parseResponseStatus (value: string | null): number | null {
  if (value === null) return null
  const n = Number(value)
  if (!/^[0-9]{3}$/.test(value.trim()) || n < 100 || n > 599) throw new ResponseStatusGucError()
  return n
}

/** The total a count preference yields (estimated: exact up to max_rows, else the larger of exact and planned). */
export function resolveTotal (plan: ReadPlan, r: ReadResult): number | null {
  switch (plan.count) {
    case null: return null
    case 'exact': return r.totalResultSet ?? r.pageTotal
    case 'planned': return r.plannedTotal ?? r.totalResultSet
    case 'estimated': {
      const exact = r.totalResultSet ?? r.pageTotal
      if (plan.maxRows !== null && exact > plan.maxRows && r.plannedTotal !== null) return Math.max(exact, r.plannedTotal)
      return exact
    }
  }
}

/** Status, headers and body of a successful read. */
export function shapeReadResponse (req: ApiRequest, plan: ReadPlan, r: ReadResult): RestResponse {
  const offset = plan.tree.range.offset
  const total = resolveTotal(plan, r)
  const headers: Record<string, string> = {}
  if (total !== null && offset > total) {
    throw new RangeNotSatisfiableError({
      details: `An offset of ${offset} was requested, but there are only ${total} rows.`,
      headers: { 'content-range': `*/${total}` }
    })
  }
  headers['content-type'] = plan.media.contentType
  headers['content-range'] = contentRange(offset, r.pageTotal, total)
  const canonical = req.query.canonical
  headers['content-location'] = `/${encodeURIComponent(plan.table.name)}${canonical ? '?' + canonical : ''}`
  if (req.echoProfile) headers['content-profile'] = req.schema
  if (plan.count !== null) headers['preference-applied'] = `count=${plan.count}`
  if (r.cut && plan.implicitLimit !== null) headers[LIMIT_APPLIED_HEADER] = String(plan.implicitLimit)
  let status = total !== null && r.pageTotal < total ? 206 : 200
  for (const [k, v] of parseResponseHeaders(r.responseHeaders)) headers[k] = v
  const custom = parseResponseStatus(r.responseStatus)
  if (custom !== null) status = custom
  return { status, headers, body: plan.headersOnly ? null : r.body }
}

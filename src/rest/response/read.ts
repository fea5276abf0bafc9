// Read results -> {status, headers, body} (PostgREST's Response.hs, docs/rest-protocol.md §2.6, §5.6):
// status from the count and range, Content-Range, Content-Location, Content-Profile,
// Preference-Applied. Pure: knows HTTP, not SQL.
import { RangeNotSatisfiableError, errorBodyJson } from '../errors.js'
import type { ApiRequest } from '../api-request/types.js'
import type { ReadPlan } from '../plan/types.js'
import { contentRange } from './content-range.js'
import { preferenceApplied } from './preference-applied.js'
import { toMainResult, withResponseSettings, type MainResult, type RestResponse } from './gucs.js'

/** What the main statement of a read returned, plus `Plan Rows` of the count query's EXPLAIN when it ran. */
type ReadResult = MainResult & { plannedTotal: number | null }

/** The main statement's row (and the count's EXPLAIN rows) of a read. */
export function toReadResult(
  main: Record<string, unknown>,
  explain: ReadonlyArray<Record<string, unknown>> | null,
): ReadResult {
  return { ...toMainResult(main), plannedTotal: explain === null ? null : plannedRows(explain[0]?.['QUERY PLAN']) }
}

/** The row count of an `EXPLAIN (FORMAT JSON)` result. */
function plannedRows(explain: unknown): number | null {
  const doc = typeof explain === 'string' ? (JSON.parse(explain) as unknown) : explain
  const rows = Array.isArray(doc) ? (doc[0] as { Plan?: { 'Plan Rows'?: unknown } })?.Plan?.['Plan Rows'] : undefined
  return typeof rows === 'number' ? rows : null
}

/**
 * The total a count preference yields. Estimated, as PostgREST 14 decides it: the larger
 * of exact and planned when the exact count exceeds max_rows, and always when there is no
 * max_rows (its `total > maxRows` is true against an absent maximum); else the exact count.
 */
function resolveTotal(plan: ReadPlan, r: ReadResult): number | null {
  switch (plan.count) {
    case null:
      return null
    case 'exact':
      return r.totalResultSet ?? r.pageTotal
    case 'planned':
      return r.plannedTotal ?? r.totalResultSet
    case 'estimated': {
      const exact = r.totalResultSet ?? r.pageTotal
      if ((plan.maxRows === null || exact > plan.maxRows) && r.plannedTotal !== null)
        return Math.max(exact, r.plannedTotal)
      return exact
    }
  }
}

/**
 * A relation name as PostgREST writes it in Content-Location: its UTF-8 bytes as they are
 * (a header string carries them one per character); only characters a header cannot hold
 * are percent-encoded.
 */
function rawPathName(name: string): string {
  const raw = Buffer.from(name, 'utf8').toString('latin1')
  return raw.replace(
    // eslint-disable-next-line no-control-regex -- the control characters are what it escapes
    /[\u0000-\u0008\u000a-\u001f\u007f]/g,
    (c) => '%' + c.charCodeAt(0).toString(16).toUpperCase().padStart(2, '0'),
  )
}

/** Status, headers and body of a successful read. */
export function shapeReadResponse(req: ApiRequest, plan: ReadPlan, r: ReadResult): RestResponse {
  const offset = plan.tree.range.offset
  const total = resolveTotal(plan, r)
  const headers: Record<string, string> = {}
  // As PostgREST: an offset past the counted total is answered like the read (its headers,
  // Content-Range `*/<total>`) with PGRST103's body in place of the rows.
  const outOfBounds = total !== null && offset > total
  headers['content-type'] = plan.media.contentType
  headers['content-range'] = outOfBounds ? `*/${total}` : contentRange(offset, r.pageTotal, total)
  const canonical = req.query.canonical
  headers['content-location'] = `/${rawPathName(plan.table.name)}${canonical ? '?' + canonical : ''}`
  if (req.echoProfile) headers['content-profile'] = req.schema
  const applied = preferenceApplied(req.preferences, { tx: true })
  if (applied !== null) headers['preference-applied'] = applied
  if (outOfBounds)
    return withResponseSettings(
      416,
      headers,
      errorBodyJson(new RangeNotSatisfiableError('offsetOutOfBounds', offset, total)),
      r,
    )
  const status = total !== null && r.pageTotal < total ? 206 : 200
  return withResponseSettings(status, headers, plan.headersOnly ? null : r.body, r)
}

// Write results -> {status, headers, body} (PostgREST's Response.hs, docs/rest-protocol.md §3.8):
// 201/200/204 by method, return preference and real inserts; Content-Range; Location for
// return=headers-only; Preference-Applied; Content-Profile; and the response.* settings a
// trigger or function may set. Pure.
import type { ApiRequest } from '../api-request/types.js'
import type { CallPlan, MutatePlan } from '../plan/types.js'
import { RangeNotSatisfiableError, errorBodyJson } from '../errors.js'
import { contentRange } from './content-range.js'
import { withResponseSettings, type MainResult, type RestResponse } from './gucs.js'
import { locationOf } from './location.js'
import { preferenceApplied } from './preference-applied.js'

/** Status, headers and body of a successful POST / PUT / PATCH / DELETE. */
export function shapeMutateResponse(req: ApiRequest, plan: MutatePlan, r: MainResult): RestResponse {
  const headers: Record<string, string> = {}
  const n = r.pageTotal
  const total = plan.count !== null ? n : null
  const representation = plan.returning === 'representation'
  const spec = plan.spec
  const applied = preferenceApplied(req.preferences, {
    resolution: spec.kind === 'insert' && spec.resolutionApplied,
    missing: plan.mutation === 'insert' || plan.mutation === 'update',
    return: true,
    tx: true,
    maxAffected: plan.mutation === 'update' || plan.mutation === 'delete',
  })
  if (applied !== null) headers['preference-applied'] = applied
  if (req.echoProfile) headers['content-profile'] = req.schema
  if (representation) headers['content-type'] = plan.media.contentType
  const body = representation ? r.body : null

  switch (plan.mutation) {
    case 'insert': {
      headers['content-range'] = contentRange(1, 0, total)
      if (plan.returning === 'headers-only') {
        const loc = locationOf(plan.table.name, plan.table.pk, r.body.toString())
        if (loc !== null) headers.location = loc
      }
      // Matches PostgREST: merge-duplicates answers 200 when no row was really inserted (also for []).
      const merged = spec.kind === 'insert' && spec.onConflict?.action === 'merge' && (r.inserted ?? 0) <= 0
      // An empty 201 carries Content-Length: 0 and no Content-Type (docs/rest-protocol.md §3.8).
      return withResponseSettings(merged ? 200 : 201, headers, body, r)
    }
    case 'single-upsert':
      if (!representation) return withResponseSettings(204, headers, null, r)
      return withResponseSettings(r.inserted !== null && r.inserted > 0 ? 201 : 200, headers, body, r)
    case 'update':
    case 'delete':
      // A DELETE's range is `*/<total>` whatever it removed.
      headers['content-range'] = contentRange(0, plan.mutation === 'update' ? n : 0, total)
      return withResponseSettings(representation ? 200 : 204, headers, body, r)
  }
}

/** Status, headers and body of a successful RPC call. */
export function shapeCallResponse(req: ApiRequest, plan: CallPlan, r: MainResult): RestResponse {
  const headers: Record<string, string> = {}
  const applied = preferenceApplied(req.preferences, { tx: true, maxAffected: true })
  if (applied !== null) headers['preference-applied'] = applied
  if (req.echoProfile) headers['content-profile'] = req.schema
  const set = plan.shape === 'setof-scalar' || plan.shape === 'setof-composite'
  // A function that returns one value (or void) is one row, at offset 0.
  const offset = set ? plan.tree.range.offset : 0
  const total = !plan.countRows ? null : plan.ranged ? (r.totalResultSet ?? r.pageTotal) : r.pageTotal
  headers['content-range'] = contentRange(offset, r.pageTotal, total)
  // Matches PostgREST: void answers 204 and still says how many rows the call made.
  if (plan.shape === 'void') return withResponseSettings(204, headers, null, r)
  headers['content-type'] = plan.media.contentType
  // As PostgREST: an offset past the counted total keeps the call's headers, PGRST103's body.
  if (set && total !== null && offset > total) {
    headers['content-range'] = `*/${total}`
    return withResponseSettings(
      416,
      headers,
      plan.headersOnly ? null : errorBodyJson(new RangeNotSatisfiableError('offsetOutOfBounds', offset, total)),
      r,
    )
  }
  const status = total !== null && r.pageTotal < total ? 206 : 200
  return withResponseSettings(status, headers, plan.headersOnly ? null : r.body, r)
}

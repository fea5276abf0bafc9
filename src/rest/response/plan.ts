// The plan media type's answer (PostgREST's DbPlanResult): 200 with the EXPLAIN output,
// one line per row as Postgres printed it, each ending in a newline; Content-Type names the
// format, the media type the plan is for and the options. Pure.
import type { ApiRequest } from '../api-request/types.js'
import type { ExplainSpec } from '../plan/types.js'
import type { RestResponse } from './gucs.js'

function planContentType(e: ExplainSpec): string {
  const options = e.options.length > 0 ? `; options=${e.options.join('|')}` : ''
  return `application/vnd.pgrst.plan+${e.format}; for="${e.forMediaType}"${options}; charset=utf-8`
}

/** `rows` are the EXPLAIN statement's rows (column `QUERY PLAN`, as text). */
export function shapePlanResponse(
  req: ApiRequest,
  e: ExplainSpec,
  rows: ReadonlyArray<Record<string, unknown>>,
): RestResponse {
  const headers: Record<string, string> = { 'content-type': planContentType(e) }
  if (req.echoProfile) headers['content-profile'] = req.schema
  const body = rows.map((r) => `${String(r['QUERY PLAN'] ?? '')}\n`).join('')
  return { status: 200, headers, body }
}

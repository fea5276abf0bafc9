// GoTrue's error body, built in one place for the auth engine and for the gateway's own
// refusals under /auth/v1 (where a GoTrue client reads GoTrue's shape). Two shapes, chosen by
// the request's X-Supabase-Api-Version (supabase/auth internal/api/errors.go): from
// 2024-01-01 `{code, message}`; before, `{code: <status>, error_code, msg}` with `error_id` on
// a 5xx. `x-sb-error-code` names the code either way.

const API_VERSION_2024 = Date.UTC(2024, 0, 1)

/** True when the X-Supabase-Api-Version header is a date >= 2024-01-01 (as GoTrue parses it: exactly YYYY-MM-DD). */
export function wantsApiVersion2024(header: string | string[] | undefined): boolean {
  const v = Array.isArray(header) ? header[0] : header
  if (!v || !/^\d{4}-\d{2}-\d{2}$/.test(v)) return false
  const t = Date.parse(v + 'T00:00:00Z')
  return Number.isFinite(t) && t >= API_VERSION_2024
}

export interface GoTrueError {
  status: number
  code: string
  message: string
  /** The request id, sent as `error_id` with a 5xx in the older shape. */
  requestId: string
  /** The request's X-Supabase-Api-Version header. */
  apiVersion: string | string[] | undefined
  /** Body fields of the error beyond code and message (e.g. `weak_password`). */
  extra?: Record<string, unknown>
}

/** The body and the headers GoTrue answers an error with. */
export function gotrueErrorBody(e: GoTrueError): { body: Record<string, unknown>; headers: Record<string, string> } {
  const headers: Record<string, string> = { 'x-sb-error-code': e.code }
  if (wantsApiVersion2024(e.apiVersion)) {
    headers['x-supabase-api-version'] = '2024-01-01'
    return { body: { code: e.code, message: e.message, ...e.extra }, headers }
  }
  const body: Record<string, unknown> = { code: e.status, error_code: e.code, msg: e.message }
  if (e.status >= 500) body.error_id = e.requestId
  return { body: { ...body, ...e.extra }, headers }
}

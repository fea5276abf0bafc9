// What every response shares: its shape, the main statement's row, and the `response.headers` / `response.status`
// settings a function or trigger may set in the request's transaction (docs/rest-protocol.md §6.3, PGRST111,
// PGRST112). Pure.
import { ResponseHeadersGucError, ResponseStatusGucError } from '../errors.js'

export interface RestResponse {
  status: number
  /** A list: a header `response.headers` names more than once (Set-Cookie) is sent once per value. */
  headers: Record<string, string | string[]>
  /** null: no body (HEAD, 204). Bytes: a media type handler's output over bytea. */
  body: string | Buffer | null
}

/** What the main statement of a read, write or call returned (its one row). */
export interface MainResult {
  pageTotal: number
  /** The count query's total, else null. */
  totalResultSet: number | null
  body: string | Buffer
  responseHeaders: string | null
  responseStatus: string | null
  /** Rows really inserted (merge-duplicates, PUT), null when not counted. */
  inserted: number | null
}

export function toMainResult(row: Record<string, unknown>): MainResult {
  const num = (v: unknown): number | null => (v === null || v === undefined ? null : Number(v))
  return {
    pageTotal: Number(row.page_total ?? 0),
    totalResultSet: num(row.total_result_set),
    body: typeof row.body === 'string' || Buffer.isBuffer(row.body) ? row.body : '',
    responseHeaders: (row.response_headers as string | null | undefined) ?? null,
    responseStatus: (row.response_status as string | null | undefined) ?? null,
    inserted: num(row.response_inserted),
  }
}

/** `response.headers` as a function set it: a JSON array of single-key objects (else PGRST111). */
function parseResponseHeaders(value: string | null): Array<[string, string]> {
  if (value === null) return []
  let doc: unknown
  try {
    doc = JSON.parse(value)
  } catch {
    throw new ResponseHeadersGucError()
  }
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
function parseResponseStatus(value: string | null): number | null {
  if (value === null) return null
  const n = Number(value)
  if (!/^[0-9]{3}$/.test(value.trim()) || n < 100 || n > 599) throw new ResponseStatusGucError()
  return n
}

/**
 * Applies the response.* settings to a shaped response, as PostgREST's
 * addHeadersIfNotIncluded: a header the settings name replaces the engine's, and every
 * value the settings give is sent (twice named, twice sent); then the status.
 */
export function withResponseSettings(
  status: number,
  headers: Record<string, string | string[]>,
  body: string | Buffer | null,
  r: { responseHeaders: string | null; responseStatus: string | null },
): RestResponse {
  const set = parseResponseHeaders(r.responseHeaders)
  const named = new Set(set.map(([k]) => k))
  for (const k of named) delete headers[k]
  for (const [k, v] of set) {
    const prev = headers[k]
    headers[k] = prev === undefined ? v : [...(Array.isArray(prev) ? prev : [prev]), v]
  }
  const custom = parseResponseStatus(r.responseStatus)
  return { status: custom ?? status, headers, body }
}

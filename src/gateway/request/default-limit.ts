// The default row limit of table reads, owned here end to end (docs/architecture.md,
// "Contracts with the engines"); the engines know nothing of it, a real PostgREST 14 serves
// as well as ours. On the way in: `limit=<default_limit>` added to a GET/HEAD of a table
// that has no top-level limit, larger limits capped at max_limit (as PostgREST's
// db-max-rows, which truncates silently). On the way back: what was done, in our headers,
// and whether the rows were cut, read from PostgREST's own Content-Range. The same pass over
// the raw query takes `?apikey=` out (links in mail carry it; upstreams and their logs must
// not see it); other parameters are forwarded byte for byte.
import type { OutgoingHttpHeaders } from 'node:http'
import type { Tenant } from '../../tenants/index.js'
import type { Service } from '../types.js'
import { isTablePath } from './path.js'

export interface LimitPolicy {
  default: number
  max: number | null
}

export interface QueryRewrite {
  /** The query to forward, without `?` ('' when none). */
  query: string
  /** Value of the first `apikey` parameter, when there was one. */
  apikey: string | undefined
  /** The limit the gateway added, or null. */
  limitAdded: number | null
  /** The cap the gateway applied to a larger limit, or null. */
  limitCapped: number | null
}

/** The default and maximum row limits of a request: a table read's, else null. */
export function limitPolicyOf(method: string, service: Service, path: string, tenant: Tenant): LimitPolicy | null {
  return service === 'rest' && (method === 'GET' || method === 'HEAD') && isTablePath(path)
    ? { default: tenant.rest.default_limit, max: tenant.rest.max_limit }
    : null
}

function decode(raw: string): string {
  if (!raw.includes('%') && !raw.includes('+')) return raw
  try {
    return decodeURIComponent(raw.replace(/\+/g, ' '))
  } catch {
    return raw
  }
}

/** Whether an unencoded raw query has a `limit` key (`limit=...`, or a bare `limit`). */
function hasTopLevelLimit(query: string): boolean {
  for (let i = query.indexOf('limit'); i !== -1; i = query.indexOf('limit', i + 5)) {
    const end = i + 5
    if (
      (i === 0 || query.charCodeAt(i - 1) === 38) /* & */ &&
      (end === query.length || query.charCodeAt(end) === 61 /* = */ || query.charCodeAt(end) === 38) /* & */
    )
      return true
  }
  return false
}

/**
 * Rewrites a raw query. `limit` is the tenant's policy for a GET/HEAD on a table, null
 * for every other request (RPC, the OpenAPI root, writes, auth).
 */
export function rewriteQuery(query: string, limit: LimitPolicy | null): QueryRewrite {
  const defaultLimit = limit === null ? 0 : limit.max !== null ? Math.min(limit.default, limit.max) : limit.default
  // Fast path: nothing to take out and no limit to look at.
  if (
    query === '' ||
    (!query.includes('apikey') && !query.includes('%') && (limit === null || !query.includes('limit')))
  ) {
    if (limit === null) return { query, apikey: undefined, limitAdded: null, limitCapped: null }
    return {
      query: query === '' ? `limit=${defaultLimit}` : `${query}&limit=${defaultLimit}`,
      apikey: undefined,
      limitAdded: defaultLimit,
      limitCapped: null,
    }
  }
  // Second fast path (a table read that names a limit somewhere, e.g. `authors.limit=` or
  // `limit=20`, and nothing encoded): with no cap to apply, only whether a top-level
  // `limit` key is present matters, and the query is forwarded as it came.
  if (limit !== null && limit.max === null && !query.includes('apikey') && !query.includes('%')) {
    if (hasTopLevelLimit(query)) return { query, apikey: undefined, limitAdded: null, limitCapped: null }
    return { query: `${query}&limit=${defaultLimit}`, apikey: undefined, limitAdded: defaultLimit, limitCapped: null }
  }
  let apikey: string | undefined
  let sawLimit = false
  let capped: number | null = null
  const kept: string[] = []
  for (const part of query.split('&')) {
    if (part === '') continue
    const eq = part.indexOf('=')
    const key = decode(eq === -1 ? part : part.slice(0, eq))
    if (key === 'apikey') {
      if (apikey === undefined) apikey = decode(eq === -1 ? '' : part.slice(eq + 1))
      continue
    }
    if (limit !== null && key === 'limit') {
      sawLimit = true
      const value = eq === -1 ? '' : decode(part.slice(eq + 1)).trim()
      if (limit.max !== null && /^\d+$/.test(value) && Number(value) > limit.max) {
        capped = limit.max
        kept.push(`limit=${limit.max}`)
        continue
      }
    }
    kept.push(part)
  }
  let limitAdded: number | null = null
  if (limit !== null && !sawLimit) {
    kept.push(`limit=${defaultLimit}`)
    limitAdded = defaultLimit
  }
  return { query: kept.join('&'), apikey, limitAdded, limitCapped: capped }
}

/** Says in the client's response headers which limit the gateway added or capped. */
export function addLimitHeaders(q: QueryRewrite, headers: OutgoingHttpHeaders): void {
  if (q.limitAdded !== null) headers['x-gatehouse-default-limit'] = String(q.limitAdded)
  if (q.limitCapped !== null) headers['x-gatehouse-max-limit'] = String(q.limitCapped)
}

const RANGE_HEADER = /^\s*(?:items=)?(\d+)-(\d+)\s*$/

/**
 * The limit a full page of this read is reported against (limitApplied): the default limit
 * the gateway added, unless the caller's own Range header (GET only, as PostgREST reads it)
 * asks for no more rows than that, so that the caller chose the page's size.
 */
export function cutWatch(q: QueryRewrite, method: string, range: string | undefined): number | null {
  const limit = q.limitAdded
  if (limit === null || range === undefined || method !== 'GET') return limit
  const m = RANGE_HEADER.exec(range)
  return m !== null && Number(m[2]) - Number(m[1]) + 1 <= limit ? null : limit
}

const CONTENT_RANGE = /^\s*(\d+)-(\d+)\/(\d+|\*)\s*$/

/**
 * `x-gatehouse-limit-applied` of a read answered with `status` and `contentRange`, or null:
 * the limit, when the page holds as many rows as the limit and the total (when counted)
 * says more exist. Without a count, exactly `limit` rows in the table read the same as a
 * cut (PostgREST/postgrest#2776): the header then says the rows may have been cut.
 */
export function limitApplied(limit: number, status: number, contentRange: string | undefined): string | null {
  if ((status !== 200 && status !== 206) || contentRange === undefined) return null
  const m = CONTENT_RANGE.exec(contentRange)
  if (m === null) return null
  const last = Number(m[2])
  if (last - Number(m[1]) + 1 !== limit) return null
  return m[3] !== '*' && last + 1 >= Number(m[3]) ? null : String(limit)
}

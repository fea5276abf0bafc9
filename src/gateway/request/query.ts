// Query-string rewriting on the way to an upstream, on the raw string (other parameters
// are forwarded byte for byte): takes `?apikey=` out (links in mail carry it; upstreams and
// their logs must not see it), and gives table reads `limit=<default_limit>` when they have
// none, capping larger limits at max_limit (as PostgREST, which truncates silently).

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

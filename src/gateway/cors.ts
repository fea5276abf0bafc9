// CORS for browsers calling the gateway with supabase-js. Preflights are answered here,
// without a key (the key is the auth boundary, not the Origin: Supabase's gateway docs), as
// PostgREST's CORS middleware answers them (wai-cors with its policy, PostgREST src/PostgREST/
// Cors.hs): 200, its methods, the requested headers allowed with Authorization and the simple
// ones, cached a day. Allowed origins come from config.gateway.cors_origins ('*' or exact origins).

/**
 * Response headers a browser script may read: those PostgREST's CORS policy exposes
 * (src/PostgREST/Cors.hs: Content-Encoding, Content-Location, Content-Range, Content-Type,
 * Date, Location, Server, Transfer-Encoding, Range-Unit; the Content-Location shows the
 * gateway's default limit, docs/rest-protocol.md), then the gateway's and GoTrue's own.
 */
const CORS_EXPOSED_HEADERS = [
  'content-encoding',
  'content-location',
  'content-range',
  'content-type',
  'date',
  'location',
  'server',
  'transfer-encoding',
  'range-unit',
  'range',
  'x-request-id',
  'preference-applied',
  'x-total-count',
  'link',
  'x-supabase-api-version',
  'x-gatehouse-error-code',
  'x-gatehouse-default-limit',
  'x-gatehouse-max-limit',
  'x-gatehouse-limit-applied',
  // Request-rate limits (rate-limits.ts): a browser app may read when to retry.
  'ratelimit',
  'ratelimit-policy',
  'retry-after',
]

/** PostgREST's methods as wai-cors lists them (HEAD last). */
const METHODS = 'GET, POST, PATCH, PUT, DELETE, OPTIONS, HEAD'

/** What a preflight allows: Authorization, the headers the browser asks for, then CORS's simple headers. */
function allowedRequestHeaders(requested: string | undefined): string {
  const out: string[] = []
  const seen = new Set<string>()
  const add = (h: string): void => {
    const lower = h.toLowerCase()
    if (h === '' || seen.has(lower)) return
    seen.add(lower)
    out.push(h)
  }
  add('Authorization')
  for (const h of (requested ?? '').split(',')) add(h.trim())
  for (const h of ['Accept', 'Accept-Language', 'Content-Language']) add(h)
  return out.join(', ')
}

export interface Cors {
  /** Headers for an actual (non-preflight) response to `origin`, or null when none apply. */
  response(origin: string | undefined): Record<string, string> | null
  /** Headers of a preflight answer, or null when the origin is not allowed. */
  preflight(origin: string, requestedHeaders?: string): Record<string, string> | null
  /** Whether every origin is allowed (`*`). */
  readonly anyOrigin: boolean
}

export function createCors(origins: readonly string[]): Cors {
  const any = origins.includes('*')
  const allowed = new Set(origins)
  const exposed = CORS_EXPOSED_HEADERS.join(', ')
  const anyHeaders: Record<string, string> = {
    'access-control-allow-origin': '*',
    'access-control-expose-headers': exposed,
  }

  function allowOrigin(origin: string): string | null {
    if (any) return '*'
    return allowed.has(origin) ? origin : null
  }

  return {
    response(origin) {
      if (origin === undefined) return null
      if (any) return anyHeaders
      const o = allowOrigin(origin)
      if (o === null) return null
      return { 'access-control-allow-origin': o, 'access-control-expose-headers': exposed, vary: 'Origin' }
    },
    anyOrigin: any,
    preflight(origin, requestedHeaders) {
      const o = allowOrigin(origin)
      if (o === null) return null
      const h: Record<string, string> = {
        'access-control-allow-origin': o,
        'access-control-allow-methods': METHODS,
        'access-control-allow-headers': allowedRequestHeaders(requestedHeaders),
        'access-control-max-age': '86400',
      }
      if (o !== '*') h.vary = 'Origin'
      return h
    },
  }
}

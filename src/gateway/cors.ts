// CORS for browsers calling the gateway with supabase-js. Preflights are answered here,
// without a key (the key is the auth boundary, not the Origin: Supabase's gateway docs).
// Allowed origins come from config.gateway.cors_origins ('*' or exact origins).

/** Request headers supabase-js (and postgrest-js retries) send. */
export const CORS_ALLOWED_HEADERS = [
  'apikey', 'authorization', 'x-client-info', 'x-supabase-api-version', 'prefer', 'range',
  'accept-profile', 'content-profile', 'content-type', 'x-request-id', 'x-retry-count'
]

/** Response headers a browser script may read. */
export const CORS_EXPOSED_HEADERS = [
  'content-range', 'range', 'x-request-id', 'preference-applied', 'x-total-count', 'link', 'location',
  'x-supabase-api-version', 'x-gatehouse-error-code', 'x-gatehouse-default-limit', 'x-gatehouse-max-limit',
  // Request-rate limits (rate-limits.ts): a browser app may read when to retry.
  'ratelimit', 'ratelimit-policy', 'retry-after'
]

const METHODS = 'GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS'

export interface Cors {
  /** Headers for an actual (non-preflight) response to `origin`, or null when none apply. */
  response (origin: string | undefined): Record<string, string> | null
  /** Headers of a preflight answer, or null when the origin is not allowed. */
  preflight (origin: string): Record<string, string> | null
}

export function createCors (origins: readonly string[]): Cors {
  const any = origins.includes('*')
  const allowed = new Set(origins)
  const exposed = CORS_EXPOSED_HEADERS.join(', ')
  const allowedHeaders = CORS_ALLOWED_HEADERS.join(', ')
  const anyHeaders: Record<string, string> = { 'access-control-allow-origin': '*', 'access-control-expose-headers': exposed }

  function allowOrigin (origin: string): string | null {
    if (any) return '*'
    return allowed.has(origin) ? origin : null
  }

  return {
    response (origin) {
      if (origin === undefined) return null
      if (any) return anyHeaders
      const o = allowOrigin(origin)
      if (o === null) return null
      return { 'access-control-allow-origin': o, 'access-control-expose-headers': exposed, vary: 'Origin' }
    },
    preflight (origin) {
      const o = allowOrigin(origin)
      if (o === null) return null
      const h: Record<string, string> = {
        'access-control-allow-origin': o,
        'access-control-allow-methods': METHODS,
        'access-control-allow-headers': allowedHeaders,
        'access-control-max-age': '86400'
      }
      if (o !== '*') h.vary = 'Origin'
      return h
    }
  }
}

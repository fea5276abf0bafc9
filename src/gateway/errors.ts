// The gateway's error codes (snake_case, append-only: a retired code stays listed as
// retired and is never reused). The status lives with the code. Rendered as
// {code, message, details, hint} plus the `x-gatehouse-error-code` header by render.ts.
import { defineError } from '../shared/errors.js'

// ---- request shape --------------------------------------------------------------------
export const InvalidPathError = defineError('invalid_path', 400,
  (why: string) => `The request path is not acceptable: ${why}`)

export const BadRequestError = defineError('bad_request', 400,
  (why: string) => `The request is malformed: ${why}`)

export const LengthRequiredError = defineError('length_required', 411,
  (method: string) => `A ${method} request with a body must send Content-Length, not Transfer-Encoding`)

export const PayloadTooLargeError = defineError('payload_too_large', 413,
  (limit: number) => `The request body is larger than the limit of ${limit} bytes`)

export const RequestTimeoutError = defineError('request_timeout', 408,
  (why: string) => `The request body did not arrive in time: ${why}`)

// ---- routing --------------------------------------------------------------------------
export const TenantNotFoundError = defineError('tenant_not_found', 404,
  (database: string) => `No project database is named "${database}"`)

export const NotFoundError = defineError('not_found', 404,
  () => 'Nothing is served at this path')

// ---- keys and tokens ------------------------------------------------------------------
export const NoApiKeyError = defineError('no_api_key', 401,
  () => 'No API key found in request')

export const InvalidApiKeyError = defineError('invalid_api_key', 401,
  () => 'Invalid API key')

export const InvalidTokenError = defineError('invalid_token', 401,
  () => 'Invalid bearer token')

// ---- upstreams ------------------------------------------------------------------------
export const UpstreamUnavailableError = defineError('upstream_unavailable', 502,
  () => 'unexpected failure')

export const UpstreamTimeoutError = defineError('upstream_timeout', 504,
  () => 'unexpected failure')

/** A tenant's requests in flight to its upstreams reached gateway.tenant_max_inflight. */
export const TooManyConcurrentRequestsError = defineError('too_many_concurrent_requests', 429,
  (limit: number) => `This database already has ${limit} requests in progress; retry shortly`)

/** No upstream socket became free within gateway.upstream_queue_timeout_ms. */
export const UpstreamBusyError = defineError('upstream_busy', 503,
  () => 'unexpected failure')

// ---- process --------------------------------------------------------------------------
export const NotReadyError = defineError('not_ready', 503,
  () => 'unexpected failure')

export const InternalError = defineError('internal_error', 500,
  () => 'unexpected failure')

/** Every code this part can send (docs/errors.md lists them). */
export const GATEWAY_ERROR_CODES = [
  'invalid_path', 'bad_request', 'length_required', 'tenant_not_found', 'not_found', 'no_api_key', 'invalid_api_key',
  'invalid_token', 'upstream_unavailable', 'upstream_timeout', 'not_ready', 'internal_error',
  'payload_too_large', 'request_timeout', 'too_many_concurrent_requests', 'upstream_busy'
] as const

export type GatewayErrorCode = typeof GATEWAY_ERROR_CODES[number]

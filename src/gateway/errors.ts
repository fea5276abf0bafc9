// The gateway's error codes (snake_case, append-only: a retired code stays listed as
// retired and is never reused). The status lives with the code. Rendered as
// {code, message, details, hint} plus the `x-gatehouse-error-code` header by render.ts.
import {
  BadRequestError,
  InternalError,
  NotFoundError,
  PayloadTooLargeError,
  TenantNotFoundError,
  defineError,
  defineErrorCases,
  errorCodes,
  type CodeOf,
} from '../shared/index.js'

export { BadRequestError, InternalError, NotFoundError, PayloadTooLargeError, TenantNotFoundError }

// ---- request shape --------------------------------------------------------------------
export const MalformedPathError = defineError(
  'invalid_path',
  400,
  (why: string) => `The request path is not acceptable: ${why}`,
)

export const LengthRequiredError = defineError(
  'length_required',
  411,
  (method: string) => `A ${method} request with a body must send Content-Length, not Transfer-Encoding`,
)

// bad_request, payload_too_large: shared (src/shared/errors.ts)

export const RequestTimeoutError = defineError(
  'request_timeout',
  408,
  (why: string) => `The request body did not arrive in time: ${why}`,
)

// ---- routing --------------------------------------------------------------------------
// tenant_not_found and not_found: shared (src/shared/errors.ts)

/** A Supabase service path Gatehouse does not serve (/storage/v1, /functions/v1, ...; docs/supabase.md). */
export const ServiceNotOfferedError = defineError(
  'service_not_offered',
  404,
  (service: string, prefix: string) =>
    `Gatehouse does not offer Supabase ${service} (${prefix}): it serves Auth (/auth/v1) and REST (/rest/v1) only`,
)

// ---- keys and tokens ------------------------------------------------------------------
export const NoApiKeyError = defineError('no_api_key', 401, 'No API key found in request')

export const InvalidApiKeyError = defineError('invalid_api_key', 401, 'Invalid API key')

export const InvalidTokenError = defineError('invalid_token', 401, 'Invalid bearer token')

// ---- upstreams ------------------------------------------------------------------------
export const UpstreamUnavailableError = defineError('upstream_unavailable', 502, 'unexpected failure')

/**
 * Nothing accepts connections at the engine's address (restarting, or down): 503 with
 * Retry-After, as Envoy answers a connect failure, so clients that retry a 503 (postgrest-js
 * retries GET/HEAD after Retry-After) ride out an engine restart.
 */
export const UpstreamRefusedError = defineError('upstream_refused', 503, 'unexpected failure')

export const UpstreamTimeoutError = defineError('upstream_timeout', 504, 'unexpected failure')

/** A tenant's requests in flight to its upstreams reached gateway.tenant_max_inflight. */
export const TooManyConcurrentRequestsError = defineError(
  'too_many_concurrent_requests',
  429,
  (limit: number) => `This database already has ${limit} requests in progress; retry shortly`,
)

/** One client's requests in flight to a tenant reached its share (gateway.client_max_inflight_share). */
export const ClientTooManyConcurrentRequestsError = defineError(
  'client_too_many_concurrent_requests',
  429,
  (limit: number) => `This client already has ${limit} requests to this database in progress, its share; retry shortly`,
)

/** A request-rate limit of the tenant's rest.rate_limits is reached (rate-limits.ts). */
export const RateLimitedError = defineError(
  'over_request_rate_limit',
  429,
  (policy: string, quota: number, window: number) =>
    `Request rate limit reached: this database allows ${quota} requests per ${window === 1 ? 'second' : 'minute'} ${policy.startsWith('database') ? 'in all' : policy.startsWith('client') ? 'per client address' : 'per API key'}; retry after Retry-After seconds`,
)

/** No upstream socket became free within gateway.upstream_queue_timeout_ms. */
export const UpstreamBusyError = defineError('upstream_busy', 503, 'unexpected failure')

// ---- process --------------------------------------------------------------------------
export const NotReadyError = defineError('not_ready', 503, 'unexpected failure')

// internal_error: shared

// ---- refusals of table access (docs/service.md §7; the refusal rewriter and the panel's test query) --
/** The table is not in the catalog of the role the request ran as (missing, or no privilege on it). */
export const UnknownTableError = defineError(
  'unknown_table',
  404,
  (table: string, role: string) => `Table ${table} is not in the catalog of role ${role}, the role this request ran as`,
)

/** The table is visible to the role, but the privilege the action needs is not granted. */
export const NoTableGrantError = defineError(
  'no_table_grant',
  403,
  (role: string, privilege: string, table: string, action: string) =>
    `Role ${role} lacks the ${privilege} privilege on table ${table}, which ${action} needs`,
)

/**
 * Any other refusal by the database itself (the database's message): 403 for a signed-in or
 * service caller, 401 for the anon role, as PostgREST answers 42501 to anon.
 */
export const PermissionDeniedError = defineErrorCases('permission_denied', {
  signedIn: [403, (message: string) => message],
  anon: [401, (message: string) => message],
})

/** The row was written, but the SELECT policy hides it from its author: do not retry (401 for anon, as permission_denied). */
const rlsRefusalText = (table: string, role: string): string =>
  `The row was written, but the SELECT policy of ${table} hides it from role ${role}, so it cannot be returned`
export const RlsRefusalError = defineErrorCases('rls_refusal', {
  signedIn: [403, rlsRefusalText],
  anon: [401, rlsRefusalText],
})

/** The refusals of docs/service.md §7. */
export const REFUSAL_ERRORS = {
  UnknownTableError,
  NoTableGrantError,
  PermissionDeniedError,
  RlsRefusalError,
} as const

export type RefusalCode = CodeOf<typeof REFUSAL_ERRORS>

/** The refusal codes, sorted. */
export const REFUSAL_CODES: readonly RefusalCode[] = errorCodes(REFUSAL_ERRORS)

/** Every error this part can send (docs/errors.md is generated from it). */
export const GATEWAY_ERRORS = {
  MalformedPathError,
  BadRequestError,
  LengthRequiredError,
  PayloadTooLargeError,
  RequestTimeoutError,
  TenantNotFoundError,
  NotFoundError,
  ServiceNotOfferedError,
  NoApiKeyError,
  InvalidApiKeyError,
  InvalidTokenError,
  UpstreamUnavailableError,
  UpstreamRefusedError,
  UpstreamTimeoutError,
  TooManyConcurrentRequestsError,
  ClientTooManyConcurrentRequestsError,
  RateLimitedError,
  UpstreamBusyError,
  NotReadyError,
  InternalError,
} as const

export type GatewayErrorCode = CodeOf<typeof GATEWAY_ERRORS>

/** Every code this part can send, sorted. */
export const GATEWAY_ERROR_CODES: readonly GatewayErrorCode[] = errorCodes(GATEWAY_ERRORS)

// The control-panel API's error codes (snake_case, append-only: a retired code stays listed
// as retired and is never reused) and its renderer: {code, message, details, hint} plus the
// `x-gatehouse-error-code` header. 5xx bodies say "unexpected failure" and the request id.
import {
  type PartErrorMapping,
  toPartError,
  BadRequestError,
  DatabaseUnavailableError,
  InternalError,
  NotFoundError,
  PayloadTooLargeError,
  ShuttingDownError,
  defineError,
  errorCodes,
  type CodeOf,
  type GatehouseError,
  type WireError,
} from '../shared/index.js'
import { PANEL_CONSTANTS } from '../config/index.js'

export { BadRequestError, DatabaseUnavailableError, InternalError, NotFoundError }

/** The largest request body the panel reads. */
export const PANEL_BODY_LIMIT = PANEL_CONSTANTS.bodyLimitBytes

// ---- panel session ----------------------------------------------------------------------
export const NoSessionError = defineError(
  'no_session',
  401,
  'A panel session is required: send it as Authorization: Bearer <panel session token>',
)

export const InvalidSessionError = defineError(
  'invalid_session',
  401,
  (why: string) => `The panel session is not valid: ${why}`,
)

// ---- organization and database ------------------------------------------------------------
export const NotAMemberError = defineError(
  'not_a_member',
  403,
  (organization: string) => `You are not a member of organization ${JSON.stringify(organization)}`,
)

export const DatabaseNotFoundError = defineError(
  'database_not_found',
  404,
  (organization: string, database: string) =>
    `Organization ${JSON.stringify(organization)} has no database ${JSON.stringify(database)}`,
)

// ---- request shape ------------------------------------------------------------------------
// bad_request, not_found: shared (src/shared/errors.ts)
export const ValidationError = defineError(
  'validation_failed',
  400,
  (why: string) => `The request is not valid: ${why}`,
)

const UnsupportedMediaTypeError = defineError(
  'unsupported_media_type',
  415,
  (contentType: string) => `The panel reads bodies sent as application/json, not ${JSON.stringify(contentType)}`,
)

// ---- test query ---------------------------------------------------------------------------
export const QueryError = defineError('query_error', 400, (message: string) => message)

export const QueryTimeoutError = defineError(
  'query_timeout',
  400,
  (ms: number) => `The statement ran longer than ${ms} ms and was cancelled`,
)

export const ResultTooLargeError = defineError(
  'test_query_result_too_large',
  400,
  (bytes: number) =>
    `The statement's result is larger than ${bytes} bytes and was cut off: select fewer or smaller columns, or fewer rows`,
)

export const TenantEngineMissingError = defineError(
  'tenant_engine_missing',
  409,
  (database: string, what: string) =>
    `Database ${JSON.stringify(database)} has no ${what} connection (tenant engines), which this needs`,
)

// ---- `gatehouse tenants check` ----------------------------------------------------------------
/** A refused `gatehouse tenants check` (a bad name, an unknown tenant, no connection), printed as one line. */
export const CheckFailedError = defineError('check_failed', 400, (message: string) => message)

// ---- app-session --------------------------------------------------------------------------
/** Retired: a stranger holding a member's address no longer blocks the exchange (docs/edge.md); kept so the code is never reused. */
const AccountLinkRefusedError = defineError(
  'account_link_refused',
  409,
  (database: string, email: string) =>
    `Database ${JSON.stringify(database)} already has a user with email ${email} ` +
    'whose ownership of the address was never proven by a mail round trip, so the exchange does not hand you that account',
)

export const ExchangeRateLimitError = defineError(
  'over_request_rate_limit',
  429,
  (points: number, seconds: number) =>
    `Too many app-session exchanges: at most ${points} per ${seconds} s for one panel user and database (the database's sign-in limit)`,
)

export const TestQueryLoginError = defineError(
  'test_query_login_unavailable',
  409,
  (database: string, login: string) => `Database ${JSON.stringify(database)} has no working test-query login ${login}`,
)

// ---- settings -----------------------------------------------------------------------------
export const SettingsReadOnlyError = defineError(
  'settings_read_only',
  409,
  'This panel has no writable tenant store: settings and signing keys cannot be changed here',
)

// ---- signing keys -------------------------------------------------------------------------
export const SigningKeyNotFoundError = defineError(
  'signing_key_not_found',
  404,
  (database: string, kid: string) => `Database ${JSON.stringify(database)} has no signing key ${JSON.stringify(kid)}`,
)

export const SigningKeyInUseError = defineError(
  'signing_key_in_use',
  409,
  (kid: string) => `Signing key ${JSON.stringify(kid)} signs this database's tokens now and cannot be revoked`,
)

export const LegacySecretRetireRefusedError = defineError(
  'legacy_secret_retire_refused',
  409,
  (why: string) => `The legacy JWT secret cannot be retired: ${why}`,
)

// ---- process ------------------------------------------------------------------------------
// database_unavailable, internal_error: shared

/** Every error this part raises (besides refusals of the gateway and auth errors it relays). */
export const PANEL_ERRORS = {
  NoSessionError,
  InvalidSessionError,
  NotAMemberError,
  DatabaseNotFoundError,
  BadRequestError,
  ValidationError,
  PayloadTooLargeError,
  UnsupportedMediaTypeError,
  NotFoundError,
  QueryError,
  QueryTimeoutError,
  ResultTooLargeError,
  TenantEngineMissingError,
  AccountLinkRefusedError,
  ExchangeRateLimitError,
  TestQueryLoginError,
  SettingsReadOnlyError,
  SigningKeyNotFoundError,
  SigningKeyInUseError,
  LegacySecretRetireRefusedError,
  CheckFailedError,
  DatabaseUnavailableError,
  ShuttingDownError,
  InternalError,
} as const

export type PanelErrorCode = CodeOf<typeof PANEL_ERRORS>

/** Every code of the registry, sorted. */
export const PANEL_ERROR_CODES: readonly PanelErrorCode[] = errorCodes(PANEL_ERRORS)

export interface RenderedPanelError {
  status: number
  headers: Record<string, string>
  body: WireError
  error: GatehouseError
}

/** Our error for anything thrown; fastify's 4xx keep their meaning, the rest is a 500. */
function panelErrors(contentType: string): PartErrorMapping {
  return {
    fromFastify(fe, err) {
      if (fe.kind === 'body_too_large') return new PayloadTooLargeError(PANEL_BODY_LIMIT, { cause: err })
      if (fe.kind === 'unsupported_media_type') return new UnsupportedMediaTypeError(contentType, { cause: err })
      return new BadRequestError(fe.message, { cause: err })
    },
    unknown: (err) => new InternalError({ cause: err, internal: err }),
  }
}

/**
 * Seconds a client should wait before retrying a 503 (every 503 says, as the gateway's do: RFC
 * 9110 section 10.2.3): the tenant store answers again within its 5 s re-check; a database or
 * anything else, 1.
 */
function retryAfter503(code: string): string {
  return code.startsWith('tenant_store_') ? '5' : '1'
}

export function renderPanelError(err: unknown, requestId: string, contentType = ''): RenderedPanelError {
  const error = toPartError(err, panelErrors(contentType))
  const retry: Record<string, string> = error.status === 503 ? { 'retry-after': retryAfter503(error.code) } : {}
  const body: WireError =
    error.status >= 500
      ? {
          code: error.code,
          message: 'unexpected failure',
          details: `request id ${requestId}`,
          hint: 'Retry later; quote the request id when reporting it.',
          request_id: requestId,
        }
      : error.toWire()
  return {
    status: error.status,
    headers: {
      'content-type': 'application/json; charset=utf-8',
      'x-gatehouse-error-code': error.code,
      ...retry,
      ...(error.headers ?? {}),
    },
    body,
    error,
  }
}

// The auth engine's error registry: GoTrue's `error_code` values with their statuses
// (spec/auth.md §6.3), and the renderer that picks the wire shape from the request's
// X-Supabase-Api-Version header (§6.1). Status lives with the code; messages are GoTrue's.
// Internal causes are logged with the request id, never sent.
import { DatabaseUnavailableError, GatehouseError, TenantNotFoundError, isDefinedError, type ErrorOptions } from '../shared/index.js'

/** A GoTrue API error: `code` is the `error_code`, `status` the HTTP status. */
export class AuthError extends GatehouseError {
  /** Reasons of a weak_password error (sent as `weak_password: {reasons}`). */
  readonly reasons?: string[]
  constructor (code: string, status: number, message: string, opts: ErrorOptions & { reasons?: string[] } = {}) {
    super(code, status, message, opts)
    this.name = 'AuthError'
    if (opts.reasons) this.reasons = opts.reasons
  }
}

/** GoTrue's OAuth-form error `{error, error_description}`, always 400 (§6.1.3). */
export class OAuthError extends GatehouseError {
  readonly error: string
  constructor (error: string, description: string, opts: ErrorOptions = {}) {
    super(error, 400, description, opts)
    this.name = 'OAuthError'
    this.error = error
  }
}

type Msg = string
const make = (code: string, status: number) =>
  (message: Msg, opts?: ErrorOptions & { reasons?: string[] }) => new AuthError(code, status, message, opts)

// ----- generic ---------------------------------------------------------------------------
export const unexpectedFailure = (internal?: unknown) =>
  new AuthError('unexpected_failure', 500, 'Unexpected failure, please check server logs for more information', { internal })
export const validationFailed = make('validation_failed', 400)
export const validationFailed404 = make('validation_failed', 404)
export const validationFailed422 = make('validation_failed', 422)
export const badJson = make('bad_json', 400)
export const requestTooLarge = () => new AuthError('request_entity_too_large', 413, 'Request body too large')
export const notFound = () => new AuthError('not_found', 404, 'Not Found')
/** Ours (shared): the first path segment names no tenant. */
export const tenantNotFound = (database: string) => new TenantNotFoundError(database)
/**
 * Ours (GoTrue answers 500 here): the tenant database cannot be reached (restarting, connections
 * terminated, refused); the engine reconnects by itself, so the client should retry.
 */
export const databaseUnavailable = (internal?: unknown) =>
  new DatabaseUnavailableError({ internal, headers: { 'retry-after': '1' } })
export const conflict = () =>
  new AuthError('conflict', 409, 'Too many concurrent token refresh requests on the same session or refresh token')

// ----- bearer / admin ----------------------------------------------------------------------
export const noAuthorization = () => new AuthError('no_authorization', 401, 'This endpoint requires a valid Bearer token')
export const badJwt = (reason: string) => new AuthError('bad_jwt', 403, `invalid JWT: unable to parse or verify signature, ${reason}`)
export const badJwtMsg = make('bad_jwt', 403)
export const notAdmin = (message = 'User not allowed') => new AuthError('not_admin', 403, message)
export const userNotFoundBearer = () => new AuthError('user_not_found', 403, 'User from sub claim in JWT does not exist')
export const userNotFound = () => new AuthError('user_not_found', 404, 'User not found')
export const sessionNotFoundBearer = () => new AuthError('session_not_found', 403, 'Session from session_id claim in JWT does not exist')
export const userBannedBearer = () => new AuthError('user_banned', 403, 'User is banned')

// ----- sign-up / sign-in ---------------------------------------------------------------------
export const signupDisabled = () => new AuthError('signup_disabled', 422, 'Signups not allowed for this instance')
export const anonymousDisabled = () => new AuthError('anonymous_provider_disabled', 422, 'Anonymous sign-ins are disabled')
export const emailProviderDisabled = make('email_provider_disabled', 400)
export const emailProviderDisabled422 = make('email_provider_disabled', 422)
export const phoneProviderDisabled = make('phone_provider_disabled', 400)
export const phoneProviderDisabled422 = make('phone_provider_disabled', 422)
export const userAlreadyExists = () => new AuthError('user_already_exists', 422, 'User already registered')
export const emailExists = () => new AuthError('email_exists', 422, 'A user with this email address has already been registered')
export const phoneExists = () => new AuthError('phone_exists', 422, 'Phone number already registered by another user')
export const invalidCredentials = (message = 'Invalid login credentials') => new AuthError('invalid_credentials', 400, message)
export const emailNotConfirmed = () => new AuthError('email_not_confirmed', 400, 'Email not confirmed')
export const userBanned = () => new AuthError('user_banned', 400, 'User is banned')
export const weakPassword = (message: string, reasons: string[]) => new AuthError('weak_password', 422, message, { reasons })
export const samePassword = () => new AuthError('same_password', 422, 'New password should be different from the old password.')
export const passwordTooLong = () => validationFailed('Password cannot be longer than 72 characters')

// ----- refresh tokens (§3.4) -------------------------------------------------------------------
export const refreshTokenNotFound = () => new AuthError('refresh_token_not_found', 400, 'Invalid Refresh Token: Refresh Token Not Found')
export const refreshTokenAlreadyUsed = () => new AuthError('refresh_token_already_used', 400, 'Invalid Refresh Token: Already Used')
export const refreshSessionNotFound = () => new AuthError('session_not_found', 400, 'Invalid Refresh Token: No Valid Session Found')
export const refreshUserBanned = () => new AuthError('user_banned', 400, 'Invalid Refresh Token: User Banned')

// ----- one-time tokens, mail -------------------------------------------------------------------
export const otpExpired = (message = 'Token has expired or is invalid') => new AuthError('otp_expired', 403, message)
export const overEmailSendRateLimit = (message = 'email rate limit exceeded', retryAfterSeconds?: number) =>
  new AuthError('over_email_send_rate_limit', 429, message, retryAfterSeconds ? { headers: { 'retry-after': String(retryAfterSeconds) } } : {})
/** A per-IP request bucket is empty; `Retry-After` says when it holds a token again. */
export const overRequestRateLimit = (retryAfterSeconds = 1) =>
  new AuthError('over_request_rate_limit', 429, 'Request rate limit reached', { headers: { 'retry-after': String(Math.max(1, retryAfterSeconds)) } })
/** Wrong codes a one-time code takes before it stops working (ours; GoTrue has no such limit). */
export const MAX_OTP_ATTEMPTS = 5
/** Ours: the code has taken MAX_OTP_ATTEMPTS wrong codes and no longer works, even the right one. */
export const otpAttemptsExhausted = () =>
  new AuthError('otp_expired', 403, `Token has expired or is invalid: after ${MAX_OTP_ATTEMPTS} wrong codes this code no longer works, request a new one`)
export const emailSendFailed = (what: string, internal: unknown) =>
  new AuthError('unexpected_failure', 500, `Error sending ${what} email`, { internal })

// ----- magic link, OTP, PKCE, external providers ---------------------------------------------
export const magicLinkDisabled = () => new AuthError('email_provider_disabled', 422, 'Login with magic link is disabled')
export const otpDisabled = () => new AuthError('otp_disabled', 422, 'Signups not allowed for otp')
export const invalidPkceParams = () => validationFailed('PKCE flow requires code_challenge_method and code_challenge')
/** Ours: the tenant has not switched PKCE on (GoTrue has no such switch; the status is its PKCE-parameter one). */
export const pkceDisabled = () => validationFailed('PKCE flow is disabled for this database')
export const flowStateNotFound = () => new AuthError('flow_state_not_found', 404, 'invalid flow state, no valid flow state found')
export const flowStateExpired = () => new AuthError('flow_state_expired', 422, 'invalid flow state, flow state has expired')
export const flowStateAlreadyUsed = () => new AuthError('flow_state_already_used', 400, 'State has already been used')
export const badCodeVerifier = () => new AuthError('bad_code_verifier', 400, 'code challenge does not match previously saved code verifier')
export const badOAuthState = (message = 'OAuth state not found or expired') => new AuthError('bad_oauth_state', 400, message)
export const badOAuthCallback = (message: string) => new AuthError('bad_oauth_callback', 400, message)
export const unsupportedProvider = (reason: string) => validationFailed(`Unsupported provider: ${reason}`)

/** An OAuth `error` value derived from a status, for redirects (§6.2). */
export function oauthErrorForStatus (status: number): string {
  switch (status) {
    case 400: return 'invalid_request'
    case 401: return 'unauthorized_client'
    case 403: return 'access_denied'
    case 503: return 'temporarily_unavailable'
    default: return 'server_error'
  }
}

// ----- database reachability -----------------------------------------------------------------

// Node socket errors and node-postgres messages of a connection that could not be made or was lost.
const SOCKET_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN'])
const CONNECTION_MESSAGES = [
  'Connection terminated', 'timeout exceeded when trying to connect', 'Client has encountered a connection error',
  'Client was closed and is not queryable', 'Connection ended unexpectedly'
]

function connectionLost (e: unknown): boolean {
  if (!e || typeof e !== 'object') return false
  const { code, message } = e as { code?: unknown, message?: unknown }
  if (typeof code === 'string') {
    // SQLSTATE class 08 (connection exception), 57P01-03 (admin shutdown, crash shutdown,
    // cannot connect now: a restart), 53300 (too many connections).
    if (/^08[0-9A-Z]{3}$/.test(code) || code === '57P01' || code === '57P02' || code === '57P03' || code === '53300') return true
    if (SOCKET_CODES.has(code)) return true
  }
  if (typeof message === 'string' && CONNECTION_MESSAGES.some((m) => message.startsWith(m))) return true
  // AggregateError of a dual-stack connect (127.0.0.1 and ::1 both refused).
  const errors = (e as { errors?: unknown }).errors
  return Array.isArray(errors) && errors.length > 0 && errors.every(connectionLost)
}

/** True when an error (or the cause/internal error it wraps) says the database is unreachable. */
export function isDatabaseUnreachable (err: unknown): boolean {
  let e: unknown = err
  for (let i = 0; i < 5 && e; i++) {
    if (connectionLost(e)) return true
    const x = e as { internal?: unknown, cause?: unknown }
    e = x.internal ?? x.cause
  }
  return false
}

/**
 * The error a failure is answered with: ours as they are, an unreachable database as 503
 * database_unavailable (also when wrapped in an unexpected failure), anything else 500.
 */
export function toAuthError (err: unknown): GatehouseError {
  if (err instanceof GatehouseError && (err.status < 500 || err.code === 'database_unavailable')) return err
  if (isDatabaseUnreachable(err)) return databaseUnavailable(err)
  return err instanceof GatehouseError ? err : unexpectedFailure(err)
}

// ----- rendering ----------------------------------------------------------------------------

const API_VERSION_2024 = Date.UTC(2024, 0, 1)

/** True when the X-Supabase-Api-Version header is a date >= 2024-01-01 (§6.1.2). */
export function wantsApiVersion2024 (header: string | string[] | undefined): boolean {
  const v = Array.isArray(header) ? header[0] : header
  if (!v || !/^\d{4}-\d{2}-\d{2}$/.test(v)) return false
  const t = Date.parse(v + 'T00:00:00Z')
  return Number.isFinite(t) && t >= API_VERSION_2024
}

export interface RenderedError {
  status: number
  headers: Record<string, string>
  body: Record<string, unknown>
}

/**
 * The wire form of an error for one request. 5xx bodies never carry the cause;
 * `requestId` goes into `error_id` (default shape) as GoTrue does.
 */
export function renderAuthError (err: GatehouseError, apiVersionHeader: string | string[] | undefined, requestId: string): RenderedError {
  const headers: Record<string, string> = { ...(err.headers ?? {}) }
  if (err instanceof OAuthError) {
    return { status: 400, headers, body: { error: err.error, error_description: err.message } }
  }
  const status = err.status
  const code = err.code || (status >= 500 ? 'unexpected_failure' : 'unknown')
  // Our AuthErrors carry messages written for clients; any other 5xx says nothing more.
  const message = status >= 500 && !(err instanceof AuthError) && !isDefinedError(err)
    ? 'Unexpected failure, please check server logs for more information'
    : err.message
  headers['x-sb-error-code'] = code
  const reasons = err instanceof AuthError ? err.reasons : undefined
  if (wantsApiVersion2024(apiVersionHeader)) {
    headers['x-supabase-api-version'] = '2024-01-01'
    const body: Record<string, unknown> = { code, message }
    if (reasons) body.weak_password = { reasons }
    return { status, headers, body }
  }
  const body: Record<string, unknown> = { code: status, error_code: code, msg: message }
  if (status >= 500) body.error_id = requestId
  if (reasons) body.weak_password = { reasons }
  return { status, headers, body }
}

// ----- MFA, anonymous users, identities, reauthentication, SSO, id_token ----------------------
export const anonymousNotAllowed = () => new AuthError('no_authorization', 403, 'Anonymous user not allowed to perform these actions')
export const factorIdNotUuid = () => validationFailed404('factor_id must be an UUID')
export const factorNotFound = () => new AuthError('mfa_factor_not_found', 404, 'Factor not found')
export const factorTypeInvalid = () => validationFailed('factor_type needs to be totp, phone, or webauthn')
export const mfaTotpEnrollDisabled = () => new AuthError('mfa_totp_enroll_not_enabled', 422, 'MFA enroll is disabled for TOTP')
export const mfaTotpVerifyDisabled = () => new AuthError('mfa_totp_verify_not_enabled', 422, 'MFA verification is disabled for TOTP')
export const mfaPhoneEnrollDisabled = () => new AuthError('mfa_phone_enroll_not_enabled', 422, 'MFA enroll is disabled for Phone')
export const mfaPhoneVerifyDisabled = () => new AuthError('mfa_phone_verify_not_enabled', 422, 'MFA verification is disabled for Phone')
export const mfaWebAuthnEnrollDisabled = () => new AuthError('mfa_webauthn_enroll_not_enabled', 422, 'MFA enroll is disabled for WebAuthn')
/** GoTrue answers a disabled WebAuthn verify with the enroll code and the verify message. */
export const mfaWebAuthnVerifyDisabledOnVerify = () => new AuthError('mfa_webauthn_enroll_not_enabled', 422, 'MFA verification is disabled for WebAuthn')
export const mfaWebAuthnVerifyDisabled = () => new AuthError('mfa_webauthn_verify_not_enabled', 422, 'MFA verification is disabled for WebAuthn')
export const factorNameConflict = (name: string) =>
  new AuthError('mfa_factor_name_conflict', 422, `A factor with the friendly name ${JSON.stringify(name)} for this user already exists`)
export const tooManyFactors = () => new AuthError('too_many_enrolled_mfa_factors', 422, 'Maximum number of verified factors reached, unenroll to continue')
export const aal2RequiredToEnroll = () => new AuthError('insufficient_aal', 403, 'AAL2 required to enroll a new factor')
export const aal2RequiredToUnenroll = () => new AuthError('insufficient_aal', 422, 'AAL2 required to unenroll verified factor')
export const aal2RequiredToUpdate = () => new AuthError('insufficient_aal', 401, 'AAL2 session is required to update email or password when MFA is enabled.')
export const codeRequired = () => validationFailed('Code needs to be non-empty')
export const challengeNotFound = () => new AuthError('mfa_factor_not_found', 422, 'MFA factor with the provided challenge ID not found')
export const challengeIpMismatch = () => new AuthError('mfa_ip_address_mismatch', 422, 'Challenge and verify IP addresses mismatch.')
export const challengeExpired = (id: string) =>
  new AuthError('mfa_challenge_expired', 422, `MFA challenge ${id} has expired, verify against another challenge or create a new challenge.`)
export const invalidTotpCode = () => new AuthError('mfa_verification_failed', 422, 'Invalid TOTP code entered')
export const samlDisabled = () => new AuthError('saml_provider_disabled', 404, 'SAML 2.0 is disabled')
export const manualLinkingDisabled = () => new AuthError('manual_linking_disabled', 404, 'Manual linking is disabled')
export const identityIdNotUuid = () => validationFailed404('identity_id must be an UUID')
export const singleIdentityNotDeletable = () => new AuthError('single_identity_not_deletable', 422, 'User must have at least 1 identity after unlinking')
export const identityNotFound = () => new AuthError('identity_not_found', 422, "Identity doesn't exist")
export const identityAlreadyLinked = (other: boolean) =>
  new AuthError('identity_already_exists', 422, other ? 'Identity is already linked to another user' : 'Identity is already linked')
export const emailConflictIdentityNotDeletable = () => new AuthError('email_conflict_identity_not_deletable', 422, 'Unable to unlink identity due to email conflict')
export const unexpectedAudience = () => new AuthError('unexpected_audience', 403, "Token audience doesn't match request audience")
export const reauthenticationNoAddress = () => validationFailed('Reauthentication requires the user to have an email or a phone number')
export const reauthenticationEmailNotConfirmed = () => new AuthError('email_not_confirmed', 422, 'Please verify your email first.')
export const reauthenticationNeeded = () => new AuthError('reauthentication_needed', 400, 'Password update requires reauthentication')
export const reauthenticationNotValid = () => new AuthError('reauthentication_not_valid', 422, 'Nonce has expired or is invalid')
/** Ours: the reauthentication nonce took MAX_OTP_ATTEMPTS tries and no longer works. */
export const reauthenticationAttemptsExhausted = () =>
  new AuthError('reauthentication_not_valid', 422, `Nonce has expired or is invalid: after ${MAX_OTP_ATTEMPTS} tries this nonce no longer works, request a new one`)
export const providerDisabled = (message: string) => new AuthError('provider_disabled', 400, message)

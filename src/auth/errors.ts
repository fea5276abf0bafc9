// The auth engine's error registry: GoTrue's `error_code` values with their statuses
// (docs/auth-protocol.md §6.3), and the renderer that picks the wire shape from the request's
// X-Supabase-Api-Version header (§6.1). Status lives with the code; messages are GoTrue's.
// Internal causes are logged with the request id, never sent.
import pg from 'pg'
import {
  DatabaseUnavailableError,
  GatehouseError,
  ShuttingDownError,
  TenantNotFoundError,
  defineError,
  defineErrorCases,
  type ErrorCase,
  isDefinedError,
  type ErrorOptions,
  gotrueErrorBody,
} from '../shared/index.js'

// Shared codes the engine answers (GoTrue shape, like its own).
export { DatabaseUnavailableError, ShuttingDownError, TenantNotFoundError }

/** A GoTrue API error: `code` is the `error_code`, `status` the HTTP status. */
export class AuthError extends GatehouseError {
  /** Reasons of a weak_password error (sent as `weak_password: {reasons}`). */
  readonly reasons?: string[]
  constructor(code: string, status: number, message: string, opts: ErrorOptions & { reasons?: string[] } = {}) {
    super(code, status, message, opts)
    this.name = 'AuthError'
    if (opts.reasons) this.reasons = opts.reasons
  }
}

/** GoTrue's OAuth-form error `{error, error_description}`, always 400 (§6.1, format 3); `code` is the `error`. */
export class OAuthError extends GatehouseError {
  constructor(code: string, status: number, description: string, opts: ErrorOptions = {}) {
    super(code, status, description, opts)
    this.name = 'OAuthError'
  }

  get error(): string {
    return this.code
  }
}

/**
 * An entry of the auth registry: defineError with AuthError as the class, so the GoTrue
 * renderer below knows its message was written for clients.
 */
function defineAuthError<C extends string, S extends number, A extends unknown[] = []>(
  code: C,
  status: S,
  text: string | ((...args: A) => string),
) {
  return defineError(code, status, text, AuthError)
}

/** One auth code GoTrue says in several ways (statuses and messages): one class, the case named where raised. */
function defineAuthCases<C extends string, T extends Readonly<Record<string, ErrorCase>>>(code: C, cases: T) {
  return defineErrorCases(code, cases, AuthError)
}

/** An entry in GoTrue's OAuth form: the `error` value, always 400, the description's text. */
function defineOAuthError<C extends string, A extends unknown[] = []>(
  error: C,
  text: string | ((...args: A) => string),
) {
  return defineError(error, 400, text, OAuthError)
}

/** Wrong codes a one-time code takes before it stops working (ours; GoTrue has no such limit). */
export const MAX_OTP_ATTEMPTS = 5

// ----- generic ---------------------------------------------------------------------------
export const UnexpectedFailureError = defineAuthCases('unexpected_failure', {
  default: [500, 'Unexpected failure, please check server logs for more information'],
  sendEmail: [500, (what: string) => `Error sending ${what} email`],
  multipleAccounts: [500, 'Multiple accounts with the same email address in the same linking domain detected'],
  providerEmail: [500, 'Error getting user email from external provider'],
  codeExchange: [500, 'Unable to exchange external code'],
  enrollSession: [500, 'A valid session and a registered user are required to enroll a factor'],
  siteUrl: [500, 'site url is improperly formatted'],
  qrCode: [500, 'Error generating QR Code'],
  // A statement of the sign-up refused (a trigger on auth.users that raised): GoTrue's answer.
  saveUser: [500, 'Database error saving new user'],
  // A hook that failed: GoTrue answers 500 with what went wrong, never the hook's own internals.
  hook: [500, (message: string) => message],
})
/** unexpected_failure with its cause kept for the log. */
export const unexpectedFailure = (internal?: unknown) => new UnexpectedFailureError('default', { internal })
/**
 * validation_failed, GoTrue's one code for a request it cannot take, with GoTrue's message of
 * each case: 400 (`request`), or the 404 (`notFound`: an id that is no UUID, a missing passkey)
 * and 422 (`unprocessable`) GoTrue answers in some cases.
 */
export const ValidationFailedError = defineAuthCases('validation_failed', {
  request: [400, (message: string) => message],
  notFound: [404, (message: string) => message],
  unprocessable: [422, (message: string) => message],
})
export const BadJsonError = defineAuthError('bad_json', 400, (message: string) => message)
export const RequestTooLargeError = defineAuthError('request_entity_too_large', 413, 'Request body too large')
export const NotFoundError = defineAuthError('not_found', 404, 'Not Found')
/** Ours (shared): the first path segment names no tenant. */
export const tenantNotFound = (database: string) => new TenantNotFoundError(database)
/**
 * Ours (GoTrue answers 500 here): the tenant database cannot be reached (restarting, connections
 * terminated, refused); the engine reconnects by itself, so the client should retry.
 */
export const databaseUnavailable = (internal?: unknown) =>
  new DatabaseUnavailableError({ internal, headers: { 'retry-after': '1' } })
export const ConflictError = defineAuthError(
  'conflict',
  409,
  'Too many concurrent token refresh requests on the same session or refresh token',
)

// ----- bearer / admin ----------------------------------------------------------------------
export const NoAuthorizationError = defineAuthCases('no_authorization', {
  bearer: [401, 'This endpoint requires a valid Bearer token'],
  anonymous: [403, 'Anonymous user not allowed to perform these actions'],
})
export const BadJwtError = defineAuthCases('bad_jwt', {
  unverified: [403, (reason: string) => `invalid JWT: unable to parse or verify signature, ${reason}`],
  // GoTrue requireAuthentication: a bearer token without a subject.
  missingSub: [403, 'invalid claim: missing sub claim'],
  // GoTrue answers a subject that is not a UUID with 400, not the 403 of the other bad_jwt refusals.
  subNotUuid: [400, 'invalid claim: sub claim must be a UUID'],
})
/** not_admin: GoTrue's code, with the message of each case. */
export const NotAdminError = defineAuthError('not_admin', 403, (message: string) => message)
export const UserNotFoundError = defineAuthCases('user_not_found', {
  bearer: [403, 'User from sub claim in JWT does not exist'],
  byId: [404, 'User not found'],
  byEmail: [404, 'User with this email not found'],
})
export const SessionNotFoundError = defineAuthCases('session_not_found', {
  bearer: [403, 'Session from session_id claim in JWT does not exist'],
  refresh: [400, 'Invalid Refresh Token: No Valid Session Found'],
})
export const UserBannedError = defineAuthCases('user_banned', {
  bearer: [403, 'User is banned'],
  signIn: [400, 'User is banned'],
  refresh: [400, 'Invalid Refresh Token: User Banned'],
})

// ----- sign-up / sign-in ---------------------------------------------------------------------
export const SignupDisabledError = defineAuthError('signup_disabled', 422, 'Signups not allowed for this instance')
export const AnonymousDisabledError = defineAuthError(
  'anonymous_provider_disabled',
  422,
  'Anonymous sign-ins are disabled',
)
export const PhoneProviderDisabledError = defineAuthCases('phone_provider_disabled', {
  request: [400, (message: string) => message],
  passwordGrant: [422, (message: string) => message],
})
export const UserAlreadyExistsError = defineAuthError('user_already_exists', 422, 'User already registered')
export const EmailExistsError = defineAuthCases('email_exists', {
  signUp: [422, 'A user with this email address has already been registered'],
  linking: [400, 'A user with this email address has already been registered'],
})
export const PhoneExistsError = defineAuthError('phone_exists', 422, 'Phone number already registered by another user')
/** invalid_credentials: GoTrue's code, with the message of each case. */
export const InvalidCredentialsError = defineAuthError('invalid_credentials', 400, (message: string) => message)
export const EmailNotConfirmedError = defineAuthCases('email_not_confirmed', {
  signIn: [400, 'Email not confirmed'],
  reauthenticate: [422, 'Please verify your email first.'],
  passkey: [403, 'Email not confirmed'],
  provider: [
    422,
    (provider: string) => `Unverified email with ${provider}. Verify the email with ${provider} and try again`,
  ],
})
export const WeakPasswordError = defineAuthError('weak_password', 422, (message: string) => message)
/** weak_password with its reasons (sent as `weak_password: {reasons}`). */
export const weakPassword = (message: string, reasons: string[]) =>
  new WeakPasswordError(message, { reasons } as ErrorOptions)
export const SamePasswordError = defineAuthError(
  'same_password',
  422,
  'New password should be different from the old password.',
)

// ----- refresh tokens (§3.4) -------------------------------------------------------------------
export const RefreshTokenNotFoundError = defineAuthError(
  'refresh_token_not_found',
  400,
  'Invalid Refresh Token: Refresh Token Not Found',
)
export const RefreshTokenAlreadyUsedError = defineAuthError(
  'refresh_token_already_used',
  400,
  'Invalid Refresh Token: Already Used',
)

// ----- one-time tokens, mail -------------------------------------------------------------------
export const OtpExpiredError = defineAuthCases('otp_expired', {
  token: [403, 'Token has expired or is invalid'],
  // otp_expired as GoTrue says it for a link opened at /verify (GET).
  link: [403, 'Email link is invalid or has expired'],
  // Ours: MAX_OTP_ATTEMPTS wrong codes were entered for the code or its address within the code lifetime: codes for it no longer work, even the right one; the mailed link does.
  attempts: [
    403,
    `Token has expired or is invalid: after ${MAX_OTP_ATTEMPTS} wrong codes this code no longer works; the link in the mail still does`,
  ],
})
export const OverEmailSendRateLimitError = defineAuthCases('over_email_send_rate_limit', {
  limit: [429, 'email rate limit exceeded'],
  // The per-address wait of a mail GoTrue limits by time (its message names the seconds).
  wait: [429, (seconds: number) => `For security purposes, you can only request this after ${seconds} seconds.`],
})
/** A per-IP request bucket is empty; `Retry-After` says when it holds a token again. */
export const OverRequestRateLimitError = defineAuthError('over_request_rate_limit', 429, 'Request rate limit reached')
/** A per-IP request bucket is empty; `Retry-After` says when it holds a token again. */
export const overRequestRateLimit = (retryAfterSeconds = 1) =>
  new OverRequestRateLimitError({ headers: { 'retry-after': String(Math.max(1, retryAfterSeconds)) } })

// ----- magic link, OTP, PKCE, external providers ---------------------------------------------
export const EmailProviderDisabledError = defineAuthError(
  'email_provider_disabled',
  422,
  'Login with magic link is disabled',
)
export const OtpDisabledError = defineAuthError('otp_disabled', 422, 'Signups not allowed for otp')
export const FlowStateNotFoundError = defineAuthCases('flow_state_not_found', {
  grant: [404, 'invalid flow state, no valid flow state found'],
  // flow_state_not_found as a /verify redirect carries it (400, not the grant's 404).
  redirect: [400, 'invalid flow state, no valid flow state found'],
})
export const FlowStateExpiredError = defineAuthError(
  'flow_state_expired',
  422,
  'invalid flow state, flow state has expired',
)
export const FlowStateAlreadyUsedError = defineAuthError('flow_state_already_used', 400, 'State has already been used')
export const BadCodeVerifierError = defineAuthError(
  'bad_code_verifier',
  400,
  'code challenge does not match previously saved code verifier',
)
/** bad_oauth_state: GoTrue's code, with the message of each case. */
export const BadOAuthStateError = defineAuthError('bad_oauth_state', 400, (message: string) => message)
export const BadOAuthCallbackError = defineAuthError('bad_oauth_callback', 400, (message: string) => message)

/**
 * GoTrue's oauthErrorMap: the OAuth `error` value of a status, for redirects (§6.2);
 * undefined for a status it has no entry for (404, 409, 422, 429 ...).
 */
export function oauthErrorOfStatus(status: number): string | undefined {
  switch (status) {
    case 400:
      return 'invalid_request'
    case 401:
      return 'unauthorized_client'
    case 403:
      return 'access_denied'
    case 500:
      return 'server_error'
    case 503:
      return 'temporarily_unavailable'
    default:
      return undefined
  }
}

/** The OAuth `error` of a provider callback's redirect: the map's value, else server_error. */
export function oauthErrorForStatus(status: number): string {
  return oauthErrorOfStatus(status) ?? 'server_error'
}

// ----- database reachability -----------------------------------------------------------------

// Node socket errors and node-postgres messages of a connection that could not be made or was lost.
const SOCKET_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
])
const CONNECTION_MESSAGES = [
  'Connection terminated',
  'timeout exceeded when trying to connect',
  // pg.Client's own connect timeout (connectionTimeoutMillis): a host that never answers.
  'timeout expired',
  'Client has encountered a connection error',
  'Client was closed and is not queryable',
  'Connection ended unexpectedly',
]

function connectionLost(e: unknown): boolean {
  if (!e || typeof e !== 'object') return false
  const { code, message } = e as { code?: unknown; message?: unknown }
  if (typeof code === 'string') {
    // SQLSTATE class 08 (connection exception), 57P01-03 (admin shutdown, crash shutdown,
    // cannot connect now: a restart), 53300 (too many connections).
    if (/^08[0-9A-Z]{3}$/.test(code) || code === '57P01' || code === '57P02' || code === '57P03' || code === '53300')
      return true
    if (SOCKET_CODES.has(code)) return true
  }
  if (typeof message === 'string' && CONNECTION_MESSAGES.some((m) => message.startsWith(m))) return true
  // AggregateError of a dual-stack connect (127.0.0.1 and ::1 both refused).
  const errors = (e as { errors?: unknown }).errors
  return Array.isArray(errors) && errors.length > 0 && errors.every(connectionLost)
}

/** A statement Postgres refused (a trigger that raised, a check), not the database being out of reach. */
export function statementRefused(err: unknown): boolean {
  return err instanceof pg.DatabaseError && !connectionLost(err)
}

/** The error (itself, or the cause/internal error it wraps) that says the database is unreachable; undefined when none does. */
function unreachableCause(err: unknown): unknown {
  let e: unknown = err
  for (let i = 0; i < 5 && e; i++) {
    if (connectionLost(e)) return e
    const x = e as { internal?: unknown; cause?: unknown }
    e = x.internal ?? x.cause
  }
  return undefined
}

/**
 * The error a failure is answered with: ours as they are, an unreachable database as 503
 * database_unavailable (also when wrapped in an unexpected failure), anything else 500.
 */
export function toAuthError(err: unknown): GatehouseError {
  if (err instanceof GatehouseError && (err.status < 500 || err.code === 'database_unavailable')) return err
  // The connection error itself is kept for the log, not a wrapper that says "unexpected failure".
  const cause = unreachableCause(err)
  if (cause !== undefined) return databaseUnavailable(cause)
  return err instanceof GatehouseError ? err : unexpectedFailure(err)
}

// ----- rendering ----------------------------------------------------------------------------

export interface RenderedError {
  status: number
  headers: Record<string, string>
  body: Record<string, unknown>
}

/**
 * The wire form of an error for one request. 5xx bodies never carry the cause;
 * `requestId` goes into `error_id` (default shape) as GoTrue does.
 */
export function renderAuthError(
  err: GatehouseError,
  apiVersionHeader: string | string[] | undefined,
  requestId: string,
): RenderedError {
  const headers: Record<string, string> = { ...(err.headers ?? {}) }
  if (err instanceof OAuthError) {
    return { status: 400, headers, body: { error: err.error, error_description: err.message } }
  }
  const status = err.status
  const code = err.code || (status >= 500 ? 'unexpected_failure' : 'unknown')
  // Our AuthErrors carry messages written for clients; any other 5xx says nothing more.
  const message =
    status >= 500 && !(err instanceof AuthError) && !isDefinedError(err)
      ? 'Unexpected failure, please check server logs for more information'
      : err.message
  const reasons = err instanceof AuthError ? err.reasons : undefined
  const shaped = gotrueErrorBody({
    status,
    code,
    message,
    requestId,
    apiVersion: apiVersionHeader,
    extra: reasons ? { weak_password: { reasons } } : undefined,
  })
  return { status, headers: { ...headers, ...shaped.headers }, body: shaped.body }
}

// ----- MFA, anonymous users, identities, reauthentication, SSO, id_token ----------------------
export const FactorNotFoundError = defineAuthCases('mfa_factor_not_found', {
  factor: [404, 'Factor not found'],
  challenge: [422, 'MFA factor with the provided challenge ID not found'],
})
export const MfaTotpEnrollDisabledError = defineAuthError(
  'mfa_totp_enroll_not_enabled',
  422,
  'MFA enroll is disabled for TOTP',
)
export const MfaTotpVerifyDisabledError = defineAuthError(
  'mfa_totp_verify_not_enabled',
  422,
  'MFA verification is disabled for TOTP',
)
export const MfaPhoneEnrollDisabledError = defineAuthError(
  'mfa_phone_enroll_not_enabled',
  422,
  'MFA enroll is disabled for Phone',
)
export const MfaPhoneVerifyDisabledError = defineAuthError(
  'mfa_phone_verify_not_enabled',
  422,
  'MFA verification is disabled for Phone',
)
/** mfa_webauthn_enroll_not_enabled: GoTrue's code, with the message of each case. */
export const MfaWebAuthnEnrollDisabledError = defineAuthError(
  'mfa_webauthn_enroll_not_enabled',
  422,
  (message: string) => message,
)
export const MfaWebAuthnVerifyDisabledError = defineAuthError(
  'mfa_webauthn_verify_not_enabled',
  422,
  'MFA verification is disabled for WebAuthn',
)
export const FactorNameConflictError = defineAuthError(
  'mfa_factor_name_conflict',
  422,
  (name: string) => `A factor with the friendly name ${JSON.stringify(name)} for this user already exists`,
)
export const TooManyFactorsError = defineAuthError(
  'too_many_enrolled_mfa_factors',
  422,
  'Maximum number of verified factors reached, unenroll to continue',
)
export const InsufficientAalError = defineAuthCases('insufficient_aal', {
  enroll: [403, 'AAL2 required to enroll a new factor'],
  unenroll: [422, 'AAL2 required to unenroll verified factor'],
  update: [401, 'AAL2 session is required to update email or password when MFA is enabled.'],
  passkeys: [403, 'AAL2 session is required to manage passkeys when MFA is enabled'],
})
export const ChallengeIpMismatchError = defineAuthError(
  'mfa_ip_address_mismatch',
  422,
  'Challenge and verify IP addresses mismatch.',
)
export const ChallengeExpiredError = defineAuthError(
  'mfa_challenge_expired',
  422,
  (id: string) => `MFA challenge ${id} has expired, verify against another challenge or create a new challenge.`,
)
/** mfa_verification_failed: GoTrue's code, with the message of each case. */
export const MfaVerificationFailedError = defineAuthError('mfa_verification_failed', 422, (message: string) => message)
export const SamlDisabledError = defineAuthError('saml_provider_disabled', 404, 'SAML 2.0 is disabled')
export const PasskeysDisabledError = defineAuthError('passkey_disabled', 404, 'Passkeys are disabled')
export const TooManyPasskeysError = defineAuthError('too_many_passkeys', 422, 'Maximum number of passkeys reached')
export const WebAuthnChallengeNotFoundError = defineAuthError(
  'webauthn_challenge_not_found',
  400,
  'Challenge not found or already used',
)
export const WebAuthnChallengeExpiredError = defineAuthError('webauthn_challenge_expired', 400, 'Challenge has expired')
export const WebAuthnVerificationFailedError = defineAuthCases('webauthn_verification_failed', {
  // The credential JSON does not parse as a WebAuthn response.
  response: [400, 'Invalid credential response'],
  // It parses, but the signature, challenge, origin, RP or credential do not hold.
  credential: [400, 'Credential verification failed'],
})
export const WebAuthnCredentialExistsError = defineAuthError(
  'webauthn_credential_exists',
  422,
  'This credential is already registered',
)
export const Web3DisabledError = defineAuthError('web3_provider_disabled', 422, 'Web3 provider is disabled')
/** feature_disabled: GoTrue's code, with the message of each case. */
export const FeatureDisabledError = defineAuthError('feature_disabled', 404, (message: string) => message)
export const ManualLinkingDisabledError = defineAuthError('manual_linking_disabled', 404, 'Manual linking is disabled')
export const SingleIdentityNotDeletableError = defineAuthError(
  'single_identity_not_deletable',
  422,
  'User must have at least 1 identity after unlinking',
)
export const IdentityNotFoundError = defineAuthError('identity_not_found', 422, "Identity doesn't exist")
export const IdentityAlreadyLinkedError = defineAuthError('identity_already_exists', 422, (other: boolean) =>
  other ? 'Identity is already linked to another user' : 'Identity is already linked',
)
export const EmailConflictIdentityNotDeletableError = defineAuthError(
  'email_conflict_identity_not_deletable',
  422,
  'Unable to unlink identity due to email conflict',
)
export const UnexpectedAudienceError = defineAuthError(
  'unexpected_audience',
  403,
  "Token audience doesn't match request audience",
)
export const ReauthenticationNeededError = defineAuthError(
  'reauthentication_needed',
  400,
  'Password update requires reauthentication',
)
/** reauthentication_not_valid: GoTrue's code, with the message of each case. */
export const ReauthenticationNotValidError = defineAuthError(
  'reauthentication_not_valid',
  422,
  (message: string) => message,
)
export const ProviderDisabledError = defineAuthError('provider_disabled', 400, (message: string) => message)

// ----- identities and account linking -----------------------------------------------------------
/** Ours, retired (never sent since such an identity gets a user of its own, docs/edge.md): kept so the code is never reused. */
export const EmailNotProvenError = defineAuthError(
  'email_not_proven',
  422,
  (email: string) =>
    `The user with email ${email} never proved the address by a mail round trip, so this identity is not linked to it`,
)
export const ProviderEmailNeedsVerificationError = defineAuthError(
  'provider_email_needs_verification',
  422,
  'Unverified email with the provider. Please verify your email and try again.',
)

// ----- refresh token and id_token grants (OAuth form where GoTrue uses it) -----------------------
export const SessionExpiredError = defineAuthError('session_expired', 400, 'Invalid Refresh Token: Session Expired')
/** invalid_request in the OAuth form: the refresh grant without a token, and POST /oauth/token's own texts. */
export const OAuthInvalidRequestError = defineErrorCases(
  'invalid_request',
  { refreshTokenRequired: [400, 'refresh_token required'], described: [400, (description: string) => description] },
  OAuthError,
)
/** GoTrue's id_token grant spells this `error` with a space. */
export const IdTokenRequestError = defineErrorCases(
  'invalid request',
  { request: [400, (description: string) => description], badToken: [400, 'Bad ID token'] },
  OAuthError,
)
export const NonceMismatchError = defineOAuthError('invalid nonce', 'Nonces mismatch')

// ----- external providers, PKCE redirects, MFA enrolment ---------------------------------------

// ----- auth hooks (GoTrue's internal/hooks) ------------------------------------------------------
export const HookTimeoutError = defineAuthError(
  'hook_timeout',
  422,
  (seconds: string) => `Failed to reach hook within maximum time of ${seconds} seconds`,
)
export const HookTimeoutAfterRetryError = defineAuthError(
  'hook_timeout_after_retry',
  422,
  'Failed to reach hook after maximum retries',
)
export const HookPayloadOverSizeLimitError = defineAuthError(
  'hook_payload_over_size_limit',
  422,
  (bytes: number) => `Payload size exceeded size limit of ${bytes} bytes`,
)
export const HookPayloadInvalidContentTypeError = defineAuthError(
  'hook_payload_invalid_content_type',
  400,
  (message: string) => message,
)
export const MfaVerificationRejectedError = defineAuthError(
  'mfa_verification_rejected',
  403,
  (message: string) => message,
)
/** A password_verification_attempt hook's `reject`, with its message. */

// ----- OAuth 2.1 server (GoTrue's internal/api/oauthserver) --------------------------------------
export const OAuthClientNotFoundError = defineAuthCases('oauth_client_not_found', {
  // The admin routes' `:client_id` (GoTrue's LoadOAuthServerClient).
  admin: [404, 'OAuth client not found'],
  // GET /oauth/authorize: not redirected, since the redirect URI cannot be trusted yet.
  authorizeFormat: [400, 'invalid client_id format'],
  authorize: [400, 'invalid client_id'],
})
export const OAuthAuthorizationNotFoundError = defineAuthError(
  'oauth_authorization_not_found',
  404,
  'authorization not found',
)
export const OAuthDynamicRegistrationDisabledError = defineAuthError(
  'oauth_dynamic_client_registration_disabled',
  403,
  'Dynamic client registration is not enabled',
)
export const OAuthConsentNotFoundError = defineAuthError(
  'oauth_consent_not_found',
  404,
  'No active grant found for this client',
)
/** POST /oauth/token and the refresh grant of an OAuth session: RFC 6749 §5.2 errors in the OAuth form. */
export const OAuthInvalidClientError = defineOAuthError('invalid_client', (description: string) => description)
export const OAuthInvalidGrantError = defineOAuthError('invalid_grant', (description: string) => description)
export const OAuthUnsupportedGrantTypeError = defineOAuthError(
  'unsupported_grant_type',
  (description: string) => description,
)
export const OAuthAccessDeniedError = defineOAuthError('access_denied', (description: string) => description)

// The REST engine's error registry: PostgREST's PGRSTnnn codes (docs/rest-protocol.md §7.2) with
// their statuses, the SQLSTATE -> HTTP table (§7.3), and the translation of a Postgres
// error into a wire error. Codes are append-only; the status lives with the code here,
// never at the throw site. Nothing here renders HTTP (the handler does).
import {
  BadRequestError,
  GatehouseError,
  PayloadTooLargeError,
  TenantNotFoundError,
  defineError,
  defineErrorCases,
  type ErrorOptions,
  type ErrorText,
  standardReasonPhrase,
  ShuttingDownError,
} from '../shared/index.js'

export { BadRequestError, PayloadTooLargeError, TenantNotFoundError }

// ---------------------------------------------------------------------------------------
// Group 0: connection and schema cache

/** Matches PostgREST v14: 503, the libpq message goes to the log, not the client. */
/** Matches PostgREST v14's message; its details (the libpq message) stay in our log. */
export const DbConnectionError = defineError('PGRST000', 503, 'Database connection error.')
export const SchemaCacheLoadError = defineError(
  'PGRST002',
  503,
  'Could not query the database for the schema cache. Retrying.',
)
export const PoolTimeoutError = defineError('PGRST003', 504, 'Timed out acquiring connection from connection pool.')

// ---------------------------------------------------------------------------------------
// Group 1: the request (grammar, headers, negotiation)

/**
 * PGRST100: `"failed to parse <what> (<input>)" (line 1, column N)` with the parser's
 * `unexpected X expecting Y` text as details.
 */
export const ParseError = defineError(
  'PGRST100',
  400,
  (what: string, input: string, column: number) => `"failed to parse ${what} (${input})" (line 1, column ${column})`,
)
export const RpcMethodError = defineError('PGRST101', 405, (method: string) => `Cannot use the ${method} method on RPC`)
export const InvalidBodyError = defineError('PGRST102', 400, (message: string) => message)
const RANGE = 'Requested range not satisfiable'
/** PGRST103 with PostgREST 14's details (Error.hs): `limit=-1`, `Range: 5-2`, an offset past the counted total. */
export const RangeNotSatisfiableError = defineErrorCases('PGRST103', {
  negativeLimit: [416, { message: RANGE, details: 'Limit should be greater than or equal to zero.' }],
  lowerAboveUpper: [
    416,
    {
      message: RANGE,
      details: 'The lower boundary must be lower than or equal to the upper boundary in the Range header.',
    },
  ],
  offsetOutOfBounds: [
    416,
    (offset: number, total: number) => ({
      message: RANGE,
      details: `An offset of ${offset} was requested, but there are only ${total} rows.`,
      headers: { 'content-range': `*/${total}` },
    }),
  ],
})
export const PutMatchingPkError = defineError(
  'PGRST105',
  405,
  "Filters must include all and only primary key columns with 'eq' operators",
)
export const InvalidSchemaError = defineError('PGRST106', 406, (schema: string, exposed: readonly string[]) => ({
  message: `Invalid schema: ${schema}`,
  hint: `Only the following schemas are exposed: ${exposed.join(', ')}`,
}))
export const MediaTypeError = defineError(
  'PGRST107',
  406,
  (types: string) => `None of these media types are available: ${types}`,
)
export const NotEmbeddedError = defineError('PGRST108', 400, (name: string) => ({
  message: `'${name}' is not an embedded resource in this request`,
  hint: `Verify that '${name}' is included in the 'select' query parameter.`,
}))
export const ResponseHeadersGucError = defineError(
  'PGRST111',
  500,
  'response.headers guc must be a JSON array composed of objects with a single key and a string value',
)
export const ResponseStatusGucError = defineError('PGRST112', 500, 'response.status guc must be a valid status code')
export const PutLimitError = defineError('PGRST114', 400, 'limit/offset querystring parameters are not allowed for PUT')
export const PutPayloadMismatchError = defineError(
  'PGRST115',
  400,
  'Payload values do not match URL in primary key column(s)',
)
/** Matches PostgREST: an object was requested and 0 or more than 1 rows came back. */
export const SingularityError = defineError('PGRST116', 406, (rows: number) => ({
  message: 'Cannot coerce the result to a single JSON object',
  details: `The result contains ${rows} rows`,
}))
export const UnsupportedMethodError = defineError(
  'PGRST117',
  405,
  (method: string) => `Unsupported HTTP method: ${method}`,
)
export const RelatedOrderNotToOneError = defineError('PGRST118', 400, (origin: string, target: string) => ({
  message: `A related order on '${target}' is not possible`,
  details: `'${origin}' and '${target}' do not form a many-to-one or one-to-one relationship`,
}))
const RaiseJsonError = defineError('PGRST121', 500, 'Could not parse JSON in the "RAISE SQLSTATE \'PGRST\'" error')
export const InvalidPreferencesError = defineError('PGRST122', 400, (invalid: readonly string[]) => ({
  message: 'Invalid preferences given with handling=strict',
  details: `Invalid preferences: ${invalid.join(', ')}`,
}))
export const AggregatesNotAllowedError = defineError('PGRST123', 400, 'Use of aggregate functions is not allowed')
export const MaxAffectedError = defineError('PGRST124', 400, (rows: number) => ({
  message: 'Query result exceeds max-affected preference constraint',
  details: `The query affects ${rows} rows`,
}))
export const InvalidPathError = defineError('PGRST125', 404, 'Invalid path specified in request URL')
export const NotImplementedError = defineError('PGRST127', 400, 'Feature not implemented')
/** The OpenAPI root with rest.openapi_mode `disabled` (PostgREST's openapi-mode). */
export const OpenApiDisabledError = defineError('PGRST126', 404, 'Root endpoint metadata is disabled')
export const MaxAffectedRpcError = defineError(
  'PGRST128',
  400,
  'Function must return SETOF or TABLE when max-affected preference is used with handling=strict',
)

// ---------------------------------------------------------------------------------------
// Group 2: the schema cache (relations, relationships, functions, columns)

/**
 * PGRST200 with PostgREST's details and hint: a close name for the origin when it has no
 * relationships at all, else a close name for the target among the origin's relationships.
 */
export const NoRelationshipError = defineError(
  'PGRST200',
  400,
  (
    origin: string,
    target: string,
    embedHint: string | null,
    schema: string,
    closest: { origin: string } | { target: string } | null,
  ) => ({
    message: `Could not find a relationship between '${origin}' and '${target}' in the schema cache`,
    details:
      `Searched for a foreign key relationship between '${origin}' and '${target}'` +
      (embedHint === null ? '' : ` using the hint '${embedHint}'`) +
      ` in the schema '${schema}', but no matches were found.`,
    hint:
      closest === null
        ? null
        : 'origin' in closest
          ? `Perhaps you meant '${closest.origin}' instead of '${origin}'.`
          : `Perhaps you meant '${closest.target}' instead of '${target}'.`,
  }),
)
/** Status 300 as PostgREST; details is a JSON array (sent through `extra`). */
export const AmbiguousRelationshipError = defineError(
  'PGRST201',
  300,
  (origin: string, target: string) =>
    `Could not embed because more than one relationship was found for '${origin}' and '${target}'`,
)
export const FunctionNotFoundError = defineError(
  'PGRST202',
  404,
  (signature: string) => `Could not find the function ${signature} in the schema cache`,
)
export const AmbiguousFunctionError = defineError(
  'PGRST203',
  300,
  (candidates: string) => `Could not choose the best candidate function between: ${candidates}`,
)
export const ColumnNotFoundError = defineError(
  'PGRST204',
  400,
  (column: string, table: string) => `Could not find the '${column}' column of '${table}' in the schema cache`,
)
/**
 * Also answered when the table exists but the caller's role has no privilege at all on it; with
 * PostgREST's hint when a table name of the schema is close.
 */
export const TableNotFoundError = defineError(
  'PGRST205',
  404,
  (schema: string, name: string, closest: string | null) => ({
    message: `Could not find the table '${schema}.${name}' in the schema cache`,
    hint: closest === null ? null : `Perhaps you meant the table '${schema}.${closest}'`,
  }),
)

// ---------------------------------------------------------------------------------------
// Group 3: JWT (PostgREST 14's Error.hs JwtError texts; jose-jwt's KeyError/BadAlgorithm
// texts as details). Every 401 here carries PostgREST's WWW-Authenticate challenge.

const JwtSecretMissingError = defineError('PGRST300', 500, 'Server lacks JWT secret')
const AnonDisabledError = defineError('PGRST302', 401, 'Anonymous access is disabled')

/** The message with PostgREST's challenge on PGRST301/303: `Bearer error="invalid_token", error_description="<message>"`. */
function invalidToken(message: string, details: string | null = null): ErrorText {
  const description = message.replace(/["\\]/g, '\\$&')
  return {
    message,
    details,
    headers: { 'www-authenticate': `Bearer error="invalid_token", error_description="${description}"` },
  }
}

/** PGRST301, decode errors: the token, its parts, the key, the algorithm. */
export const JwtDecodeError = defineErrorCases('PGRST301', {
  /** `Authorization: Bearer` with nothing after it. */
  empty: [401, invalidToken('Empty JWT is sent in Authorization header')],
  /** A token that does not split into 3 dot-separated parts. */
  parts: [401, (parts: number) => invalidToken(`Expected 3 parts in JWT; got ${parts}`)],
  /** The key does not verify the signature (also an HMAC algorithm other than the pinned one). */
  keyCannotDecode: [
    401,
    invalidToken('No suitable key or wrong key type', 'None of the keys was able to decode the JWT'),
  ],
  /** A signature algorithm no configured key can verify (RSA, EC, EdDSA). */
  noSuitableKey: [
    401,
    invalidToken('No suitable key or wrong key type', 'No suitable key was found to decode the JWT'),
  ],
  /** An unsecured token (`alg: none`). */
  unsecured: [
    401,
    invalidToken('Wrong or unsupported encoding algorithm', "JWT is unsecured but expected 'alg' was not 'none'"),
  ],
  /** A token that does not parse (bad base64url, header JSON, unknown algorithm). */
  malformed: [401, invalidToken('JWT cryptographic operation failed')],
})

/** PGRST303, claim errors: expired, not yet valid, issued in the future, a time or aud claim of the wrong type. */
export const JwtClaimsError = defineErrorCases('PGRST303', {
  expired: [401, invalidToken('JWT expired')],
  notYetValid: [401, invalidToken('JWT not yet valid')],
  issuedAtFuture: [401, invalidToken('JWT issued at future')],
  notInAudience: [401, invalidToken('JWT not in audience')],
  parsingFailed: [401, invalidToken('Parsing claims failed')],
  expNotNumber: [401, invalidToken("The JWT 'exp' claim must be a number")],
  nbfNotNumber: [401, invalidToken("The JWT 'nbf' claim must be a number")],
  iatNotNumber: [401, invalidToken("The JWT 'iat' claim must be a number")],
  audNotStringOrArray: [401, invalidToken("The JWT 'aud' claim must be a string or an array of strings")],
})
export type JwtClaimsFailure = keyof typeof JwtClaimsError.cases

/**
 * A token role the request may not switch to: what PostgREST answers for a role that
 * does not exist (Postgres' 22023 on `set_config('role', ...)`, 401 with `WWW-Authenticate:
 * Bearer`). Also said for another tenant's roles, whose existence is not ours to reveal.
 */
export function unknownRole(role: string): GatehouseError {
  const message = `role "${role}" does not exist`
  return new GatehouseError('22023', statusForSqlState('22023', message, false), message, {
    headers: { 'www-authenticate': 'Bearer' },
  })
}

// ---------------------------------------------------------------------------------------
// Row-level security on writes (docs/service.md §6-§7)

/** Postgres' refusal of a new row by a policy (WITH CHECK, or SELECT policies on RETURNING). */
export function isNewRowRefusal(err: unknown): boolean {
  return isPgServerError(err) && err.code === '42501' && /^new row violates row-level security policy/.test(err.message)
}

interface RowWrittenFacts {
  /** The caller's role as docs/service.md §3 names it (anon, authenticated, service_role). */
  role: string
  isAnon: boolean
  schema: string
  table: string
  /** The return preference that asked for the hidden rows. */
  returning: string
  rows: number
}

/**
 * docs/service.md §7: the row was written, but the SELECT policy hides it from its author. A
 * 42501 refusal (401 for anon, 403 otherwise, as any 42501) whose body carries
 * `row_written: true`: the one marker the gateway's refusal rewriter turns into `rls_refusal`
 * (docs/architecture.md, "Contracts with the engines").
 */
export function rowWrittenError(f: RowWrittenFacts): GatehouseError {
  const what = f.rows === 1 ? '1 row was' : `${f.rows} rows were`
  return new GatehouseError(
    '42501',
    statusForSqlState('42501', '', f.isAnon),
    `new row was written but the SELECT policy hides it from role ${f.role}`,
    {
      details:
        `${what} written to ${f.schema}.${f.table} and committed; only returning ${f.rows === 1 ? 'it' : 'them'} ` +
        `(Prefer: return=${f.returning}) was refused, because the SELECT policy does not let role ${f.role} see the new row. ` +
        'Do not retry the request: it would write the row again.',
      hint: 'Send Prefer: return=minimal, or add a SELECT policy that lets the author see the row.',
      extra: { row_written: true },
      headers: f.isAnon ? { 'www-authenticate': 'Bearer' } : {},
    },
  )
}

// ---------------------------------------------------------------------------------------
// Ours (snake_case, not PostgREST's)

// tenant_not_found, payload_too_large and bad_request: shared (src/shared/errors.ts)
export const EngineNotConfiguredError = defineError(
  'engine_not_configured',
  503,
  (database: string) => `The REST engine has no connection for database '${database}'`,
)
/** 5xx with no known cause: the body says only this plus the request id; the cause is logged. */
export const UnexpectedError = defineError('unexpected_failure', 500, 'unexpected failure')

/** The engine's own errors (not PostgREST's): their Proxy-Status names Gatehouse. */
const OWN_ERRORS = [
  TenantNotFoundError,
  ShuttingDownError,
  EngineNotConfiguredError,
  PayloadTooLargeError,
  BadRequestError,
  UnexpectedError,
]

/**
 * The Proxy-Status of an error response: `PostgREST; error=<code>` as PostgREST 14 sends
 * on every error it answers (its PGRST codes, SQLSTATEs, codes RAISEd with 'PGRST'),
 * `gatehouse; error=<code>` for the engine's own codes. Only visible ASCII of the code is
 * kept (a RAISEd code is arbitrary text).
 */
export function proxyStatus(e: GatehouseError): string {
  const code = e.code.replace(/[^\x20-\x7e]/g, '')
  return `${OWN_ERRORS.some((c) => e instanceof c) ? 'gatehouse' : 'PostgREST'}; error=${code}`
}

/** Every error this part raises itself (a Postgres error keeps its SQLSTATE besides these). */
export const REST_ERRORS = {
  DbConnectionError,
  SchemaCacheLoadError,
  PoolTimeoutError,
  ParseError,
  RpcMethodError,
  InvalidBodyError,
  RangeNotSatisfiableError,
  PutMatchingPkError,
  InvalidSchemaError,
  MediaTypeError,
  NotEmbeddedError,
  ResponseHeadersGucError,
  ResponseStatusGucError,
  PutLimitError,
  PutPayloadMismatchError,
  SingularityError,
  UnsupportedMethodError,
  RelatedOrderNotToOneError,
  RaiseJsonError,
  InvalidPreferencesError,
  AggregatesNotAllowedError,
  MaxAffectedError,
  InvalidPathError,
  NotImplementedError,
  MaxAffectedRpcError,
  NoRelationshipError,
  AmbiguousRelationshipError,
  FunctionNotFoundError,
  AmbiguousFunctionError,
  ColumnNotFoundError,
  TableNotFoundError,
  JwtSecretMissingError,
  JwtDecodeError,
  AnonDisabledError,
  JwtClaimsError,
  TenantNotFoundError,
  ShuttingDownError,
  EngineNotConfiguredError,
  PayloadTooLargeError,
  BadRequestError,
  UnexpectedError,
} as const

// ---------------------------------------------------------------------------------------
// SQLSTATE -> HTTP (docs/rest-protocol.md §7.3, PostgREST's mapSQLtoHTTP); checked top to bottom.

/**
 * The HTTP status of a Postgres error. `isAnon` decides 42501: 401 for the anon role
 * (a JWT whose role is anon is still anon), 403 otherwise.
 */
export function statusForSqlState(sqlstate: string, message: string, isAnon: boolean): number {
  const c = sqlstate.toUpperCase()
  const cls = c.slice(0, 2)
  if (cls === '08') return 503
  if (cls === '09') return 500
  if (cls === '0L' || cls === '0P') return 403
  if (c === '23503' || c === '23505') return 409
  if (c === '25006') return 405
  if (c === '21000') return message.endsWith('requires a WHERE clause') ? 400 : 500
  if (c === '22023') return /^role ".*" does not exist$/s.test(message) ? 401 : 400
  if (cls === '25') return 500
  if (cls === '28') return 403
  if (cls === '2D' || cls === '38' || cls === '39' || cls === '3B' || cls === '40') return 500
  if (c === '53400') return 500
  if (cls === '53') return 503
  if (cls === '54' || cls === '55') return 500
  if (c === '57P01') return 503
  if (cls === '57' || cls === '58' || cls === 'F0' || cls === 'HV') return 500
  if (c === 'P0001') return 400
  if (cls === 'P0' || cls === 'XX') return 500
  if (c === '42883') return message.startsWith('function xmlagg(') ? 406 : 404
  if (c === '42P01') return 404
  if (c === '42P17') return 500
  if (c === '42501') return isAnon ? 401 : 403
  if (cls === 'PT') {
    // PostgREST reads the three characters after PT as the status; anything else (PT40A) is 500.
    const s = /^PT\d{3}$/.test(c) ? Number(c.slice(2)) : 0
    return s >= 100 && s <= 599 ? s : 500
  }
  return 400
}

/** The fields node-postgres puts on a server error. */
interface PgServerError {
  code?: unknown
  message?: unknown
  detail?: unknown
  hint?: unknown
  severity?: unknown
}

/** A server-side Postgres error (has a 5-character SQLSTATE and a severity). */
export function isPgServerError(err: unknown): err is Error & { code: string; detail?: string; hint?: string } {
  const e = err as PgServerError
  return (
    !!e &&
    typeof e === 'object' &&
    typeof e.code === 'string' &&
    /^[0-9A-Z]{5}$/.test(e.code) &&
    typeof e.severity === 'string'
  )
}

/** SQLSTATEs that mean the connection itself is gone (PGRST000 rather than a query error). */
function isConnectionLoss(code: string): boolean {
  return code.startsWith('08') || code === '57P01' || code === '57P02' || code === '57P03'
}

/**
 * Translates a Postgres error into the wire error PostgREST sends: `code` is the
 * SQLSTATE, message/details/hint are Postgres' MESSAGE/DETAIL/HINT. 401 carries
 * `WWW-Authenticate: Bearer`.
 */
export function fromPgError(
  err: Error & { code: string; detail?: string; hint?: string },
  isAnon: boolean,
): GatehouseError {
  if (isConnectionLoss(err.code)) return new DbConnectionError({ cause: err, internal: err.message })
  if (err.code === 'PGRST') return fromPgrstRaise(err)
  const status = statusForSqlState(err.code, err.message, isAnon)
  const opts: ErrorOptions = { details: err.detail ?? null, hint: err.hint ?? null, cause: err }
  if (status === 401) opts.headers = { 'www-authenticate': 'Bearer' }
  // Matches PostgREST: RAISE SQLSTATE 'PTnnn' answers status nnn with the message as its reason phrase.
  const phrase =
    /^PT\d{3}$/i.test(err.code) && status === Number(err.code.slice(2)) ? statusLineSafe(err.message) : null
  const e = new DatabaseError(err.code, status, err.message, opts, phrase)
  return e
}

// ---------------------------------------------------------------------------------------
// RAISE SQLSTATE 'PGRST' (docs/rest-protocol.md §7.4): MESSAGE is the JSON error body, DETAIL the
// status and extra headers; anything else is PGRST121.

const PGRST_MESSAGE_HINT =
  "MESSAGE must be a JSON object with obligatory keys: 'code', 'message' and optional keys: 'details', 'hint'."
const PGRST_DETAIL_HINT =
  "DETAIL must be a JSON object with obligatory keys: 'status', 'headers' and optional key: 'status_text'."

function jsonObject(text: string): Record<string, unknown> | null {
  try {
    const v = JSON.parse(text) as unknown
    return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : null
  } catch {
    return null
  }
}

/** A JSON string or null/absent (aeson's `.:?` of Text); anything else fails the parse. */
function optionalText(v: unknown): { ok: true; value: string | null } | { ok: false } {
  if (v === undefined || v === null) return { ok: true, value: null }
  return typeof v === 'string' ? { ok: true, value: v } : { ok: false }
}

function fromPgrstRaise(err: Error & { detail?: string }): GatehouseError {
  // Matches PostgREST's parse: MESSAGE {code, message: strings; details, hint: strings or
  // null}; DETAIL {status: an integer, headers: an object of strings, status_text: a string}.
  const body = jsonObject(err.message)
  const details = optionalText(body?.details)
  const hint = optionalText(body?.hint)
  if (body === null || typeof body.code !== 'string' || typeof body.message !== 'string' || !details.ok || !hint.ok) {
    return new RaiseJsonError({
      details: `Invalid JSON value for MESSAGE: '${err.message}'`,
      hint: PGRST_MESSAGE_HINT,
      cause: err,
    })
  }
  if (err.detail === undefined || err.detail === null) {
    return new RaiseJsonError({
      details: 'DETAIL is missing in the RAISE statement',
      hint: PGRST_DETAIL_HINT,
      cause: err,
    })
  }
  const detail = jsonObject(err.detail)
  const status = detail?.status
  const headers = detail?.headers
  const statusText = optionalText(detail?.status_text)
  // The status must also be one HTTP can carry (PostgREST takes any integer).
  if (
    detail === null ||
    typeof status !== 'number' ||
    !Number.isInteger(status) ||
    status < 100 ||
    status > 599 ||
    typeof headers !== 'object' ||
    headers === null ||
    Array.isArray(headers) ||
    Object.values(headers).some((v) => typeof v !== 'string') ||
    !statusText.ok
  ) {
    return new RaiseJsonError({
      details: `Invalid JSON value for DETAIL: '${err.detail}'`,
      hint: PGRST_DETAIL_HINT,
      cause: err,
    })
  }
  const out: Record<string, string> = {}
  for (const [k, v] of Object.entries(headers as Record<string, string>)) {
    // Only well-formed header names and single-line values reach the response.
    if (/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(k) && !/[\r\n]/.test(v)) out[k.toLowerCase()] = v
  }
  const phrase = statusText.value !== null ? statusLineSafe(statusText.value) : null
  const e = new DatabaseError(
    body.code,
    status,
    body.message,
    { details: details.value, hint: hint.value, headers: out, cause: err },
    phrase,
  )
  return e
}

// ---------------------------------------------------------------------------------------
// The error body as PostgREST writes it: aeson encodes a JSON object with its keys sorted
// (`{"code":..,"details":..,"hint":..,"message":..}`), nested objects too.

function sortedKeys(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(sortedKeys)
  if (typeof v !== 'object' || v === null) return v
  const out: Record<string, unknown> = {}
  for (const k of Object.keys(v).sort()) out[k] = sortedKeys((v as Record<string, unknown>)[k])
  return out
}

/** The JSON text of an error's body, keys in PostgREST's (sorted) order; `extra` fields included. */
export function errorBodyJson(e: GatehouseError, extra: Record<string, unknown> = {}): string {
  return JSON.stringify(sortedKeys({ ...e.toWire(), ...extra }))
}

// ---------------------------------------------------------------------------------------
// HTTP reason phrases (supabase-js shows them as statusText): PostgREST's (shared/http.ts),
// or the one an error chose itself.

/**
 * An error raised in the database, under its own code (a SQLSTATE, or the code of a
 * `RAISE SQLSTATE 'PGRST'`), with the reason phrase it chose itself, if any (RAISE SQLSTATE
 * 'PTnnn' and 'PGRST' with status_text).
 */
class DatabaseError extends GatehouseError {
  constructor(
    code: string,
    status: number,
    message: string,
    opts: ErrorOptions,
    readonly statusText: string | null,
  ) {
    super(code, status, message, opts)
  }
}

/** A phrase safe on the status line (visible ASCII and spaces, no CR/LF). */
function statusLineSafe(text: string): string | null {
  return /^[\t\x20-\x7e]{1,200}$/.test(text) ? text : null
}

/** The reason phrase PostgREST sends with `status` (or that `err` chose), null = Node's own. */
export function reasonPhrase(status: number, err?: GatehouseError): string | null {
  if (err instanceof DatabaseError && err.statusText !== null) return err.statusText
  return standardReasonPhrase(status)
}

// Auth hooks as GoTrue has them (supabase/auth internal/hooks: v0hooks, hookspgfunc, hookshttp,
// hookserrors): at five points the engine hands a JSON payload to the database's hook and reads
// its answer. A hook is `pg-functions://postgres/<schema>/<function>` (called on the engine's own
// connection, in the request's transaction when there is one, cancelled after 2 s; the
// function must be granted to the engine's login) or an http(s) endpoint (a POST signed with
// Standard Webhooks, 5 s, through the outbound guard). Failures answer as GoTrue's do.
import { createHash, createHmac, randomUUID } from 'node:crypto'
import type pg from 'pg'
import {
  outboundFetch,
  OutboundRefusedError,
  preparedRow,
  quoteIdent,
  safeUrl,
  type PoolLike,
  type Queryable,
} from '../shared/index.js'
import type { AuthHook } from '../tenants/index.js'
import {
  AuthError,
  InvalidCredentialsError,
  UnexpectedFailureError,
  HookPayloadInvalidContentTypeError,
  HookPayloadOverSizeLimitError,
  HookTimeoutAfterRetryError,
  HookTimeoutError,
  MfaVerificationRejectedError,
  unexpectedFailure,
} from './errors.js'
import type { TenantContext } from './types.js'

export type AuthHookName =
  | 'custom_access_token'
  | 'send_email'
  | 'password_verification_attempt'
  | 'mfa_verification_attempt'
  | 'before_user_created'

/** GoTrue's names of the hooks (the payload's `metadata.name`). */
const GOTRUE_NAMES: Record<AuthHookName, string> = {
  custom_access_token: 'customize-access-token',
  send_email: 'send-email',
  password_verification_attempt: 'password-verification',
  mfa_verification_attempt: 'mfa-verification',
  before_user_created: 'before-user-created',
}

/** The search path the auth engine's login connects with (platform migration 0010). */
const PINNED_SEARCH_PATH = 'pg_catalog, pg_temp'

/** GoTrue's limits: 5 s and three tries for an endpoint, 200 KB of answer (a function's: auth.hook_function_timeout_ms). */
const HOOK_LIMITS = { httpTimeoutMs: 5_000, httpTries: 3, httpBackoffMs: 2_000, maxBytes: 200 * 1024 }

/** Where a hook runs from: the request's tenant context and, when known, the caller's address. */
export interface HookCall {
  readonly ctx: TenantContext
  readonly ip?: string | null
  /** The request's transaction: a function hook runs in it (a new one otherwise). */
  readonly q?: Queryable
}

/** The hook configured for `name`, or null when none is (or it is switched off). */
export function hookOf(ctx: TenantContext, name: AuthHookName): AuthHook | null {
  const hook = ctx.tenant.auth.hooks?.[name]
  return hook === undefined || hook.enabled === false ? null : hook
}

/**
 * Runs the hook `name` with `payload` (GoTrue's `metadata` added) and resolves with its answer
 * (null for an empty one); null at once when the database has no such hook. Throws the
 * AuthError GoTrue answers with when the hook fails or answers `{error: {http_code, message}}`.
 */
export async function runAuthHook(
  call: HookCall,
  name: AuthHookName,
  payload: Record<string, unknown>,
): Promise<Record<string, unknown> | null> {
  const hook = hookOf(call.ctx, name)
  if (hook === null) return null
  const metadata: Record<string, unknown> = {
    uuid: randomUUID(),
    time: call.ctx.now().toISOString(),
    name: GOTRUE_NAMES[name],
  }
  if (call.ip) metadata.ip_address = call.ip
  const body = JSON.stringify({ metadata, ...payload })
  const started = Date.now()
  try {
    const answer = hook.uri.startsWith('pg-functions:')
      ? await runFunctionHook(call, hook.uri, body)
      : await runHttpHook(call, hook, body)
    call.ctx.log.info(
      { action: 'run_hook', hook: hook.uri, success: true, duration_ms: Date.now() - started },
      'Hook ran successfully',
    )
    return answer
  } catch (err) {
    call.ctx.log.warn(
      { action: 'run_hook', hook: hook.uri, success: false, duration_ms: Date.now() - started, err },
      'Hook errored out',
    )
    if (err instanceof AuthError) throw err
    throw new UnexpectedFailureError('hook', `Error running hook URI: ${safeUrl(hook.uri)}`, { internal: err })
  }
}

// ---- Postgres functions ---------------------------------------------------------------------

/** `pg-functions://<database>/<schema>/<function>` -> the quoted function name. */
function functionOf(uri: string): string {
  const m = /^pg-functions:\/\/[^/]*\/([A-Za-z_][A-Za-z0-9_$]*)\/([A-Za-z_][A-Za-z0-9_$]*)$/.exec(uri)
  if (m === null) throw new UnexpectedFailureError('hook', `Error running hook URI: ${safeUrl(uri)}`)
  return `${quoteIdent(m[1] as string)}.${quoteIdent(m[2] as string)}`
}

/**
 * Calls a function hook in one round trip: one statement calls it and reads back what it may
 * have changed for the session. Its 2 s limit is kept from the outside (no `SET LOCAL
 * statement_timeout` before it, no transaction of its own): a call still running then is
 * cancelled from another connection of the pool (pg_cancel_backend; a backend that is idle
 * by then ignores the cancel), and counts as a failed hook. Outside a request's transaction
 * the call runs in autocommit on a pooled connection.
 */
async function runFunctionHook(call: HookCall, uri: string, body: string): Promise<Record<string, unknown> | null> {
  const fn = functionOf(uri)
  const db = call.ctx.db
  const limitMs = call.ctx.config.auth.hook_function_timeout_ms
  const output =
    call.q !== undefined
      ? await withinHookDeadline(db, call.q, limitMs, () => invokeFunction(call.q!, fn, body))
      : await withPooledClient(db, (client) =>
          withinHookDeadline(db, client, limitMs, () => invokeFunction(client, fn, body)),
        )
  return checkAnswer(typeof output === 'string' ? parseJson(output) : output)
}

/**
 * The call of a function hook as a named prepared statement: Postgres parses and plans it once
 * per connection (a hook in SQL is inlined then too). Its answer comes as text, parsed here as
 * the driver parses json and jsonb: the statement's result type stays text whatever the function
 * returns, so a function replaced with another return type never meets "cached plan must not
 * change result type".
 */
const hookStatements = new Map<string, { name: string; text: string }>()

function hookStatement(fn: string): { name: string; text: string } {
  let statement = hookStatements.get(fn)
  if (statement === undefined) {
    const text = `SELECT ${fn}($1::jsonb)::text AS output, pg_catalog.current_setting('role') AS role,
      pg_catalog.current_setting('search_path') AS path`
    // A short name of the text (Postgres cuts names at 63 bytes; a function's name may be that long).
    const name = 'gatehouse_auth_hook_' + createHash('sha256').update(text).digest('hex').slice(0, 24)
    statement = { name, text }
    if (hookStatements.size >= 10_000) hookStatements.clear()
    hookStatements.set(fn, statement)
  }
  return statement
}

async function invokeFunction(q: Queryable, fn: string, body: string): Promise<unknown> {
  const statement = hookStatement(fn)
  // Its fields by position: output, role, path (shared/prepared-row.ts: no Describe per call).
  const row = await preparedRow(q, statement.name, statement.text, [body])
  // Whatever the function set for the session ends here: the engine's login keeps its
  // pinned search path and its own role on this pooled connection.
  if (row !== null && (row[1] !== 'none' || row[2] !== PINNED_SEARCH_PATH))
    await q.query('RESET ROLE; RESET search_path')
  return row?.[0] ?? null
}

/** A connection of the pool for `fn`; one whose hook call was cancelled is discarded, not reused. */
async function withPooledClient<T>(db: PoolLike, fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await db.connect()
  try {
    const out = await fn(client)
    client.release()
    return out
  } catch (err) {
    client.release(err instanceof HookDeadlineError ? err : undefined)
    throw err
  }
}

/** The hook's call ran into its 2 s limit and was cancelled. */
class HookDeadlineError extends Error {}

/** Runs `call` on `client`, cancelling its statement (from another connection of `db`) after the hook limit. */
async function withinHookDeadline<T>(
  db: PoolLike,
  client: Queryable,
  limitMs: number,
  call: () => Promise<T>,
): Promise<T> {
  const pid = (client as { processID?: number | null }).processID
  if (typeof pid !== 'number') throw new Error('a function hook needs a connection of its own (no backend process id)')
  let cancelled = false
  const timer = setTimeout(() => {
    cancelled = true
    db.query('SELECT pg_catalog.pg_cancel_backend($1)', [pid]).catch(() => {})
  }, limitMs)
  let out: T
  try {
    out = await call()
  } catch (err) {
    if (cancelled) throw new HookDeadlineError(`the function hook ran past ${limitMs} ms`, { cause: err })
    throw err
  } finally {
    clearTimeout(timer)
  }
  // Answered just as the cancel went out: still past the limit, and the connection may carry it.
  if (cancelled) throw new HookDeadlineError(`the function hook ran past ${limitMs} ms`)
  return out
}

// ---- HTTP endpoints -------------------------------------------------------------------------

/** Standard Webhooks signatures (`v1,<base64 HMAC-SHA256>`) of the payload with each secret. */
function webhookSignatures(secrets: readonly string[], id: string, timestamp: number, body: string): string {
  return secrets
    .map((secret) => {
      const key = Buffer.from(secret.replace(/^v1,whsec_/, ''), 'base64')
      return 'v1,' + createHmac('sha256', key).update(`${id}.${timestamp}.${body}`).digest('base64')
    })
    .join(', ')
}

async function runHttpHook(call: HookCall, hook: AuthHook, body: string): Promise<Record<string, unknown> | null> {
  const deadline = AbortSignal.timeout(HOOK_LIMITS.httpTimeoutMs)
  const policy = { allowHosts: call.ctx.config.outbound.allow_hosts }
  for (let attempt = 0; attempt < HOOK_LIMITS.httpTries; attempt++) {
    const id = randomUUID()
    const timestamp = Math.floor(call.ctx.now().getTime() / 1000)
    let res: Response
    try {
      res = await outboundFetch(
        hook.uri,
        {
          method: 'POST',
          body,
          signal: deadline,
          maxBytes: HOOK_LIMITS.maxBytes + 1,
          headers: {
            'content-type': 'application/json',
            'webhook-id': id,
            'webhook-timestamp': String(timestamp),
            'webhook-signature': webhookSignatures(hook.secrets ?? [], id, timestamp, body),
            'accept-encoding': 'identity',
          },
        },
        policy,
      )
    } catch (err) {
      if (deadline.aborted) throw new HookTimeoutError((HOOK_LIMITS.httpTimeoutMs / 1000).toFixed(6))
      if (err instanceof OutboundRefusedError)
        throw new UnexpectedFailureError('hook', `Error running hook URI: ${safeUrl(hook.uri)}`, { internal: err })
      if (/larger than/.test(String((err as Error).message))) {
        throw new HookPayloadOverSizeLimitError(HOOK_LIMITS.maxBytes)
      }
      if (attempt === HOOK_LIMITS.httpTries - 1) throw new HookTimeoutAfterRetryError()
      await new Promise((resolve) => setTimeout(resolve, HOOK_LIMITS.httpBackoffMs))
      continue
    }
    const answer = await readHttpAnswer(res)
    if (answer !== 'retry') return answer
  }
  throw new UnexpectedFailureError('hook', 'Service currently unavailable due to hook')
}

/** GoTrue's reading of an endpoint's status and body; 'retry' for a 429/503 with Retry-After. */
async function readHttpAnswer(res: Response): Promise<Record<string, unknown> | null | 'retry'> {
  switch (res.status) {
    case 204:
      return null
    case 200:
    case 202: {
      const type = res.headers.get('content-type')
      if (type === null || type === '')
        throw new HookPayloadInvalidContentTypeError('Invalid Content-Type: Missing Content-Type header')
      if (type.split(';')[0]?.trim().toLowerCase() !== 'application/json') {
        throw new HookPayloadInvalidContentTypeError(`Invalid JSON response. Received content-type: ${type}`)
      }
      return checkAnswer(parseJson(await res.text()))
    }
    case 429:
    case 503:
      if (res.headers.get('retry-after')) return 'retry'
      throw new UnexpectedFailureError('hook', 'Service currently unavailable due to hook')
    case 400:
      throw new UnexpectedFailureError('hook', 'Invalid payload sent to hook')
    case 401:
      throw new UnexpectedFailureError('hook', 'Hook requires authorization token')
    default:
      throw new UnexpectedFailureError('hook', `Unexpected status code returned from hook: ${res.status}`)
  }
}

// ---- answers --------------------------------------------------------------------------------

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text)
  } catch (err) {
    throw new UnexpectedFailureError('hook', 'Error unmarshaling JSON output.', { internal: err })
  }
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v)

/**
 * A hook's answer; `{error: {http_code, message}}` becomes that error (GoTrue's hookserrors:
 * 500 when no code is given; `unknown` as the error_code of other statuses).
 */
function checkAnswer(output: unknown): Record<string, unknown> | null {
  if (output === null || output === undefined) return null
  if (!isObject(output)) throw unexpectedFailure(new Error('hook answered something other than a JSON object'))
  const e = output.error
  if (isObject(e) && typeof e.message === 'string' && e.message !== '') {
    const code =
      typeof e.http_code === 'number' && Number.isInteger(e.http_code) && e.http_code >= 400 && e.http_code <= 599
        ? e.http_code
        : 500
    throw new AuthError(code === 500 ? 'unexpected_failure' : 'unknown', code, e.message)
  }
  return output
}

// ---- the attempt hooks ----------------------------------------------------------------------

/** GoTrue's default texts when a hook rejects without a message. */
const DEFAULT_REJECTION = {
  password: 'Further password verification attempts will be rejected.',
  mfa: 'Further MFA verification attempts will be rejected.',
}

interface Decision {
  reject: boolean
  message: string
  logout: boolean
}

function decisionOf(answer: Record<string, unknown> | null, fallback: string): Decision {
  const reject = answer?.decision === 'reject'
  const message = typeof answer?.message === 'string' && answer.message !== '' ? answer.message : fallback
  return { reject, message, logout: answer?.should_logout_user === true }
}

/**
 * password_verification_attempt: told whether the password was right; `reject` answers 400
 * invalid_credentials with the hook's message (signing the user out everywhere when it asks).
 */
export async function passwordAttemptHook(
  call: HookCall,
  userId: string,
  valid: boolean,
  logout: (userId: string) => Promise<unknown>,
): Promise<void> {
  if (hookOf(call.ctx, 'password_verification_attempt') === null) return
  const d = decisionOf(
    await runAuthHook(call, 'password_verification_attempt', { user_id: userId, valid }),
    DEFAULT_REJECTION.password,
  )
  if (!d.reject) return
  if (d.logout) await logout(userId)
  throw new InvalidCredentialsError(d.message)
}

/**
 * mfa_verification_attempt: told whether the code was right; `reject` signs the user out
 * everywhere and answers 403 mfa_verification_rejected with the hook's message.
 */
export async function mfaAttemptHook(
  call: HookCall,
  a: { userId: string; factorId: string; factorType: string; valid: boolean },
  logout: (userId: string) => Promise<unknown>,
): Promise<void> {
  if (hookOf(call.ctx, 'mfa_verification_attempt') === null) return
  const answer = await runAuthHook(call, 'mfa_verification_attempt', {
    user_id: a.userId,
    factor_id: a.factorId,
    factor_type: a.factorType,
    valid: a.valid,
  })
  const d = decisionOf(answer, DEFAULT_REJECTION.mfa)
  if (!d.reject) return
  await logout(a.userId)
  throw new MfaVerificationRejectedError(d.message)
}

/**
 * before_user_created: the user about to be created (as the API would show it); the hook
 * refuses it by answering an error, which rolls the creation back.
 */
export async function beforeUserCreatedHook(call: HookCall, user: Record<string, unknown>): Promise<void> {
  await runAuthHook(call, 'before_user_created', { user })
}

/** What the send_email hook is told of a mail (GoTrue's mailer.EmailData). */
export interface EmailData {
  token: string
  token_hash: string
  redirect_to: string
  email_action_type: string
  site_url: string
  token_new: string
  token_hash_new: string
}

/** send_email: the mail goes to the hook instead of SMTP, with the user and the mail's tokens. */
export async function sendEmailHook(
  call: HookCall,
  user: Record<string, unknown>,
  emailData: EmailData,
): Promise<void> {
  await runAuthHook(call, 'send_email', { user, email_data: emailData })
}

// Auth hooks as GoTrue has them (supabase/auth internal/hooks: v0hooks, hookspgfunc, hookshttp,
// hookserrors): at five points the engine hands a JSON payload to the database's hook and reads
// its answer. A hook is `pg-functions://postgres/<schema>/<function>` (called on the engine's own
// connection, in the request's transaction when there is one, as the database's hook role,
// stopped after 2 s; the function must be granted to that role) or an http(s) endpoint (a POST
// signed with Standard Webhooks, 5 s, through the outbound guard). Either answer may be 200 KB
// at most. Failures answer as GoTrue's do (docs/auth-hooks.md).
import { createHmac, randomUUID } from 'node:crypto'
import pg from 'pg'
import {
  outboundFetch,
  OutboundRefusedError,
  preparedRow,
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

/** The hooks, by their names in the tenant file, with GoTrue's names (the payload's `metadata.name`). */
const GOTRUE_NAMES = {
  custom_access_token: 'customize-access-token',
  send_email: 'send-email',
  password_verification_attempt: 'password-verification',
  mfa_verification_attempt: 'mfa-verification',
  before_user_created: 'before-user-created',
} as const

export type AuthHookName = keyof typeof GOTRUE_NAMES

/** GoTrue's limits: 5 s and three tries for an endpoint, 200 KB of answer, a function's too (its time: auth.hook_function_timeout_ms). */
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

/** `pg-functions://<database>/<schema>/<function>` -> schema and function name. */
function functionOf(uri: string): [string, string] {
  const m = /^pg-functions:\/\/[^/]*\/([A-Za-z_][A-Za-z0-9_$]*)\/([A-Za-z_][A-Za-z0-9_$]*)$/.exec(uri)
  if (m === null) throw new UnexpectedFailureError('hook', `Error running hook URI: ${safeUrl(uri)}`)
  return [m[1] as string, m[2] as string]
}

/**
 * Calls a function hook in one round trip, through platform.call_hook (platform migration
 * 0280): the function runs with the database's hook role's privileges only, and an answer
 * longer than HOOK_LIMITS.maxBytes is refused in Postgres. Its limit is kept from the outside
 * (no `SET LOCAL statement_timeout` before it, no transaction of its own): a call still running
 * then is cancelled, and terminated after a grace if it goes on (a PL/pgSQL hook can catch the
 * cancel); the request answers GoTrue's hook_timeout. Outside a request's transaction the call
 * runs in autocommit on a pooled connection, discarded after a deadline.
 */
async function runFunctionHook(call: HookCall, uri: string, body: string): Promise<Record<string, unknown> | null> {
  const fn = functionOf(uri)
  const ctx = call.ctx
  const output =
    call.q !== undefined
      ? await withinHookDeadline(ctx, call.q, () => invokeFunction(call.q!, fn, body))
      : await withPooledClient(ctx.db, (client) =>
          withinHookDeadline(ctx, client, () => invokeFunction(client, fn, body)),
        )
  return checkAnswer(typeof output === 'string' ? parseJson(output) : output)
}

/**
 * The call as a named prepared statement, one for every hook: Postgres parses and plans it once
 * per connection. Its answer comes as text (parsed here as the driver parses json and jsonb),
 * whatever the function returns, so a function replaced with another return type needs nothing.
 */
const HOOK_CALL = {
  name: 'gatehouse_auth_hook_call',
  text: 'SELECT platform.call_hook($1, $2, $3::jsonb, $4::integer)',
}

/**
 * The SQLSTATE platform.call_hook raises for an answer over the size limit. Its other one,
 * GH426 (a hook changed the session's prepared statements, all deallocated since), the
 * connection's session guard handles (src/shared/session-guard.ts).
 */
const CALL_HOOK_OVERSIZED = 'GH413'

async function invokeFunction(q: Queryable, [schema, name]: [string, string], body: string): Promise<unknown> {
  try {
    const row = await preparedRow(q, HOOK_CALL.name, HOOK_CALL.text, [schema, name, body, String(HOOK_LIMITS.maxBytes)])
    return row?.[0] ?? null
  } catch (err) {
    const code = (err as { code?: string }).code
    if (code === CALL_HOOK_OVERSIZED) throw new HookPayloadOverSizeLimitError(HOOK_LIMITS.maxBytes)
    throw err
  }
}

/** A connection of the pool for `fn`; one whose hook call ran past its limit is discarded, not reused. */
async function withPooledClient<T>(db: PoolLike, fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await db.connect()
  try {
    const out = await fn(client)
    client.release()
    return out
  } catch (err) {
    client.release(err instanceof HookTimeoutError ? err : undefined)
    throw err
  }
}

/**
 * How long a cancelled hook call may take to stop before its backend is terminated, and how
 * long the connection that stops it may take to open.
 */
const HOOK_STOP = { graceMs: 250, connectTimeoutMs: 2_000 }

/**
 * Runs `call` on `client` within the hook limit (auth.hook_function_timeout_ms): past it, the
 * call is cancelled, and its backend terminated after HOOK_STOP.graceMs if still running
 * (the connection is then gone: the pool discards it). Answers GoTrue's hook_timeout then.
 */
async function withinHookDeadline<T>(ctx: TenantContext, client: Queryable, call: () => Promise<T>): Promise<T> {
  const pid = (client as { processID?: number | null }).processID
  if (typeof pid !== 'number') throw new Error('a function hook needs a connection of its own (no backend process id)')
  const limitMs = ctx.config.auth.hook_function_timeout_ms
  let running = true
  let cancelled = false
  const stop = (signal: 'pg_cancel_backend' | 'pg_terminate_backend'): void => {
    signalHookBackend(ctx, signal, pid, () => running).catch((err: unknown) =>
      ctx.log.warn({ action: 'run_hook', pid, signal, err }, 'could not stop a hook past its limit'),
    )
  }
  const timers = [
    setTimeout(() => {
      cancelled = true
      stop('pg_cancel_backend')
    }, limitMs),
    setTimeout(() => stop('pg_terminate_backend'), limitMs + HOOK_STOP.graceMs),
  ]
  const timeout = () => new HookTimeoutError((limitMs / 1000).toFixed(6))
  let out: T
  try {
    out = await call()
  } catch (err) {
    // The call's own error (the cancel's, the termination's) goes to the log with it.
    if (cancelled) throw Object.assign(timeout(), { cause: err })
    throw err
  } finally {
    running = false
    for (const timer of timers) clearTimeout(timer)
  }
  // Answered just as the cancel went out: still past the limit, and the connection may carry it.
  if (cancelled) throw timeout()
  return out
}

/**
 * Cancels or terminates the backend `pid` while it still runs the hook call, from a connection
 * of its own (the tenant's pool may be all taken by such calls), or from one of the pool's when
 * none can be opened (the login at its CONNECTION LIMIT). The login may signal its own sessions
 * only; the backend is signalled only while it runs the call's statement.
 */
async function signalHookBackend(
  ctx: TenantContext,
  signal: 'pg_cancel_backend' | 'pg_terminate_backend',
  pid: number,
  running: () => boolean,
): Promise<void> {
  if (!running()) return
  const sql = `SELECT pg_catalog.${signal}(a.pid) FROM pg_catalog.pg_stat_activity a
    WHERE a.pid = $1 AND a.state = 'active' AND a.query = $2`
  const values = [pid, HOOK_CALL.text]
  const client = new pg.Client({
    connectionString: ctx.tenant.engines?.auth,
    connectionTimeoutMillis: HOOK_STOP.connectTimeoutMs,
    application_name: 'gatehouse-auth-hook-deadline',
  })
  client.on('error', () => {})
  try {
    await client.connect()
  } catch (err) {
    ctx.log.warn({ action: 'run_hook', pid, signal, err }, 'signalling a hook past its limit from the pool')
    await client.end().catch(() => {})
    if (running()) await ctx.db.query(sql, values)
    return
  }
  try {
    if (running()) await client.query(sql, values)
  } finally {
    await client.end().catch(() => {})
  }
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

/** An attempt hook's answer: whether it rejects, with which message, and whether the user is signed out. */
function decisionOf(answer: Record<string, unknown> | null, fallback: string) {
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

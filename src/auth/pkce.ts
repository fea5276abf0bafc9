// PKCE (docs/auth-protocol.md §5.7): reading code_challenge / code_challenge_method from a request, the
// tenant's switch, checking a verifier against a stored challenge, flow-state expiry and
// the AMR method of each verify type. Email flows start their flow state here too.
import { createHash } from 'node:crypto'
import type { Queryable } from '../shared/index.js'
import { constantTimeEqual } from './crypto.js'
import { ValidationFailedError } from './errors.js'
import { insertFlowState, type CodeChallengeMethod, type FlowStateRow } from './models/flow-state.js'
import type { TenantContext } from './types.js'

export interface PkceParams {
  challenge: string
  method: CodeChallengeMethod
}

/** GoTrue's flow-state lifetime (EXTERNAL_FLOW_STATE_EXPIRY_DURATION default and minimum). */
const FLOW_STATE_EXPIRY_SECONDS = 300

const CHALLENGE = /^[a-zA-Z._~0-9-]+$/

function asString(v: unknown): string {
  return typeof v === 'string' ? v : ''
}

/**
 * The PKCE parameters of a request (null when it has none). Both or neither must be
 * given; the challenge is 43-128 characters of the unreserved set; the method s256 or
 * plain (any case). A PKCE request to a tenant without PKCE is refused.
 */
export function pkceParamsOf(ctx: TenantContext, rawChallenge: unknown, rawMethod: unknown): PkceParams | null {
  const challenge = asString(rawChallenge)
  const method = asString(rawMethod)
  if ((challenge === '') !== (method === ''))
    throw new ValidationFailedError('request', 'PKCE flow requires code_challenge_method and code_challenge')
  if (challenge === '') return null
  if (challenge.length < 43 || challenge.length > 128 || !CHALLENGE.test(challenge)) {
    throw new ValidationFailedError('request', 'code challenge has to be between 43 and 128 characters')
  }
  const m = method.toLowerCase()
  if (m !== 's256' && m !== 'plain')
    throw new ValidationFailedError('request', `code challenge method not supported: ${method}`)
  if (!ctx.tenant.auth.pkce) throw new ValidationFailedError('request', 'PKCE flow is disabled for this database')
  return { challenge, method: m }
}

/** True when the verifier matches the stored challenge (constant time). */
export function verifierMatches(
  flow: Pick<FlowStateRow, 'code_challenge' | 'code_challenge_method'>,
  verifier: string,
): boolean {
  if (!flow.code_challenge) return false
  const derived =
    flow.code_challenge_method === 'plain'
      ? verifier
      : createHash('sha256').update(verifier, 'utf8').digest('base64url')
  return constantTimeEqual(derived, flow.code_challenge)
}

/** GoTrue: magic-link flows expire 5 min after the code was issued, all others after creation. */
export function isFlowStateExpired(flow: FlowStateRow, now: Date): boolean {
  const from =
    flow.authentication_method === 'magiclink' ? (flow.auth_code_issued_at ?? flow.created_at) : flow.created_at
  return from.getTime() + FLOW_STATE_EXPIRY_SECONDS * 1000 < now.getTime()
}

/** The flow method (and AMR) of a verify type: signup -> email/signup, others by name. */
export function flowMethodOfVerifyType(type: string): string {
  return type === 'signup' ? 'email/signup' : type
}

/** Starts the flow state of an email flow (its mailed token is then `pkce_`-prefixed). */
export async function startEmailFlow(
  ctx: TenantContext,
  q: Queryable,
  userId: string,
  method: string,
  pkce: PkceParams,
): Promise<FlowStateRow> {
  return insertFlowState(q, { providerType: 'email', authenticationMethod: method, pkce, userId, now: ctx.now() })
}

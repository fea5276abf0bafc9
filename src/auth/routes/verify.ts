// GET /verify (the link in mails; 303 redirects with the session or the error in the
// fragment) and POST /verify (token_hash, or token + email; JSON answers), docs/auth-protocol.md §3.8-3.9.
// The verify types themselves live in confirmations.ts (VERIFY_KINDS). A `pkce_` link ends
// with `?code=` of the user's flow state instead of a session; `email` is a
// confirmation or a magic-link token, whichever it turns out to be.
import type { FastifyReply, FastifyRequest } from 'fastify'
import { withTransaction, type Queryable } from '../../shared/index.js'
import { ottTypesOfVerifyType, verifyTokenHash, type VerifyOutcome } from '../confirmations.js'
import { hashOtp } from '../crypto.js'
import {
  AuthError,
  FlowStateNotFoundError,
  MAX_OTP_ATTEMPTS,
  OtpExpiredError,
  toAuthError,
  ValidationFailedError,
} from '../errors.js'
import { contextOf } from '../request-state.js'
import { bodyOf, clientMeta, normaliseEmail, normalisePhone, optString, queryParam, redirectUrlOf } from '../http.js'
import { findOneTimeToken } from '../models/one-time-tokens.js'
import { countAddressAttempt, countOtpAttempt } from '../models/otp-attempts.js'
import { findLatestFlowState, updateFlowState } from '../models/flow-state.js'
import { flowMethodOfVerifyType } from '../pkce.js'
import { errorRedirectUrl, withFragmentParams, withQueryParams } from '../redirects.js'
import { startSession } from '../tokens.js'
import type { AccessTokenResponse, TenantContext } from '../types.js'

/** The `type`s a link may carry (GET /verify); others are an error redirect. */
const LINK_TYPES = new Set(['signup', 'invite', 'recovery', 'magiclink', 'email_change', 'email'])
const FIRST_EMAIL_CHANGE = 'Confirmation link accepted. Please proceed to confirm link sent to the other email'

const flowStateNotFoundRedirect = () => new FlowStateNotFoundError('redirect')

/**
 * The type and stored hash a verification is about: among the candidate hashes (an OTP's
 * hash, and the same `pkce_`-prefixed), the one that exists; `email` becomes `signup` for
 * a confirmation token and `magiclink` otherwise (as GoTrue rewrites it).
 */
async function resolveToken(q: Queryable, type: string, hashes: string[]): Promise<{ type: string; hash: string }> {
  if (type === 'email') {
    for (const h of hashes) if (await findOneTimeToken(q, h, ['confirmation_token'])) return { type: 'signup', hash: h }
    type = 'magiclink'
  }
  if (hashes.length > 1) {
    const types = ottTypesOfVerifyType(type)
    for (const h of hashes) if (await findOneTimeToken(q, h, types)) return { type, hash: h }
  }
  return { type, hash: hashes[0]! }
}

interface Verified {
  outcome: VerifyOutcome
  type: string
  session?: AccessTokenResponse
  code?: string
}

async function verifyAndSignIn(
  ctx: TenantContext,
  req: FastifyRequest,
  type: string,
  hashes: string[],
  opts: { relatesTo?: string; linkOpened?: boolean; pkceRedirect?: boolean; attemptCounted?: boolean },
): Promise<Verified> {
  return withTransaction(ctx.db, async (q) => {
    const resolved = await resolveToken(q, type, hashes)
    const outcome = await verifyTokenHash(ctx, q, resolved.type, resolved.hash, opts)
    if (outcome.kind !== 'signed_in') return { outcome, type: resolved.type }
    if (opts.pkceRedirect && resolved.hash.startsWith('pkce_')) {
      // PKCE link: the flow started with the mail gets its code; the session waits for the exchange.
      const flow = await findLatestFlowState(q, outcome.user.user.id, flowMethodOfVerifyType(resolved.type))
      if (!flow || !flow.auth_code) throw flowStateNotFoundRedirect()
      await updateFlowState(q, flow.id, { authCodeIssuedAt: ctx.now() }, ctx.now())
      return { outcome, type: resolved.type, code: flow.auth_code }
    }
    const session = await startSession(ctx, q, outcome.user, { method: 'otp', ...clientMeta(req) })
    return { outcome, type: resolved.type, session }
  })
}

function errorRedirect(
  reply: FastifyReply,
  redirectTo: string,
  err: unknown,
  pkce: boolean,
  log: FastifyRequest['log'],
) {
  const e = toAuthError(err)
  if (e.status >= 500) log.error({ err: e.internal ?? err }, 'verify failed')
  // A PKCE link carries the error in the query as well (GoTrue's prepErrorRedirectURL).
  return reply.redirect(errorRedirectUrl(redirectTo, e, pkce, 'verify'), 303)
}

export async function getVerify(req: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
  const ctx = contextOf(req)
  const type = queryParam(req, 'type')
  const token = queryParam(req, 'token')
  if (!type) throw new ValidationFailedError('request', 'Verify requires a verification type')
  if (!token) throw new ValidationFailedError('request', 'Verify requires a token or a token hash')
  const redirectTo = redirectUrlOf(req, ctx.tenant.auth)
  const pkce = token.startsWith('pkce_')
  try {
    if (!LINK_TYPES.has(type)) throw new ValidationFailedError('request', 'Invalid email verification type')
    const v = await verifyAndSignIn(ctx, req, type, [token], { linkOpened: true, pkceRedirect: true })
    if (v.outcome.kind === 'first_email_change_confirmation') {
      const base = pkce ? withQueryParams(redirectTo, { message: FIRST_EMAIL_CHANGE }) : redirectTo
      return reply.redirect(withFragmentParams(base, { message: FIRST_EMAIL_CHANGE }), 303)
    }
    if (v.code) return reply.redirect(withQueryParams(redirectTo, { code: v.code }), 303)
    const s = v.session!
    return reply.redirect(
      withFragmentParams(redirectTo, {
        access_token: s.access_token,
        expires_at: String(s.expires_at),
        expires_in: String(s.expires_in),
        refresh_token: s.refresh_token,
        token_type: 'bearer',
        type: v.type,
      }),
      303,
    )
  } catch (err) {
    return errorRedirect(reply, redirectTo, err, pkce, req.log)
  }
}

/** The address a code was sent to, GoTrue's checks in its order (internal/api/verify.go). */
function codeAddress(email: string | undefined, phone: string | undefined): string {
  if (phone && !email) {
    normalisePhone(phone)
    // No SMS provider sends codes (docs/auth-protocol.md §3.9): no phone code can match, so
    // GoTrue's answer for an unknown number or a wrong code.
    throw new OtpExpiredError('token')
  }
  if (!email || phone)
    throw new ValidationFailedError('request', 'Only an email address or phone number should be provided on verify')
  try {
    return normaliseEmail(email)
  } catch {
    throw new ValidationFailedError('unprocessable', 'Invalid email format')
  }
}

/** POST /verify's answer: the session, or the message of the first of two email change links. */
function verifiedAnswer({ outcome, session }: Verified): unknown {
  return outcome.kind === 'first_email_change_confirmation' ? { msg: FIRST_EMAIL_CHANGE, code: '200' } : session!
}

export async function postVerify(req: FastifyRequest): Promise<unknown> {
  const ctx = contextOf(req)
  const b = bodyOf(req)
  const type = optString(b, 'type')
  const token = optString(b, 'token')
  const tokenHash = optString(b, 'token_hash')
  const email = optString(b, 'email')
  const phone = optString(b, 'phone')
  if (!type) throw new ValidationFailedError('request', 'Verify requires a verification type')
  if ((token && tokenHash) || (!token && !tokenHash))
    throw new ValidationFailedError('request', 'Verify requires either a token or a token hash')
  let hashes: string[]
  let relatesTo: string | undefined
  if (tokenHash) {
    if (email || phone || optString(b, 'redirect_to'))
      throw new ValidationFailedError('request', 'Only the token_hash and type should be provided')
    // GoTrue looks a token hash up by its type first: a type without emailed tokens is a 400.
    if (!LINK_TYPES.has(type)) throw new ValidationFailedError('request', 'Invalid email verification type')
    hashes = [tokenHash]
  } else {
    relatesTo = codeAddress(email, phone)
    const hash = hashOtp(relatesTo, token!)
    // A code mailed in a PKCE flow is stored `pkce_`-prefixed; the code works all the same.
    hashes = [hash, 'pkce_' + hash]
  }
  if (relatesTo === undefined) return verifiedAnswer(await verifyAndSignIn(ctx, req, type, hashes, {}))
  // A code with its address: the attempt counts against that address's outstanding codes
  // and against the address itself within a code lifetime, before the code is checked, so
  // however many clients guess at once, and however many new codes they have mailed, an
  // address's codes are checked MAX_OTP_ATTEMPTS times at most; after that even the right
  // code is refused (the mailed link still works).
  // One transaction, the address's row locked first: concurrent guesses are counted one
  // after the other, both counts together.
  const attempts = await withTransaction(ctx.db, async (q) => {
    const byAddress = await countAddressAttempt(q, relatesTo!, ctx.tenant.auth.otp_expiry, ctx.now())
    return Math.max(byAddress, await countOtpAttempt(q, relatesTo!, ottTypesOfVerifyType(type)))
  })
  if (attempts > MAX_OTP_ATTEMPTS) throw new OtpExpiredError('attempts')
  try {
    return verifiedAnswer(await verifyAndSignIn(ctx, req, type, hashes, { relatesTo, attemptCounted: true }))
  } catch (err) {
    if (attempts === MAX_OTP_ATTEMPTS && err instanceof AuthError && err.code === 'otp_expired')
      throw new OtpExpiredError('attempts')
    throw err
  }
}

// The MFA steps every factor type shares (docs/auth-protocol.md §3.19, GoTrue's internal/api/mfa.go):
// the checks before a new factor (validateFactors), the checks of the challenge a verify names
// (validateChallenge), and what a verified factor does to the session and the user's other
// sessions and factors (updateMFASessionAndClaims and what follows it).
import { withTransaction, type Queryable } from '../shared/index.js'
import {
  ChallengeExpiredError,
  ChallengeIpMismatchError,
  FactorNameConflictError,
  FactorNotFoundError,
  InsufficientAalError,
  TooManyFactorsError,
} from './errors.js'
import { audit } from './models/audit-log.js'
import {
  AMR_OF_FACTOR,
  deleteChallenge,
  deleteExpiredFactors,
  deleteSessionsBelowAal2,
  deleteUnverifiedFactors,
  factorsOfUser,
  findChallenge,
  insertChallenge,
  markChallengeVerified,
  markFactorVerified,
  setSessionAal,
  type ChallengeRow,
} from './models/factors.js'
import { activeTokenOfSession, insertRefreshToken, revokeSessionTokens } from './models/refresh-tokens.js'
import { advanceSessionCounter, sessionTokenState } from './models/session-tokens.js'
import { encodeRefreshTokenV2 } from './refresh-token-format.js'
import { addAmrClaim, amrClaims, findSession } from './models/sessions.js'
import { loadUserWithIdentities } from './models/users.js'
import { tokenResponse } from './tokens.js'
import type { AccessTokenResponse, AuthenticatedUser, FactorRow, TenantContext } from './types.js'

/** GoTrue's MFA defaults: challenges and unverified, unchallenged factors live 300 s. */
export const CHALLENGE_EXPIRY_SECONDS = 300
const FACTOR_EXPIRY_SECONDS = 300
const MAX_VERIFIED_FACTORS = 10

/** The caller the MFA routes' checks proved: signed in, not anonymous, with a session. */
export type MfaCaller = AuthenticatedUser & { sessionId: string }

export async function sessionIsAal2(q: Queryable, sessionId: string): Promise<boolean> {
  return (await findSession(q, sessionId))?.aal === 'aal2'
}

/**
 * Before a new factor (GoTrue's validateFactors): expired unverified factors removed, the name
 * free, room under both limits, and an aal2 session when the user has a verified factor.
 */
export async function checkNewFactor(ctx: TenantContext, q: Queryable, u: MfaCaller, friendlyName: string) {
  const userId = u.user.user.id
  await deleteExpiredFactors(q, userId, ctx.now(), FACTOR_EXPIRY_SECONDS)
  const factors = await factorsOfUser(q, userId)
  if (factors.some((f) => (f.friendly_name ?? '') === friendlyName)) throw new FactorNameConflictError(friendlyName)
  const verified = factors.filter((f) => f.status === 'verified').length
  if (factors.length >= ctx.tenant.auth.mfa_max_enrolled_factors || verified >= MAX_VERIFIED_FACTORS)
    throw new TooManyFactorsError()
  if (verified > 0 && !(await sessionIsAal2(q, u.sessionId))) throw new InsufficientAalError('enroll')
}

/** The challenge a verify names (GoTrue's validateChallenge): the factor's, same IP, unspent, not expired. */
export async function liveChallenge(
  ctx: TenantContext,
  factor: FactorRow,
  challengeId: string,
  ip: string,
): Promise<ChallengeRow> {
  const challenge = await findChallenge(ctx.db, factor.id, challengeId)
  if (!challenge) throw new FactorNotFoundError('challenge')
  if (challenge.verified_at || challenge.ip_address !== ip) throw new ChallengeIpMismatchError()
  if (challenge.created_at.getTime() + CHALLENGE_EXPIRY_SECONDS * 1000 < ctx.now().getTime()) {
    await deleteChallenge(ctx.db, challenge.id)
    throw new ChallengeExpiredError(challenge.id)
  }
  return challenge
}

/** A new challenge of the factor (audited), as the challenge routes answer it; `webauthn`: its ceremony. */
export async function createChallenge(
  ctx: TenantContext,
  u: MfaCaller,
  factor: FactorRow,
  ip: string,
  webauthn?: object,
): Promise<{ id: string; type: string; expires_at: number }> {
  const challenge = await withTransaction(ctx.db, async (q) => {
    const now = ctx.now()
    const c = await insertChallenge(q, { factorId: factor.id, ip, now, webauthn })
    const traits = { factor_id: factor.id, factor_status: factor.status }
    const user = u.user.user
    await audit(q, { action: 'challenge_created', actorId: user.id, actorUsername: user.email, traits, ip, now })
    return c
  })
  const expiresAt = Math.floor(challenge.created_at.getTime() / 1000) + CHALLENGE_EXPIRY_SECONDS
  return { id: challenge.id, type: factor.factor_type, expires_at: expiresAt }
}

/**
 * The raised session's refresh token. A v2 session's counter moves on by two (GoTrue's
 * updateMFASessionAndClaims: the aal1 token, even one behind, can no longer refresh); a v1
 * session's tokens are revoked and a child of its active one issued.
 */
async function raisedRefreshToken(q: Queryable, userId: string, sessionId: string, now: Date): Promise<string> {
  const v2 = await sessionTokenState(q, sessionId)
  if (v2) {
    const next = await advanceSessionCounter(q, sessionId, 2, now)
    return encodeRefreshTokenV2(sessionId, next!.counter, next!.key)
  }
  const active = await activeTokenOfSession(q, sessionId)
  await revokeSessionTokens(q, sessionId, now)
  return insertRefreshToken(q, { userId, sessionId, parent: active?.token, now })
}

/**
 * Raises the caller's session after a verified factor (GoTrue's updateMFASessionAndClaims):
 * AMR claim added, the session's refresh token rotated (the aal1 one no longer refreshes),
 * aal and factor_id stored, a token signed with the session's AMR.
 */
async function raiseSession(
  ctx: TenantContext,
  q: Queryable,
  userId: string,
  sessionId: string,
  factor: FactorRow,
  ip: string | null,
): Promise<AccessTokenResponse> {
  const now = ctx.now()
  await addAmrClaim(q, sessionId, AMR_OF_FACTOR[factor.factor_type]!, now)
  const refreshToken = await raisedRefreshToken(q, userId, sessionId, now)
  await setSessionAal(q, sessionId, 'aal2', factor.id, now)
  const user = (await loadUserWithIdentities(q, userId))!
  const amr = await amrClaims(q, sessionId)
  return tokenResponse(ctx, user, { id: sessionId, refreshToken, amr }, { q, method: `mfa/${factor.factor_type}`, ip })
}

/**
 * A verify that held, inside its transaction: audited, the challenge spent, the factor
 * verified, the session raised to aal2, the user's aal1 sessions and other unverified
 * factors of the type removed. Returns the raised session's tokens.
 */
export async function completeVerification(
  ctx: TenantContext,
  q: Queryable,
  u: MfaCaller,
  factor: FactorRow,
  challengeId: string,
  ip: string,
): Promise<AccessTokenResponse> {
  const userId = u.user.user.id
  const now = ctx.now()
  await audit(q, {
    action: 'verification_attempted',
    actorId: userId,
    actorUsername: u.user.user.email,
    traits: { factor_id: factor.id, challenge_id: challengeId, factor_type: factor.factor_type },
    ip,
    now,
  })
  // Two verifies of one challenge race here; the loser sees a spent challenge.
  if (!(await markChallengeVerified(q, challengeId, now))) throw new ChallengeIpMismatchError()
  if (factor.status !== 'verified') await markFactorVerified(q, factor.id, now)
  const token = await raiseSession(ctx, q, userId, u.sessionId, factor, ip)
  await deleteSessionsBelowAal2(q, userId)
  await deleteUnverifiedFactors(q, userId, factor.factor_type)
  return token
}

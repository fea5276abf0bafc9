// grant_type=refresh_token: GoTrue's legacy v1 rotation (docs/auth-protocol.md §5.2). A live token is
// rotated in one atomic statement (the hot path). A revoked token is either a lost
// response (its child is the active token), a reuse within the tenant's reuse interval
// (both answer the current active token), or theft: the whole session family is revoked
// (committed) and the answer is refresh_token_already_used.
import type { FastifyRequest } from 'fastify'
import { setTimeout as sleep } from 'node:timers/promises'
import { withTransaction } from '../../shared/index.js'
import { assertRefreshTokenShape } from '../crypto.js'
import {
  ConflictError,
  SessionNotFoundError,
  RefreshTokenAlreadyUsedError,
  RefreshTokenNotFoundError,
  RefreshTokenRequiredError,
  UserBannedError,
  SessionExpiredError,
} from '../errors.js'
import { clientMeta, type Body } from '../http.js'
import {
  activeTokenOfSession,
  deleteRefreshToken,
  isConcurrentDeletion,
  loadRefreshContext,
  lockTokenAndSession,
  revokeSessionTokens,
  rotateLiveToken,
  rotateRefreshToken,
  touchSession,
} from '../models/refresh-tokens.js'
import { isUserBanned } from '../models/users.js'
import { tokenResponse } from '../tokens.js'
import type { AccessTokenResponse, TenantContext, UserRow } from '../types.js'

/** How long concurrent refreshes of one token wait for each other before 409 (GoTrue: 5 s). */
const LOCK_WAIT_MS = 5_000

type ReuseOutcome =
  { kind: 'ok'; token: string } | { kind: 'locked' } | { kind: 'gone' } | { kind: 'live' } | { kind: 'reused' }

export async function refreshTokenGrant(
  ctx: TenantContext,
  req: FastifyRequest,
  b: Body,
): Promise<AccessTokenResponse> {
  const issue = { method: 'token_refresh', ip: clientMeta(req).ip }
  const presented = b.refresh_token
  if (presented === undefined || presented === null || presented === '') throw new RefreshTokenRequiredError()
  assertRefreshTokenShape(presented)
  // The common case in one statement; anything unusual falls through to the loop below.
  const hot = await rotateLiveToken(ctx.db, presented, ctx.now())
  if (hot) {
    const c = hot.context
    return tokenResponse(
      ctx,
      { user: c.user, identities: c.identities, factors: c.factors },
      { id: c.sessionId, refreshToken: hot.newToken, amr: c.amr },
      issue,
    )
  }
  const giveUpAt = Date.now() + LOCK_WAIT_MS

  for (;;) {
    const rc = await loadRefreshContext(ctx.db, presented)
    if (!rc || !rc.user) throw new RefreshTokenNotFoundError()
    const now = ctx.now()
    const sessionId = await usableSession(ctx, rc, rc.user, now)
    const user = { user: rc.user, identities: rc.identities, factors: rc.factors }

    if (!rc.token.revoked) {
      const out = await rotateRefreshToken(ctx.db, { id: rc.token.id, userId: rc.user.id, sessionId, now })
      if (out.kind === 'rotated')
        return tokenResponse(ctx, user, { id: sessionId, refreshToken: out.token, amr: rc.amr }, issue)
      if (out.kind === 'gone') continue
      if (out.kind === 'locked') {
        await backoff(giveUpAt)
        continue
      }
      // revoked meanwhile: the reuse path below decides.
    }

    const reuse = await decideReuse(ctx, rc.token.id, sessionId, now)
    if (!reuse) continue
    switch (reuse.kind) {
      case 'ok':
        return tokenResponse(ctx, user, { id: sessionId, refreshToken: reuse.token, amr: rc.amr }, issue)
      case 'reused':
        throw new RefreshTokenAlreadyUsedError()
      case 'locked':
        await backoff(giveUpAt)
        continue
      case 'gone':
      case 'live':
        continue
    }
  }
}

/** The token's session, when its user may refresh and it still lasts; a token without one is deleted. */
async function usableSession(
  ctx: TenantContext,
  rc: NonNullable<Awaited<ReturnType<typeof loadRefreshContext>>>,
  user: UserRow,
  now: Date,
): Promise<string> {
  if (isUserBanned(user, now)) throw new UserBannedError('refresh')
  const sessionId = rc.token.session_id
  if (!sessionId || !rc.sessionExists) {
    await deleteRefreshToken(ctx.db, rc.token.id)
    throw new SessionNotFoundError('refresh')
  }
  if (rc.sessionNotAfter && rc.sessionNotAfter.getTime() < now.getTime()) throw new SessionExpiredError()
  return sessionId
}

/**
 * A revoked token presented again, decided under the token's and session's locks: the current
 * token (lost response, or a reuse within the interval), or the family revoked (theft);
 * null when the rows went away meanwhile.
 */
async function decideReuse(
  ctx: TenantContext,
  tokenId: string,
  sessionId: string,
  now: Date,
): Promise<ReuseOutcome | null> {
  return withTransaction<ReuseOutcome | null>(ctx.db, async (q) => {
    const locked = await lockTokenAndSession(q, tokenId, sessionId)
    if (locked === null) return { kind: 'locked' }
    const token = locked.token
    if (!token) return { kind: 'gone' }
    if (!token.revoked) return { kind: 'live' }
    const active = await activeTokenOfSession(q, sessionId)
    const withinInterval =
      now.getTime() <= token.updated_at.getTime() + ctx.tenant.auth.refresh_token_reuse_interval * 1000
    // Lost response: the client never saw the child of this token. Or a reuse inside the
    // interval (several tabs refreshing at once): both get the current token.
    if (active && (active.parent === token.token || withinInterval)) {
      await touchSession(q, sessionId, now)
      return { kind: 'ok', token: active.token }
    }
    await revokeSessionTokens(q, sessionId, now)
    return { kind: 'reused' }
  }).catch((err: unknown) => {
    if (isConcurrentDeletion(err)) return null
    throw err
  })
}

async function backoff(giveUpAt: number): Promise<void> {
  if (Date.now() >= giveUpAt) throw new ConflictError()
  await sleep(10 + Math.floor(Math.random() * 20))
}

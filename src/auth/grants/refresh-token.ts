// grant_type=refresh_token. A v2 token (docs/auth-protocol.md §5.3) goes to grants/refresh-token-v2.ts (its format: refresh-token-format.ts).
// A v1 token (§5.2): with algorithm 1 a live token is rotated in one atomic statement (the hot
// path); with algorithm 2 its session moves to v2 tokens instead (GoTrue's upgrade, for every
// session). A revoked token is either a lost response (its child is the active token), a
// reuse within the tenant's reuse interval (both answer the current active token, or the
// session's current v2 token once it moved), or theft: the whole session family is revoked
// (committed) and the answer is refresh_token_already_used.
import type { FastifyRequest } from 'fastify'
import { setTimeout as sleep } from 'node:timers/promises'
import { withTransaction } from '../../shared/index.js'
import { parseRefreshTokenParam } from '../crypto.js'
import {
  ConflictError,
  SessionNotFoundError,
  RefreshTokenAlreadyUsedError,
  RefreshTokenNotFoundError,
  OAuthInvalidRequestError,
  UserBannedError,
  SessionExpiredError,
} from '../errors.js'
import { clientMeta, type Body } from '../http.js'
import { checkOAuthBinding } from './oauth-binding.js'
import { refreshV2Grant } from './refresh-token-v2.js'
import {
  activeTokenOfSession,
  deleteRefreshToken,
  loadRefreshContext,
  lockTokenAndSession,
  nullIfDeleted,
  revokeRefreshToken,
  revokeSessionTokens,
  rotateLiveToken,
  rotateRefreshToken,
  touchSession,
  type RotateOutcome,
} from '../models/refresh-tokens.js'
import {
  advanceSessionCounter,
  saveSessionCounter,
  sessionTokenState,
  type RefreshInfo,
} from '../models/session-tokens.js'
import { isUserBanned } from '../models/users.js'
import { encodeRefreshTokenV2 } from '../refresh-token-format.js'
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
  /** The OAuth client asking at POST /oauth/token (oauth-binding.ts); null at /token. */
  client: string | null = null,
): Promise<AccessTokenResponse> {
  const meta = clientMeta(req)
  const issue = { method: 'token_refresh', ip: meta.ip }
  const presented = b.refresh_token
  if (presented === undefined || presented === null || presented === '')
    throw new OAuthInvalidRequestError('refreshTokenRequired')
  const v2 = parseRefreshTokenParam(presented)
  if (v2) return refreshV2Grant(ctx, v2, { now: ctx.now(), userAgent: meta.userAgent, ip: meta.ip }, client)
  const token = presented as string
  const upgrade = ctx.tenant.auth.refresh_token_algorithm_version === 2
  // The common case in one statement; anything unusual falls through to the loop below.
  const hot = upgrade || client !== null ? null : await rotateLiveToken(ctx.db, token, ctx.now())
  if (hot) {
    const c = hot.context
    return tokenResponse(ctx, c, { id: c.sessionId, refreshToken: hot.newToken, amr: c.amr }, issue)
  }
  return refreshV1SlowPath(ctx, token, upgrade, meta, client)
}

/** A v1 token the hot statement did not take (or, with algorithm 2, every v1 token). */
async function refreshV1SlowPath(
  ctx: TenantContext,
  presented: string,
  upgrade: boolean,
  meta: { userAgent: string | null; ip: string | null },
  client: string | null,
): Promise<AccessTokenResponse> {
  const issue = { method: 'token_refresh', ip: meta.ip }
  const giveUpAt = Date.now() + LOCK_WAIT_MS
  for (;;) {
    const rc = await loadRefreshContext(ctx.db, presented)
    if (!rc || !rc.user) throw new RefreshTokenNotFoundError()
    const now = ctx.now()
    const sessionId = await usableSession(ctx, rc, rc.user, now)
    const oauth = await checkOAuthBinding(ctx, sessionId, client)
    const user = { user: rc.user, identities: rc.identities, factors: rc.factors }

    if (!rc.token.revoked) {
      const rotate = { id: rc.token.id, userId: rc.user.id, sessionId, now }
      const out = upgrade
        ? await upgradeSession(ctx, rotate, { now, userAgent: meta.userAgent, ip: meta.ip })
        : await rotateRefreshToken(ctx.db, rotate)
      if (out.kind === 'rotated')
        return tokenResponse(ctx, user, { id: sessionId, refreshToken: out.token, amr: rc.amr, oauth }, issue)
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
        return tokenResponse(ctx, user, { id: sessionId, refreshToken: reuse.token, amr: rc.amr, oauth }, issue)
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
    // The session moved to v2 tokens (its v1 tokens are all revoked): within the interval
    // the client gets the session's current v2 token, as a concurrent v2 refresh would.
    const v2 = active ? null : await sessionTokenState(q, sessionId)
    if (v2 && withinInterval) {
      await touchSession(q, sessionId, now)
      return { kind: 'ok', token: encodeRefreshTokenV2(sessionId, v2.counter, v2.key) }
    }
    // Lost response: the client never saw the child of this token. Or a reuse inside the
    // interval (several tabs refreshing at once): both get the current token.
    if (active && (active.parent === token.token || withinInterval)) {
      await touchSession(q, sessionId, now)
      return { kind: 'ok', token: active.token }
    }
    await revokeSessionTokens(q, sessionId, now)
    return { kind: 'reused' }
  }).catch(nullIfDeleted)
}

/**
 * A live v1 token of a tenant on algorithm 2 (GoTrue's upgrade): revoked, and its session set
 * up for v2 tokens (a key and counter 0, or its counter moved on when it has them), under the
 * token's and session's locks. Answers the session's first v2 token.
 */
async function upgradeSession(
  ctx: TenantContext,
  t: { id: string; sessionId: string },
  info: RefreshInfo,
): Promise<RotateOutcome> {
  const outcome = await withTransaction<RotateOutcome>(ctx.db, async (q) => {
    const locked = await lockTokenAndSession(q, t.id, t.sessionId)
    if (locked === null) return { kind: 'locked' }
    if (!locked.token) return { kind: 'gone' }
    if (locked.token.revoked) return { kind: 'revoked' }
    await revokeRefreshToken(q, t.id, info.now)
    const s = await advanceSessionCounter(q, t.sessionId, 1, info.now)
    if (!s) return { kind: 'gone' }
    await saveSessionCounter(q, t.sessionId, s.counter, info)
    return { kind: 'rotated', token: encodeRefreshTokenV2(t.sessionId, s.counter, s.key) }
  }).catch(nullIfDeleted)
  return outcome ?? { kind: 'gone' }
}

async function backoff(giveUpAt: number): Promise<void> {
  if (Date.now() >= giveUpAt) throw new ConflictError()
  await sleep(10 + Math.floor(Math.random() * 20))
}

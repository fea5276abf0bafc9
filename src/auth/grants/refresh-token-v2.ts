// grant_type=refresh_token with a v2 token (docs/auth-protocol.md §5.3; supabase/auth
// internal/tokens/service.go RefreshTokenGrant, its *crypto.RefreshToken branch). The common
// case is one statement (models/hot-refresh.ts rotateSessionToken); anything else is
// decided under the session's row lock by how far the presented counter is behind the
// session's: ahead is a token this server never issued, equal is a normal refresh, one behind
// (the client lost the answer) or any behind within the reuse interval of the last refresh
// (several tabs at once) gets the current token again, and any other reuse ends the session.
import { setTimeout as sleep } from 'node:timers/promises'
import { withTransaction } from '../../shared/index.js'
import {
  ConflictError,
  RefreshTokenAlreadyUsedError,
  RefreshTokenNotFoundError,
  SessionExpiredError,
  UserBannedError,
  ValidationFailedError,
} from '../errors.js'
import { deleteSession } from '../models/sessions.js'
import { checkOAuthBinding } from './oauth-binding.js'
import { rotateSessionToken } from '../models/hot-refresh.js'
import {
  loadSessionTokenContext,
  lockSessionToken,
  saveSessionCounter,
  type RefreshInfo,
  type SessionTokenContext,
} from '../models/session-tokens.js'
import { isUserBanned } from '../models/users.js'
import { encodeRefreshTokenV2, hasValidSignature, type RefreshTokenV2 } from '../refresh-token-format.js'
import { tokenResponse } from '../tokens.js'
import type { AccessTokenResponse, TenantContext } from '../types.js'

/** How long concurrent refreshes of one session wait for each other before 409 (GoTrue: 5 s). */
const LOCK_WAIT_MS = 5_000

type Decision =
  | { kind: 'issue'; counter: bigint; key: string }
  | { kind: 'locked' }
  | { kind: 'gone' }
  | { kind: 'ahead' }
  | { kind: 'reused' }

const issueOf = (ip: string | null) => ({ method: 'token_refresh', ip })

export async function refreshV2Grant(
  ctx: TenantContext,
  token: RefreshTokenV2,
  info: RefreshInfo,
  /** The OAuth client asking at POST /oauth/token (oauth-binding.ts); null at /token. */
  client: string | null = null,
): Promise<AccessTokenResponse> {
  const hot = client === null ? await rotateSessionToken(ctx.db, token, info) : null
  if (hot) {
    const c = hot.context
    const refreshToken = encodeRefreshTokenV2(c.sessionId, token.counter + 1n, hot.key)
    return tokenResponse(ctx, c, { id: c.sessionId, refreshToken, amr: c.amr }, issueOf(info.ip))
  }
  const giveUpAt = Date.now() + LOCK_WAIT_MS
  for (;;) {
    const sc = await usableSession(ctx, token, info.now)
    const oauth = await checkOAuthBinding(ctx, token.sessionId, client)
    const d = await decide(ctx, token, info)
    switch (d.kind) {
      case 'issue': {
        const refreshToken = encodeRefreshTokenV2(token.sessionId, d.counter, d.key)
        return tokenResponse(ctx, sc, { id: token.sessionId, refreshToken, amr: sc.amr, oauth }, issueOf(info.ip))
      }
      case 'ahead':
        throw new ValidationFailedError('request', 'Invalid Refresh Token: Not Issued By This Server')
      case 'reused':
        throw new RefreshTokenAlreadyUsedError()
      case 'gone':
        throw new RefreshTokenNotFoundError()
      case 'locked':
        if (Date.now() >= giveUpAt) throw new ConflictError()
        await sleep(10 + Math.floor(Math.random() * 20))
    }
  }
}

/**
 * The token's session, when it exists, is set up for v2, the token's signature holds for its
 * key, its user may refresh and it still lasts (GoTrue's findUserWithRefreshToken: a session
 * without v2 data or a bad signature is as if there were no session).
 */
async function usableSession(ctx: TenantContext, token: RefreshTokenV2, now: Date): Promise<SessionTokenContext> {
  const sc = await loadSessionTokenContext(ctx.db, token.sessionId)
  if (!sc || sc.key === null || sc.counter === null || !hasValidSignature(token, sc.key))
    throw new RefreshTokenNotFoundError()
  if (isUserBanned(sc.user, now)) throw new UserBannedError('refresh')
  if (sc.notAfter && sc.notAfter.getTime() < now.getTime()) throw new SessionExpiredError()
  return sc
}

/** The counter to issue, decided under the session's row lock; a reuse outside the allowed cases deletes the session (committed). */
async function decide(ctx: TenantContext, token: RefreshTokenV2, info: RefreshInfo): Promise<Decision> {
  return withTransaction<Decision>(ctx.db, async (q) => {
    const s = await lockSessionToken(q, token.sessionId)
    if (s === null) return { kind: 'locked' }
    if (s === 'gone' || s.key === null || s.counter === null || !hasValidSignature(token, s.key))
      return { kind: 'gone' }
    const behind = s.counter - token.counter
    if (behind < 0n) return { kind: 'ahead' }
    if (behind === 0n) {
      await saveSessionCounter(q, token.sessionId, s.counter + 1n, info)
      return { kind: 'issue', counter: s.counter + 1n, key: s.key }
    }
    const failedToSave = behind === 1n
    const concurrent =
      Math.abs(info.now.getTime() - s.lastRefreshedAt.getTime()) < ctx.tenant.auth.refresh_token_reuse_interval * 1000
    if (failedToSave || concurrent) {
      // The counter stays: every client of the session converges on the current token.
      await saveSessionCounter(q, token.sessionId, s.counter, info)
      return { kind: 'issue', counter: s.counter, key: s.key }
    }
    await deleteSession(q, token.sessionId)
    return { kind: 'reused' }
  })
}

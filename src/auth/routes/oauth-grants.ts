// What a signed-in user sees of the OAuth 2.1 server (docs/auth-protocol.md §3.22), GoTrue's
// UserListOAuthGrants, UserRevokeOAuthGrant and OAuthUserInfo: the apps they consented to
// (GET /user/oauth/grants), taking a consent back, which ends every session the app holds for
// them (DELETE /user/oauth/grants?client_id=), and the OIDC userinfo of an app's access token,
// filtered by the session's scopes (GET /oauth/userinfo).
import type { FastifyReply, FastifyRequest } from 'fastify'
import { withTransaction } from '../../shared/index.js'
import { UUID } from '../bearer.js'
import { OAuthConsentNotFoundError, ValidationFailedError } from '../errors.js'
import { queryParam } from '../http.js'
import { listActiveConsents, revokeConsent } from '../models/oauth-authorizations.js'
import { deleteSessionsOfOAuthClient, oauthBindingOf } from '../models/sessions.js'
import { profileClaims } from '../oauth-claims.js'
import { callerOf, contextOf } from '../request-state.js'
import { clientDetails, scopesOf } from './oauth-authorize.js'

export async function getUserOAuthGrants(req: FastifyRequest): Promise<unknown> {
  const ctx = contextOf(req)
  const grants = await listActiveConsents(ctx.db, callerOf(req).user.user.id)
  return grants.map((g) => ({
    client: clientDetails({ ...g, id: g.client_id }),
    scopes: scopesOf(g.scopes),
    granted_at: g.granted_at,
  }))
}

export async function deleteUserOAuthGrant(req: FastifyRequest, reply: FastifyReply): Promise<unknown> {
  const ctx = contextOf(req)
  const clientId = queryParam(req, 'client_id') ?? ''
  if (clientId === '') throw new ValidationFailedError('request', 'client_id query parameter is required')
  if (!UUID.test(clientId)) throw new ValidationFailedError('request', 'invalid client_id format')
  const userId = callerOf(req).user.user.id
  await withTransaction(ctx.db, async (q) => {
    if (!(await revokeConsent(q, userId, clientId.toLowerCase(), ctx.now()))) throw new OAuthConsentNotFoundError()
    await deleteSessionsOfOAuthClient(q, clientId.toLowerCase(), userId)
  })
  reply.code(204)
  return reply.send()
}

/** The OIDC claims of the caller, as far as the session's scopes reach (OpenID Connect Core §5.3). */
export async function getOAuthUserInfo(req: FastifyRequest): Promise<unknown> {
  const ctx = contextOf(req)
  const caller = callerOf(req)
  const u = caller.user.user
  const out: Record<string, unknown> = { sub: u.id }
  const binding = caller.sessionId === null ? null : await oauthBindingOf(ctx.db, caller.sessionId)
  const scopes = scopesOf(binding?.scopes ?? '')
  if (scopes.includes('email')) {
    if (u.email) out.email = u.email
    if (u.email_confirmed_at) out.email_verified = true
  }
  if (scopes.includes('profile')) Object.assign(out, profileClaims(u), { user_metadata: u.raw_user_meta_data ?? {} })
  if (scopes.includes('phone')) {
    if (u.phone) out.phone = u.phone
    if (u.phone_confirmed_at) out.phone_verified = true
  }
  return out
}

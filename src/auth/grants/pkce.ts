// grant_type=pkce (docs/auth-protocol.md §3.4, §5.7): auth_code + code_verifier -> a session. The flow row
// is locked and deleted in the same transaction, so a code works once; its method becomes
// the session's AMR and the provider tokens of an OAuth flow come back in the response.
import type { FastifyRequest } from 'fastify'
import { withTransaction } from '../../shared/index.js'
import {
  BadCodeVerifierError,
  FlowStateExpiredError,
  FlowStateNotFoundError,
  UserBannedError,
  ValidationFailedError,
} from '../errors.js'
import { clientMeta, optString, type Body } from '../http.js'
import { deleteFlowState, lockFlowStateByAuthCode } from '../models/flow-state.js'
import { isUserBanned, loadUserWithIdentities } from '../models/users.js'
import { isFlowStateExpired, verifierMatches } from '../pkce.js'
import { startSession, type AuthMethod } from '../tokens.js'
import type { AccessTokenResponse, TenantContext } from '../types.js'

export async function pkceGrant(ctx: TenantContext, req: FastifyRequest, b: Body): Promise<AccessTokenResponse> {
  const authCode = optString(b, 'auth_code') ?? ''
  const verifier = optString(b, 'code_verifier') ?? ''
  if (authCode === '' || verifier === '')
    throw new ValidationFailedError('request', 'invalid request: both auth code and code verifier should be non-empty')
  if (!ctx.tenant.auth.pkce) throw new ValidationFailedError('request', 'PKCE flow is disabled for this database')
  return withTransaction(ctx.db, async (q) => {
    const flow = await lockFlowStateByAuthCode(q, authCode)
    if (!flow || !flow.user_id) throw new FlowStateNotFoundError('grant')
    if (isFlowStateExpired(flow, ctx.now())) throw new FlowStateExpiredError()
    if (!verifierMatches(flow, verifier)) throw new BadCodeVerifierError()
    const user = await loadUserWithIdentities(q, flow.user_id)
    if (!user) throw new FlowStateNotFoundError('grant')
    if (isUserBanned(user.user, ctx.now())) throw new UserBannedError('signIn')
    const session = await startSession(ctx, q, user, {
      method: flow.authentication_method as AuthMethod,
      ...clientMeta(req),
    })
    await deleteFlowState(q, flow.id)
    if (flow.provider_access_token) session.provider_token = flow.provider_access_token
    if (flow.provider_refresh_token) session.provider_refresh_token = flow.provider_refresh_token
    return session
  })
}

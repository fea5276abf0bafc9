// Manual identity linking (docs/auth-protocol.md §3.16): GET /user/identities/authorize starts an external
// sign-in whose identity is added to the caller (the provider's URL as {url} with
// skip_http_redirect=true, else a 302), DELETE /user/identities/:identity_id removes one.
// Both need a signed-in user first and then the database's manual_linking switch (GoTrue:
// 404 manual_linking_disabled). GET /user/identities has no handler in GoTrue: with the
// switch on it is 404 not_found, as there.
import type { FastifyReply, FastifyRequest } from 'fastify'
import { withTransaction } from '../../shared/index.js'
import { NotFoundError, UnexpectedAudienceError } from '../errors.js'
import { callerOf, contextOf } from '../request-state.js'
import { audienceOf } from '../bearer.js'
import { queryParam } from '../http.js'
import { unlinkIdentity } from '../linking.js'
import { startExternalFlow } from './authorize.js'
import { uuidParam } from './checks.js'

export async function getIdentities(): Promise<never> {
  throw new NotFoundError()
}

export async function getIdentityAuthorize(req: FastifyRequest, reply: FastifyReply): Promise<unknown> {
  const ctx = contextOf(req)
  const u = callerOf(req)
  const url = await startExternalFlow(ctx, req, u.user.user.id)
  if (queryParam(req, 'skip_http_redirect') === 'true') return { url }
  return reply.redirect(url, 302)
}

export async function deleteIdentity(req: FastifyRequest): Promise<Record<string, never>> {
  const ctx = contextOf(req)
  const u = callerOf(req)
  const id = uuidParam(req, 'identity_id')
  if (audienceOf(u.claims) !== ctx.tenant.jwt.aud) throw new UnexpectedAudienceError()
  await withTransaction(ctx.db, (q) => unlinkIdentity(ctx, q, u.user.user.id, id))
  return {}
}

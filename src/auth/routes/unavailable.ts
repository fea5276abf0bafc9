// GoTrue features this engine does not offer, answered as GoTrue answers them switched off
// (its defaults), so auth-js's methods for them get GoTrue's errors rather than a bare 404:
//   - the OAuth 2.1 server (`/oauth/*`, `/user/oauth/grants`, `/admin/oauth/clients*`,
//     `/.well-known/oauth-authorization-server`): 404 feature_disabled "OAuth server is disabled"
//   - custom OAuth providers (`/admin/custom-providers*`): 404 feature_disabled
//   - a user's passkeys in the admin API: none to list, none to delete.
// Admin routes check the admin token first and /user routes the bearer first, as GoTrue's
// route order does; the others refuse before anything else.
import type { FastifyInstance, FastifyRequest } from 'fastify'
import {
  CustomProvidersDisabledError, OAuthServerDisabledError, PasskeyNotFoundError, UserNotFoundError, ValidationFailed404Error
} from '../errors.js'
import { contextOf } from '../hooks/resolve-tenant.js'
import { requireAdmin, requireUser, UUID } from '../hooks/require-user.js'
import { findUserById } from '../models/users.js'

export async function unavailableRoutes (scope: FastifyInstance): Promise<void> {
  const oauthOff = async () => { throw new OAuthServerDisabledError() }
  scope.get('/.well-known/oauth-authorization-server', oauthOff)
  scope.post('/oauth/clients/register', oauthOff)
  scope.post('/oauth/token', oauthOff)
  scope.get('/oauth/userinfo', oauthOff)
  scope.get('/oauth/authorize', oauthOff)
  scope.get('/oauth/authorizations/:id', oauthOff)
  scope.post('/oauth/authorizations/:id/consent', oauthOff)

  const userOauthOff = async (req: FastifyRequest) => { await requireUser(contextOf(req), req); throw new OAuthServerDisabledError() }
  scope.get('/user/oauth/grants', userOauthOff)
  scope.delete('/user/oauth/grants', userOauthOff)

  const admin = (err: () => Error) => async (req: FastifyRequest) => { await requireAdmin(contextOf(req), req); throw err() }
  const adminOauthOff = admin(() => new OAuthServerDisabledError())
  scope.get('/admin/oauth/clients', adminOauthOff)
  scope.post('/admin/oauth/clients', adminOauthOff)
  scope.get('/admin/oauth/clients/:id', adminOauthOff)
  scope.put('/admin/oauth/clients/:id', adminOauthOff)
  scope.delete('/admin/oauth/clients/:id', adminOauthOff)
  scope.post('/admin/oauth/clients/:id/regenerate_secret', adminOauthOff)
  const customOff = admin(() => new CustomProvidersDisabledError())
  scope.get('/admin/custom-providers', customOff)
  scope.post('/admin/custom-providers', customOff)
  scope.get('/admin/custom-providers/:id', customOff)
  scope.put('/admin/custom-providers/:id', customOff)
  scope.delete('/admin/custom-providers/:id', customOff)

  // GoTrue's loadUser, then the user's passkeys: there are none here.
  const adminUser = async (req: FastifyRequest) => {
    const ctx = contextOf(req)
    await requireAdmin(ctx, req)
    const id = (req.params as { id?: string }).id ?? ''
    if (!UUID.test(id)) throw new ValidationFailed404Error('user_id must be an UUID')
    if (!await findUserById(ctx.db, id.toLowerCase())) throw new UserNotFoundError()
  }
  scope.get('/admin/users/:id/passkeys', async (req) => { await adminUser(req); return [] })
  scope.delete('/admin/users/:id/passkeys/:passkey', async (req) => { await adminUser(req); throw new PasskeyNotFoundError() })
}

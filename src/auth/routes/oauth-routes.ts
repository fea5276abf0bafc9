// The routes of the OAuth 2.1 server (docs/auth-protocol.md §3.22), as GoTrue's api.go mounts
// them: every one answers 404 feature_disabled while the database's `auth.oauth_server.enabled`
// is off (admin routes check the admin token first, as GoTrue's route order does).
import { bodyOf } from '../http.js'
import { ADMIN, OAUTH_SERVER, USER, type AuthRoute, type LimitRule } from './checks.js'
import { getOAuthAuthorization, getOAuthAuthorize, postOAuthConsent } from './oauth-authorize.js'
import { deleteUserOAuthGrant, getOAuthUserInfo, getUserOAuthGrants } from './oauth-grants.js'
import { postOAuthToken } from './oauth-token.js'
import { getOAuthServerMetadata } from './jwks.js'
import {
  deleteAdminOAuthClient,
  getAdminOAuthClient,
  getAdminOAuthClients,
  postAdminOAuthClient,
  postDynamicRegistration,
  postRegenerateSecret,
  putAdminOAuthClient,
} from './oauth-clients.js'

const ADMIN_OAUTH = [ADMIN, OAUTH_SERVER]
const OAUTH_USER = [OAUTH_SERVER, USER]

/** POST /oauth/token: refreshing takes the token_refresh bucket, a code exchange sign_in_sign_up (as /token). */
const OAUTH_TOKEN_LIMIT: LimitRule = {
  name: 'token_refresh for grant_type=refresh_token, else sign_in_sign_up (oauth_token)',
  pick: (req) =>
    bodyOf(req).grant_type === 'refresh_token'
      ? { bucket: 'token_refresh' }
      : { bucket: 'sign_in_sign_up', endpoint: 'oauth_token' },
}

export const OAUTH_ROUTES: readonly AuthRoute[] = [
  { method: 'GET', path: '/admin/oauth/clients', checks: ADMIN_OAUTH, handler: getAdminOAuthClients },
  { method: 'POST', path: '/admin/oauth/clients', checks: ADMIN_OAUTH, handler: postAdminOAuthClient },
  { method: 'GET', path: '/admin/oauth/clients/:client_id', checks: ADMIN_OAUTH, handler: getAdminOAuthClient },
  { method: 'PUT', path: '/admin/oauth/clients/:client_id', checks: ADMIN_OAUTH, handler: putAdminOAuthClient },
  { method: 'DELETE', path: '/admin/oauth/clients/:client_id', checks: ADMIN_OAUTH, handler: deleteAdminOAuthClient },
  {
    method: 'POST',
    path: '/admin/oauth/clients/:client_id/regenerate_secret',
    checks: ADMIN_OAUTH,
    handler: postRegenerateSecret,
  },
  {
    method: 'POST',
    path: '/oauth/clients/register',
    checks: [OAUTH_SERVER],
    limit: { bucket: 'sign_in_sign_up', endpoint: 'oauth_register' },
    handler: postDynamicRegistration,
  },
  {
    method: 'GET',
    path: '/.well-known/oauth-authorization-server',
    checks: [OAUTH_SERVER],
    handler: getOAuthServerMetadata,
  },
  {
    method: 'GET',
    path: '/oauth/authorize',
    checks: [OAUTH_SERVER],
    limit: { bucket: 'sign_in_sign_up', endpoint: 'oauth_authorize' },
    handler: getOAuthAuthorize,
  },
  { method: 'GET', path: '/oauth/authorizations/:id', checks: OAUTH_USER, handler: getOAuthAuthorization },
  { method: 'POST', path: '/oauth/authorizations/:id/consent', checks: OAUTH_USER, handler: postOAuthConsent },
  { method: 'POST', path: '/oauth/token', checks: [OAUTH_SERVER], limit: OAUTH_TOKEN_LIMIT, handler: postOAuthToken },
  { method: 'GET', path: '/oauth/userinfo', checks: OAUTH_USER, handler: getOAuthUserInfo },
  { method: 'GET', path: '/user/oauth/grants', checks: [USER, OAUTH_SERVER], handler: getUserOAuthGrants },
  { method: 'DELETE', path: '/user/oauth/grants', checks: [USER, OAUTH_SERVER], handler: deleteUserOAuthGrant },
]

// The routes of the OAuth 2.1 server (docs/auth-protocol.md §3.22), as GoTrue's api.go mounts
// them: every one answers 404 feature_disabled while the database's `auth.oauth_server.enabled`
// is off (admin routes check the admin token first, as GoTrue's route order does).
import { ADMIN, OAUTH_SERVER, type AuthRoute } from './checks.js'
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

export const OAUTH_ROUTES: readonly AuthRoute[] = [
  { method: 'GET', path: '/admin/oauth/clients', checks: ADMIN_OAUTH, limit: null, handler: getAdminOAuthClients },
  { method: 'POST', path: '/admin/oauth/clients', checks: ADMIN_OAUTH, limit: null, handler: postAdminOAuthClient },
  {
    method: 'GET',
    path: '/admin/oauth/clients/:client_id',
    checks: ADMIN_OAUTH,
    limit: null,
    handler: getAdminOAuthClient,
  },
  {
    method: 'PUT',
    path: '/admin/oauth/clients/:client_id',
    checks: ADMIN_OAUTH,
    limit: null,
    handler: putAdminOAuthClient,
  },
  {
    method: 'DELETE',
    path: '/admin/oauth/clients/:client_id',
    checks: ADMIN_OAUTH,
    limit: null,
    handler: deleteAdminOAuthClient,
  },
  {
    method: 'POST',
    path: '/admin/oauth/clients/:client_id/regenerate_secret',
    checks: ADMIN_OAUTH,
    limit: null,
    handler: postRegenerateSecret,
  },
  {
    method: 'POST',
    path: '/oauth/clients/register',
    checks: [OAUTH_SERVER],
    limit: { bucket: 'sign_in_sign_up', endpoint: 'oauth_register' },
    handler: postDynamicRegistration,
  },
]

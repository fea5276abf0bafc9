// SAML single sign-on is not offered: POST /sso, GET /sso/saml/metadata and POST
// /sso/saml/acs answer as GoTrue does with SAML off (404 saml_provider_disabled
// "SAML 2.0 is disabled"), before anything else is looked at.
import type { FastifyInstance, FastifyRequest } from 'fastify'
import { SamlDisabledError } from '../errors.js'
import { contextOf } from '../hooks/resolve-tenant.js'
import { requireAdmin } from '../hooks/require-user.js'

export async function ssoRoutes (scope: FastifyInstance): Promise<void> {
  const disabled = async () => { throw new SamlDisabledError() }
  scope.post('/sso', disabled)
  scope.get('/sso/saml/metadata', disabled)
  scope.post('/sso/saml/acs', disabled)
  // The admin API of SSO providers: the admin check first, then the same refusal.
  const adminDisabled = async (req: FastifyRequest) => { await requireAdmin(contextOf(req), req); throw new SamlDisabledError() }
  scope.get('/admin/sso/providers', adminDisabled)
  scope.post('/admin/sso/providers', adminDisabled)
  scope.get('/admin/sso/providers/:id', adminDisabled)
  scope.put('/admin/sso/providers/:id', adminDisabled)
  scope.delete('/admin/sso/providers/:id', adminDisabled)
}

// SAML single sign-on and passkeys are not offered: POST /sso, GET /sso/saml/metadata and
// POST /sso/saml/acs answer as GoTrue does with SAML off (404 saml_provider_disabled
// "SAML 2.0 is disabled"), and every /passkeys route (auth-js's `passkey.*`) as it does with
// passkeys off (404 passkey_disabled "Passkeys are disabled"), before anything else is looked at.
import type { FastifyInstance, FastifyRequest } from 'fastify'
import { PasskeysDisabledError, SamlDisabledError } from '../errors.js'
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

  const passkeysDisabled = async () => { throw new PasskeysDisabledError() }
  scope.post('/passkeys/authentication/options', passkeysDisabled)
  scope.post('/passkeys/authentication/verify', passkeysDisabled)
  scope.post('/passkeys/registration/options', passkeysDisabled)
  scope.post('/passkeys/registration/verify', passkeysDisabled)
  scope.get('/passkeys', passkeysDisabled)
  scope.patch('/passkeys/:id', passkeysDisabled)
  scope.delete('/passkeys/:id', passkeysDisabled)
}

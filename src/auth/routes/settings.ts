// GET /settings (docs/auth-protocol.md §3.2): what the tenant has switched on. `external` lists GoTrue's
// providers (false unless configured) plus any other provider the tenant names; two
// Gatehouse fields tell clients about magic link and PKCE, which GoTrue's body lacks.
import type { FastifyRequest } from 'fastify'
import type { Tenant } from '../../tenants/index.js'
import { contextOf } from '../request-state.js'
import { GOTRUE_PROVIDERS, isProviderEnabled } from '../providers/index.js'

function settingsOf(tenant: Tenant): Record<string, unknown> {
  const a = tenant.auth
  const external: Record<string, boolean> = { anonymous_users: a.anonymous_sign_in }
  for (const p of GOTRUE_PROVIDERS) external[p] = false
  // Enabled and configured well enough to use (a preset, an issuer, or explicit URLs).
  for (const name of Object.keys(a.providers)) external[name] = isProviderEnabled(tenant, name)
  external.email = true
  external.phone = false
  return {
    external,
    disable_signup: !a.signup_enabled,
    mailer_autoconfirm: !a.mail_confirmation,
    phone_autoconfirm: false,
    sms_provider: '',
    saml_enabled: false,
    saml_private_key_next_configured: false,
    passkeys_enabled: a.passkeys,
    magic_link_enabled: a.magic_link,
    pkce_enabled: a.pkce,
  }
}

export async function getSettings(req: FastifyRequest): Promise<unknown> {
  return settingsOf(contextOf(req).tenant)
}

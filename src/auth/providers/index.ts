// External identity providers of a tenant (tenant.auth.providers): the preset a name
// selects (github, gitlab, google; any other name with an `issuer` is a generic OpenID
// Connect provider, or plain OAuth 2 with explicit URLs), and GoTrue's refusal of an
// unknown or disabled provider (400 validation_failed "Unsupported provider: ...").
import type { Tenant, ProviderSettings } from '../../tenants/index.js'
import { ValidationFailedError } from '../errors.js'
import { githubProvider } from './github.js'
import { gitlabProvider } from './gitlab.js'
import { oidcProvider } from './oidc.js'
import type { OAuthProvider } from './types.js'

export type { OAuthProvider, ProviderTokens, ProviderUser } from './types.js'
export { ProviderError } from './types.js'
export { verifyIdTokenOfIssuer, IdTokenRefused, identityClaimsOf } from './oidc.js'
export { setProviderOutboundPolicy } from './http.js'

const OIDC_SCOPES = ['openid', 'email', 'profile']

/** The provider implementation for a configured name, or null when the settings cannot make one. */
function buildProvider(name: string, s: ProviderSettings): OAuthProvider | null {
  switch (name) {
    case 'github':
      return githubProvider(name, s)
    case 'gitlab':
      return gitlabProvider(name, s)
    case 'google':
      return oidcProvider(name, s, { issuer: 'https://accounts.google.com', scopes: OIDC_SCOPES })
    default:
      if (s.issuer) return oidcProvider(name, s, { scopes: OIDC_SCOPES })
      if (s.authorize_url && s.token_url && s.userinfo_url) return oidcProvider(name, s, { scopes: s.scopes ?? [] })
      return null
  }
}

/** Whether a tenant has this provider switched on (and configured well enough to use). */
export function isProviderEnabled(tenant: Tenant, name: string): boolean {
  const s = Object.hasOwn(tenant.auth.providers, name) ? tenant.auth.providers[name] : undefined
  return !!s && s.enabled !== false && buildProvider(name, s) !== null
}

/** GoTrue's built-in providers, in the order its /settings lists them under `external`. */
export const GOTRUE_PROVIDERS = [
  'apple',
  'azure',
  'bitbucket',
  'discord',
  'facebook',
  'snapchat',
  'figma',
  'fly',
  'github',
  'gitlab',
  'google',
  'keycloak',
  'kakao',
  'linkedin',
  'linkedin_oidc',
  'notion',
  'spotify',
  'slack',
  'slack_oidc',
  'workos',
  'twitch',
  'twitter',
  'zoom',
]

/**
 * GoTrue's built-in provider names (those /settings lists, and two more): one it knows but
 * has no settings for "is not enabled".
 */
const GOTRUE_BUILTIN_PROVIDERS = new Set([...GOTRUE_PROVIDERS, 'x', 'vercel_marketplace'])

/**
 * The tenant's provider of that name; 400 validation_failed when unknown ("Provider x could
 * not be found") or known to GoTrue but not switched on here ("provider is not enabled").
 */
export function providerOf(tenant: Tenant, name: string): OAuthProvider {
  const s = Object.hasOwn(tenant.auth.providers, name) ? tenant.auth.providers[name] : undefined
  if (!s && GOTRUE_BUILTIN_PROVIDERS.has(name.toLowerCase()))
    throw new ValidationFailedError('request', 'Unsupported provider: provider is not enabled')
  if (!s) throw new ValidationFailedError('request', `Unsupported provider: Provider ${name} could not be found`)
  if (s.enabled === false) throw new ValidationFailedError('request', 'Unsupported provider: provider is not enabled')
  const p = buildProvider(name, s)
  if (!p) throw new ValidationFailedError('request', `Unsupported provider: Provider ${name} could not be found`)
  return p
}

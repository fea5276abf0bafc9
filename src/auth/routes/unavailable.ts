// GoTrue features this engine does not offer, answered as GoTrue answers them switched off
// (its defaults), so auth-js's methods for them get GoTrue's errors rather than a bare 404:
//   - SAML single sign-on (`/sso`, `/sso/saml/*`, `/admin/sso/providers*`): 404
//     saml_provider_disabled "SAML 2.0 is disabled"
//   - custom OAuth providers (`/admin/custom-providers*`): 404 feature_disabled
// Admin routes check the admin token first and /user routes the bearer first, as GoTrue's
// route order does; the others refuse before anything else.
import type { HTTPMethods } from 'fastify'
import { FeatureDisabledError, SamlDisabledError } from '../errors.js'
import { ADMIN, USER, type AuthRoute, type Check } from './checks.js'

/** Who must be proven before the refusal: nobody, the caller's bearer, or the admin token. */
type Who = 'none' | 'user' | 'admin'

/** Each switched-off feature: its refusal, the check before it, and its routes. */
const SWITCHED_OFF: Array<{ error: () => Error; check: Who; routes: Array<[HTTPMethods, string]> }> = [
  {
    error: () => new SamlDisabledError(),
    check: 'none',
    routes: [
      ['POST', '/sso'],
      ['GET', '/sso/saml/metadata'],
      ['POST', '/sso/saml/acs'],
    ],
  },
  {
    error: () => new SamlDisabledError(),
    check: 'admin',
    routes: [
      ['GET', '/admin/sso/providers'],
      ['POST', '/admin/sso/providers'],
      ['GET', '/admin/sso/providers/:id'],
      ['PUT', '/admin/sso/providers/:id'],
      ['DELETE', '/admin/sso/providers/:id'],
    ],
  },
  {
    error: () => new FeatureDisabledError('Custom OAuth providers are disabled'),
    check: 'admin',
    routes: [
      ['GET', '/admin/custom-providers'],
      ['POST', '/admin/custom-providers'],
      ['GET', '/admin/custom-providers/:id'],
      ['PUT', '/admin/custom-providers/:id'],
      ['DELETE', '/admin/custom-providers/:id'],
    ],
  },
]

/** The refusal as the route list shows it: status and code. */
function noteOf(err: Error): string {
  const e = err as Error & { status?: number; code?: string }
  return `switched off: ${e.status ?? ''} ${e.code ?? ''}`
}

const CHECKS: Record<Who, Check[]> = { none: [], user: [USER], admin: [ADMIN] }

/** The routes of the switched-off features, for the route table. */
export const UNAVAILABLE_ROUTES: readonly AuthRoute[] = [
  ...SWITCHED_OFF.flatMap(({ error, check, routes }) =>
    routes.map(([method, path]): AuthRoute => ({
      method,
      path,
      checks: CHECKS[check],
      handler: async () => {
        throw error()
      },
      note: noteOf(error()),
    })),
  ),
]

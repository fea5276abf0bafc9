// Every route of the auth engine below /:database, declared in one table as GoTrue's api.go
// declares its router: method, path, the checks before the handler (checks.ts: user, admin,
// ...), the per-IP limit (rate-limits.ts, request-limits.ts) and the handler. The checks run
// first, in order, then the limit, then the handler. docs/routes.md is rendered from this
// table (scripts/routes-doc.ts) and kept in sync by a test.
import type { FastifyInstance } from 'fastify'
import { deleteAdminFactor, getAdminFactors, putAdminFactor } from './admin-factors.js'
import {
  deleteAdminUser,
  getAdminUser,
  getAdminUsers,
  postAdminUsers,
  postGenerateLink,
  postInvite,
  putAdminUser,
} from './admin.js'
import { getAuthorize } from './authorize.js'
import { handleCallback } from './callback.js'
import {
  ADMIN,
  DATABASE_AUDIENCE,
  FACTOR,
  limitName,
  MANUAL_LINKING,
  NOT_ANONYMOUS,
  SESSION,
  SIGNUP_LIMIT,
  TOKEN_LIMIT,
  USER,
  takeLimit,
  type AuthRoute,
} from './checks.js'
import { deleteFactorRoute, postChallenge, postFactor, postFactorVerify } from './factors.js'
import { getHealth } from './health.js'
import { deleteIdentity, getIdentities, getIdentityAuthorize } from './identities.js'
import { getJwks, getOpenIdConfiguration } from './jwks.js'
import { postLogout } from './logout.js'
import { OAUTH_ROUTES } from './oauth-routes.js'
import { postMagicLink, postOtp } from './otp.js'
import {
  deleteAdminPasskey,
  deletePasskeyRoute,
  getAdminPasskeys,
  getPasskeys,
  PASSKEYS,
  patchPasskey,
  postAuthenticationOptions,
  postAuthenticationVerify,
  postRegistrationOptions,
  postRegistrationVerify,
} from './passkeys.js'
import { getReauthenticate } from './reauthenticate.js'
import { postRecover } from './recover.js'
import { postResend } from './resend.js'
import { getSettings } from './settings.js'
import { postSignup } from './signup.js'
import { postToken } from './token.js'
import { UNAVAILABLE_ROUTES } from './unavailable.js'
import { getUser, putUser } from './user.js'
import { getVerify, postVerify } from './verify.js'

const MFA_USER = [USER, NOT_ANONYMOUS, SESSION]
const LINKING_USER = [USER, MANUAL_LINKING]

const AUTH_ROUTES: readonly AuthRoute[] = [
  { method: 'GET', path: '/health', handler: getHealth },
  { method: 'GET', path: '/settings', handler: getSettings },
  { method: 'GET', path: '/.well-known/jwks.json', handler: getJwks },
  { method: 'GET', path: '/.well-known/openid-configuration', handler: getOpenIdConfiguration },
  { method: 'POST', path: '/signup', limit: SIGNUP_LIMIT, handler: postSignup },
  { method: 'POST', path: '/token', limit: TOKEN_LIMIT, handler: postToken },
  { method: 'GET', path: '/verify', limit: { bucket: 'verify' }, handler: getVerify },
  { method: 'POST', path: '/verify', limit: { bucket: 'verify' }, handler: postVerify },
  { method: 'POST', path: '/otp', limit: { bucket: 'otp', endpoint: 'otp' }, handler: postOtp },
  { method: 'POST', path: '/magiclink', limit: { bucket: 'otp', endpoint: 'magiclink' }, handler: postMagicLink },
  { method: 'POST', path: '/recover', limit: { bucket: 'otp', endpoint: 'recover' }, handler: postRecover },
  { method: 'POST', path: '/resend', limit: { bucket: 'otp', endpoint: 'resend' }, handler: postResend },
  { method: 'GET', path: '/authorize', handler: getAuthorize },
  { method: 'GET', path: '/callback', handler: handleCallback },
  { method: 'POST', path: '/callback', handler: handleCallback },
  { method: 'GET', path: '/user', checks: [USER, DATABASE_AUDIENCE], handler: getUser },
  {
    method: 'PUT',
    path: '/user',
    checks: [USER, DATABASE_AUDIENCE],
    limit: { bucket: 'otp', endpoint: 'user' },
    handler: putUser,
  },
  { method: 'GET', path: '/user/identities', checks: LINKING_USER, handler: getIdentities },
  { method: 'GET', path: '/user/identities/authorize', checks: LINKING_USER, handler: getIdentityAuthorize },
  { method: 'DELETE', path: '/user/identities/:identity_id', checks: LINKING_USER, handler: deleteIdentity },
  { method: 'GET', path: '/reauthenticate', checks: [USER], handler: getReauthenticate },
  { method: 'POST', path: '/logout', checks: [USER], handler: postLogout },
  { method: 'POST', path: '/factors', checks: MFA_USER, handler: postFactor },
  {
    method: 'POST',
    path: '/factors/:id/challenge',
    checks: [...MFA_USER, FACTOR],
    limit: { feature: 'mfa_challenge' },
    handler: postChallenge,
  },
  {
    method: 'POST',
    path: '/factors/:id/verify',
    checks: [...MFA_USER, FACTOR],
    limit: { feature: 'mfa_verify' },
    handler: postFactorVerify,
  },
  { method: 'DELETE', path: '/factors/:id', checks: [...MFA_USER, FACTOR], handler: deleteFactorRoute },
  { method: 'POST', path: '/invite', checks: [ADMIN], handler: postInvite },
  { method: 'GET', path: '/admin/users', checks: [ADMIN], handler: getAdminUsers },
  { method: 'POST', path: '/admin/users', checks: [ADMIN], handler: postAdminUsers },
  { method: 'GET', path: '/admin/users/:id', checks: [ADMIN], handler: getAdminUser },
  { method: 'PUT', path: '/admin/users/:id', checks: [ADMIN], handler: putAdminUser },
  { method: 'DELETE', path: '/admin/users/:id', checks: [ADMIN], handler: deleteAdminUser },
  { method: 'POST', path: '/admin/generate_link', checks: [ADMIN], handler: postGenerateLink },
  { method: 'GET', path: '/admin/users/:id/factors', checks: [ADMIN], handler: getAdminFactors },
  { method: 'PUT', path: '/admin/users/:id/factors/:factor_id', checks: [ADMIN], handler: putAdminFactor },
  { method: 'DELETE', path: '/admin/users/:id/factors/:factor_id', checks: [ADMIN], handler: deleteAdminFactor },
  {
    method: 'POST',
    path: '/passkeys/authentication/options',
    checks: [PASSKEYS],
    limit: { feature: 'passkey_authentication' },
    handler: postAuthenticationOptions,
  },
  { method: 'POST', path: '/passkeys/authentication/verify', checks: [PASSKEYS], handler: postAuthenticationVerify },
  {
    method: 'POST',
    path: '/passkeys/registration/options',
    checks: [PASSKEYS, USER],
    handler: postRegistrationOptions,
  },
  { method: 'POST', path: '/passkeys/registration/verify', checks: [PASSKEYS, USER], handler: postRegistrationVerify },
  { method: 'GET', path: '/passkeys', checks: [PASSKEYS, USER], handler: getPasskeys },
  { method: 'PATCH', path: '/passkeys/:passkey', checks: [PASSKEYS, USER], handler: patchPasskey },
  { method: 'DELETE', path: '/passkeys/:passkey', checks: [PASSKEYS, USER], handler: deletePasskeyRoute },
  { method: 'GET', path: '/admin/users/:id/passkeys', checks: [ADMIN], handler: getAdminPasskeys },
  { method: 'DELETE', path: '/admin/users/:id/passkeys/:passkey', checks: [ADMIN], handler: deleteAdminPasskey },
  ...OAUTH_ROUTES,
  ...UNAVAILABLE_ROUTES,
]

/** Registers the table's routes on the tenant scope: checks and limit as a preHandler. */
export function registerAuthRoutes(scope: FastifyInstance): void {
  for (const route of AUTH_ROUTES) {
    const { checks = [], limit } = route
    scope.route({
      method: route.method,
      url: route.path,
      preHandler: async (req) => {
        for (const check of checks) await check.run(req)
        if (limit !== undefined) await takeLimit(req, limit)
      },
      handler: route.handler,
    })
  }
}

/** The table as the route list shows it (docs/routes.md): method, path, checks, limit, note. */
export function authRouteList(): Array<{
  method: string
  path: string
  checks: string[]
  limit: string | null
  note: string
}> {
  return AUTH_ROUTES.map((r) => ({
    method: r.method,
    path: r.path,
    checks: (r.checks ?? []).map((c) => c.name),
    limit: r.limit === undefined ? null : limitName(r.limit),
    note: r.note ?? '',
  }))
}

// grant_type=id_token (docs/auth-protocol.md §3.4, GoTrue's IdTokenGrant): an app signs a person in with an
// ID token it got from an OpenID Connect provider the database has switched on. The token is
// checked against the provider's JWKS (discovery of its issuer), the audience against the
// provider's client id, the nonce against hex(SHA-256(request nonce)); then the person is
// found, linked by verified email or created (as in the provider callback), or, with
// link_identity, the identity is added to the signed-in caller. Errors are GoTrue's OAuth-form
// 400s ("invalid request", with its space) and validation_failed / provider_disabled.
import { createHash } from 'node:crypto'
import type { FastifyRequest } from 'fastify'
import { withTransaction, ownValue } from '../../shared/index.js'
import { resolveIdentityUser, type ExternalIdentity } from '../accounts.js'
import {
  IdTokenRequestError,
  ManualLinkingDisabledError,
  NonceMismatchError,
  ProviderDisabledError,
  unexpectedFailure,
  ValidationFailedError,
} from '../errors.js'
import { requireUser } from '../bearer.js'
import { clientMeta, optBool, optString, type Body } from '../http.js'
import { linkIdentityToUser } from '../linking.js'
import { identityClaimsOf, IdTokenRefused, ProviderError, verifyIdTokenOfIssuer } from '../providers/index.js'
import { startSession } from '../tokens.js'
import type { AccessTokenResponse, TenantContext } from '../types.js'

/** The issuers of GoTrue's built-in ID-token providers (named in its "not enabled" error). */
const KNOWN_ISSUERS = new Map<string, string>([
  ['google', 'https://accounts.google.com'],
  ['apple', 'https://appleid.apple.com'],
  ['azure', 'https://login.microsoftonline.com/common/v2.0'],
  ['facebook', 'https://www.facebook.com'],
  ['kakao', 'https://kauth.kakao.com'],
  ['keycloak', ''],
  ['snapchat', 'https://accounts.snapchat.com'],
  ['vercel_marketplace', 'https://marketplace.vercel.com'],
])

const invalidRequest = (description: string) => new IdTokenRequestError('request', description)

/** The provider's issuer and client id, or GoTrue's refusal. */
function idTokenProvider(ctx: TenantContext, name: string): { issuer: string; clientId: string } {
  const s = ownValue(ctx.tenant.auth.providers, name)
  const known = KNOWN_ISSUERS.get(name)
  const issuer = name === 'google' ? (s?.issuer ?? known!) : s?.issuer
  if (!s || !issuer) {
    if (!s && known !== undefined)
      throw new ProviderDisabledError(`Provider (issuer ${JSON.stringify(known)}) is not enabled`)
    throw new ValidationFailedError('request', `Custom OIDC provider ${JSON.stringify(name)} not allowed`)
  }
  if (s.enabled === false) throw new ProviderDisabledError(`Provider (issuer ${JSON.stringify(issuer)}) is not enabled`)
  return { issuer, clientId: s.client_id }
}

export async function idTokenGrant(ctx: TenantContext, req: FastifyRequest, b: Body): Promise<AccessTokenResponse> {
  const idToken = optString(b, 'id_token') ?? ''
  const providerName = optString(b, 'provider') ?? ''
  const clientId = optString(b, 'client_id') ?? ''
  const issuerParam = optString(b, 'issuer') ?? ''
  const nonce = optString(b, 'nonce') ?? ''
  optString(b, 'access_token')
  const link = optBool(b, 'link_identity') ?? false
  if (idToken === '') throw invalidRequest('id_token required')
  if (providerName === '' && (clientId === '' || issuerParam === ''))
    throw invalidRequest('provider or client_id and issuer required')

  let linkTo: string | null = null
  if (link) {
    if (!req.headers.authorization) throw invalidRequest('Linking requires a valid user access token in Authorization')
    const u = await requireUser(ctx, req)
    // Linking is the database's choice, whichever way the identity arrives.
    if (!ctx.tenant.auth.manual_linking) throw new ManualLinkingDisabledError()
    linkTo = u.user.user.id
  }

  const provider = idTokenProvider(ctx, providerName)
  let verified
  try {
    verified = await verifyIdTokenOfIssuer(provider.issuer, idToken)
  } catch (err) {
    if (err instanceof IdTokenRefused) throw new IdTokenRequestError('badToken', { internal: err.cause })
    if (err instanceof ProviderError) throw unexpectedFailure(err)
    throw err
  }
  if (!verified.sub) throw invalidRequest('Missing sub claim in id_token')
  if (!verified.aud.includes(provider.clientId))
    throw invalidRequest(`Unacceptable audience in id_token: [${verified.aud.join(' ')}]`)
  const tokenNonce = verified.nonce ?? ''
  if ((tokenNonce !== '') !== (nonce !== ''))
    throw invalidRequest('Passed nonce and nonce in id_token should either both exist or not.')
  if (tokenNonce !== '' && createHash('sha256').update(nonce, 'utf8').digest('hex') !== tokenNonce) {
    throw new NonceMismatchError()
  }

  const c = verified.claims
  const email = typeof c.email === 'string' && c.email !== '' ? c.email : null
  const ext: ExternalIdentity = {
    provider: providerName,
    providerId: verified.sub,
    email,
    emailVerified: c.email_verified === true || c.email_verified === 'true',
    identityData: identityClaimsOf({ ...c, iss: c.iss ?? provider.issuer }),
  }
  return withTransaction(ctx.db, async (q) => {
    const user = linkTo ? await linkIdentityToUser(ctx, q, linkTo, ext) : (await resolveIdentityUser(ctx, q, ext)).user
    return startSession(ctx, q, user, { method: 'oauth', ...clientMeta(req) })
  })
}

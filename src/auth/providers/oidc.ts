// OpenID Connect providers (the generic `issuer` preset and Google): discovery of the
// issuer's endpoints (cached), a nonce derived from our state, the ID token checked
// against the issuer's JWKS (asymmetric algorithms only, audience = client id, nonce),
// userinfo merged in. Without an issuer, explicit URLs make it a plain OAuth 2 provider
// whose userinfo answers OIDC-style claims.
import { createHash } from 'node:crypto'
import { createRemoteJWKSet, customFetch, jwtVerify } from 'jose'
import { LRUCache } from 'lru-cache'
import type { ProviderSettings } from '../../tenants/index.js'
import { buildAuthorizeUrl, exchangeAuthorizationCode, getJson, joinScopes, providerFetch, str } from './http.js'
import { ProviderError, type OAuthProvider, type ProviderEmail } from './types.js'
import { definedOnly } from '../json.js'

interface OidcMetadata {
  issuer: string
  authorization_endpoint: string
  token_endpoint: string
  userinfo_endpoint?: string
  jwks_uri: string
}

const ASYMMETRIC = ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA']
const DISCOVERY_TTL_MS = 10 * 60 * 1000

// Per process: discovery documents (by issuer) and remote key sets (by jwks_uri), bounded.
const discoveries = new LRUCache<string, Promise<OidcMetadata>>({ max: 200, ttl: DISCOVERY_TTL_MS })
const keySets = new LRUCache<string, ReturnType<typeof createRemoteJWKSet>>({ max: 200 })

function trimSlash(s: string): string {
  return s.replace(/\/+$/, '')
}

async function fetchDiscovery(issuer: string): Promise<OidcMetadata> {
  const meta = (await getJson(
    `${trimSlash(issuer)}/.well-known/openid-configuration`,
    'oidc discovery',
  )) as OidcMetadata
  // The document must be the issuer's own (OpenID Connect Discovery §4.3).
  if (typeof meta.issuer !== 'string' || trimSlash(meta.issuer) !== trimSlash(issuer))
    throw new ProviderError('oidc discovery: issuer mismatch')
  for (const k of ['authorization_endpoint', 'token_endpoint', 'jwks_uri'] as const) {
    if (typeof meta[k] !== 'string') throw new ProviderError(`oidc discovery: no ${k}`)
  }
  return meta
}

function discover(issuer: string): Promise<OidcMetadata> {
  const key = trimSlash(issuer)
  let p = discoveries.get(key)
  if (!p) {
    p = fetchDiscovery(issuer)
    discoveries.set(key, p)
    p.catch(() => discoveries.delete(key))
  }
  return p
}

function keySet(uri: string): ReturnType<typeof createRemoteJWKSet> {
  let k = keySets.get(uri)
  if (!k) {
    // The key set is fetched through the provider HTTP helper like every other provider request.
    k = createRemoteJWKSet(new URL(uri), {
      timeoutDuration: 10_000,
      [customFetch]: (url, init) => providerFetch(url, init as RequestInit),
    })
    keySets.set(uri, k)
  }
  return k
}

/** The nonce of a flow: bound to our state, so no storage is needed to check it. */
function nonceOf(state: string): string {
  return createHash('sha256')
    .update('gatehouse-oidc-nonce:' + state, 'utf8')
    .digest('base64url')
}

const STANDARD = new Set([
  'iss',
  'sub',
  'aud',
  'exp',
  'iat',
  'nbf',
  'jti',
  'nonce',
  'auth_time',
  'at_hash',
  'c_hash',
  'azp',
  'sid',
  'acr',
  'amr',
  'name',
  'given_name',
  'family_name',
  'middle_name',
  'nickname',
  'preferred_username',
  'profile',
  'picture',
  'website',
  'email',
  'email_verified',
  'gender',
  'birthdate',
  'zoneinfo',
  'locale',
  'phone_number',
  'phone_number_verified',
  'address',
  'updated_at',
])

/** identity_data of an OIDC person (GoTrue's Claims names), the rest under custom_claims. */
export function identityClaimsOf(c: Record<string, unknown>): Record<string, unknown> {
  const custom: Record<string, unknown> = {}
  for (const [k, v] of Object.entries(c)) if (!STANDARD.has(k)) custom[k] = v
  const out = definedOnly({
    iss: str(c.iss),
    name: str(c.name),
    full_name: str(c.name),
    given_name: str(c.given_name),
    family_name: str(c.family_name),
    nickname: str(c.nickname),
    preferred_username: str(c.preferred_username),
    user_name: str(c.preferred_username) ?? str(c.nickname),
    picture: str(c.picture),
    avatar_url: str(c.picture),
    locale: str(c.locale),
    phone: str(c.phone_number),
  })
  if (Object.keys(custom).length) out.custom_claims = custom
  return out
}

/** The ID token of a code exchange, verified against the provider's keys and the sign-in's nonce. */
async function verifiedIdToken(
  idToken: string | undefined,
  meta: OidcMetadata,
  clientId: string,
  state: string,
): Promise<Record<string, unknown>> {
  if (!idToken) throw new ProviderError('oidc: the token response has no id_token')
  let payload: Record<string, unknown>
  try {
    ;({ payload } = await jwtVerify(idToken, keySet(meta.jwks_uri), {
      issuer: meta.issuer,
      audience: clientId,
      algorithms: ASYMMETRIC,
      clockTolerance: 60,
      requiredClaims: ['sub', 'exp', 'iat'],
    }))
  } catch (err) {
    throw new ProviderError('oidc: id_token refused', { cause: err })
  }
  if (payload.nonce !== nonceOf(state)) throw new ProviderError('oidc: id_token nonce mismatch')
  return payload
}

/** The provider's address for the user, as the primary email. */
function primaryEmail(claims: Record<string, unknown>): ProviderEmail[] {
  const email = str(claims.email)
  if (!email) return []
  return [{ email, verified: claims.email_verified === true || claims.email_verified === 'true', primary: true }]
}

export function oidcProvider(
  name: string,
  s: ProviderSettings,
  defaults: { issuer?: string; scopes: string[] },
): OAuthProvider {
  const issuer = s.issuer ?? defaults.issuer
  const scopes = s.scopes ?? defaults.scopes

  async function endpoints(): Promise<{ authorize: string; token: string; userinfo?: string; meta?: OidcMetadata }> {
    const meta = issuer ? await discover(issuer) : undefined
    const authorize = s.authorize_url ?? meta?.authorization_endpoint
    const token = s.token_url ?? meta?.token_endpoint
    if (!authorize || !token) throw new ProviderError(`provider ${name}: no authorization or token endpoint`)
    return { authorize, token, userinfo: s.userinfo_url ?? meta?.userinfo_endpoint, meta }
  }

  return {
    name,
    usesPkce: true,
    async authorizeUrl(r) {
      const e = await endpoints()
      const extra = { ...r.params }
      if (e.meta) extra.nonce = nonceOf(r.state)
      return buildAuthorizeUrl(e.authorize, {
        clientId: s.client_id,
        redirectUri: r.redirectUri,
        state: r.state,
        extra,
        codeChallenge: r.codeChallenge,
        scope: joinScopes(e.meta && !scopes.includes('openid') ? ['openid', ...scopes] : scopes, r.scopes),
      })
    },
    async exchangeCode(code, redirectUri, codeVerifier) {
      return exchangeAuthorizationCode(s, (await endpoints()).token, code, redirectUri, codeVerifier)
    },
    async userData(tokens, { state }) {
      const e = await endpoints()
      let claims: Record<string, unknown> = e.meta
        ? await verifiedIdToken(tokens.idToken, e.meta, s.client_id, state)
        : {}
      if (e.userinfo) {
        const info = (await getJson(e.userinfo, 'userinfo', tokens.accessToken)) as Record<string, unknown>
        if (claims.sub !== undefined && info.sub !== claims.sub)
          throw new ProviderError('userinfo: sub differs from the id_token')
        claims = { ...claims, ...info }
      }
      const id = str(claims.sub) ?? str(claims.id)
      if (!id) throw new ProviderError(`provider ${name}: no subject`)
      return { id, emails: primaryEmail(claims), claims: identityClaimsOf({ ...claims, iss: claims.iss ?? issuer }) }
    },
  }
}

/** The claims of an ID token an app got from the provider itself (grant_type=id_token). */
interface VerifiedIdToken {
  sub?: string
  aud: string[]
  nonce?: string
  claims: Record<string, unknown>
}

/**
 * Checks an ID token against the issuer's discovery and JWKS (signature with an asymmetric
 * key, iss, exp present and not past); the audience and nonce are the caller's to check. ProviderError when the
 * issuer cannot be reached; IdTokenRefused when the token is not good.
 */
export async function verifyIdTokenOfIssuer(issuer: string, idToken: string): Promise<VerifiedIdToken> {
  const meta = await discover(issuer)
  let payload: Record<string, unknown>
  try {
    // An ID token without exp would be good forever once leaked: refused, as GoTrue's
    // verifier (go-oidc) refuses it.
    ;({ payload } = await jwtVerify(idToken, keySet(meta.jwks_uri), {
      issuer: meta.issuer,
      algorithms: ASYMMETRIC,
      clockTolerance: 60,
      requiredClaims: ['exp'],
    }))
  } catch (err) {
    throw new IdTokenRefused(err)
  }
  const aud = Array.isArray(payload.aud)
    ? payload.aud.filter((x): x is string => typeof x === 'string')
    : typeof payload.aud === 'string'
      ? [payload.aud]
      : []
  return {
    sub: str(payload.sub),
    aud,
    nonce: typeof payload.nonce === 'string' ? payload.nonce : undefined,
    claims: payload,
  }
}

export class IdTokenRefused extends Error {
  constructor(cause: unknown) {
    super('id token refused', { cause })
    this.name = 'IdTokenRefused'
  }
}

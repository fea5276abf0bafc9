// What the OAuth 2.1 server tells an app about its user (docs/auth-protocol.md §3.22), by the
// scopes the user granted (OpenID Connect Core §5.4): the ID token of a code exchange with scope
// openid (§2; GoTrue's GenerateIDToken) and the profile part of GET /oauth/userinfo (§5.3).
// ID tokens are signed only with an asymmetric key, as GoTrue signs them; with the HS256
// secret none is issued (GoTrue answers the exchange with a 500 then).
import { currentSigningKey } from '../tenants/index.js'
import { signTenantJwt } from './tokens.js'
import type { TenantContext, UserRow } from './types.js'

/** How long an ID token lasts (GoTrue: an hour). */
const ID_TOKEN_SECONDS = 3600

/** The profile claims of a user (scope profile): name (else the email), picture, username, updated_at. */
export function profileClaims(u: UserRow): Record<string, unknown> {
  const meta = u.raw_user_meta_data ?? {}
  const text = (k: string): string | undefined => {
    const v = meta[k]
    return typeof v === 'string' && v !== '' ? v : undefined
  }
  const out: Record<string, unknown> = {}
  const name = text('name') ?? (u.email || undefined)
  if (name !== undefined) out.name = name
  const picture = text('picture') ?? text('avatar_url')
  if (picture !== undefined) out.picture = picture
  const username = text('preferred_username') ?? text('username')
  if (username !== undefined) out.preferred_username = username
  if (u.updated_at) out.updated_at = Math.floor(new Date(u.updated_at).getTime() / 1000)
  return out
}

/** The ID token for `clientId`, or undefined when the tenant signs with the HS256 secret. */
export function idTokenOf(
  ctx: TenantContext,
  u: UserRow,
  o: { clientId: string; scopes: string[]; nonce: string | null; authTime: Date },
): string | undefined {
  if (currentSigningKey(ctx.tenant.jwt) === null) return undefined
  const claims: Record<string, unknown> = { aud: [o.clientId] }
  if (o.nonce) claims.nonce = o.nonce
  claims.auth_time = Math.floor(o.authTime.getTime() / 1000)
  const email = o.scopes.includes('email')
  if (email && u.email) claims.email = u.email
  claims.email_verified = email && u.email_confirmed_at !== null
  const phone = o.scopes.includes('phone')
  if (phone && u.phone) claims.phone_number = u.phone
  claims.phone_number_verified = phone && u.phone_confirmed_at !== null
  if (o.scopes.includes('profile')) Object.assign(claims, profileClaims(u))
  claims.client_id = o.clientId
  const iat = Math.floor(ctx.now().getTime() / 1000)
  return signTenantJwt(ctx, claims, u.id, iat, ID_TOKEN_SECONDS)
}

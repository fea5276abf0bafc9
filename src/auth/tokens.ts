// Access and refresh token issuance (docs/auth-protocol.md §4.1, §2.4, §5.1): the claims GoTrue puts into
// an access token, the AccessTokenResponse, and "start a session" for every sign-in method
// (session row + AMR claim + first refresh token, v1 or v2 by the tenant's algorithm, + last_sign_in_at). Rotation of refresh
// tokens lives in grants/refresh-token.ts.
import { signAsymmetricSync, signHS256Sync, type Queryable } from '../shared/index.js'
import { currentSigningKey, privateKeyObject } from '../tenants/index.js'
import { customizeAccessToken } from './access-token-hook.js'
import { hookOf } from './auth-hooks.js'
import { audit, type AuditAction } from './models/audit-log.js'
import { factorsOfUser } from './models/factors.js'
import { insertRefreshToken } from './models/refresh-tokens.js'
import { addAmrClaim, bindSessionToOAuthClient, insertSession, type OAuthBinding } from './models/sessions.js'
import { toUserJson, updateUser } from './models/users.js'
import { encodeRefreshTokenV2, newRefreshTokenKey } from './refresh-token-format.js'
import type { AccessTokenResponse, AmrEntry, TenantContext, UserWithIdentities } from './types.js'

/** Sign-in methods recorded in the AMR claim (docs/auth-protocol.md §4.1). */
export type AuthMethod =
  | 'password'
  | 'otp'
  | 'oauth'
  | 'magiclink'
  | 'recovery'
  | 'invite'
  | 'email/signup'
  | 'email_change'
  | 'anonymous'
  | 'sso/saml'
  | 'web3'
  | 'passkey'
  | 'oauth_provider/authorization_code'

function aalOf(amr: AmrEntry[]): 'aal1' | 'aal2' {
  return amr.some((a) => a.method === 'totp' || a.method === 'mfa/phone' || a.method === 'mfa/webauthn')
    ? 'aal2'
    : 'aal1'
}

/** The claims of an access token, in GoTrue's order. */
function accessTokenClaims(
  ctx: TenantContext,
  u: UserWithIdentities,
  sessionId: string,
  amr: AmrEntry[],
  oauth?: OAuthBinding | null,
): Record<string, unknown> {
  const user = u.user
  const claims: Record<string, unknown> = {
    aud: user.aud || ctx.tenant.jwt.aud,
    email: user.email ?? '',
    phone: user.phone ?? '',
    app_metadata: user.raw_app_meta_data ?? {},
    user_metadata: user.raw_user_meta_data ?? {},
    role: user.role || 'authenticated',
    aal: aalOf(amr),
    amr,
    session_id: sessionId,
    is_anonymous: user.is_anonymous,
  }
  // A session of an OAuth 2.1 client (docs/auth-protocol.md §3.22): GoTrue's client_id and scope claims.
  if (oauth) {
    claims.client_id = oauth.clientId
    if (oauth.scopes) claims.scope = oauth.scopes
  }
  return claims
}

interface SignAs {
  subject?: string
  issuer?: string
  iat: number
  expiresIn: number
}

/**
 * Signs claims with the tenant's current key: the newest signing key of
 * `jwt.signing_algorithm` (ES256/RS256, `kid` in the header), or the HS256 secret.
 */
function signClaims(ctx: TenantContext, claims: Record<string, unknown>, as: SignAs): string {
  const key = currentSigningKey(ctx.tenant.jwt)
  const common = { expiresInSeconds: as.expiresIn, issuer: as.issuer, subject: as.subject, now: as.iat }
  if (key === null) return signHS256Sync(claims, { secret: ctx.tenant.jwt.secret, ...common })
  return signAsymmetricSync(claims, {
    alg: key.alg,
    kid: key.kid,
    privateKey: privateKeyObject(key.private_key),
    ...common,
  })
}

/** Signs a token of this tenant (its issuer) for `subject`: its access tokens, the OAuth server's ID tokens. */
export function signTenantJwt(
  ctx: TenantContext,
  claims: Record<string, unknown>,
  subject: string,
  iat: number,
  expiresIn: number,
): string {
  return signClaims(ctx, claims, { subject, issuer: ctx.issuer, iat, expiresIn })
}

/** Signs the claims a custom access token hook answered, with its own iat, exp, iss and sub. */
function signCustomClaims(ctx: TenantContext, claims: Record<string, unknown>): string {
  const { iat, exp, iss, sub, ...rest } = claims
  return signClaims(ctx, rest, {
    subject: typeof sub === 'string' ? sub : undefined,
    issuer: typeof iss === 'string' ? iss : undefined,
    iat: Number(iat),
    expiresIn: Number(exp) - Number(iat),
  })
}

/** How a token was asked for: the custom access token hook is told (GoTrue's authentication_method). */
interface IssueOptions {
  /** The request's transaction, where the hook runs when it is a function (a transaction client, never a pool). */
  readonly q?: Queryable
  /** GoTrue's authentication method: a sign-in method, `token_refresh`, `mfa/totp`. */
  readonly method: string
  readonly ip?: string | null
}

/**
 * Signs an access token for a session and shapes the AccessTokenResponse. With a custom access
 * token hook the hook's claims are signed instead (GoTrue's GenerateAccessToken).
 */
export async function tokenResponse(
  ctx: TenantContext,
  u: UserWithIdentities,
  session: { id: string; refreshToken: string; amr: AmrEntry[]; oauth?: OAuthBinding | null },
  issue: IssueOptions,
): Promise<AccessTokenResponse> {
  const iat = Math.floor(ctx.now().getTime() / 1000)
  const expiresIn = ctx.tenant.jwt.expiry
  const claims = accessTokenClaims(ctx, u, session.id, session.amr, session.oauth)
  // Without a custom access token hook (the common case) its claims object is never built.
  const custom =
    hookOf(ctx, 'custom_access_token') === null
      ? null
      : await customizeAccessToken({ ctx, q: issue.q, ip: issue.ip }, u.user.id, issue.method, {
          iss: ctx.issuer,
          sub: u.user.id,
          ...claims,
          exp: iat + expiresIn,
          iat,
        })
  const accessToken =
    custom === null ? signTenantJwt(ctx, claims, u.user.id, iat, expiresIn) : signCustomClaims(ctx, custom)
  return {
    access_token: accessToken,
    token_type: 'bearer',
    expires_in: expiresIn,
    expires_at: iat + expiresIn,
    refresh_token: session.refreshToken,
    user: toUserJson(u),
  }
}

interface StartSessionOptions {
  method: AuthMethod
  userAgent?: string | null
  ip?: string | null
  /** Audit action to record (login by default; signups pass user_signedup). */
  auditAction?: AuditAction | null
  /** The OAuth 2.1 client the session is issued to, and its scopes. */
  oauth?: OAuthBinding
}

/**
 * Starts a session for a user who just proved who they are: session row, AMR claim,
 * first refresh token, last_sign_in_at. Runs on the caller's transaction client.
 */
export async function startSession(
  ctx: TenantContext,
  q: Queryable,
  u: UserWithIdentities,
  opts: StartSessionOptions,
): Promise<AccessTokenResponse> {
  const now = ctx.now()
  const v2 = ctx.tenant.auth.refresh_token_algorithm_version === 2
  const session = await insertSession(q, {
    userId: u.user.id,
    now,
    userAgent: opts.userAgent,
    ip: opts.ip,
    refreshTokenKey: v2 ? newRefreshTokenKey() : null,
  })
  await addAmrClaim(q, session.id, opts.method, now)
  if (opts.oauth) await bindSessionToOAuthClient(q, session.id, opts.oauth)
  // Algorithm 2 (GoTrue's IssueRefreshToken): the session's key signs counter 0, no token row.
  const refreshToken = session.refresh_token_hmac_key
    ? encodeRefreshTokenV2(session.id, 0n, session.refresh_token_hmac_key)
    : await insertRefreshToken(q, { userId: u.user.id, sessionId: session.id, now })
  const user = await updateUser(q, u.user.id, { last_sign_in_at: now }, now)
  const action = opts.auditAction === undefined ? 'login' : opts.auditAction
  if (action) {
    await audit(q, {
      action,
      actorId: user.id,
      actorUsername: user.email ?? user.phone,
      traits: { provider: opts.method },
      ip: opts.ip,
      now,
    })
  }
  const amr: AmrEntry[] = [{ method: opts.method, timestamp: Math.floor(now.getTime() / 1000) }]
  const factors = u.factors ?? (await factorsOfUser(q, user.id))
  return tokenResponse(
    ctx,
    { user, identities: u.identities, factors },
    { id: session.id, refreshToken, amr, oauth: opts.oauth },
    { q, method: opts.method, ip: opts.ip },
  )
}

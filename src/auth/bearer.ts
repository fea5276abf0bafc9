// Bearer checks of docs/auth-protocol.md §4.4: `Authorization: Bearer <jwt>` signed with the tenant secret
// (HS256) or one of this tenant's signing keys (ES256/RS256, by kid), exp required, iss =
// this tenant's issuer, so another tenant's token fails the key and the issuer; then the
// user (and session) the claims name must exist.
// requireAdmin checks the role claim instead of loading a user.
import type { FastifyRequest } from 'fastify'
import { errors as joseErrors } from 'jose'
import {
  describeJwtError,
  LegacySecretRetiredError,
  UnknownKeyIdError,
  verifyWithKeys,
  ROLE_CLAIMS,
  type VerificationKey,
} from '../shared/index.js'
import {
  BadJwtError,
  NoAuthorizationError,
  NotAdminError,
  SessionNotFoundError,
  UnexpectedAudienceError,
  UserBannedError,
  UserNotFoundError,
  ValidationFailedError,
} from './errors.js'
import { sessionExists } from './models/sessions.js'
import { isUserBanned, loadUserWithIdentities, NIL_UUID } from './models/users.js'
import type { AuthenticatedUser, BearerClaims, TenantContext } from './types.js'

export const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i

/** GoTrue's JWT_ADMIN_ROLES default. */
const ADMIN_ROLES = new Set<string>([ROLE_CLAIMS.svc, 'supabase_admin'])

function bearerToken(req: FastifyRequest): string | null {
  const h = req.headers.authorization
  if (typeof h !== 'string') return null
  const m = /^bearer (\S+)$/i.exec(h.trim())
  return m ? m[1]! : null
}

/** The reason GoTrue's JWT library (golang-jwt v5) gives for the common failures. */
function goJwtReason(err: unknown, token: string): string {
  if (err instanceof joseErrors.JWTExpired) return 'token has invalid claims: token is expired'
  if (err instanceof joseErrors.JWSSignatureVerificationFailed)
    return 'token signature is invalid: signature is invalid'
  if (err instanceof UnknownKeyIdError)
    return `token is unverifiable: error while executing keyfunc: ${err.kid === undefined ? 'missing kid' : 'invalid kid: ' + err.kid}`
  if (err instanceof LegacySecretRetiredError) return `token is unverifiable: ${err.message}`
  if (err instanceof joseErrors.JOSEAlgNotAllowed)
    return 'token is unverifiable: error while executing keyfunc: unexpected signing method'
  if (token.split('.').length !== 3) return 'token is malformed: token contains an invalid number of segments'
  if (err instanceof joseErrors.JWSInvalid || err instanceof joseErrors.JWTInvalid)
    return 'token is malformed: ' + describeJwtError(err)
  return describeJwtError(err)
}

const keysOfRecord = new WeakMap<object, VerificationKey[]>()

/** The tenant's public signing keys (memoised per tenant record). */
function verificationKeysOf(ctx: TenantContext): VerificationKey[] {
  const list = ctx.tenant.jwt.signing_keys ?? []
  let keys = keysOfRecord.get(list)
  if (keys === undefined) {
    keys = list.map((k) => ({ kid: k.kid, alg: k.alg, public_jwk: k.public_jwk }))
    keysOfRecord.set(list, keys)
  }
  return keys
}

/** Verifies a bearer token of this tenant; 401 without one, 403 bad_jwt when it fails. */
async function verifyBearer(ctx: TenantContext, req: FastifyRequest): Promise<BearerClaims> {
  const token = bearerToken(req)
  if (!token) throw new NoAuthorizationError('bearer')
  try {
    return (await verifyWithKeys(token, {
      secret: ctx.tenant.jwt.secret,
      keys: verificationKeysOf(ctx),
      legacyRetired: ctx.tenant.jwt.legacy_secret_retired !== undefined,
      issuer: ctx.issuer,
      currentDate: ctx.now(),
    })) as BearerClaims
  } catch (err) {
    throw new BadJwtError('unverified', goJwtReason(err, token))
  }
}

export async function requireUser(ctx: TenantContext, req: FastifyRequest): Promise<AuthenticatedUser> {
  const claims = await verifyBearer(ctx, req)
  if (typeof claims.sub !== 'string' || claims.sub === '') throw new BadJwtError('missingSub')
  if (!UUID.test(claims.sub)) throw new BadJwtError('subNotUuid')
  const sessionId =
    typeof claims.session_id === 'string' && UUID.test(claims.session_id) && claims.session_id !== NIL_UUID
      ? claims.session_id
      : null
  const [user, hasSession] = await Promise.all([
    loadUserWithIdentities(ctx.db, claims.sub),
    sessionId ? sessionExists(ctx.db, sessionId, claims.sub) : Promise.resolve(true),
  ])
  if (!user) throw new UserNotFoundError('bearer')
  if (!hasSession) throw new SessionNotFoundError('bearer')
  if (isUserBanned(user.user, ctx.now())) throw new UserBannedError('bearer')
  return { claims, user, sessionId }
}

export async function requireAdmin(ctx: TenantContext, req: FastifyRequest): Promise<BearerClaims> {
  const claims = await verifyBearer(ctx, req)
  if (typeof claims.role !== 'string' || !ADMIN_ROLES.has(claims.role)) throw new NotAdminError('User not allowed')
  // A service token names no audience (the gateway's, Supabase's service_role key); one
  // that names another audience than the database's was made for something else: 403
  // unexpected_audience, GoTrue's answer for a token of another audience.
  if (claims.aud !== undefined && audienceOf(claims) !== ctx.tenant.jwt.aud) throw new UnexpectedAudienceError()
  return claims
}

/** The token's audience as GoTrue reads it: `aud`, or its first entry when a list. */
export function audienceOf(claims: BearerClaims): string | undefined {
  const aud = Array.isArray(claims.aud) ? claims.aud[0] : claims.aud
  return typeof aud === 'string' ? aud : undefined
}

/**
 * GoTrue's UserGet check, for GET and PUT /user: a token whose audience is not the
 * database's (a token of this database's secret made for another audience) is 400
 * validation_failed "Token audience doesn't match request audience".
 */
export function requireDatabaseAudience(ctx: TenantContext, claims: BearerClaims): void {
  if (audienceOf(claims) !== ctx.tenant.jwt.aud)
    throw new ValidationFailedError('request', "Token audience doesn't match request audience")
}

// The caller of a REST request: the gateway's upstream token (HS256 with the tenant's
// upstream secret, algorithm pinned, exp required) verified once and cached until it
// expires, its role checked against the tenant's three request roles; no token = anon.
// JWT failures become PostgREST's PGRST301/PGRST303 with WWW-Authenticate.
import { errors as joseErrors } from 'jose'
import { LRUCache } from 'lru-cache'
import { tokenCacheKey, verifyHS256 } from '../shared/jwt.js'
import type { Tenant } from '../tenants/index.js'
import { kindOfRoleName, type RoleKind } from '../shared/roles.js'
import { JwtClaimsError, JwtDecodeError } from './errors.js'

export type { RoleKind } from '../shared/roles.js'

export interface Caller {
  /** The Postgres role the request runs as. */
  role: string
  kind: RoleKind
  /** The claims for request.jwt.claims, with `role` set to the effective role. */
  claims: Record<string, unknown>
  /** 42501 answers 401 (not 403) when the role is the anon role. */
  isAnon: boolean
}

/** Clock skew allowed on exp/nbf (PostgREST allows 30 s). */
const SKEW_SECONDS = 30

function invalidToken (message: string): Record<string, string> {
  return { 'www-authenticate': `Bearer error="invalid_token", error_description="${message.replace(/["\\]/g, '')}"` }
}

function decodeError (message: string, details?: string): Error {
  return new JwtDecodeError(message, { details: details ?? null, headers: invalidToken(message) })
}

function claimsError (message: string): Error {
  return new JwtClaimsError(message, { headers: invalidToken(message) })
}

/** jose's failure -> PostgREST's JWT error. */
export function jwtError (err: unknown): Error {
  if (err instanceof joseErrors.JWTExpired) return claimsError('JWT expired')
  if (err instanceof joseErrors.JWTClaimValidationFailed) {
    if (err.claim === 'nbf') return claimsError('JWT not yet valid')
    if (err.claim === 'iat') return claimsError('JWT issued at future')
    if (err.claim === 'exp') return claimsError(err.reason === 'missing' ? "The JWT 'exp' claim is required" : "The JWT 'exp' claim must be a number")
    return claimsError(`The JWT '${err.claim}' claim is invalid`)
  }
  if (err instanceof joseErrors.JOSEAlgNotAllowed || err instanceof joseErrors.JOSENotSupported) return decodeError('Wrong or unsupported encoding algorithm')
  if (err instanceof joseErrors.JWSSignatureVerificationFailed) return decodeError('No suitable key or wrong key type', 'None of the keys was able to decode the JWT')
  if (err instanceof joseErrors.JWTInvalid) return claimsError('Parsing claims failed')
  return decodeError('JWT cryptographic operation failed')
}

export function roleKindOf (tenant: Pick<Tenant, 'roles'>, role: string): RoleKind | null {
  return kindOfRoleName(tenant.roles, role)
}

interface Verified {
  claims: Record<string, unknown>
  exp: number
  nbf: number | null
}

export interface TokenVerifierOptions {
  /** Verified tokens kept (each until its exp). */
  max?: number
  now?: () => number
}

/** Verifies upstream tokens with an LRU of verified ones (keyed by a hash of tenant, secret and token). */
export class TokenVerifier {
  readonly #cache: LRUCache<string, Verified>
  readonly #now: () => number

  constructor (opts: TokenVerifierOptions = {}) {
    this.#cache = new LRUCache({ max: opts.max ?? 10_000 })
    this.#now = opts.now ?? Date.now
  }

  /** The caller of a request with this Authorization header (or none). */
  async caller (tenant: Tenant, authorization: string | undefined): Promise<Caller> {
    const token = bearerToken(authorization)
    if (token === null) return anonCaller(tenant)
    if (token === '') throw decodeError('Empty JWT is sent in Authorization header')
    const parts = token.split('.').length
    if (parts !== 3) throw decodeError(`Expected 3 parts in JWT; got ${parts}`)
    const nowSec = this.#now() / 1000
    const key = tokenCacheKey(tenant.database, tenant.jwt.upstream_secret, token)
    let v = this.#cache.get(key)
    if (v) {
      // Cached signature; the time claims are checked again on every use.
      if (v.exp + SKEW_SECONDS <= nowSec) { this.#cache.delete(key); throw claimsError('JWT expired') }
      if (v.nbf !== null && v.nbf - SKEW_SECONDS > nowSec) throw claimsError('JWT not yet valid')
    } else {
      let payload: Record<string, unknown>
      try {
        payload = await verifyHS256(token, {
          secret: tenant.jwt.upstream_secret,
          clockToleranceSeconds: SKEW_SECONDS,
          currentDate: new Date(this.#now())
        }) as Record<string, unknown>
      } catch (err) {
        throw jwtError(err)
      }
      v = { claims: payload, exp: Number(payload.exp), nbf: typeof payload.nbf === 'number' ? payload.nbf : null }
      const ttl = Math.floor((v.exp + SKEW_SECONDS - nowSec) * 1000)
      if (ttl > 0) this.#cache.set(key, v, { ttl })
    }
    const roleClaim = v.claims.role
    if (roleClaim === undefined || roleClaim === null) return { ...anonCaller(tenant), claims: { ...v.claims, role: tenant.roles.anon } }
    if (typeof roleClaim !== 'string') throw claimsError("The JWT 'role' claim must be a string")
    const kind = roleKindOf(tenant, roleClaim)
    if (kind === null) throw claimsError("The JWT 'role' claim is not a role of this database")
    return { role: roleClaim, kind, claims: v.claims, isAnon: kind === 'anon' }
  }

  clear (): void { this.#cache.clear() }
}

function anonCaller (tenant: Tenant): Caller {
  return { role: tenant.roles.anon, kind: 'anon', claims: { role: tenant.roles.anon }, isAnon: true }
}

/** The token of `Authorization: Bearer <token>` (scheme case-insensitive); null when there is none. */
export function bearerToken (authorization: string | undefined): string | null {
  if (authorization === undefined) return null
  const m = /^\s*bearer(?:\s+(.*))?$/is.exec(authorization)
  if (!m) return null
  return (m[1] ?? '').trim()
}

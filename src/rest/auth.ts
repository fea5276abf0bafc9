// The caller of a REST request: the gateway's upstream token (HS256 with the tenant's
// upstream secret, algorithm pinned, exp required) whose signature is verified once and
// cached until it expires, its claims checked on every use as PostgREST checks them, its
// role checked against the tenant's three request roles; no token = anon. Every failure
// is an error of the registry (errors.ts) with PostgREST 14's text.
import { compactVerify, errors as joseErrors } from 'jose'
import { LRUCache } from 'lru-cache'
import { hmacKey, tokenCacheKey, kindOfRoleName, type RoleKind } from '../shared/index.js'
import type { Tenant } from '../tenants/index.js'
import { JwtClaimsError, JwtDecodeError, unknownRole, type JwtClaimsFailure } from './errors.js'

/** Who a request runs as: the verified token's role and claims (the anon role without one). */
export interface RequestRole {
  /** The Postgres role the request runs as. */
  role: string
  kind: RoleKind
  /** The claims for request.jwt.claims, with `role` set to the effective role. */
  claims: Record<string, unknown>
  /** 42501 answers 401 (not 403) when the role is the anon role. */
  isAnon: boolean
}

/** Clock skew allowed on exp/nbf/iat (PostgREST allows 30 s). */
const SKEW_SECONDS = 30

/** Signature algorithms PostgREST's JWT library knows but an HMAC secret cannot verify. */
const ASYMMETRIC_ALGS: ReadonlySet<string> = new Set(['RS256', 'RS384', 'RS512', 'ES256', 'ES384', 'ES512', 'EdDSA'])
const OTHER_HMAC_ALGS: ReadonlySet<string> = new Set(['HS384', 'HS512'])

/**
 * The decode failure PostgREST reports for the token's header before any signature check:
 * a header that does not parse or names an unknown algorithm is malformed, `none` is an
 * unsecured token, an asymmetric algorithm has no suitable key, another HMAC algorithm is
 * a key that cannot decode it (the algorithm is pinned to HS256). null: HS256.
 */
function headerFailure(encodedHeader: string): Error | null {
  let header: unknown
  try {
    header = JSON.parse(Buffer.from(encodedHeader, 'base64url').toString('utf8'))
  } catch {
    return new JwtDecodeError('malformed')
  }
  const alg =
    typeof header === 'object' && header !== null && !Array.isArray(header)
      ? (header as { alg?: unknown }).alg
      : undefined
  if (alg === 'HS256') return null
  if (alg === 'none') return new JwtDecodeError('unsecured')
  if (typeof alg === 'string' && ASYMMETRIC_ALGS.has(alg)) return new JwtDecodeError('noSuitableKey')
  if (typeof alg === 'string' && OTHER_HMAC_ALGS.has(alg)) return new JwtDecodeError('keyCannotDecode')
  return new JwtDecodeError('malformed')
}

/** jose's verification failure -> PostgREST's PGRST301. */
function jwtError(err: unknown): Error {
  if (err instanceof joseErrors.JWSSignatureVerificationFailed) return new JwtDecodeError('keyCannotDecode')
  if (err instanceof joseErrors.JOSEAlgNotAllowed || err instanceof joseErrors.JOSENotSupported)
    return new JwtDecodeError('keyCannotDecode')
  return new JwtDecodeError('malformed')
}

/** A time claim as PostgREST reads it: a non-integer (or out of int64) number counts as 0. */
function seconds(v: number): number {
  return Number.isInteger(v) && Math.abs(v) <= 9.2e18 ? v : 0
}

/**
 * PostgREST's claim checks, in its order (exp, nbf, iat, aud), 30 s of skew; null or
 * absent claims pass, except exp, which the upstream token must carry (a missing exp is
 * reported as PostgREST reports an exp that is not a number).
 */
function claimsFailure(claims: Record<string, unknown>, nowSec: number): JwtClaimsFailure | null {
  const now = Math.floor(nowSec)
  const exp = claims.exp
  if (typeof exp !== 'number') return 'expNotNumber'
  if (now - SKEW_SECONDS > seconds(exp)) return 'expired'
  const nbf = claims.nbf
  if (nbf !== undefined && nbf !== null) {
    if (typeof nbf !== 'number') return 'nbfNotNumber'
    if (now + SKEW_SECONDS < seconds(nbf)) return 'notYetValid'
  }
  const iat = claims.iat
  if (iat !== undefined && iat !== null) {
    if (typeof iat !== 'number') return 'iatNotNumber'
    if (now + SKEW_SECONDS < seconds(iat)) return 'issuedAtFuture'
  }
  const aud = claims.aud
  if (
    aud !== undefined &&
    aud !== null &&
    typeof aud !== 'string' &&
    !(Array.isArray(aud) && aud.every((a) => typeof a === 'string'))
  )
    return 'audNotStringOrArray'
  return null
}

/** Verified tokens kept (each until its exp). */
const MAX_TOKENS = 10_000

/**
 * Verifies upstream tokens with an LRU of signature-verified claims (keyed by a hash of
 * tenant, secret and token); the claims are checked again on every use.
 */
export class TokenVerifier {
  readonly #cache: LRUCache<string, Record<string, unknown>>
  readonly #now: () => number

  constructor(opts: { now?: () => number } = {}) {
    this.#cache = new LRUCache({ max: MAX_TOKENS })
    this.#now = opts.now ?? Date.now
  }

  /** The caller of a request with this Authorization header (or none). */
  async caller(tenant: Tenant, authorization: string | undefined): Promise<RequestRole> {
    const token = bearerToken(authorization)
    if (token === null) return anonCaller(tenant)
    if (token === '') throw new JwtDecodeError('empty')
    const parts = token.split('.')
    if (parts.length !== 3) throw new JwtDecodeError('parts', parts.length)
    const nowSec = this.#now() / 1000
    const key = tokenCacheKey(tenant.database, tenant.jwt.upstream_secret, token)
    const cached = this.#cache.get(key)
    const claims = cached ?? (await verifiedClaims(token, parts[0]!, tenant.jwt.upstream_secret))
    const failure = claimsFailure(claims, nowSec)
    if (failure !== null) {
      if (failure === 'expired') this.#cache.delete(key)
      throw new JwtClaimsError(failure)
    }
    if (cached === undefined) {
      const ttl = Math.floor((seconds(claims.exp as number) + SKEW_SECONDS - nowSec) * 1000)
      if (ttl > 0) this.#cache.set(key, claims, { ttl })
    }
    // PostgREST reads the role claim as text (a non-string one JSON-encoded); absent = anon.
    const roleClaim = claims.role
    if (roleClaim === undefined) return { ...anonCaller(tenant), claims: { ...claims, role: tenant.roles.anon } }
    const role = typeof roleClaim === 'string' ? roleClaim : JSON.stringify(roleClaim)
    const kind = kindOfRoleName(tenant.roles, role)
    if (kind === null) throw unknownRole(role)
    return { role, kind, claims, isAnon: kind === 'anon' }
  }

  clear(): void {
    this.#cache.clear()
  }
}

/** The claims of a token whose signature verifies (HS256 with `secret`): PGRST301 or PGRST303 otherwise. */
async function verifiedClaims(token: string, header: string, secret: string): Promise<Record<string, unknown>> {
  const bad = headerFailure(header)
  if (bad !== null) throw bad
  let payload: Uint8Array
  try {
    payload = (await compactVerify(token, hmacKey(secret), { algorithms: ['HS256'] })).payload
  } catch (err) {
    throw jwtError(err)
  }
  let parsed: unknown
  try {
    parsed = JSON.parse(Buffer.from(payload).toString('utf8'))
  } catch {
    parsed = null
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new JwtClaimsError('parsingFailed')
  return parsed as Record<string, unknown>
}

function anonCaller(tenant: Tenant): RequestRole {
  return { role: tenant.roles.anon, kind: 'anon', claims: { role: tenant.roles.anon }, isAnon: true }
}

/** Data.Word8's isSpace (TAB, LF, VT, FF, CR, space, NBSP), which PostgREST's Bearer parsing uses. */
const WAI_SPACE = /[\t\n\v\f\r \u00a0]/
const WAI_LEADING_SPACE = /^[\t\n\v\f\r \u00a0]+/

/**
 * The token of `Authorization: Bearer <token>`; null when there is none. As PostgREST
 * (wai-extra's extractBearerAuth): the scheme is everything before the first blank and
 * must be `bearer` in any case, the token is the rest with its leading blanks dropped and
 * nothing else removed (`Bearer` alone is an empty token).
 */
export function bearerToken(authorization: string | undefined): string | null {
  if (authorization === undefined) return null
  const blank = authorization.search(WAI_SPACE)
  const scheme = blank < 0 ? authorization : authorization.slice(0, blank)
  if (scheme.toLowerCase() !== 'bearer') return null
  return blank < 0 ? '' : authorization.slice(blank).replace(WAI_LEADING_SPACE, '')
}

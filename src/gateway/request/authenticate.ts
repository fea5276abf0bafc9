// Who is calling: the API key (`apikey` header, `?apikey=`, or an opaque key as
// `Authorization: Bearer`, as supabase-js sends it) and an optional bearer JWT verified
// with this tenant's own keys only: HS256 with its secret, ES256/RS256 with the public key
// its `kid` names among this tenant's signing keys (exp required, iss/aud bound to the tenant).
// Verified tokens are cached until their exp, keyed by a hash (never the token itself).
import type { IncomingHttpHeaders } from 'node:http'
import { decodeProtectedHeader, errors as joseErrors, type JWTPayload } from 'jose'
import { LRUCache } from 'lru-cache'
import {
  acceptedAlgorithms,
  describeJwtError,
  looksLikeJwt,
  tokenCacheKey,
  verifyWithKeys,
  firstHeader,
  ACCEPTED_CLAIMS_TEXT,
  kindOfClaim,
  bearerToken,
  type VerificationKey,
} from '../../shared/index.js'
import { keyKind, tenantIssuer, type RoleKind, type Tenant } from '../../tenants/index.js'
import { InvalidApiKeyError, InvalidTokenError, NoApiKeyError } from '../errors.js'
import type { Caller } from '../types.js'

interface TenantFacts {
  /** Fingerprint of everything a cached verdict or upstream token depends on. */
  fp: string
  issuer: string
  /** The tenant's public signing keys (its own, never another tenant's). */
  verificationKeys: readonly VerificationKey[]
  /**
   * Keys that matched this tenant record (constant-time) before, with their kind. Only
   * matches are remembered, so a wrong key always takes the constant-time path.
   */
  known: Map<string, 'anon' | 'svc'>
}

interface Verified {
  kind: RoleKind
  claims: JWTPayload
  exp: number
}

export interface AuthenticatorOptions {
  publicUrl: string
  /** Clock in milliseconds; default Date.now. */
  now?: () => number
}

function invalidToken(details: string, cause?: unknown): InstanceType<typeof InvalidTokenError> {
  return new InvalidTokenError({
    details,
    hint: "Sign in again to get a fresh access token from this project's /auth/v1.",
    cause,
    headers: { 'www-authenticate': 'Bearer error="invalid_token"' },
  })
}

/** A reason a client can act on; jose's own messages are too generic for alg and claims. */
function describeFailure(err: unknown, token: string, f: TenantFacts): string {
  if (err instanceof joseErrors.JOSEAlgNotAllowed) {
    let alg = 'unknown'
    try {
      alg = String(decodeProtectedHeader(token).alg)
    } catch {}
    return `algorithm "${alg}" is not allowed: tokens must be signed with ${acceptedAlgorithms(f.verificationKeys).join(' or ')}`
  }
  if (err instanceof joseErrors.JWTClaimValidationFailed) {
    if (err.claim === 'iss') return 'token issuer (iss) does not belong to this project'
    if (err.claim === 'aud') return 'token audience (aud) is not accepted by this project'
    if (err.claim === 'exp' && err.reason === 'missing') return 'token has no expiry (exp)'
  }
  return describeJwtError(err)
}

// Refusals of a bearer token that failed verification (signature, claims, or no JWT at all;
// not of a verified token with a role we do not accept): the auth service lets its engine
// answer those GoTrue's way.
const unverified = new WeakSet<object>()

function unverifiedRefusal(details: string, cause?: unknown): InstanceType<typeof InvalidTokenError> {
  const refused = invalidToken(details, cause)
  unverified.add(refused)
  return refused
}

/** True when `err` refused a bearer token that failed verification (signature, exp, iss, aud, not a JWT). */
export function isUnverifiedTokenRefusal(err: unknown): boolean {
  return typeof err === 'object' && err !== null && unverified.has(err)
}

/** The last token seen on a client connection, with its cache key. */
interface LastToken {
  fp: string
  token: string
  key: string
}

/** The last caller authenticated on a client connection, with what it was authenticated from. */
interface LastCaller {
  fp: string
  apikey: string | undefined
  authorization: string | undefined
  queryKey: string | undefined
  open: boolean
  caller: Caller
}

/** What a request presents: its API key (header, query or opaque bearer) and its bearer JWT. */
interface Presented {
  apikey: string | undefined
  jwt: string | undefined
  opaqueBearer: string | undefined
}

/**
 * Authenticates callers of one gateway: API keys against the tenant record, bearer JWTs
 * with the tenant's own keys, verdicts cached until the token's exp. A keep-alive client
 * sends the same headers request after request: the last caller of each connection is
 * remembered, so it is not re-parsed, re-hashed and re-looked-up every time.
 */
export class Authenticator {
  readonly #publicUrl: string
  readonly #now: () => number
  readonly #facts = new WeakMap<Tenant, TenantFacts>()
  readonly #verified: LRUCache<string, Verified>
  readonly #lastToken = new WeakMap<object, LastToken>()
  readonly #lastCaller = new WeakMap<object, LastCaller>()

  constructor(opts: AuthenticatorOptions) {
    this.#publicUrl = opts.publicUrl
    this.#now = opts.now ?? Date.now
    this.#verified = new LRUCache<string, Verified>({ max: 50_000 })
  }

  /**
   * Throws no_api_key / invalid_api_key / invalid_token (or rejects with invalid_token);
   * `open` routes may come without a key. Synchronous unless a token must be verified.
   */
  authenticate(
    tenant: Tenant,
    headers: IncomingHttpHeaders,
    queryKey: string | undefined,
    open: boolean,
    connection?: object,
  ): Caller | Promise<Caller> {
    const f = this.facts(tenant)
    if (connection === undefined) return this.#authenticateNow(tenant, f, headers, queryKey, open, connection)
    const apikey = firstHeader(headers.apikey)
    const authorization = firstHeader(headers.authorization)
    const m = this.#lastCaller.get(connection)
    if (
      m !== undefined &&
      m.fp === f.fp &&
      m.apikey === apikey &&
      m.authorization === authorization &&
      m.queryKey === queryKey &&
      m.open === open &&
      (m.caller.exp === null || m.caller.exp > this.#nowSeconds())
    ) {
      return m.caller
    }
    const remember = (caller: Caller): Caller => {
      this.#lastCaller.set(connection, { fp: f.fp, apikey, authorization, queryKey, open, caller })
      return caller
    }
    const c = this.#authenticateNow(tenant, f, headers, queryKey, open, connection)
    return c instanceof Promise ? c.then(remember) : remember(c)
  }

  /** Fingerprint and issuer of a tenant record (memoised per record object). */
  facts(tenant: Tenant): TenantFacts {
    let f = this.#facts.get(tenant)
    if (f === undefined) {
      f = factsOf(tenant, this.#publicUrl)
      this.#facts.set(tenant, f)
    }
    return f
  }

  clear(): void {
    this.#verified.clear()
  }

  #nowSeconds(): number {
    return Math.floor(this.#now() / 1000)
  }

  #authenticateNow(
    tenant: Tenant,
    f: TenantFacts,
    headers: IncomingHttpHeaders,
    queryKey: string | undefined,
    open: boolean,
    connection: object | undefined,
  ): Caller | Promise<Caller> {
    const p = presented(headers, queryKey)
    const kk = apiKeyKind(tenant, f, p.apikey, open)
    if (p.opaqueBearer !== undefined) throw opaqueBearerRefusal(tenant, p.opaqueBearer)
    if (p.jwt === undefined) {
      const kind: RoleKind = kk ?? 'anon'
      return { kind, claims: null, token: null, exp: null, keyKind: kk, cacheKey: `${f.fp}:${kind}` }
    }
    const token = p.jwt
    const key = this.#keyFor(f.fp, token, connection)
    const hit = this.#verified.get(key)
    if (hit !== undefined && hit.exp > this.#nowSeconds())
      return { kind: hit.kind, claims: hit.claims, token, exp: hit.exp, keyKind: kk, cacheKey: key }
    return this.#verify(tenant, f, token, key).then((v) => ({
      kind: v.kind,
      claims: v.claims,
      token,
      exp: v.exp,
      keyKind: kk,
      cacheKey: key,
    }))
  }

  /** The token's cache key, computed once per connection for a token sent again. */
  #keyFor(fp: string, token: string, connection: object | undefined): string {
    if (connection === undefined) return tokenCacheKey(fp, token)
    const last = this.#lastToken.get(connection)
    if (last !== undefined && last.fp === fp && last.token === token) return last.key
    const key = tokenCacheKey(fp, token)
    this.#lastToken.set(connection, { fp, token, key })
    return key
  }

  async #verify(tenant: Tenant, f: TenantFacts, token: string, key: string): Promise<Verified> {
    const nowSec = this.#nowSeconds()
    let claims: JWTPayload
    try {
      claims = await verifyWithKeys(token, {
        secret: tenant.jwt.secret,
        keys: f.verificationKeys,
        legacyRetired: tenant.jwt.legacy_secret_retired !== undefined,
        issuer: f.issuer,
        audience: tenant.jwt.aud,
        currentDate: new Date(this.#now()),
      })
    } catch (err) {
      throw unverifiedRefusal(describeFailure(err, token, f), err)
    }
    const role = claims.role
    // A Map look-up: `constructor` or `__proto__` as role is refused, never taken for anon.
    const kind = kindOfClaim(role)
    if (kind === null) {
      throw invalidToken(
        `role ${typeof role === 'string' ? `"${role.slice(0, 64)}"` : '(missing)'} is not accepted; expected ${ACCEPTED_CLAIMS_TEXT}`,
      )
    }
    const v: Verified = { kind, claims, exp: claims.exp! }
    const ttl = (v.exp - nowSec) * 1000
    if (ttl > 0) this.#verified.set(key, v, { ttl: Math.min(ttl, 24 * 3600 * 1000) })
    return v
  }
}

function factsOf(tenant: Tenant, publicUrl: string): TenantFacts {
  const issuer = tenantIssuer(tenant, publicUrl)
  const verificationKeys = (tenant.jwt.signing_keys ?? []).map((k) => ({
    kid: k.kid,
    alg: k.alg,
    public_jwk: k.public_jwk,
  }))
  return {
    issuer,
    verificationKeys,
    known: new Map(),
    // A revoked (removed) signing key changes the fingerprint: verdicts cached under it are not reused.
    fp: tokenCacheKey(
      tenant.database,
      issuer,
      tenant.jwt.aud,
      tenant.jwt.secret,
      tenant.jwt.upstream_secret,
      tenant.jwt.legacy_secret_retired !== undefined ? 'legacy-retired' : 'legacy',
      tenant.roles.anon,
      tenant.roles.auth,
      tenant.roles.svc,
      tenant.keys.public,
      tenant.keys.secret,
      ...verificationKeys.map((k) => `${k.alg}:${k.kid}:${JSON.stringify(k.public_jwk)}`),
    ),
  }
}

/**
 * The API key and bearer token of a request. An opaque key as bearer (supabase-js sends the
 * key there when nobody is signed in) is the key when no apikey came; otherwise it must be
 * that same key (`opaqueBearer` is set when it is not).
 */
function presented(headers: IncomingHttpHeaders, queryKey: string | undefined): Presented {
  const headerKey = firstHeader(headers.apikey)
  let apikey = headerKey !== undefined && headerKey !== '' ? headerKey : queryKey !== '' ? queryKey : undefined
  const authorization = firstHeader(headers.authorization)
  let bearer: string | undefined
  if (authorization !== undefined && authorization !== '') {
    const token = bearerToken(authorization)
    if (token === null) throw invalidToken('the Authorization header must be "Bearer <token>"')
    bearer = token
  }
  if (bearer === undefined || looksLikeJwt(bearer)) return { apikey, jwt: bearer, opaqueBearer: undefined }
  if (apikey === undefined) apikey = bearer
  return { apikey, jwt: undefined, opaqueBearer: apikey !== bearer ? bearer : undefined }
}

/** The kind of the API key presented (null: none, on an open route); throws when it is not this tenant's. */
function apiKeyKind(tenant: Tenant, f: TenantFacts, apikey: string | undefined, open: boolean): 'anon' | 'svc' | null {
  if (apikey === undefined) {
    if (open) return null
    throw new NoApiKeyError({ hint: "Send your project's public key in the apikey header (or ?apikey= in links)." })
  }
  let kk = f.known.get(apikey) ?? null
  if (kk === null) {
    kk = keyKind(tenant, apikey)
    if (kk !== null && f.known.size < 16) f.known.set(apikey, kk)
  }
  if (kk === null) {
    throw new InvalidApiKeyError({
      details: 'the key does not belong to this project',
      hint: 'Use the public or secret key of this project.',
    })
  }
  return kk
}

/** An opaque bearer that differs from the API key sent beside it. */
function opaqueBearerRefusal(tenant: Tenant, bearer: string): Error {
  if (keyKind(tenant, bearer) !== null) {
    return new InvalidApiKeyError({ details: 'the apikey header and the Authorization header carry different keys' })
  }
  return unverifiedRefusal("the bearer token is neither a JWT nor this project's API key")
}

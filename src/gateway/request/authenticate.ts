// Who is calling: the API key (`apikey` header, `?apikey=`, or an opaque key as
// `Authorization: Bearer`, as supabase-js sends it) and an optional bearer JWT verified
// with this tenant's own keys only: HS256 with its secret, ES256/RS256 with the public key
// its `kid` names among this tenant's signing keys (exp required, iss/aud bound to the tenant).
// Verified tokens are cached until their exp, keyed by a hash (never the token itself).
import type { IncomingHttpHeaders } from 'node:http'
import { decodeProtectedHeader, errors as joseErrors, type JWTPayload } from 'jose'
import { LRUCache } from 'lru-cache'
import crypto from 'node:crypto'
import {
  acceptedAlgorithms, describeJwtError, looksLikeJwt, tokenCacheKey, verifyWithKeys, firstHeader,
  ACCEPTED_CLAIMS_TEXT, kindOfClaim, type VerificationKey
} from '../../shared/index.js'
import { keyKind, tenantIssuer, type RoleKind, type Tenant } from '../../tenants/index.js'
import { InvalidApiKeyError, InvalidTokenError, NoApiKeyError } from '../errors.js'
import type { Caller } from '../types.js'

// One-shot SHA-256 (Node >= 20.12) is several times cheaper than createHash() per request.
const oneShot = (crypto as { hash?: (alg: string, data: string, enc: 'base64url') => string }).hash

/** Cache key of a token for one tenant record: a hash of the JSON tuple, never the token. */
function callerKey (fp: string, token: string): string {
  return oneShot !== undefined ? oneShot('sha256', JSON.stringify([fp, token]), 'base64url') : tokenCacheKey(fp, token)
}

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
  /** Most verified tokens kept. */
  cacheMax?: number
}

export interface Authenticator {
  /**
   * Throws no_api_key / invalid_api_key / invalid_token (or rejects with invalid_token);
   * `open` routes may come without a key. Synchronous unless a token must be verified.
   */
  authenticate (tenant: Tenant, headers: IncomingHttpHeaders, queryKey: string | undefined, open: boolean, connection?: object): Caller | Promise<Caller>
  /** Fingerprint and issuer of a tenant record (memoised per record object). */
  facts (tenant: Tenant): TenantFacts
  clear (): void
}

function invalidToken (details: string, cause?: unknown): InstanceType<typeof InvalidTokenError> {
  return new InvalidTokenError({
    details,
    hint: 'Sign in again to get a fresh access token from this project\'s /auth/v1.',
    cause,
    headers: { 'www-authenticate': 'Bearer error="invalid_token"' }
  })
}

/** A reason a client can act on; jose's own messages are too generic for alg and claims. */
function describeFailure (err: unknown, token: string, f: TenantFacts): string {
  if (err instanceof joseErrors.JOSEAlgNotAllowed) {
    let alg = 'unknown'
    try { alg = String(decodeProtectedHeader(token).alg) } catch {}
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

/** True when `err` refused a bearer token that failed verification (signature, exp, iss, aud, not a JWT). */
export function isUnverifiedTokenRefusal (err: unknown): boolean {
  return typeof err === 'object' && err !== null && unverified.has(err)
}

export function createAuthenticator (opts: AuthenticatorOptions): Authenticator {
  const now = opts.now ?? Date.now
  const facts = new WeakMap<Tenant, TenantFacts>()
  const verified = new LRUCache<string, Verified>({ max: opts.cacheMax ?? 50_000 })

  function factsOf (tenant: Tenant): TenantFacts {
    let f = facts.get(tenant)
    if (f === undefined) {
      const issuer = tenantIssuer(tenant, opts.publicUrl)
      const verificationKeys = (tenant.jwt.signing_keys ?? []).map((k) => ({ kid: k.kid, alg: k.alg, public_jwk: k.public_jwk }))
      f = {
        issuer,
        verificationKeys,
        known: new Map(),
        // A revoked (removed) signing key changes the fingerprint: verdicts cached under it are not reused.
        fp: tokenCacheKey(tenant.database, issuer, tenant.jwt.aud, tenant.jwt.secret, tenant.jwt.upstream_secret,
          tenant.jwt.legacy_secret_retired !== undefined ? 'legacy-retired' : 'legacy',
          tenant.roles.anon, tenant.roles.auth, tenant.roles.svc, tenant.keys.public, tenant.keys.secret,
          ...verificationKeys.map((k) => `${k.alg}:${k.kid}:${JSON.stringify(k.public_jwk)}`))
      }
      facts.set(tenant, f)
    }
    return f
  }

  /** A cached verdict still valid now, or undefined. */
  function cachedVerdict (key: string): Verified | undefined {
    const hit = verified.get(key)
    return hit !== undefined && hit.exp > Math.floor(now() / 1000) ? hit : undefined
  }

  async function verifyToken (tenant: Tenant, f: TenantFacts, token: string, key: string): Promise<Verified> {
    const nowSec = Math.floor(now() / 1000)
    let claims: JWTPayload
    try {
      claims = await verifyWithKeys(token, {
        secret: tenant.jwt.secret,
        keys: f.verificationKeys,
        legacyRetired: tenant.jwt.legacy_secret_retired !== undefined,
        issuer: f.issuer,
        audience: tenant.jwt.aud,
        currentDate: new Date(now())
      })
    } catch (err) {
      const refused = invalidToken(describeFailure(err, token, f), err)
      unverified.add(refused)
      throw refused
    }
    const role = claims.role
    // A Map look-up: `constructor` or `__proto__` as role is refused, never taken for anon.
    const kind = kindOfClaim(role)
    if (kind === null) {
      throw invalidToken(`role ${typeof role === 'string' ? `"${role.slice(0, 64)}"` : '(missing)'} is not accepted; expected ${ACCEPTED_CLAIMS_TEXT}`)
    }
    const v: Verified = { kind, claims, exp: claims.exp! }
    const ttl = (v.exp - nowSec) * 1000
    if (ttl > 0) verified.set(key, v, { ttl: Math.min(ttl, 24 * 3600 * 1000) })
    return v
  }

  // The last token seen on each client connection and its cache key: a keep-alive client
  // sends the same token request after request, so the hash is computed once per connection.
  const lastOnConnection = new WeakMap<object, { fp: string, token: string, key: string }>()

  function keyFor (fp: string, token: string, connection: object | undefined): string {
    if (connection === undefined) return callerKey(fp, token)
    const last = lastOnConnection.get(connection)
    if (last !== undefined && last.fp === fp && last.token === token) return last.key
    const key = callerKey(fp, token)
    lastOnConnection.set(connection, { fp, token, key })
    return key
  }

  // The last caller authenticated on each client connection: the same tenant record, key
  // and Authorization header give the same caller until its token expires, so a keep-alive
  // client is not re-parsed, re-hashed and re-looked-up on every request.
  interface Memo { fp: string, apikey: string | undefined, authorization: string | undefined, queryKey: string | undefined, open: boolean, caller: Caller }
  const lastCaller = new WeakMap<object, Memo>()

  function authenticate (tenant: Tenant, headers: IncomingHttpHeaders, queryKey: string | undefined, open: boolean, connection?: object): Caller | Promise<Caller> {
    const f = factsOf(tenant)
    if (connection === undefined) return authenticateNow(tenant, f, headers, queryKey, open, connection)
    const apikeyHeader = firstHeader(headers.apikey)
    const authorizationHeader = firstHeader(headers.authorization)
    const m = lastCaller.get(connection)
    if (m !== undefined && m.fp === f.fp && m.apikey === apikeyHeader && m.authorization === authorizationHeader &&
        m.queryKey === queryKey && m.open === open && (m.caller.exp === null || m.caller.exp > Math.floor(now() / 1000))) {
      return m.caller
    }
    const remember = (caller: Caller): Caller => {
      lastCaller.set(connection, { fp: f.fp, apikey: apikeyHeader, authorization: authorizationHeader, queryKey, open, caller })
      return caller
    }
    const c = authenticateNow(tenant, f, headers, queryKey, open, connection)
    return c instanceof Promise ? c.then(remember) : remember(c)
  }

  function authenticateNow (tenant: Tenant, f: TenantFacts, headers: IncomingHttpHeaders, queryKey: string | undefined, open: boolean, connection: object | undefined): Caller | Promise<Caller> {
    const headerKey = firstHeader(headers.apikey)
    let apikey = headerKey !== undefined && headerKey !== '' ? headerKey : queryKey !== '' ? queryKey : undefined

    let bearer: string | undefined
    const authorization = firstHeader(headers.authorization)
    if (authorization !== undefined && authorization !== '') {
      const m = /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(authorization)
      if (m === null) throw invalidToken('the Authorization header must be "Bearer <token>"')
      bearer = m[1]!
    }
    const bearerIsJwt = bearer !== undefined && looksLikeJwt(bearer)

    // An opaque key as bearer (supabase-js sends the key there when nobody is signed in):
    // it is the key when no apikey came; otherwise it must be that same key.
    let opaqueBearer: string | undefined
    if (bearer !== undefined && !bearerIsJwt) {
      if (apikey === undefined) apikey = bearer
      else if (apikey !== bearer) opaqueBearer = bearer
    }

    let kk: 'anon' | 'svc' | null = null
    if (apikey === undefined) {
      if (!open) {
        throw new NoApiKeyError({ hint: 'Send your project\'s public key in the apikey header (or ?apikey= in links).' })
      }
    } else {
      kk = f.known.get(apikey) ?? null
      if (kk === null) {
        kk = keyKind(tenant, apikey)
        if (kk !== null && f.known.size < 16) f.known.set(apikey, kk)
      }
      if (kk === null) {
        throw new InvalidApiKeyError({ details: 'the key does not belong to this project', hint: 'Use the public or secret key of this project.' })
      }
    }
    if (opaqueBearer !== undefined) {
      if (keyKind(tenant, opaqueBearer) !== null) {
        throw new InvalidApiKeyError({ details: 'the apikey header and the Authorization header carry different keys' })
      }
      const refused = invalidToken('the bearer token is neither a JWT nor this project\'s API key')
      unverified.add(refused)
      throw refused
    }

    if (bearerIsJwt) {
      const token = bearer!
      const key = keyFor(f.fp, token, connection)
      const hit = cachedVerdict(key)
      if (hit !== undefined) return { kind: hit.kind, claims: hit.claims, token, exp: hit.exp, keyKind: kk, cacheKey: key }
      return verifyToken(tenant, f, token, key).then((v) => ({ kind: v.kind, claims: v.claims, token, exp: v.exp, keyKind: kk, cacheKey: key }))
    }
    const kind: RoleKind = kk ?? 'anon'
    return { kind, claims: null, token: null, exp: null, keyKind: kk, cacheKey: `${f.fp}:${kind}` }
  }

  return { authenticate, facts: factsOf, clear: () => verified.clear() }
}

// Tokens the gateway signs for its upstreams, cached per (tenant record, caller) and
// re-used until near expiry: the REST token (tenant.jwt.upstream_secret, role = this
// tenant's Postgres role for the caller's kind, the caller's claims kept, exp capped by the
// caller's) and the auth upstream's service_role token for secret-key calls.
import type { JWTPayload } from 'jose'
import { LRUCache } from 'lru-cache'
import { signAsymmetric, signHS256, ROLE_CLAIMS } from '../../shared/index.js'
import { currentSigningKey, privateKeyObject, type Tenant } from '../../tenants/index.js'
import { roleKindOf, type Caller } from '../types.js'

export interface UpstreamTokenOptions {
  /** gateway.upstream_token_ttl_seconds */
  ttlSeconds: number
  now?: () => number
}

export interface UpstreamTokens {
  /**
   * The REST upstream's token (caller.cacheKey already binds the tenant record) as an
   * Authorization value (`Bearer <token>`), synchronous when cached: one string per signed
   * token, not one per request (undici checks and copies a header value on every request,
   * a string made once is flat and checked fast).
   */
  restAuthorization(tenant: Tenant, caller: Caller): string | Promise<string>
  /** service_role token for the auth upstream (secret key, no user JWT); synchronous when cached. */
  authService(tenant: Tenant, issuer: string, fp: string): string | Promise<string>
  clear(): void
}

interface Entry {
  token: string
  renewAt: number
  authorization: string
}

// Claims the gateway sets itself; the caller's values are not carried over.
const OWN_CLAIMS = new Set(['role', 'exp', 'iat', 'nbf', 'jti'])

/** `Bearer <token>`, the string made when the token was signed when it is the caller's. */
function authorizationOf(caller: Caller, token: string): string {
  const own = caller.upstream
  return own !== undefined && own.token === token ? own.authorization : `Bearer ${token}`
}

/** The Authorization value of the REST token `t` (a value, or a promise while it is signed). */
function authorizationFrom(t: string | Promise<string>, caller: Caller): string | Promise<string> {
  return typeof t === 'string' ? authorizationOf(caller, t) : t.then((token) => authorizationOf(caller, token))
}

export function createUpstreamTokens(opts: UpstreamTokenOptions): UpstreamTokens {
  const now = opts.now ?? Date.now
  const ttl = opts.ttlSeconds
  // Renew when a fifth of the lifetime is left, so a token never reaches the upstream
  // with less than that (clock skew, slow requests).
  const margin = Math.max(2, Math.floor(ttl / 5))
  const cache = new LRUCache<string, Entry>({ max: 50_000 })

  function rest(tenant: Tenant, caller: Caller): string | Promise<string> {
    const nowSec = Math.floor(now() / 1000)
    // The caller object a connection re-uses carries its token: no cache look-up at all.
    const own = caller.upstream
    if (own !== undefined && own.renewAt > nowSec) return own.token
    const key = `rest:${caller.cacheKey}`
    const hit = cache.get(key)
    if (hit !== undefined && hit.renewAt > nowSec) {
      caller.upstream = hit
      return hit.token
    }
    return signRest(tenant, caller, key, nowSec).then((token) => {
      caller.upstream = cache.get(key)
      return token
    })
  }

  async function signRest(tenant: Tenant, caller: Caller, key: string, nowSec: number): Promise<string> {
    const claims = restClaims(tenant, caller)
    let exp = nowSec + ttl
    if (caller.exp !== null && caller.exp < exp) exp = caller.exp
    const token = await signHS256(claims, {
      secret: tenant.jwt.upstream_secret,
      expiresInSeconds: exp - nowSec,
      now: nowSec,
    })
    // A token capped by the caller's exp is renewed only when it has expired (the caller
    // token has too, then); an uncapped one when the margin is reached.
    const renewAt = exp === nowSec + ttl ? exp - margin : exp
    cache.set(key, { token, renewAt, authorization: `Bearer ${token}` }, { ttl: Math.max(1, exp - nowSec) * 1000 })
    return token
  }

  function authService(tenant: Tenant, issuer: string, fp: string): string | Promise<string> {
    const nowSec = Math.floor(now() / 1000)
    const key = `auth-svc:${fp}`
    const hit = cache.get(key)
    return hit !== undefined && hit.renewAt > nowSec ? hit.token : signAuthService(tenant, issuer, key, nowSec)
  }

  async function signAuthService(tenant: Tenant, issuer: string, key: string, nowSec: number): Promise<string> {
    const token = await signServiceToken(tenant, issuer, ttl, nowSec)
    cache.set(key, { token, renewAt: nowSec + ttl - margin, authorization: `Bearer ${token}` }, { ttl: ttl * 1000 })
    return token
  }

  const restAuthorization = (tenant: Tenant, caller: Caller): string | Promise<string> =>
    authorizationFrom(rest(tenant, caller), caller)
  return { restAuthorization, authService, clear: () => cache.clear() }
}

/** The REST token's claims: the caller's, but for those the gateway sets, and the tenant's role for the caller's kind. */
function restClaims(tenant: Tenant, caller: Caller): JWTPayload {
  const claims: JWTPayload = {}
  if (caller.claims !== null) {
    for (const name in caller.claims) if (!OWN_CLAIMS.has(name)) claims[name] = caller.claims[name]
  }
  claims.role = tenant.roles[roleKindOf(caller)]
  return claims
}

/**
 * The auth upstream's service_role token. Once the legacy secret is retired the auth engine
 * refuses HS256: sign with the key that signs the tenant's own tokens (docs/tenant-state.md).
 */
function signServiceToken(tenant: Tenant, issuer: string, ttl: number, nowSec: number): Promise<string> {
  const claims = { role: ROLE_CLAIMS.svc }
  const signer = tenant.jwt.legacy_secret_retired !== undefined ? currentSigningKey(tenant.jwt) : null
  if (signer === null)
    return signHS256(claims, { secret: tenant.jwt.secret, issuer, expiresInSeconds: ttl, now: nowSec })
  const privateKey = privateKeyObject(signer.private_key)
  return signAsymmetric(claims, {
    alg: signer.alg,
    kid: signer.kid,
    privateKey,
    issuer,
    expiresInSeconds: ttl,
    now: nowSec,
  })
}

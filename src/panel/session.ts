// Panel sessions: JWTs the control panel issues to its users, verified here with the
// panel's key (config.panel.session_secret for HS256, or config.panel.jwks_url through a
// remote JWKS), algorithms pinned to config.panel.algorithms, `exp` required, `iss`/`aud`
// checked when configured. Claims: `sub` (panel user id), `email`, `orgs` (organization ids
// the user is a member of), optional `email_verified` (default true: the panel vouches).
import { createRemoteJWKSet, jwtVerify, type JWTPayload, type JWTVerifyGetKey, type JWTHeaderParameters } from 'jose'
import type { Config } from '../config/index.js'
import { ConfigError, describeJwtError, hmacKey, signHS256 } from '../shared/index.js'
import { InvalidSessionError } from './errors.js'

/** The verified panel user. */
export interface PanelSession {
  /** Panel user id (`sub`). */
  userId: string
  email: string | null
  /** Whether the panel vouches for the email (claim `email_verified`, default true). */
  emailVerified: boolean
  /** Organization ids the user is a member of (`orgs`). */
  orgs: string[]
  /** `exp` (seconds). */
  exp: number
}

export interface SessionVerifier {
  /** Verifies a panel session token; throws InvalidSessionError (401) when it is not valid. */
  verify(token: string): Promise<PanelSession>
}

const SYMMETRIC = /^HS(256|384|512)$/
const ASYMMETRIC = /^(RS|PS|ES)(256|384|512)$|^EdDSA$|^Ed25519$/

/** Builds the verifier; misconfiguration throws a ConfigError at boot, never at request time. */
export function createSessionVerifier(panel: Config['panel'], opts: { now?: () => Date } = {}): SessionVerifier {
  const algorithms = [...panel.algorithms]
  if (algorithms.length === 0) throw new ConfigError('panel.algorithms must name at least one JWT algorithm')
  for (const a of algorithms) {
    if (!SYMMETRIC.test(a) && !ASYMMETRIC.test(a))
      throw new ConfigError(`panel.algorithms: ${JSON.stringify(a)} is not a supported JWT algorithm`)
  }
  const secret = panel.session_secret !== undefined ? hmacKey(panel.session_secret) : null
  const jwks =
    panel.jwks_url !== undefined && panel.jwks_url !== '' ? createRemoteJWKSet(new URL(panel.jwks_url)) : null
  if (secret === null && jwks === null) {
    throw new ConfigError('the panel needs panel.session_secret (HS256) or panel.jwks_url to verify panel sessions')
  }
  if (algorithms.some((a) => SYMMETRIC.test(a)) && secret === null && !algorithms.some((a) => ASYMMETRIC.test(a))) {
    throw new ConfigError('panel.algorithms names only HMAC algorithms but panel.session_secret is not set')
  }
  if (!algorithms.some((a) => SYMMETRIC.test(a)) && jwks === null) {
    throw new ConfigError('panel.algorithms names only public-key algorithms but panel.jwks_url is not set')
  }

  const getKey: JWTVerifyGetKey = async (header: JWTHeaderParameters, token) => {
    if (SYMMETRIC.test(header.alg)) {
      if (secret === null) throw new InvalidSessionError('token algorithm is not allowed')
      return secret
    }
    if (jwks === null) throw new InvalidSessionError('token algorithm is not allowed')
    return jwks(header, token)
  }

  return {
    async verify(token) {
      let payload: JWTPayload
      try {
        const r = await jwtVerify(token, getKey, {
          algorithms,
          requiredClaims: ['exp', 'sub'],
          ...(panel.issuer !== undefined ? { issuer: panel.issuer } : {}),
          ...(panel.audience !== undefined ? { audience: panel.audience } : {}),
          ...(opts.now !== undefined ? { currentDate: opts.now() } : {}),
        })
        payload = r.payload
      } catch (err) {
        if (err instanceof InvalidSessionError) throw err
        throw new InvalidSessionError(describeJwtError(err), { cause: err })
      }
      return sessionOf(payload)
    },
  }
}

/** The panel session a verified token's claims describe (sub, orgs, email). */
function sessionOf(payload: JWTPayload): PanelSession {
  const sub = payload.sub
  if (typeof sub !== 'string' || sub === '' || sub.length > 255)
    throw new InvalidSessionError('claim "sub" must be the panel user id')
  const orgs = (payload as { orgs?: unknown }).orgs
  if (!Array.isArray(orgs) || !orgs.every((o) => typeof o === 'string'))
    throw new InvalidSessionError('claim "orgs" must be an array of organization ids')
  const email = (payload as { email?: unknown }).email
  if (email !== undefined && email !== null && typeof email !== 'string')
    throw new InvalidSessionError('claim "email" must be a string')
  const verified = (payload as { email_verified?: unknown }).email_verified
  return {
    userId: sub,
    email: typeof email === 'string' && email !== '' ? email : null,
    emailVerified: verified !== false,
    orgs: orgs as string[],
    exp: payload.exp as number,
  }
}

export interface SignPanelSessionOptions {
  /** The HS256 secret (config.panel.session_secret). */
  secret: string
  /** Panel user id (`sub`). */
  userId: string
  email?: string | null
  /** Organization ids the user is a member of. */
  orgs: string[]
  /** Lifetime in seconds (default 3600); negative gives an expired token (tests). */
  expiresIn?: number
  issuer?: string
  audience?: string
  /** Issue time, seconds since the epoch (default now). */
  now?: number
}

/**
 * Signs a panel session as the control panel would (HS256). For the development stack and
 * tests; a real panel issues its own tokens (HS256 with the shared secret, or keys
 * published at panel.jwks_url).
 */
export async function signPanelSession(o: SignPanelSessionOptions): Promise<string> {
  const claims: JWTPayload = { orgs: [...o.orgs] }
  if (o.email !== undefined && o.email !== null) claims.email = o.email
  return signHS256(claims, {
    secret: o.secret,
    expiresInSeconds: o.expiresIn ?? 3600,
    subject: o.userId,
    ...(o.issuer !== undefined ? { issuer: o.issuer } : {}),
    ...(o.audience !== undefined ? { audience: o.audience } : {}),
    ...(o.now !== undefined ? { now: o.now } : {}),
  })
}

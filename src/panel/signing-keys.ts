// The signing keys the panel shows and changes: the view (kid, algorithm, which one signs,
// the public JWK; never a private part), rotation (a new key that signs from now on, the
// older ones keep verifying) and revocation (the key leaves the record: its tokens stop
// verifying everywhere once the record's invalidation reaches each process).
import {
  ASYMMETRIC_ALGORITHMS, SigningKeyChangeError, currentSigningKey, generateSigningKey, runtimeSigningKey, signingAlgorithmOf,
  withRevokedKey, withRotatedKey, type AsymmetricAlgorithm, type PublicSigningJwk, type Tenant
} from '../tenants/index.js'
import { SigningKeyInUseError, SigningKeyNotFoundError, ValidationError } from './errors.js'

export interface SigningKeysView {
  signing_algorithm: 'HS256' | AsymmetricAlgorithm
  keys: Array<{ kid: string, alg: AsymmetricAlgorithm, current: boolean, public_jwk: PublicSigningJwk }>
}

export function signingKeysView (t: Tenant): SigningKeysView {
  const cur = currentSigningKey(t.jwt)?.kid
  return {
    signing_algorithm: signingAlgorithmOf(t.jwt),
    keys: (t.jwt.signing_keys ?? []).map((k) => ({ kid: k.kid, alg: k.alg, current: k.kid === cur, public_jwk: k.public_jwk }))
  }
}

/** The record's jwt block with a new current key; `body` may name `alg` (ES256, RS256). */
export async function rotatedJwt (t: Tenant, body: unknown): Promise<{ jwt: Tenant['jwt'], kid: string }> {
  let alg: AsymmetricAlgorithm
  const requested = typeof body === 'object' && body !== null && !Array.isArray(body) && Object.hasOwn(body, 'alg')
    ? (body as { alg: unknown }).alg
    : undefined
  if (body !== undefined && body !== null && (typeof body !== 'object' || Array.isArray(body))) throw new ValidationError('send a JSON object ({} or {"alg": "ES256"})')
  for (const k of Object.keys((body ?? {}) as object)) if (k !== 'alg') throw new ValidationError(`${k}: unknown field (allowed: alg)`)
  if (requested === undefined) {
    const now = signingAlgorithmOf(t.jwt)
    alg = now === 'HS256' ? 'ES256' : now
  } else if (typeof requested === 'string' && (ASYMMETRIC_ALGORITHMS as readonly string[]).includes(requested)) {
    alg = requested as AsymmetricAlgorithm
  } else {
    throw new ValidationError(`alg: must be one of ${ASYMMETRIC_ALGORITHMS.join(', ')}`)
  }
  const key = runtimeSigningKey(await generateSigningKey(alg))
  return { jwt: withRotatedKey(t.jwt, key), kid: key.kid }
}

/** The record's jwt block without `kid` (404 for an unknown kid, 409 for the key that signs now). */
export function revokedJwt (t: Tenant, database: string, kid: string): Tenant['jwt'] {
  try {
    return withRevokedKey(t.jwt, kid)
  } catch (err) {
    if (err instanceof SigningKeyChangeError) {
      if (err.reason === 'unknown_kid') throw new SigningKeyNotFoundError(database, kid, { cause: err })
      throw new SigningKeyInUseError(kid, { cause: err, hint: 'Rotate first (POST .../api/signing-keys/rotate), then revoke this key.' })
    }
    throw err
  }
}

// The signing keys the panel shows and changes: the view (kid, algorithm, which one signs,
// the public JWK; never a private part), rotation (a new key that signs from now on, the
// older ones keep verifying) and revocation (the key leaves the record: its tokens stop
// verifying everywhere once the record's invalidation reaches each process).
import {
  ASYMMETRIC_ALGORITHMS,
  SigningKeyChangeError,
  currentSigningKey,
  generateSigningKey,
  runtimeSigningKey,
  signingAlgorithmOf,
  withRetiredLegacySecret,
  withRevokedKey,
  withRotatedKey,
  type AsymmetricAlgorithm,
  type PublicSigningJwk,
  type Tenant,
} from '../tenants/index.js'
import {
  LegacySecretRetireRefusedError,
  SigningKeyInUseError,
  SigningKeyNotFoundError,
  ValidationError,
} from './errors.js'

interface SigningKeysView {
  signing_algorithm: 'HS256' | AsymmetricAlgorithm
  /** false once the legacy HS256 secret is retired (its tokens are refused). */
  legacy_secret_active: boolean
  /** Revoked keys (tombstones): kid, when, by whom. */
  revoked_keys: Array<{ kid: string; revoked_at: string; revoked_by: string }>
  keys: Array<{ kid: string; alg: AsymmetricAlgorithm; current: boolean; public_jwk: PublicSigningJwk }>
}

export function signingKeysView(t: Tenant): SigningKeysView {
  const cur = currentSigningKey(t.jwt)?.kid
  return {
    signing_algorithm: signingAlgorithmOf(t.jwt),
    legacy_secret_active: t.jwt.legacy_secret_retired === undefined,
    revoked_keys: (t.jwt.revoked_keys ?? []).map((r) => ({
      kid: r.kid,
      revoked_at: r.revoked_at,
      revoked_by: r.revoked_by,
    })),
    keys: (t.jwt.signing_keys ?? []).map((k) => ({
      kid: k.kid,
      alg: k.alg,
      current: k.kid === cur,
      public_jwk: k.public_jwk,
    })),
  }
}

/** The record's jwt block with a new current key; `body` may name `alg` (ES256, RS256). */
export async function rotatedJwt(t: Tenant, body: unknown): Promise<{ jwt: Tenant['jwt']; kid: string }> {
  let alg: AsymmetricAlgorithm
  const requested =
    typeof body === 'object' && body !== null && !Array.isArray(body) && Object.hasOwn(body, 'alg')
      ? (body as { alg: unknown }).alg
      : undefined
  if (body !== undefined && body !== null && (typeof body !== 'object' || Array.isArray(body)))
    throw new ValidationError('send a JSON object ({} or {"alg": "ES256"})')
  for (const k of Object.keys((body ?? {}) as object))
    if (k !== 'alg') throw new ValidationError(`${k}: unknown field (allowed: alg)`)
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

/**
 * The record's jwt block without `kid` and with its tombstone (404 for an unknown or already
 * revoked kid, 409 for the key that signs now).
 */
export function revokedJwt(t: Tenant, database: string, kid: string, by: string): Tenant['jwt'] {
  try {
    return withRevokedKey(t.jwt, kid, { by, at: new Date().toISOString() })
  } catch (err) {
    if (err instanceof SigningKeyChangeError) {
      if (err.reason === 'unknown_kid')
        throw new SigningKeyNotFoundError(database, kid, { cause: err, details: err.message })
      throw new SigningKeyInUseError(kid, {
        cause: err,
        hint: 'Rotate first (POST .../api/signing-keys/rotate), then revoke this key.',
      })
    }
    throw err
  }
}

/** The record's jwt block with the legacy HS256 secret retired (409 while it still signs, or once retired). */
export function retiredLegacyJwt(t: Tenant, by: string): Tenant['jwt'] {
  try {
    return withRetiredLegacySecret(t.jwt, { by, at: new Date().toISOString() })
  } catch (err) {
    if (err instanceof SigningKeyChangeError) {
      throw new LegacySecretRetireRefusedError(err.message, {
        cause: err,
        hint:
          err.reason === 'no_asymmetric_key'
            ? 'Rotate first (POST .../api/signing-keys/rotate {"alg": "ES256"}), then retire the legacy secret.'
            : null,
      })
    }
    throw err
  }
}

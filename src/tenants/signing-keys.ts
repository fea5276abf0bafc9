// Asymmetric signing keys of a tenant (ES256, RS256) beside its legacy HS256 secret: the
// form a tenant file holds (`jwt.signing_keys`: kid, alg, private key as a JWK JSON string
// or a PKCS#8 PEM, `${ENV}` allowed), the public JWK every record carries so the gateway
// verifies without the private part, and the pure steps of rotation and revocation.
// The key that signs is the newest listed key of `jwt.signing_algorithm`; HS256 signs with
// `jwt.secret`. Every listed key verifies; a revoked key leaves the list and stays behind as a
// tombstone (`jwt.revoked_keys`: kid, thumbprint, when, by whom) that nothing removes, so it
// never verifies again (docs/tenant-state.md). The legacy secret can be retired the same way
// once an asymmetric key signs (`jwt.legacy_secret_retired`).
import { createHash, createPrivateKey, createPublicKey, randomUUID, type KeyObject } from 'node:crypto'

export const SIGNING_ALGORITHMS = ['HS256', 'ES256', 'RS256'] as const
export type SigningAlgorithm = (typeof SIGNING_ALGORITHMS)[number]
export const ASYMMETRIC_ALGORITHMS = ['ES256', 'RS256'] as const
export type AsymmetricAlgorithm = (typeof ASYMMETRIC_ALGORITHMS)[number]

/** A key as a tenant file holds it. */
export interface SigningKeyFile {
  kid: string
  alg: AsymmetricAlgorithm
  /** A private JWK as JSON, or a PKCS#8 PEM. */
  private_key: string
}

/** The public half as published in the JWKS (GoTrue's member shape). */
export interface PublicSigningJwk {
  alg: AsymmetricAlgorithm
  crv?: string
  e?: string
  ext: true
  key_ops: ['verify']
  kid: string
  kty: 'EC' | 'RSA'
  n?: string
  use: 'sig'
  x?: string
  y?: string
}

/** A key as the runtime tenant record holds it: the file's fields plus the public JWK. */
export interface TenantSigningKey extends SigningKeyFile {
  public_jwk: PublicSigningJwk
}

export const KID = /^[A-Za-z0-9._-]{1,128}$/

const parsed = new Map<string, KeyObject>()

/** The private KeyObject of a key's text (cached: records re-use the same text). */
export function privateKeyObject(text: string): KeyObject {
  let key = parsed.get(text)
  if (key === undefined) {
    const trimmed = text.trim()
    key = trimmed.startsWith('{')
      ? createPrivateKey({ key: JSON.parse(trimmed) as import('node:crypto').JsonWebKey, format: 'jwk' })
      : createPrivateKey({ key: trimmed, format: 'pem' })
    if (parsed.size > 10_000) parsed.clear()
    parsed.set(text, key)
  }
  return key
}

/** Why a listed key cannot be used (null when it can). Never echoes key material. */
export function signingKeyProblem(key: SigningKeyFile): string | null {
  let k: KeyObject
  try {
    k = privateKeyObject(key.private_key)
  } catch {
    return 'private_key: not a private key (a private JWK as JSON, or a PKCS#8 PEM)'
  }
  if (k.type !== 'private') return 'private_key: not a private key'
  const d = k.asymmetricKeyDetails ?? {}
  if (key.alg === 'ES256' && !(k.asymmetricKeyType === 'ec' && d.namedCurve === 'prime256v1')) {
    return 'private_key: an ES256 key must be an EC key on the P-256 curve'
  }
  if (key.alg === 'RS256' && !(k.asymmetricKeyType === 'rsa' && (d.modulusLength ?? 0) >= 2048)) {
    return 'private_key: an RS256 key must be an RSA key of at least 2048 bits'
  }
  return null
}

/** The public JWK of a listed key (throws when the key is unusable; validate first). */
function publicJwkOf(key: SigningKeyFile): PublicSigningJwk {
  const pub = createPublicKey(privateKeyObject(key.private_key)).export({ format: 'jwk' }) as Record<string, string>
  const common = { ext: true as const, key_ops: ['verify'] as ['verify'], kid: key.kid, use: 'sig' as const }
  return key.alg === 'ES256'
    ? { alg: 'ES256', crv: pub.crv, ...common, kty: 'EC', x: pub.x, y: pub.y }
    : { alg: 'RS256', e: pub.e, ...common, kty: 'RSA', n: pub.n }
}

/** The runtime form of a listed key. */
export function runtimeSigningKey(key: SigningKeyFile): TenantSigningKey {
  return { kid: key.kid, alg: key.alg, private_key: key.private_key, public_jwk: publicJwkOf(key) }
}

/** A new key pair (jose), the private half as a JWK JSON string and a random kid. */
export async function generateSigningKey(alg: AsymmetricAlgorithm): Promise<SigningKeyFile> {
  // Loaded here only: every `gatehouse tenants` command loads this module, few generate keys.
  const { exportJWK, generateKeyPair } = await import('jose')
  const { privateKey } = await generateKeyPair(alg, {
    extractable: true,
    ...(alg === 'RS256' ? { modulusLength: 2048 } : {}),
  })
  const jwk = await exportJWK(privateKey)
  return { kid: randomUUID(), alg, private_key: JSON.stringify(jwk) }
}

/** A revoked key, kept for good. */
export interface RevokedKey {
  kid: string
  /** RFC 7638 thumbprint of the public key (absent when the key was not readable). */
  thumbprint?: string
  revoked_at: string
  revoked_by: string
}

/** Who changed something, and when (tombstones, retirement). */
export interface ChangeStamp {
  by: string
  at: string
}

interface JwtKeys<K extends SigningKeyFile> {
  signing_algorithm?: SigningAlgorithm
  signing_keys?: K[]
  revoked_keys?: RevokedKey[]
  legacy_secret_retired?: { retired_at: string; retired_by: string }
}

/** The RFC 7638 thumbprint (SHA-256, base64url) of a public JWK. */
function jwkThumbprint(jwk: PublicSigningJwk): string {
  const members =
    jwk.kty === 'EC' ? { crv: jwk.crv, kty: jwk.kty, x: jwk.x, y: jwk.y } : { e: jwk.e, kty: jwk.kty, n: jwk.n }
  return createHash('sha256').update(JSON.stringify(members)).digest('base64url')
}

/** The thumbprint of a listed key, or null when its private key is unreadable. */
function thumbprintOf(key: SigningKeyFile): string | null {
  try {
    return jwkThumbprint(publicJwkOf(key))
  } catch {
    return null
  }
}

/** The tombstone a key matches (same kid, or the same key under another kid), or null. */
function revocationOf(key: SigningKeyFile, revoked: readonly RevokedKey[]): RevokedKey | null {
  if (revoked.length === 0) return null
  const byKid = revoked.find((r) => r.kid === key.kid)
  if (byKid !== undefined) return byKid
  const tp = thumbprintOf(key)
  return tp === null ? null : (revoked.find((r) => r.thumbprint === tp) ?? null)
}

/** The keys without every revoked one. */
export function withoutRevoked<K extends SigningKeyFile>(keys: K[], revoked: readonly RevokedKey[]): K[] {
  return revoked.length === 0 ? keys : keys.filter((k) => revocationOf(k, revoked) === null)
}

/** The listed keys a tombstone matches, with it (a file that still lists a revoked key). */
export function revokedKeysListed(
  jwt: JwtKeys<SigningKeyFile>,
  revoked: readonly RevokedKey[] = jwt.revoked_keys ?? [],
): Array<{ kid: string; tombstone: RevokedKey }> {
  const out: Array<{ kid: string; tombstone: RevokedKey }> = []
  for (const k of jwt.signing_keys ?? []) {
    const r = revocationOf(k, revoked)
    if (r !== null) out.push({ kid: k.kid, tombstone: r })
  }
  return out
}

/** The union of two tombstone lists (the first one's entry wins for a kid both hold). */
export function mergeTombstones(a: readonly RevokedKey[] = [], b: readonly RevokedKey[] = []): RevokedKey[] {
  const out = [...a]
  for (const r of b) if (!out.some((x) => x.kid === r.kid)) out.push(r)
  return out
}

/** The algorithm a tenant signs with (records written before signing keys existed: HS256). */
export function signingAlgorithmOf(jwt: JwtKeys<SigningKeyFile>): SigningAlgorithm {
  return jwt.signing_algorithm ?? 'HS256'
}

/** The key that signs new tokens, or null when the tenant signs with its HS256 secret. */
export function currentSigningKey<K extends SigningKeyFile>(jwt: JwtKeys<K>): K | null {
  const alg = signingAlgorithmOf(jwt)
  if (alg === 'HS256') return null
  const keys = jwt.signing_keys ?? []
  for (let i = keys.length - 1; i >= 0; i--) if (keys[i]!.alg === alg) return keys[i]!
  return null
}

/** Why rotation or revocation was refused (the CLI and the panel map it to their errors). */
export class SigningKeyChangeError extends Error {
  constructor(
    readonly reason: 'unknown_kid' | 'in_use' | 'no_asymmetric_key' | 'already_retired',
    message: string,
  ) {
    super(message)
  }
}

/**
 * The jwt block after a rotation: `key` appended and the signing algorithm set to its alg,
 * so it signs from now on; every earlier key keeps verifying.
 */
export function withRotatedKey<J extends JwtKeys<K>, K extends SigningKeyFile>(jwt: J, key: K): J {
  return { ...jwt, signing_algorithm: key.alg, signing_keys: [...(jwt.signing_keys ?? []), key] }
}

/**
 * The jwt block without `kid` and with its tombstone; refuses an unknown (or already revoked)
 * kid and the key that signs now.
 */
export function withRevokedKey<J extends JwtKeys<K>, K extends SigningKeyFile>(
  jwt: J,
  kid: string,
  stamp: ChangeStamp,
): J {
  const keys = jwt.signing_keys ?? []
  const key = keys.find((k) => k.kid === kid)
  if (key === undefined) {
    const gone = (jwt.revoked_keys ?? []).find((r) => r.kid === kid)
    throw new SigningKeyChangeError(
      'unknown_kid',
      gone !== undefined
        ? `signing key "${kid}" was already revoked (${gone.revoked_at} by ${gone.revoked_by})`
        : `no signing key with kid "${kid}"`,
    )
  }
  if (currentSigningKey(jwt)?.kid === kid) {
    throw new SigningKeyChangeError(
      'in_use',
      `key "${kid}" signs this database's tokens now: rotate to a new key first (or set jwt.signing_algorithm: HS256), then revoke it`,
    )
  }
  const tombstone: RevokedKey = {
    kid,
    ...(thumbprintOf(key) !== null ? { thumbprint: thumbprintOf(key)! } : {}),
    revoked_at: stamp.at,
    revoked_by: stamp.by,
  }
  return {
    ...jwt,
    signing_keys: keys.filter((k) => k.kid !== kid),
    revoked_keys: [...(jwt.revoked_keys ?? []), tombstone],
  }
}

/** The jwt block with the legacy HS256 secret retired; only while an asymmetric key signs. */
export function withRetiredLegacySecret<J extends JwtKeys<K>, K extends SigningKeyFile>(jwt: J, stamp: ChangeStamp): J {
  if (jwt.legacy_secret_retired !== undefined) {
    throw new SigningKeyChangeError(
      'already_retired',
      `the legacy JWT secret was already retired (${jwt.legacy_secret_retired.retired_at} by ${jwt.legacy_secret_retired.retired_by})`,
    )
  }
  if (currentSigningKey(jwt) === null) {
    throw new SigningKeyChangeError(
      'no_asymmetric_key',
      "the legacy JWT secret still signs this database's tokens: rotate to an ES256 or RS256 key first, then retire it",
    )
  }
  return { ...jwt, legacy_secret_retired: { retired_at: stamp.at, retired_by: stamp.by } }
}

/** The keys as people see them: kid, alg, whether it signs now (never private parts). */
export function describeSigningKeys(
  jwt: JwtKeys<SigningKeyFile>,
): Array<{ kid: string; alg: AsymmetricAlgorithm; current: boolean }> {
  const cur = currentSigningKey(jwt)?.kid
  return (jwt.signing_keys ?? []).map((k) => ({ kid: k.kid, alg: k.alg, current: k.kid === cur }))
}

/**
 * Why `next` may not replace `current` (null when it may): a tombstone or the retirement of
 * the legacy secret would go, or a revoked key would verify again.
 */
export function revivalProblem(current: JwtKeys<SigningKeyFile> | null, next: JwtKeys<SigningKeyFile>): string | null {
  const kept = next.revoked_keys ?? []
  for (const r of current?.revoked_keys ?? []) {
    if (!kept.some((x) => x.kid === r.kid))
      return `signing key "${r.kid}" was revoked (${r.revoked_at} by ${r.revoked_by}): its tombstone cannot be removed`
  }
  const back = revokedKeysListed(next, kept)[0]
  if (back !== undefined) {
    return `signing key "${back.kid}" was revoked (${back.tombstone.revoked_at} by ${back.tombstone.revoked_by}) and cannot be added again: generate a new key (rotate)`
  }
  if (current?.legacy_secret_retired !== undefined && next.legacy_secret_retired === undefined) {
    return `the legacy JWT secret was retired (${current.legacy_secret_retired.retired_at} by ${current.legacy_secret_retired.retired_by}) and cannot be brought back`
  }
  return null
}

// jose wrappers shared by the gateway, the engines and the panel: HMAC keys from
// tenant secrets, signing, and verification with the algorithm pinned and exp required.
// Callers translate jose errors into their own protocol's errors (see describeJwtError).
import {
  SignJWT,
  jwtVerify,
  errors as joseErrors,
  type JWK,
  type JWTHeaderParameters,
  type JWTPayload,
  type JWTVerifyOptions,
} from 'jose'
import { createHmac, hash, createPublicKey, sign as cryptoSign, type KeyObject } from 'node:crypto'

const keyCache = new Map<string, Uint8Array>()

/** The HMAC key for a secret string (cached: tenants re-use the same secret). */
export function hmacKey(secret: string): Uint8Array {
  let key = keyCache.get(secret)
  if (!key) {
    key = new TextEncoder().encode(secret)
    if (keyCache.size > 10_000) keyCache.clear()
    keyCache.set(secret, key)
  }
  return key
}

export interface SignOptions {
  secret: string
  expiresInSeconds: number
  issuer?: string
  audience?: string
  subject?: string
  now?: number // seconds since epoch; defaults to the clock
  kid?: string
}

export async function signHS256(claims: JWTPayload, opts: SignOptions): Promise<string> {
  const iat = opts.now ?? Math.floor(Date.now() / 1000)
  const header: { alg: 'HS256'; typ: 'JWT'; kid?: string } = { alg: 'HS256', typ: 'JWT' }
  if (opts.kid) header.kid = opts.kid
  let jwt = new SignJWT({ ...claims })
    .setProtectedHeader(header)
    .setIssuedAt(iat)
    .setExpirationTime(iat + opts.expiresInSeconds)
  if (opts.issuer) jwt = jwt.setIssuer(opts.issuer)
  if (opts.audience) jwt = jwt.setAudience(opts.audience)
  if (opts.subject) jwt = jwt.setSubject(opts.subject)
  return jwt.sign(hmacKey(opts.secret))
}

/**
 * The same token as signHS256, signed synchronously with node:crypto (no WebCrypto job
 * round trip): for hot paths such as the auth engine's refresh grant. Claims layout:
 * the given claims, then iat, exp, iss, aud, sub (as jose's builder adds them).
 */
export function signHS256Sync(claims: JWTPayload, opts: SignOptions): string {
  const iat = opts.now ?? Math.floor(Date.now() / 1000)
  const header: { alg: 'HS256'; typ: 'JWT'; kid?: string } = { alg: 'HS256', typ: 'JWT' }
  if (opts.kid) header.kid = opts.kid
  const payload: JWTPayload = { ...claims, iat, exp: iat + opts.expiresInSeconds }
  if (opts.issuer) payload.iss = opts.issuer
  if (opts.audience) payload.aud = opts.audience
  if (opts.subject) payload.sub = opts.subject
  const input =
    Buffer.from(JSON.stringify(header)).toString('base64url') +
    '.' +
    Buffer.from(JSON.stringify(payload)).toString('base64url')
  return input + '.' + createHmac('sha256', hmacKey(opts.secret)).update(input).digest('base64url')
}

interface VerifyOptions {
  secret: string
  issuer?: string | string[]
  audience?: string | string[]
  /** Current time for tests (jose currentDate). */
  currentDate?: Date
}

export interface AsymmetricSignOptions extends Omit<SignOptions, 'secret' | 'kid'> {
  alg: 'ES256' | 'RS256'
  kid: string
  privateKey: KeyObject
}

/**
 * An ECDSA P-256 signature as node:crypto returns it by default (DER: SEQUENCE of the
 * INTEGERs r and s, each minimal, with a leading 0x00 when its high bit is set) in the JWS
 * form of RFC 7518 §3.4: r and s as 32-byte big-endian numbers, concatenated.
 */
export function es256DerToJose(der: Buffer): Buffer {
  const out = Buffer.alloc(64)
  // The SEQUENCE header is two bytes (a P-256 signature's body is at most 72 bytes).
  let at = 2
  for (let part = 0; part < 2; part++) {
    if (der[at] !== 0x02) throw new Error('ES256 signature: not a DER INTEGER')
    let length = der[at + 1]!
    let start = at + 2
    at = start + length
    while (length > 32 && der[start] === 0) {
      start++
      length--
    }
    if (length > 32) throw new Error('ES256 signature: integer longer than 32 bytes')
    der.copy(out, part * 32 + 32 - length, start, start + length)
  }
  return out
}

/**
 * Signs with an asymmetric key; the header carries `kid`. Claims laid out as signHS256's.
 * node:crypto's one-shot sign, synchronously (ES256 with the JWS signature encoding of RFC
 * 7518 §3.4; RS256 as RSASSA-PKCS1-v1_5): no WebCrypto job, promise and key handle per token
 * (less CPU per ES256 signature than jose, docs/benchmarks.md). The key goes to
 * crypto.sign as the KeyObject itself and the DER signature is re-encoded here: asking for
 * `{ key, dsaEncoding: 'ieee-p1363' }` instead costs twice the CPU per signature in Node 24
 * (the options object is checked as a CryptoKey and as a KeyObject, each check making a
 * TypeError with its stack trace, and node's re-encoding costs more than es256DerToJose).
 */
export async function signAsymmetric(claims: JWTPayload, opts: AsymmetricSignOptions): Promise<string> {
  return signAsymmetricSync(claims, opts)
}

/** The registered claims signAsymmetric adds after the given ones. */
const ADDED_CLAIMS = ['iat', 'exp', 'iss', 'aud', 'sub'] as const

/**
 * signAsymmetric's token, synchronously (for hot paths such as the auth engine's refresh
 * grant). The payload is the given claims' JSON with iat, exp, iss, aud and sub appended as
 * text: the bytes JSON.stringify writes for `{ ...claims, iat, exp, ... }` without copying the
 * claims into a new object first (the copy cost more than the stringify). Claims that carry one
 * of those names themselves go through the copy, which keeps their place.
 */
export function signAsymmetricSync(claims: JWTPayload, opts: AsymmetricSignOptions): string {
  const iat = opts.now ?? Math.floor(Date.now() / 1000)
  const header = { alg: opts.alg, typ: 'JWT', kid: opts.kid }
  const input =
    Buffer.from(JSON.stringify(header)).toString('base64url') +
    '.' +
    Buffer.from(payloadJson(claims, iat, opts)).toString('base64url')
  const signature = cryptoSign('sha256', Buffer.from(input), opts.privateKey)
  return input + '.' + (opts.alg === 'ES256' ? es256DerToJose(signature) : signature).toString('base64url')
}

function payloadJson(claims: JWTPayload, iat: number, opts: Omit<SignOptions, 'secret' | 'kid'>): string {
  const own = JSON.stringify(claims)
  const plain =
    own !== undefined &&
    own[0] === '{' &&
    typeof (claims as { toJSON?: unknown }).toJSON !== 'function' &&
    !ADDED_CLAIMS.some((k) => Object.hasOwn(claims, k))
  if (!plain) {
    const payload: JWTPayload = { ...claims, iat, exp: iat + opts.expiresInSeconds }
    if (opts.issuer) payload.iss = opts.issuer
    if (opts.audience) payload.aud = opts.audience
    if (opts.subject) payload.sub = opts.subject
    return JSON.stringify(payload)
  }
  let added = `"iat":${JSON.stringify(iat)},"exp":${JSON.stringify(iat + opts.expiresInSeconds)}`
  if (opts.issuer) added += `,"iss":${JSON.stringify(opts.issuer)}`
  if (opts.audience) added += `,"aud":${JSON.stringify(opts.audience)}`
  if (opts.subject) added += `,"sub":${JSON.stringify(opts.subject)}`
  return own.length === 2 ? `{${added}}` : `${own.slice(0, -1)},${added}}`
}

/** A public key a token may be verified with: only tokens whose header names this kid and alg. */
export interface VerificationKey {
  kid: string
  alg: 'ES256' | 'RS256'
  public_jwk: JWK
}

export interface KeysVerifyOptions extends VerifyOptions {
  /** The asymmetric keys of the same tenant as `secret`; nobody else's. */
  keys: readonly VerificationKey[]
  /** The legacy HS256 secret was retired: HS256 tokens are refused (LegacySecretRetiredError). */
  legacyRetired?: boolean
}

/** An HS256 token of a tenant whose legacy secret was retired (docs/tenant-state.md). */
export class LegacySecretRetiredError extends joseErrors.JOSEError {
  static override code = 'ERR_GATEHOUSE_LEGACY_SECRET_RETIRED'
  override code = 'ERR_GATEHOUSE_LEGACY_SECRET_RETIRED'
  constructor() {
    super(
      'token is signed with the legacy JWT secret (HS256), which this project retired; sign in again for a token of its current signing key',
    )
  }
}

/** A token signed with an asymmetric algorithm whose kid is none of the given keys. */
export class UnknownKeyIdError extends joseErrors.JOSEError {
  static override code = 'ERR_GATEHOUSE_UNKNOWN_KID'
  override code = 'ERR_GATEHOUSE_UNKNOWN_KID'
  constructor(readonly kid: string | undefined) {
    super(kid === undefined ? 'token has no key id (kid)' : 'token key id (kid) is not a signing key of this project')
  }
}

const publicKeys = new WeakMap<VerificationKey, KeyObject>()

function publicKeyOf(k: VerificationKey): KeyObject {
  let key = publicKeys.get(k)
  if (key === undefined) {
    key = createPublicKey({ key: k.public_jwk as import('node:crypto').JsonWebKey, format: 'jwk' })
    publicKeys.set(k, key)
  }
  return key
}

/** The algorithms a tenant's tokens may carry: HS256 and the algs of its keys. */
export function acceptedAlgorithms(keys: readonly VerificationKey[]): string[] {
  const algs = ['HS256']
  for (const k of keys) if (!algs.includes(k.alg)) algs.push(k.alg)
  return algs
}

/**
 * Verifies a tenant's token: HS256 with its secret only, ES256/RS256 only with the listed key
 * whose kid and alg the header names (a kid of another tenant, or none, is refused); exp
 * required, iss/aud checked when given. An HS256 token is never checked against a public
 * key, nor an asymmetric one against the secret.
 */
export async function verifyWithKeys(token: string, opts: KeysVerifyOptions): Promise<JWTPayload> {
  const o: JWTVerifyOptions = {
    algorithms: acceptedAlgorithms(opts.keys),
    requiredClaims: ['exp'],
  }
  if (opts.issuer !== undefined) o.issuer = opts.issuer
  if (opts.audience !== undefined) o.audience = opts.audience
  if (opts.currentDate) o.currentDate = opts.currentDate
  const resolve = (header: JWTHeaderParameters): Uint8Array | KeyObject => {
    if (header.alg === 'HS256') {
      if (opts.legacyRetired === true) throw new LegacySecretRetiredError()
      return hmacKey(opts.secret)
    }
    const k = header.kid === undefined ? undefined : opts.keys.find((x) => x.kid === header.kid && x.alg === header.alg)
    if (k === undefined) throw new UnknownKeyIdError(header.kid)
    return publicKeyOf(k)
  }
  const { payload } = await jwtVerify(token, resolve, o)
  return payload
}

/** A short human reason for a jose failure, safe to send to a client. */
export function describeJwtError(err: unknown): string {
  if (err instanceof joseErrors.JWTExpired) return 'token has expired'
  if (err instanceof joseErrors.JWTClaimValidationFailed) return `claim "${err.claim}" is invalid: ${err.reason}`
  if (err instanceof joseErrors.JOSEAlgNotAllowed) return 'token algorithm is not allowed'
  if (err instanceof joseErrors.JWSSignatureVerificationFailed) return 'token signature is invalid'
  if (err instanceof UnknownKeyIdError || err instanceof LegacySecretRetiredError) return err.message
  if (err instanceof joseErrors.JWTInvalid || err instanceof joseErrors.JWSInvalid) return 'token is malformed'
  if (err instanceof joseErrors.JOSEError) return 'token is invalid'
  return 'token is invalid'
}

/** An unambiguous cache key for a token (never the token itself). One-shot hash(): cheaper than createHash() per request. */
export function tokenCacheKey(...parts: string[]): string {
  return hash('sha256', JSON.stringify(parts), 'base64url')
}

/** Looks like a JWT (three base64url segments). */
export function looksLikeJwt(value: string): boolean {
  return /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$/.test(value)
}

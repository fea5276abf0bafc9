// Refresh tokens of GoTrue's algorithm v2 (supabase/auth internal/crypto/refresh_tokens.go;
// docs/auth-protocol.md §5.3): no row per token. A token is base64url (no padding) of
//   version 0 | the session's uuid (16 bytes) | uvarint counter | signature (16) | checksum (4)
// where the signature is the first 16 bytes of HMAC-SHA-256 over everything before it, keyed
// by the session's own key (auth.sessions.refresh_token_hmac_key, base64url of 32 random
// bytes), and the checksum the first 4 bytes of SHA-256 over everything before it (it only
// spares the database strings that cannot be tokens). The session keeps the counter of the
// newest token it issued (auth.sessions.refresh_token_counter).
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto'

const SIGNATURE_LENGTH = 16
const CHECKSUM_LENGTH = 4
const MIN_LENGTH = 1 + 16 + 1 + SIGNATURE_LENGTH + CHECKSUM_LENGTH
/** The longest token's text: a 64-bit uvarint takes at most 10 bytes (47 bytes, 63 characters). */
const MAX_TEXT_LENGTH = 63

/** A parsed v2 token: its checksum held; its signature is checked against the session's key. */
export interface RefreshTokenV2 {
  readonly sessionId: string
  readonly counter: bigint
  /** Version, session and counter: the bytes the signature covers. */
  readonly signed: Buffer
  readonly signature: Buffer
}

/** A new per-session key as GoTrue stores it without database encryption: base64url of 32 random bytes. */
export function newRefreshTokenKey(): string {
  return randomBytes(32).toString('base64url')
}

function uvarint(n: bigint): number[] {
  const out: number[] = []
  let v = n < 0n ? 0n : n
  while (v >= 0x80n) {
    out.push(Number(v & 0x7fn) | 0x80)
    v >>= 7n
  }
  out.push(Number(v))
  return out
}

/** Reads a uvarint (Go's binary.Uvarint): the value and its byte length, or null when malformed or over 64 bits. */
function readUvarint(b: Buffer, at: number): { value: bigint; length: number } | null {
  let value = 0n
  let shift = 0n
  for (let i = 0; i < 10 && at + i < b.length; i++) {
    const byte = b[at + i]!
    if (i === 9 && byte > 1) return null
    value |= BigInt(byte & 0x7f) << shift
    if (byte < 0x80) return { value, length: i + 1 }
    shift += 7n
  }
  return null
}

const uuidBytes = (id: string): Buffer => Buffer.from(id.replace(/-/g, ''), 'hex')

function uuidText(b: Buffer): string {
  const h = b.toString('hex')
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`
}

const BLOCK = 64
const IPAD = Buffer.alloc(BLOCK, 0x36)
const OPAD = Buffer.alloc(BLOCK, 0x5c)

/**
 * The first 16 bytes of HMAC-SHA-256 (RFC 2104) from two hashes: node's createHmac with a raw
 * key makes a KeyObject per call, dearer than the two hashes (docs/benchmarks.md).
 */
function hmac16(key: Buffer, signed: Buffer): Buffer {
  const k = key.length > BLOCK ? createHash('sha256').update(key).digest() : key
  const inner = Buffer.from(IPAD)
  const outer = Buffer.from(OPAD)
  for (let i = 0; i < k.length; i++) {
    inner[i]! ^= k[i]!
    outer[i]! ^= k[i]!
  }
  const ih = createHash('sha256').update(inner).update(signed).digest()
  return createHash('sha256').update(outer).update(ih).digest().subarray(0, SIGNATURE_LENGTH)
}

/** The bytes a token's signature covers: version 0, the session id, the counter. */
function signedPart(sessionId: string, counter: bigint): Buffer {
  return Buffer.concat([Buffer.of(0), uuidBytes(sessionId), Buffer.from(uvarint(counter))])
}

/** The token for a session's counter, signed with its key (base64url text as stored). */
export function encodeRefreshTokenV2(sessionId: string, counter: bigint, key: string): string {
  const signed = signedPart(sessionId, counter)
  const body = Buffer.concat([signed, hmac16(Buffer.from(key, 'base64url'), signed)])
  const checksum = createHash('sha256').update(body).digest().subarray(0, CHECKSUM_LENGTH)
  return Buffer.concat([body, checksum]).toString('base64url')
}

const BASE64URL = /^[A-Za-z0-9_-]+$/

/**
 * Parses a v2 token as GoTrue's ParseRefreshToken does; null for anything it refuses (bad
 * length, version other than 0, checksum mismatch, malformed counter).
 */
export function parseRefreshTokenV2(token: string): RefreshTokenV2 | null {
  if (token.length > MAX_TEXT_LENGTH || token.length % 4 === 1 || !BASE64URL.test(token)) return null
  const raw = Buffer.from(token, 'base64url')
  if (raw.length < MIN_LENGTH || raw[0] !== 0) return null
  const end = raw.length - CHECKSUM_LENGTH
  const checksum = createHash('sha256').update(raw.subarray(0, end)).digest().subarray(0, CHECKSUM_LENGTH)
  if (!timingSafeEqual(checksum, raw.subarray(end))) return null
  const counter = readUvarint(raw, 17)
  if (counter === null || 17 + counter.length + SIGNATURE_LENGTH !== end) return null
  const signedEnd = 17 + counter.length
  return {
    sessionId: uuidText(raw.subarray(1, 17)),
    counter: counter.value > 0x7fffffffffffffffn ? 0x7fffffffffffffffn : counter.value,
    signed: raw.subarray(0, signedEnd),
    signature: raw.subarray(signedEnd, end),
  }
}

/** True when the token was signed with the session's key (constant time). */
export function hasValidSignature(token: RefreshTokenV2, key: string): boolean {
  const expected = hmac16(Buffer.from(key, 'base64url'), token.signed)
  return timingSafeEqual(expected, token.signature)
}

// Password hashing (bcrypt) and the tenant password policy, one-time token generation
// and hashing as GoTrue stores them (hex SHA-224 of address + OTP, docs/auth-protocol.md §5.4), random
// passwords, legacy v1 refresh token strings (§5.2) and the shape check of presented ones. No I/O besides bcrypt's CPU work,
// which runs natively on libuv's thread pool (@node-rs/bcrypt's async calls), never on the
// event loop: a flood of sign-ins at one tenant must not stall the others' requests.
import { hash as nativeHash, verify as nativeVerify } from '@node-rs/bcrypt'
import { createHash, randomBytes, randomFillSync, randomInt, timingSafeEqual } from 'node:crypto'
import { availableParallelism } from 'node:os'
import type { AuthSettings } from '../tenants/index.js'
import { ValidationFailedError, weakPassword } from './errors.js'
import { parseRefreshTokenV2, type RefreshTokenV2 } from './refresh-token-format.js'

// At most this many hashes run at once in the process (the rest wait their turn): bcrypt
// keeps a core busy for its whole run, and libuv's pool has 4 threads, so a flood of
// sign-ins on a 2-core machine would otherwise take the core the event loop needs.
let hashSlots = Math.max(1, availableParallelism() - 1)
let hashesRunning = 0
const hashQueue: Array<() => void> = []

/** Sets the number of bcrypt computations that may run at once; 0 means the cores less one. */
export function setHashConcurrency(n: number): void {
  hashSlots = n > 0 ? n : Math.max(1, availableParallelism() - 1)
  while (hashesRunning < hashSlots && hashQueue.length > 0) {
    hashesRunning++
    hashQueue.shift()!()
  }
}

async function withHashSlot<T>(fn: () => Promise<T>): Promise<T> {
  if (hashesRunning >= hashSlots) await new Promise<void>((resolve) => hashQueue.push(resolve))
  else hashesRunning++
  try {
    return await fn()
  } finally {
    const next = hashQueue.shift()
    if (next) next()
    else hashesRunning--
  }
}

const bcryptHash = (password: string, cost: number) => withHashSlot(() => nativeHash(password, cost))
const bcryptVerify = (password: string, hash: string) => withHashSlot(() => nativeVerify(password, hash))

/** bcrypt reads 72 bytes at most; GoTrue refuses longer passwords rather than truncating. */
const MAX_PASSWORD_BYTES = 72

export function checkPasswordLength(password: string): void {
  if (Buffer.byteLength(password, 'utf8') > MAX_PASSWORD_BYTES)
    throw new ValidationFailedError('request', 'Password cannot be longer than 72 characters')
}

export async function hashPassword(password: string, cost: number): Promise<string> {
  checkPasswordLength(password)
  return asGoTrueHash(await bcryptHash(password, cost))
}

/**
 * $2a$ as GoTrue writes them, so a real GoTrue taking over a database verifies them. The
 * $2y$/$2b$ that the native hasher writes differs from $2a$ only for inputs over 255 bytes,
 * which checkPasswordLength refuses, so the prefix is all that changes.
 */
function asGoTrueHash(hash: string): string {
  return /^\$2[by]\$/.test(hash) ? '$2a$' + hash.slice(4) : hash
}

// Valid hashes to compare against when the user has no password, so the time of a failed
// sign-in does not reveal whether the address is registered (one per cost, made lazily
// off the event loop; concurrent first callers share the one being made).
const dummyHashes = new Map<number, Promise<string>>()
function dummyHash(cost: number): Promise<string> {
  let h = dummyHashes.get(cost)
  if (!h) {
    h = bcryptHash(randomBytes(16).toString('hex'), cost)
    h.catch(() => dummyHashes.delete(cost))
    dummyHashes.set(cost, h)
  }
  return h
}

/**
 * Compares a password with a stored bcrypt hash ($2a$/$2b$/$2y$ of any earlier writer,
 * GoTrue's and bcryptjs' included); false for empty or foreign hashes.
 */
export async function verifyPassword(
  password: string,
  hash: string | null | undefined,
  cost: number,
): Promise<boolean> {
  if (Buffer.byteLength(password, 'utf8') > MAX_PASSWORD_BYTES) return false
  if (!hash || !/^\$2[abxy]\$\d\d\$/.test(hash)) {
    await bcryptVerify(password, await dummyHash(cost)).catch(() => false)
    return false
  }
  return bcryptVerify(password, hash).catch(() => false)
}

const LOWER = 'abcdefghijklmnopqrstuvwxyz'
const UPPER = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ'
const DIGITS = '0123456789'
const SYMBOLS = '!@#$%^&*()_+-=[]{};\'\\:"|<>?,./`~'

/** The character sets of a tenant's `password_required_characters` preset (Supabase's presets). */
function requiredCharacterSets(preset: string): string[] {
  switch (preset) {
    case '':
      return []
    case 'letters_digits':
      return [LOWER + UPPER, DIGITS]
    case 'lower_upper_letters_digits':
      return [LOWER, UPPER, DIGITS]
    case 'lower_upper_letters_digits_symbols':
      return [LOWER, UPPER, DIGITS, SYMBOLS]
    default:
      // GoTrue's own syntax: colon-separated sets, `\:` escapes a colon.
      return preset
        .split(/(?<!\\):/)
        .map((s) => s.replace(/\\:/g, ':'))
        .filter((s) => s.length > 0)
  }
}

interface PasswordStrength {
  ok: boolean
  message: string
  reasons: string[]
}

/** GoTrue's checkPasswordStrength: `length` and `characters` reasons, messages joined by spaces. */
export function passwordStrength(
  password: string,
  settings: Pick<AuthSettings, 'password_min_length' | 'password_required_characters'>,
): PasswordStrength {
  const reasons: string[] = []
  const messages: string[] = []
  const min = Math.max(6, settings.password_min_length)
  if ([...password].length < min) {
    reasons.push('length')
    messages.push(`Password should be at least ${min} characters.`)
  }
  const sets = requiredCharacterSets(settings.password_required_characters)
  if (sets.length && !sets.every((set) => [...password].some((ch) => set.includes(ch)))) {
    reasons.push('characters')
    messages.push(`Password should contain at least one character of each: ${sets.join(', ')}.`)
  }
  return { ok: reasons.length === 0, message: messages.join(' '), reasons }
}

/** Throws 422 weak_password (or 400 for an over-long password) when the policy refuses it. */
export function assertPasswordAcceptable(
  password: string,
  settings: Pick<AuthSettings, 'password_min_length' | 'password_required_characters'>,
): void {
  checkPasswordLength(password)
  const s = passwordStrength(password, settings)
  if (!s.ok) throw weakPassword(s.message, s.reasons)
}

/** A numeric OTP of six digits, zero-padded. */
export function generateOtp(): string {
  return String(randomInt(0, 1_000_000)).padStart(6, '0')
}

/** hex(SHA-224(address + otp)): the value GoTrue stores and puts into links (docs/auth-protocol.md §5.4). */
export function hashOtp(address: string, otp: string): string {
  return createHash('sha224')
    .update(address + otp, 'utf8')
    .digest('hex')
}

/** The hash of a random password (all character classes) for an account created without one. */
export function randomPasswordHash(cost: number): Promise<string> {
  return hashPassword(randomBytes(36).toString('base64url') + 'aA1!', cost)
}

const BASE32 = 'abcdefghijklmnopqrstuvwxyz234567'

/**
 * Random bytes for refresh tokens, drawn from the CSPRNG 256 tokens' worth at a time (as
 * node's randomUUID buffers its entropy): a randomBytes call per token costs ten times more.
 */
const tokenEntropy = Buffer.alloc(12 * 256)
let tokenEntropyAt = tokenEntropy.length

/** A legacy v1 refresh token: 12 random lower-case base32 characters (docs/auth-protocol.md §5.2). */
export function generateRefreshToken(): string {
  if (tokenEntropyAt === tokenEntropy.length) {
    randomFillSync(tokenEntropy)
    tokenEntropyAt = 0
  }
  let out = ''
  for (let i = 0; i < 12; i++) out += BASE32[tokenEntropy[tokenEntropyAt + i]! & 31]
  tokenEntropyAt += 12
  return out
}

/**
 * Pre-validation of a presented refresh token (docs/auth-protocol.md §3.4, GoTrue's
 * RefreshTokenGrantParams.Validate): 12 characters of `[a-z0-9]` are a v1 token (null);
 * anything longer must parse as a v2 token (§5.3), which is returned. Everything else is
 * 400 validation_failed.
 */
export function parseRefreshTokenParam(token: unknown): RefreshTokenV2 | null {
  if (typeof token === 'string' && /^[a-z0-9]{12}$/.test(token)) return null
  const v2 = typeof token === 'string' && token.length > 12 ? parseRefreshTokenV2(token) : null
  if (v2 === null) throw new ValidationFailedError('request', 'Refresh token is not valid')
  return v2
}

export function constantTimeEqual(a: string, b: string): boolean {
  const x = Buffer.from(a)
  const y = Buffer.from(b)
  return x.length === y.length && timingSafeEqual(x, y)
}

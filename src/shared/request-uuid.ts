// Random (version 4) UUIDs for request ids, one per request that comes without one. Node's
// crypto.randomUUID() joins its 36 characters from 20 pieces (a chain of intermediate
// strings the heap then holds and flattens); here the characters are written into one
// buffer and read out as one string. The random bytes come from the same CSPRNG, fetched
// for 128 ids at a time as randomUUID() does (RFC 9562 section 5.4: 122 random bits, the
// version and variant bits set).
import { randomFillSync } from 'node:crypto'

const BATCH = 128
const HEX = Buffer.from('0123456789abcdef', 'latin1')
let pool = Buffer.alloc(0)
let next = 0
const text = Buffer.alloc(36)

/** A random UUID, `xxxxxxxx-xxxx-4xxx-Nxxx-xxxxxxxxxxxx` (N one of 8, 9, a, b). */
export function requestUuid(): string {
  if (next + 16 > pool.length) {
    pool = randomFillSync(Buffer.allocUnsafe(16 * BATCH))
    next = 0
  }
  const at = next
  next += 16
  pool[at + 6] = (pool[at + 6]! & 0x0f) | 0x40
  pool[at + 8] = (pool[at + 8]! & 0x3f) | 0x80
  let j = 0
  for (let i = 0; i < 16; i++) {
    if (i === 4 || i === 6 || i === 8 || i === 10) text[j++] = 45 // -
    const b = pool[at + i]!
    text[j++] = HEX[b >> 4]!
    text[j++] = HEX[b & 15]!
  }
  return text.toString('latin1', 0, 36)
}

// ES256 signatures: node:crypto signs in DER, JWS wants r and s as two 32-byte numbers
// (RFC 7518 §3.4). es256DerToJose re-encodes; signAsymmetric's tokens verify with jose.
import { generateKeyPairSync } from 'node:crypto'
import t from 'tap'
import { jwtVerify } from 'jose'
import { es256DerToJose, signAsymmetric } from '../../src/shared/jwt.js'

/** DER of SEQUENCE { INTEGER r, INTEGER s } from the integers' content bytes. */
function der(r: number[], s: number[]): Buffer {
  const body = [0x02, r.length, ...r, 0x02, s.length, ...s]
  return Buffer.from([0x30, body.length, ...body])
}

t.test('es256DerToJose: minimal integers, high-bit pads and short numbers become two 32-byte halves', async (t) => {
  const full = Array.from({ length: 32 }, (_, i) => i + 1)
  const high = [0x00, 0x80, ...Array.from({ length: 31 }, () => 0x11)] // 33 bytes: a leading 0x00 keeps it positive
  const short = [0x7f, 0x22] // a number with 30 leading zero bytes
  const out = es256DerToJose(der(high, short))
  t.equal(out.length, 64)
  t.same([...out.subarray(0, 32)], high.slice(1))
  t.same([...out.subarray(32)], [...Array(30).fill(0), 0x7f, 0x22])
  t.same([...es256DerToJose(der(full, full))], [...full, ...full])
  t.throws(() => es256DerToJose(Buffer.from([0x30, 0x06, 0x04, 0x01, 0x01, 0x02, 0x01, 0x01])), /not a DER INTEGER/)
  t.throws(() => es256DerToJose(der([0x01, ...full], full)), /longer than 32 bytes/)
})

t.test('signAsymmetric ES256: every token verifies with the public key', async (t) => {
  const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' })
  // Enough signatures that some have an r or s below 2^248 (a shorter DER integer).
  for (let i = 0; i < 600; i++) {
    const token = await signAsymmetric(
      { role: 'authenticated', n: i },
      { alg: 'ES256', kid: 'k1', privateKey, expiresInSeconds: 60 },
    )
    const signature = Buffer.from(token.split('.')[2]!, 'base64url')
    if (signature.length !== 64) t.fail(`signature ${i} is ${signature.length} bytes`)
    const { payload, protectedHeader } = await jwtVerify(token, publicKey, { algorithms: ['ES256'] })
    if (payload.n !== i || protectedHeader.kid !== 'k1') t.fail(`token ${i} did not verify as signed`)
  }
  t.pass('600 tokens verified')
})

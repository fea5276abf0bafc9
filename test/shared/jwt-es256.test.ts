// ES256 signatures: node:crypto signs in DER, JWS wants r and s as two 32-byte numbers
// (RFC 7518 §3.4). es256DerToJose re-encodes; signAsymmetric's tokens verify with jose.
import { generateKeyPairSync } from 'node:crypto'
import t from 'tap'
import { jwtVerify } from 'jose'
import { es256DerToJose, signAsymmetric, signAsymmetricSync, type AsymmetricSignOptions } from '../../src/shared/jwt.js'

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

t.test(
  'signAsymmetricSync: the payload is the claims then iat, exp, iss, aud, sub, as JSON.stringify writes them',
  async (t) => {
    const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' })
    const base = { alg: 'ES256' as const, kid: 'k1', privateKey, expiresInSeconds: 3600, now: 1_700_000_000 }
    const now = base.now
    const cases: Array<[string, Record<string, unknown>, Partial<AsymmetricSignOptions>]> = [
      [
        'claims, issuer and subject',
        { role: 'authenticated', amr: [{ method: 'password', timestamp: 1 }], e: 'é"\n' },
        { issuer: 'http://x/auth/v1', subject: 'u1' },
      ],
      ['no claims', {}, {}],
      ['an audience too', { a: 1 }, { audience: 'aud1', issuer: 'i', subject: 's' }],
      ['integer-like keys first, as JSON.stringify orders them', { b: 1, 7: 'seven', a: 2 }, { subject: 's' }],
      ['undefined values left out', { a: undefined, b: null, c: 1 }, { issuer: '' }],
      [
        'claims naming iat and sub keep their place and their value is replaced',
        { sub: 'old', x: 1, iat: 5 },
        { subject: 'new' },
      ],
      ['a claims object with toJSON', { x: 1, toJSON: () => ({ y: 2 }) }, { subject: 's' }],
    ]
    for (const [name, claims, extra] of cases) {
      const opts: AsymmetricSignOptions = { ...base, ...extra }
      const token = signAsymmetricSync(claims, opts)
      const spread: Record<string, unknown> = { ...claims, iat: now, exp: now + opts.expiresInSeconds }
      if (opts.issuer) spread.iss = opts.issuer
      if (opts.audience) spread.aud = opts.audience
      if (opts.subject) spread.sub = opts.subject
      t.equal(Buffer.from(token.split('.')[1]!, 'base64url').toString(), JSON.stringify(spread), name)
      if (typeof claims.toJSON === 'function') continue // its own JSON, without exp (as before)
      const { payload } = await jwtVerify(token, publicKey, { currentDate: new Date(now * 1000) })
      t.equal(payload.exp, now + 3600, `${name}: verifies`)
    }
    t.equal(
      await signAsymmetric({ a: 1 }, base).then((x) => x.split('.')[1]),
      signAsymmetricSync({ a: 1 }, base).split('.')[1],
    )
  },
)

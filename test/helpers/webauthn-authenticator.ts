// A software WebAuthn authenticator for the passkey tests (not a test file): what a browser and
// a platform authenticator hand the app from navigator.credentials.create() and .get(), as
// the W3C WebAuthn Level 2 spec lays them out: an ES256 key pair, "none" attestation, a
// discoverable credential that remembers the user handle, client data for one origin.
import { createHash, generateKeyPairSync, randomBytes, sign, type KeyObject } from 'node:crypto'
import { isoCBOR } from '@simplewebauthn/server/helpers'

const b64url = (b: Uint8Array | Buffer): string => Buffer.from(b).toString('base64url')
const sha256 = (b: Buffer | string): Buffer => createHash('sha256').update(b).digest()

/** Authenticator data flags (WebAuthn §6.1): user present, user verified, attested credential data. */
const UP = 0x01
const UV = 0x04
const AT = 0x40

interface CreationOptions {
  challenge: string
  rp: { id?: string }
  user: { id: string }
}

interface RequestOptions {
  challenge: string
  rpId?: string
}

export class SoftAuthenticator {
  readonly credentialId = randomBytes(16)
  #privateKey: KeyObject
  #publicKey: KeyObject
  #userHandle: string | null = null
  #signCount = 0
  readonly rpId: string
  readonly origin: string

  constructor(o: { rpId: string; origin: string }) {
    this.rpId = o.rpId
    this.origin = o.origin
    const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' })
    this.#privateKey = privateKey
    this.#publicKey = publicKey
  }

  /** The credential's public key as a COSE_Key (EC2, P-256, ES256). */
  #coseKey(): Uint8Array {
    const jwk = this.#publicKey.export({ format: 'jwk' })
    const key = new Map<number, number | Uint8Array>([
      [1, 2],
      [3, -7],
      [-1, 1],
      [-2, Buffer.from(jwk.x!, 'base64url')],
      [-3, Buffer.from(jwk.y!, 'base64url')],
    ])
    return isoCBOR.encode(key)
  }

  #authData(flags: number, attested: boolean): Buffer {
    const count = Buffer.alloc(4)
    count.writeUInt32BE(this.#signCount)
    const parts = [sha256(this.rpId), Buffer.from([flags]), count]
    if (attested) {
      const len = Buffer.alloc(2)
      len.writeUInt16BE(this.credentialId.length)
      parts.push(Buffer.alloc(16), len, this.credentialId, Buffer.from(this.#coseKey()))
    }
    return Buffer.concat(parts)
  }

  #clientData(type: string, challenge: string, origin = this.origin): Buffer {
    return Buffer.from(JSON.stringify({ type, challenge, origin, crossOrigin: false }))
  }

  /** navigator.credentials.create() serialized (PublicKeyCredential.toJSON()). */
  create(options: CreationOptions, o: { origin?: string; fmt?: string; attStmt?: Map<string, unknown> } = {}) {
    this.#userHandle = options.user.id
    const authData = this.#authData(UP | UV | AT, true)
    const attestation = new Map<string, unknown>([
      ['fmt', o.fmt ?? 'none'],
      ['attStmt', o.attStmt ?? new Map()],
      ['authData', authData],
    ])
    return {
      id: b64url(this.credentialId),
      rawId: b64url(this.credentialId),
      type: 'public-key' as const,
      response: {
        clientDataJSON: b64url(this.#clientData('webauthn.create', options.challenge, o.origin)),
        attestationObject: b64url(isoCBOR.encode(attestation as never)),
        transports: ['internal' as const],
      },
      clientExtensionResults: {},
      authenticatorAttachment: 'platform' as const,
    }
  }

  /** navigator.credentials.get() serialized: signed over authenticatorData || SHA-256(clientDataJSON). */
  get(options: RequestOptions, o: { origin?: string } = {}) {
    if (this.#userHandle === null) throw new Error('the authenticator holds no credential yet')
    this.#signCount += 1
    const authData = this.#authData(UP | UV, false)
    const clientData = this.#clientData('webauthn.get', options.challenge, o.origin)
    const signature = sign('sha256', Buffer.concat([authData, sha256(clientData)]), this.#privateKey)
    return {
      id: b64url(this.credentialId),
      rawId: b64url(this.credentialId),
      type: 'public-key' as const,
      response: {
        clientDataJSON: b64url(clientData),
        authenticatorData: b64url(authData),
        signature: b64url(signature),
        userHandle: this.#userHandle,
      },
      clientExtensionResults: {},
      authenticatorAttachment: 'platform' as const,
    }
  }
}

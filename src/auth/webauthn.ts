// The WebAuthn ceremonies of passkeys (docs/auth-protocol.md §3.21), as GoTrue runs them with
// go-webauthn: discoverable credentials (resident key required), user verification preferred,
// no attestation. The options and the checks of an answer (challenge, origin, RP id, signature,
// counter) are @simplewebauthn/server's; the challenge, RP and origins a ceremony began with
// travel in its challenge row, so a settings change does not move a ceremony under way.
import {
  generateAuthenticationOptions,
  generateRegistrationOptions,
  verifyAuthenticationResponse,
  verifyRegistrationResponse,
  type AuthenticationResponseJSON,
  type RegistrationResponseJSON,
} from '@simplewebauthn/server'
import { isoCBOR } from '@simplewebauthn/server/helpers'
import type { WebAuthnSettings } from '../tenants/index.js'
import { isPlainObject } from '../shared/index.js'
import { PasskeysDisabledError, WebAuthnVerificationFailedError } from './errors.js'
import type { ChallengeSession, PasskeyRow } from './models/webauthn.js'
import type { TenantContext, UserRow } from './types.js'

/** The database's relying party; 404 passkey_disabled while passkeys are off. */
export function relyingPartyOf(ctx: TenantContext): WebAuthnSettings {
  const a = ctx.tenant.auth
  if (!a.passkeys || a.webauthn === undefined) throw new PasskeysDisabledError()
  return a.webauthn
}

const b64url = (b: Uint8Array): string => Buffer.from(b).toString('base64url')

/** What a registration is for: a passkey (discoverable, GoTrue's getPasskeyWebAuthn) or an MFA factor (GoTrue's getWebAuthnMFA). */
const SELECTION = {
  passkey: { residentKey: 'required', requireResidentKey: true, userVerification: 'preferred' },
  factor: { residentKey: 'discouraged', userVerification: 'preferred' },
} as const

/** Options for navigator.credentials.create(): the user's credentials of that kind excluded. */
export async function registrationOptions(
  rp: WebAuthnSettings,
  user: UserRow,
  exclude: StoredCredential[],
  kind: keyof typeof SELECTION,
) {
  const name = user.email || user.phone || user.id
  const meta = user.raw_user_meta_data ?? {}
  return generateRegistrationOptions({
    rpName: rp.rp_display_name,
    rpID: rp.rp_id,
    // GoTrue's WebAuthnID: the user id's text, so the assertion's userHandle names the user.
    userID: Buffer.from(user.id, 'utf8'),
    userName: name,
    ...(kind === 'passkey'
      ? { userDisplayName: typeof meta.name === 'string' && meta.name !== '' ? meta.name : name }
      : {}),
    timeout: rp.challenge_expiry_seconds * 1000,
    attestationType: 'none',
    excludeCredentials: exclude.map((c) => ({ id: b64url(c.id), transports: c.transports })),
    authenticatorSelection: SELECTION[kind],
  })
}

/** Options for navigator.credentials.get(): discoverable (no credential named) or the ones given. */
export function authenticationOptions(rp: WebAuthnSettings, allow: StoredCredential[] = []) {
  return generateAuthenticationOptions({
    rpID: rp.rp_id,
    timeout: rp.challenge_expiry_seconds * 1000,
    userVerification: 'preferred',
    allowCredentials: allow.map((c) => ({ id: b64url(c.id), transports: c.transports })),
  })
}

const RESPONSE_FIELDS = {
  create: ['clientDataJSON', 'attestationObject'],
  request: ['clientDataJSON', 'authenticatorData', 'signature'],
} as const

/** The serialized PublicKeyCredential's outer shape of a create or a request answer. */
export function looksLikeCredential(raw: unknown, kind: 'create' | 'request'): boolean {
  return (
    isPlainObject(raw) &&
    typeof raw.id === 'string' &&
    typeof raw.rawId === 'string' &&
    raw.type === 'public-key' &&
    isPlainObject(raw.response) &&
    RESPONSE_FIELDS[kind].every((f) => typeof (raw.response as Record<string, unknown>)[f] === 'string')
  )
}

/** The answer as a WebAuthn response; anything else is 400 "Invalid credential response". */
function credentialShape(raw: unknown, kind: 'create' | 'request'): Record<string, unknown> {
  if (!looksLikeCredential(raw, kind)) throw new WebAuthnVerificationFailedError('response')
  return raw as Record<string, unknown>
}

/** The ceremony's expectations, from its challenge row. */
function expected(session: ChallengeSession) {
  return { expectedChallenge: session.challenge, expectedOrigin: session.rp_origins, expectedRPID: session.rp_id }
}

/**
 * The answer with its attestation statement dropped, as a browser drops it when the options
 * ask for attestation "none" (WebAuthn Level 2 §5.4.7): we ask for none and trust none. Checking a
 * statement would also check its certificates' revocation, fetching the CRL URLs the client's
 * certificates name (@simplewebauthn/server's isCertRevoked; an android-key chain is anchored in
 * its own last certificate): a client could make the engine call any address. The
 * authenticator data (credential, key, AAGUID, flags, counter) stays as signed.
 */
function withoutAttestation(response: RegistrationResponseJSON): RegistrationResponseJSON {
  let authData: unknown
  try {
    const decoded = isoCBOR.decodeFirst<Map<string, unknown>>(
      Buffer.from(response.response.attestationObject, 'base64url'),
    )
    authData = decoded instanceof Map ? decoded.get('authData') : undefined
  } catch {
    authData = undefined
  }
  if (!(authData instanceof Uint8Array)) throw new WebAuthnVerificationFailedError('response')
  const none = new Map<string, unknown>([
    ['fmt', 'none'],
    ['attStmt', new Map()],
    ['authData', authData],
  ])
  const attestationObject = b64url(isoCBOR.encode(none as never))
  return { ...response, response: { ...response.response, attestationObject } }
}

/** A registration answer checked against its challenge: the new credential, or 400. */
export async function verifiedRegistration(raw: unknown, session: ChallengeSession) {
  const response = withoutAttestation(credentialShape(raw, 'create') as unknown as RegistrationResponseJSON)
  let result
  try {
    result = await verifyRegistrationResponse({ response, ...expected(session), requireUserVerification: false })
  } catch {
    throw new WebAuthnVerificationFailedError('credential')
  }
  if (!result.verified) throw new WebAuthnVerificationFailedError('credential')
  return result.registrationInfo
}

/** The user id an assertion names (its userHandle), or 400 when it names none. */
export function assertionUserId(raw: unknown): { response: AuthenticationResponseJSON; userId: string } {
  const r = credentialShape(raw, 'request')
  const response = r as unknown as AuthenticationResponseJSON
  const handle = response.response.userHandle
  const userId = typeof handle === 'string' ? Buffer.from(handle, 'base64url').toString('utf8') : ''
  return { response, userId }
}

/** A credential as the checks need it: id, COSE public key, counter, transports. */
export interface StoredCredential {
  id: Buffer
  publicKey: Buffer
  counter: number
  transports: string[]
}

export function passkeyCredential(p: PasskeyRow): StoredCredential {
  return { id: p.credential_id, publicKey: p.public_key, counter: Number(p.sign_count), transports: p.transports }
}

/** An assertion checked against its challenge and the stored credential: the new counter, or 400. */
export async function verifiedAssertion(
  response: AuthenticationResponseJSON,
  session: ChallengeSession,
  stored: StoredCredential,
): Promise<number> {
  let result
  try {
    result = await verifyAuthenticationResponse({
      response,
      ...expected(session),
      credential: {
        id: b64url(stored.id),
        publicKey: new Uint8Array(stored.publicKey),
        counter: stored.counter,
        transports: stored.transports as never,
      },
      requireUserVerification: false,
    })
  } catch {
    throw new WebAuthnVerificationFailedError('credential')
  }
  if (!result.verified) throw new WebAuthnVerificationFailedError('credential')
  return result.authenticationInfo.newCounter
}

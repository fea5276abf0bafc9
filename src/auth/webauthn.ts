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
import type { WebAuthnSettings } from '../tenants/index.js'
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

/** Options for navigator.credentials.create(): the user's existing passkeys excluded. */
export async function registrationOptions(rp: WebAuthnSettings, user: UserRow, existing: PasskeyRow[]) {
  const name = user.email || user.phone || user.id
  const meta = user.raw_user_meta_data ?? {}
  const displayName = typeof meta.name === 'string' && meta.name !== '' ? meta.name : name
  return generateRegistrationOptions({
    rpName: rp.rp_display_name,
    rpID: rp.rp_id,
    // GoTrue's WebAuthnID: the user id's text, so the assertion's userHandle names the user.
    userID: Buffer.from(user.id, 'utf8'),
    userName: name,
    userDisplayName: displayName,
    timeout: rp.challenge_expiry_seconds * 1000,
    attestationType: 'none',
    excludeCredentials: existing.map((p) => ({ id: b64url(p.credential_id), transports: p.transports })),
    authenticatorSelection: { residentKey: 'required', requireResidentKey: true, userVerification: 'preferred' },
  })
}

/** Options for navigator.credentials.get(): discoverable, so no credential is named. */
export function authenticationOptions(rp: WebAuthnSettings) {
  return generateAuthenticationOptions({
    rpID: rp.rp_id,
    timeout: rp.challenge_expiry_seconds * 1000,
    userVerification: 'preferred',
  })
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v)
}

/** The serialized PublicKeyCredential's outer shape; anything else is not a WebAuthn answer. */
function credentialShape(raw: unknown, fields: readonly string[]): Record<string, unknown> {
  const ok =
    isObject(raw) &&
    typeof raw.id === 'string' &&
    typeof raw.rawId === 'string' &&
    raw.type === 'public-key' &&
    isObject(raw.response) &&
    fields.every((f) => typeof (raw.response as Record<string, unknown>)[f] === 'string')
  if (!ok) throw new WebAuthnVerificationFailedError('response')
  return raw as Record<string, unknown>
}

/** The ceremony's expectations, from its challenge row. */
function expected(session: ChallengeSession) {
  return { expectedChallenge: session.challenge, expectedOrigin: session.rp_origins, expectedRPID: session.rp_id }
}

/** A registration answer checked against its challenge: the new credential, or 400. */
export async function verifiedRegistration(raw: unknown, session: ChallengeSession) {
  const response = credentialShape(raw, ['clientDataJSON', 'attestationObject']) as unknown as RegistrationResponseJSON
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
  const r = credentialShape(raw, ['clientDataJSON', 'authenticatorData', 'signature'])
  const response = r as unknown as AuthenticationResponseJSON
  const handle = response.response.userHandle
  const userId = typeof handle === 'string' ? Buffer.from(handle, 'base64url').toString('utf8') : ''
  return { response, userId }
}

/** An assertion checked against its challenge and the stored passkey: the new counter, or 400. */
export async function verifiedAssertion(
  response: AuthenticationResponseJSON,
  session: ChallengeSession,
  passkey: PasskeyRow,
): Promise<number> {
  let result
  try {
    result = await verifyAuthenticationResponse({
      response,
      ...expected(session),
      credential: {
        id: b64url(passkey.credential_id),
        publicKey: new Uint8Array(passkey.public_key),
        counter: Number(passkey.sign_count),
        transports: passkey.transports as never,
      },
      requireUserVerification: false,
    })
  } catch {
    throw new WebAuthnVerificationFailedError('credential')
  }
  if (!result.verified) throw new WebAuthnVerificationFailedError('credential')
  return result.authenticationInfo.newCounter
}

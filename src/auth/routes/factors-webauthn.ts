// WebAuthn MFA factors (docs/auth-protocol.md §3.19; GoTrue's enrollWebAuthnFactor,
// challengeWebAuthnFactor, verifyWebAuthnFactor in internal/api/mfa.go; auth-js
// `mfa.webauthn.*`): enrolling makes an unverified factor; its first challenge is a
// registration ceremony ("create"), answered with the new credential, which verifies the factor;
// a verified factor's challenge is an authentication ceremony ("request") with its credential.
// Either raises the session to aal2 with AMR `mfa/webauthn`. The relying party is the
// database's `webauthn` setting, as for passkeys.
import type { FastifyRequest } from 'fastify'
import { withTransaction } from '../../shared/index.js'
import { ValidationFailedError, WebAuthnVerificationFailedError } from '../errors.js'
import { clientMeta } from '../http.js'
import {
  CHALLENGE_EXPIRY_SECONDS,
  checkNewFactor,
  completeVerification,
  createChallenge,
  liveChallenge,
  type MfaCaller,
} from '../mfa.js'
import { audit } from '../models/audit-log.js'
import {
  insertFactor,
  saveWebAuthnCredential,
  webAuthnCredentialOf,
  webAuthnCredentialsOfUser,
} from '../models/factors.js'
import type { ChallengeSession } from '../models/webauthn.js'
import type { FactorRow, TenantContext } from '../types.js'
import {
  assertionUserId,
  authenticationOptions,
  looksLikeCredential,
  registrationOptions,
  verifiedAssertion,
  verifiedRegistration,
  type StoredCredential,
} from '../webauthn.js'

type Ceremony = 'create' | 'request'

/** What a WebAuthn factor's challenge row keeps: the ceremony's kind and expectations. */
interface FactorCeremony extends ChallengeSession {
  type: Ceremony
}

const std64 = (b: Uint8Array | Buffer): string => Buffer.from(b).toString('base64')

/** A verified credential as GoTrue stores it in mfa_factors.web_authn_credential (go-webauthn's Credential). */
function storedJson(c: StoredCredential, o: { attestationType: string; aaguid: string | null }) {
  return {
    id: std64(c.id),
    publicKey: std64(c.publicKey),
    attestationType: o.attestationType,
    transport: c.transports,
    flags: { userPresent: true, userVerified: false, backupEligible: false, backupState: false },
    authenticator: {
      AAGUID: std64(Buffer.from((o.aaguid ?? '').replace(/-/g, ''), 'hex')),
      signCount: c.counter,
      cloneWarning: false,
      attachment: '',
    },
  }
}

/** The credential of a stored go-webauthn Credential JSON (ids in standard base64). */
function fromStoredJson(j: Record<string, unknown>): StoredCredential {
  const auth = (j.authenticator ?? {}) as { signCount?: number }
  return {
    id: Buffer.from(String(j.id ?? ''), 'base64'),
    publicKey: Buffer.from(String(j.publicKey ?? ''), 'base64'),
    counter: Number(auth.signCount ?? 0),
    transports: Array.isArray(j.transport) ? (j.transport as string[]) : [],
  }
}

function relyingParty(ctx: TenantContext) {
  const rp = ctx.tenant.auth.webauthn
  if (rp === undefined) throw new Error('WebAuthn factors are on without auth.webauthn')
  return { ...rp, challenge_expiry_seconds: CHALLENGE_EXPIRY_SECONDS }
}

export async function enrollWebAuthn(ctx: TenantContext, req: FastifyRequest, u: MfaCaller, friendlyName: string) {
  const user = u.user.user
  return withTransaction(ctx.db, async (q) => {
    await checkNewFactor(ctx, q, u, friendlyName)
    const now = ctx.now()
    const factor = await insertFactor(q, { userId: user.id, friendlyName, type: 'webauthn', secret: null, now })
    const traits = { factor_id: factor.id, factor_type: 'webauthn' }
    const ip = clientMeta(req).ip
    await audit(q, { action: 'factor_in_progress', actorId: user.id, actorUsername: user.email, traits, ip, now })
    return { id: factor.id, type: 'webauthn', friendly_name: friendlyName }
  })
}

/** The ceremony of a factor's challenge: registration while unverified, else authentication with its credential. */
async function ceremonyOptions(ctx: TenantContext, u: MfaCaller, factor: FactorRow) {
  const rp = relyingParty(ctx)
  const others = (await webAuthnCredentialsOfUser(ctx.db, u.user.user.id)).map(fromStoredJson)
  if (factor.status !== 'verified')
    return { type: 'create' as const, options: await registrationOptions(rp, u.user.user, others, 'factor') }
  const own = await webAuthnCredentialOf(ctx.db, factor.id)
  const allow = own ? [fromStoredJson(own)] : []
  return { type: 'request' as const, options: await authenticationOptions(rp, allow) }
}

export async function challengeWebAuthn(ctx: TenantContext, u: MfaCaller, factor: FactorRow, ip: string) {
  const rp = relyingParty(ctx)
  const { type, options } = await ceremonyOptions(ctx, u, factor)
  const ceremony: FactorCeremony = { type, challenge: options.challenge, rp_id: rp.rp_id, rp_origins: rp.rp_origins }
  const challenge = await createChallenge(ctx, u, factor, ip, ceremony)
  return { ...challenge, webauthn: { type, credential_options: { publicKey: options } } }
}

/** The body's `webauthn` member, GoTrue's checks in order. */
function answerOf(b: Record<string, unknown>): { type: Ceremony; response: unknown } {
  const w = Object.hasOwn(b, 'webauthn') ? b.webauthn : undefined
  if (typeof w !== 'object' || w === null || Array.isArray(w))
    throw new ValidationFailedError('request', 'WebAuthn config required')
  const { type, credential_response: response } = w as Record<string, unknown>
  if (type !== 'create' && type !== 'request')
    throw new ValidationFailedError('request', 'WebAuthn type must be create or request')
  if (response === undefined || response === null)
    throw new ValidationFailedError('request', 'credential_response required')
  if (!looksLikeCredential(response, type)) throw new ValidationFailedError('request', 'Invalid credential_response')
  return { type, response }
}

/** The credential the answer proves against the challenge's ceremony, as it is to be stored. */
async function provenCredential(
  ctx: TenantContext,
  factor: FactorRow,
  ceremony: FactorCeremony,
  type: Ceremony,
  response: unknown,
): Promise<{ json: Record<string, unknown>; aaguid: string | null }> {
  if (ceremony.type !== type) throw new WebAuthnVerificationFailedError('credential')
  if (type === 'create') {
    const info = await verifiedRegistration(response, ceremony)
    const c = info.credential
    const aaguid = info.aaguid === '00000000-0000-0000-0000-000000000000' ? null : info.aaguid
    const stored = {
      id: Buffer.from(c.id, 'base64url'),
      publicKey: Buffer.from(c.publicKey),
      counter: c.counter,
      transports: c.transports ?? [],
    }
    return { json: storedJson(stored, { attestationType: info.fmt, aaguid }), aaguid }
  }
  const own = await webAuthnCredentialOf(ctx.db, factor.id)
  if (own === null) throw new WebAuthnVerificationFailedError('credential')
  const stored = fromStoredJson(own)
  const assertion = assertionUserId(response).response
  if (!stored.id.equals(Buffer.from(assertion.rawId, 'base64url')))
    throw new WebAuthnVerificationFailedError('credential')
  const signCount = await verifiedAssertion(assertion, ceremony, stored)
  return {
    json: { ...own, authenticator: { ...(own.authenticator as object), signCount } },
    aaguid: factor.web_authn_aaguid,
  }
}

export async function verifyWebAuthn(
  ctx: TenantContext,
  req: FastifyRequest,
  u: MfaCaller,
  factor: FactorRow,
  challengeId: string,
  b: Record<string, unknown>,
) {
  const { type, response } = answerOf(b)
  const ip = clientMeta(req).ip ?? ''
  const challenge = await liveChallenge(ctx, factor, challengeId, ip)
  const ceremony = challenge.web_authn_session_data as FactorCeremony | null
  if (ceremony === null) throw new WebAuthnVerificationFailedError('credential')
  const { json, aaguid } = await provenCredential(ctx, factor, ceremony, type, response)
  return withTransaction(ctx.db, async (q) => {
    await saveWebAuthnCredential(q, factor.id, json, aaguid, ctx.now())
    return completeVerification(ctx, q, u, factor, challenge.id, ip)
  })
}

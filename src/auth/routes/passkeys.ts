// Passkeys (docs/auth-protocol.md §3.21, GoTrue's internal/api/passkey_*.go): a signed-in user
// registers discoverable WebAuthn credentials (POST /passkeys/registration/options, then
// /verify), lists, renames and deletes them (GET /passkeys, PATCH and DELETE /passkeys/:id);
// anyone signs in with one (POST /passkeys/authentication/options, then /verify: a session
// with AMR `passkey`). The admin API lists and deletes a user's passkeys. Each ceremony's
// challenge is used once (models/webauthn.ts). Off by default: 404 passkey_disabled.
import type { FastifyReply, FastifyRequest } from 'fastify'
import { withTransaction } from '../../shared/index.js'
import { UUID } from '../bearer.js'
import {
  EmailNotConfirmedError,
  InsufficientAalError,
  TooManyPasskeysError,
  UserBannedError,
  ValidationFailedError,
  WebAuthnChallengeExpiredError,
  WebAuthnChallengeNotFoundError,
  WebAuthnCredentialExistsError,
  WebAuthnVerificationFailedError,
} from '../errors.js'
import { bodyOf, clientMeta, optString } from '../http.js'
import { audit } from '../models/audit-log.js'
import { factorsOfUser } from '../models/factors.js'
import { identitiesForUser } from '../models/identities.js'
import { findSession } from '../models/sessions.js'
import { findUserById, isUserBanned } from '../models/users.js'
import {
  consumeChallenge,
  countPasskeys,
  deleteExpiredChallenges,
  deletePasskey,
  findPasskeyByCredentialId,
  findPasskeyOfUser,
  insertChallenge,
  insertPasskey,
  passkeysOfUser,
  renamePasskey,
  touchPasskey,
  type ChallengeRow,
  type ChallengeType,
  type PasskeyRow,
} from '../models/webauthn.js'
import { callerOf, contextOf } from '../request-state.js'
import { startSession } from '../tokens.js'
import type { AuthenticatedUser, TenantContext } from '../types.js'
import {
  assertionUserId,
  authenticationOptions,
  passkeyCredential,
  registrationOptions,
  relyingPartyOf,
  verifiedAssertion,
  verifiedRegistration,
} from '../webauthn.js'
import { loadPathUser, type Check } from './checks.js'

/** Passkeys are on for the database (GoTrue's requirePasskeyEnabled, before anything else). */
export const PASSKEYS: Check = {
  name: 'passkeys on',
  run: (req) => {
    relyingPartyOf(contextOf(req))
  },
}

const passkeyNotFound = () => new ValidationFailedError('notFound', 'Passkey not found')

/** A passkey as the API shows it: friendly_name and last_used_at only when set. */
function passkeyJson(p: PasskeyRow) {
  return {
    id: p.id,
    ...(p.friendly_name !== '' ? { friendly_name: p.friendly_name } : {}),
    created_at: p.created_at.toISOString(),
    ...(p.last_used_at ? { last_used_at: p.last_used_at.toISOString() } : {}),
  }
}

/** With a verified MFA factor, managing passkeys needs an aal2 session (GoTrue's requirePasskeyManagementAAL). */
async function requireManagementAal(ctx: TenantContext, caller: AuthenticatedUser): Promise<void> {
  const factors = await factorsOfUser(ctx.db, caller.user.user.id)
  if (!factors.some((f) => f.status === 'verified')) return
  const session = caller.sessionId ? await findSession(ctx.db, caller.sessionId) : null
  if (session?.aal !== 'aal2') throw new InsufficientAalError('passkeys')
}

/** Stores a ceremony's challenge and answers its options (GoTrue's options response). */
async function beginCeremony(ctx: TenantContext, type: ChallengeType, userId: string | null, options: object) {
  const rp = relyingPartyOf(ctx)
  const now = ctx.now()
  const expiresAt = new Date(now.getTime() + rp.challenge_expiry_seconds * 1000)
  await deleteExpiredChallenges(ctx.db, now)
  const challenge = (options as { challenge: string }).challenge
  const session = { challenge, rp_id: rp.rp_id, rp_origins: [...rp.rp_origins] }
  const id = await insertChallenge(ctx.db, { userId, type, session, now, expiresAt })
  return { challenge_id: id, options, expires_at: Math.floor(expiresAt.getTime() / 1000) }
}

/** The answer's challenge, consumed: 400 when unknown, used or expired. */
async function takeChallenge(req: FastifyRequest, type: ChallengeType, userId: string | null) {
  const ctx = contextOf(req)
  const b = bodyOf(req)
  const id = optString(b, 'challenge_id')
  if (!id) throw new ValidationFailedError('request', 'challenge_id is required')
  const credential = Object.hasOwn(b, 'credential') ? b.credential : undefined
  if (credential === undefined || credential === null)
    throw new ValidationFailedError('request', 'credential is required')
  if (!UUID.test(id)) throw new ValidationFailedError('request', 'challenge_id must be a valid UUID')
  const challenge: ChallengeRow | null = await consumeChallenge(ctx.db, id.toLowerCase(), type, userId)
  if (!challenge) throw new WebAuthnChallengeNotFoundError()
  if (challenge.expires_at.getTime() <= ctx.now().getTime()) throw new WebAuthnChallengeExpiredError()
  return { ctx, challenge, credential }
}

export async function postRegistrationOptions(req: FastifyRequest): Promise<unknown> {
  const ctx = contextOf(req)
  const caller = callerOf(req)
  const user = caller.user.user
  await requireManagementAal(ctx, caller)
  const existing = await passkeysOfUser(ctx.db, user.id)
  if (existing.length >= ctx.tenant.auth.max_passkeys_per_user) throw new TooManyPasskeysError()
  const options = await registrationOptions(relyingPartyOf(ctx), user, existing.map(passkeyCredential), 'passkey')
  return beginCeremony(ctx, 'registration', user.id, options)
}

export async function postRegistrationVerify(req: FastifyRequest): Promise<unknown> {
  const caller = callerOf(req)
  const user = caller.user.user
  await requireManagementAal(contextOf(req), caller)
  const { ctx, challenge, credential } = await takeChallenge(req, 'registration', user.id)
  const info = await verifiedRegistration(credential, challenge.session_data)
  const passkey = await withTransaction(ctx.db, async (q) => {
    if ((await countPasskeys(q, user.id)) >= ctx.tenant.auth.max_passkeys_per_user) throw new TooManyPasskeysError()
    if (await findPasskeyByCredentialId(q, Buffer.from(info.credential.id, 'base64url')))
      throw new WebAuthnCredentialExistsError()
    const now = ctx.now()
    const created = await insertPasskey(q, {
      userId: user.id,
      credentialId: Buffer.from(info.credential.id, 'base64url'),
      publicKey: Buffer.from(info.credential.publicKey),
      attestationType: info.fmt,
      aaguid: info.aaguid === '00000000-0000-0000-0000-000000000000' ? null : info.aaguid,
      signCount: info.credential.counter,
      transports: info.credential.transports ?? [],
      backupEligible: info.credentialDeviceType === 'multiDevice',
      backedUp: info.credentialBackedUp,
      now,
    })
    const traits = { passkey_id: created.id }
    await audit(q, { action: 'passkey_created', actorId: user.id, actorUsername: user.email, traits, now })
    return created
  })
  return passkeyJson(passkey)
}

export async function postAuthenticationOptions(req: FastifyRequest): Promise<unknown> {
  const ctx = contextOf(req)
  return beginCeremony(ctx, 'authentication', null, await authenticationOptions(relyingPartyOf(ctx)))
}

/** The passkey an assertion names, of the user its userHandle names; 400 otherwise. */
async function assertedPasskey(ctx: TenantContext, credential: unknown) {
  const { response, userId } = assertionUserId(credential)
  const user = UUID.test(userId) ? await findUserById(ctx.db, userId.toLowerCase()) : null
  const passkey = user ? await findPasskeyByCredentialId(ctx.db, Buffer.from(response.rawId, 'base64url')) : null
  if (!user || !passkey || passkey.user_id !== user.id) throw new WebAuthnVerificationFailedError('credential')
  return { response, user, passkey }
}

export async function postAuthenticationVerify(req: FastifyRequest): Promise<unknown> {
  const { ctx, challenge, credential } = await takeChallenge(req, 'authentication', null)
  const { response, user, passkey } = await assertedPasskey(ctx, credential)
  const counter = await verifiedAssertion(response, challenge.session_data, passkeyCredential(passkey))
  if (user.email && !user.email_confirmed_at) throw new EmailNotConfirmedError('passkey')
  if (isUserBanned(user, ctx.now())) throw new UserBannedError('bearer')
  return withTransaction(ctx.db, async (q) => {
    await touchPasskey(q, passkey.id, counter, ctx.now())
    const identities = await identitiesForUser(q, user.id)
    return startSession(ctx, q, { user, identities }, { method: 'passkey', ...clientMeta(req) })
  })
}

export async function getPasskeys(req: FastifyRequest): Promise<unknown> {
  const ctx = contextOf(req)
  return (await passkeysOfUser(ctx.db, callerOf(req).user.user.id)).map(passkeyJson)
}

/** The caller's (or, for the admin API, the path user's) passkey `:passkey`, or 404. */
async function passkeyOf(ctx: TenantContext, userId: string, id: string | undefined): Promise<PasskeyRow> {
  if (!id || !UUID.test(id)) throw passkeyNotFound()
  const p = await findPasskeyOfUser(ctx.db, userId, id.toLowerCase())
  if (!p) throw passkeyNotFound()
  return p
}

export async function patchPasskey(req: FastifyRequest): Promise<unknown> {
  const ctx = contextOf(req)
  const user = callerOf(req).user.user
  const name = optString(bodyOf(req), 'friendly_name') ?? ''
  if (name === '') throw new ValidationFailedError('request', 'friendly_name is required')
  if (name.length > 120) throw new ValidationFailedError('request', 'friendly_name must be 120 characters or less')
  const p = await passkeyOf(ctx, user.id, (req.params as { passkey?: string }).passkey)
  const renamed = await withTransaction(ctx.db, async (q) => {
    const now = ctx.now()
    const r = await renamePasskey(q, p.id, name, now)
    const traits = { passkey_id: p.id }
    await audit(q, { action: 'passkey_updated', actorId: user.id, actorUsername: user.email, traits, now })
    return r
  })
  return passkeyJson(renamed)
}

/** Deletes a passkey with its audit entry: by its user, or by an admin for `userId`. */
async function removePasskey(ctx: TenantContext, p: PasskeyRow, actorId: string, traits: Record<string, unknown>) {
  await withTransaction(ctx.db, async (q) => {
    await deletePasskey(q, p.id)
    await audit(q, { action: 'passkey_deleted', actorId, traits: { ...traits, passkey_id: p.id }, now: ctx.now() })
  })
}

export async function deletePasskeyRoute(req: FastifyRequest, reply: FastifyReply): Promise<unknown> {
  const ctx = contextOf(req)
  const caller = callerOf(req)
  await requireManagementAal(ctx, caller)
  const p = await passkeyOf(ctx, caller.user.user.id, (req.params as { passkey?: string }).passkey)
  await removePasskey(ctx, p, caller.user.user.id, {})
  return reply.code(204).send()
}

export async function getAdminPasskeys(req: FastifyRequest): Promise<unknown> {
  const ctx = contextOf(req)
  const user = await loadPathUser(ctx, req)
  return (await passkeysOfUser(ctx.db, user.id)).map(passkeyJson)
}

export async function deleteAdminPasskey(req: FastifyRequest, reply: FastifyReply): Promise<unknown> {
  const ctx = contextOf(req)
  const userId = (await loadPathUser(ctx, req)).id
  const p = await passkeyOf(ctx, userId, (req.params as { passkey?: string }).passkey)
  await removePasskey(ctx, p, userId, { user_id: userId, via: 'admin' })
  return reply.code(204).send()
}

// GET /user and PUT /user (docs/auth-protocol.md §3.14-3.15): the signed-in user's record; metadata merge
// (null deletes a key), password change (policy, not the same password, other sessions
// ended), and email change with confirmation mails (GoTrue's secure mode: both addresses).
import type { FastifyRequest } from 'fastify'
import { withTransaction } from '../../shared/index.js'
import { emailIdentityData, refreshProviders } from '../accounts.js'
import { sendEmailToken } from '../confirmations.js'
import { assertPasswordAcceptable, hashPassword, verifyPassword } from '../crypto.js'
import {
  Aal2RequiredToUpdateError, AppMetadataAdminOnlyError, EmailExistsError, MAX_OTP_ATTEMPTS, PhoneProviderDisabledError, ReauthenticationAttemptsExhaustedError, ReauthenticationNeededError, SamePasswordError, ValidationFailed422Error
} from '../errors.js'
import { callerOf, contextOf } from '../request-state.js'
import { countOtpAttempt } from '../models/otp-attempts.js'
import { bodyOf, normaliseEmail, optObject, optString, redirectUrlOf } from '../http.js'
import { audit } from '../models/audit-log.js'
import { identitiesForUser, insertIdentity } from '../models/identities.js'
import { deleteOneTimeTokensOfUser } from '../models/one-time-tokens.js'
import { deleteSessionsOfUser, findSession } from '../models/sessions.js'
import { isEmailTaken, lockUserById, toUserJson, updateUser, type UserColumn } from '../models/users.js'
import type { UserJson } from '../types.js'
import { pkceParamsOf, startEmailFlow } from '../pkce.js'
import { verifyReauthenticationNonce } from './reauthenticate.js'

/** GoTrue's metadata update: keys merged, a null value deletes its key. */
export function mergeMetadata (current: Record<string, unknown> | null, patch: Record<string, unknown>): Record<string, unknown> {
  const out = { ...(current ?? {}) }
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete out[k]
    else out[k] = v
  }
  return out
}

export async function getUser (req: FastifyRequest): Promise<UserJson> {
  const { user } = callerOf(req)
  return toUserJson(user)
}

export async function putUser (req: FastifyRequest): Promise<UserJson> {
  const ctx = contextOf(req)
  const { user: current, sessionId } = callerOf(req)
  const settings = ctx.tenant.auth
  const b = bodyOf(req)
  const rawEmail = optString(b, 'email')
  const phone = optString(b, 'phone')
  const password = optString(b, 'password')
  const data = optObject(b, 'data')
  const appMetadata = optObject(b, 'app_metadata')
  const u = current.user

  const email = rawEmail ? normaliseEmail(rawEmail) : undefined
  if (phone) throw new PhoneProviderDisabledError('Phone provider is disabled for this database')
  if (password !== undefined) assertPasswordAcceptable(password, settings)
  if (appMetadata && u.role !== 'admin') throw new AppMetadataAdminOnlyError()
  const nonce = optString(b, 'nonce')
  const session = sessionId ? await findSession(ctx.db, sessionId) : null
  if (current.factors?.some((f) => f.status === 'verified') && session?.aal !== 'aal2') {
    if ((password !== undefined && password !== '') || (email !== undefined && email !== (u.email ?? '')) || (phone !== undefined && phone !== (u.phone ?? ''))) {
      throw new Aal2RequiredToUpdateError()
    }
  }
  if (password !== undefined && u.is_anonymous && !u.email && !email) {
    throw new ValidationFailed422Error('Updating password of an anonymous user without an email or phone is not allowed')
  }
  const changingEmail = email !== undefined && email !== (u.email ?? '').toLowerCase()
  if (changingEmail && await isEmailTaken(ctx.db, email, u.id)) throw new EmailExistsError()

  // Secure password change: a session older than 24 h needs the nonce of GET /reauthenticate.
  const needsNonce = password !== undefined && settings.secure_password_change &&
    (!session?.created_at || ctx.now().getTime() > session.created_at.getTime() + 24 * 3600 * 1000)
  if (needsNonce && !nonce) throw new ReauthenticationNeededError()
  if (needsNonce) {
    // Each try counts against the outstanding nonce before it is compared, as codes do.
    const attempts = await countOtpAttempt(ctx.db, u.email ?? '', ['reauthentication_token'])
    if (attempts > MAX_OTP_ATTEMPTS) throw new ReauthenticationAttemptsExhaustedError()
  }
  let newHash: string | undefined
  if (password !== undefined) {
    if (await verifyPassword(password, u.encrypted_password, ctx.config.auth.bcrypt_cost)) throw new SamePasswordError()
    newHash = await hashPassword(password, ctx.config.auth.bcrypt_cost)
  }
  const redirectTo = redirectUrlOf(req, settings)
  // PKCE: an email change of a PKCE client ends with ?code= (flow email_change).
  const pkce = changingEmail ? pkceParamsOf(ctx, b.code_challenge, b.code_challenge_method) : null

  const updated = await withTransaction(ctx.db, async (q) => {
    const now = ctx.now()
    let user = (await lockUserById(q, u.id))!
    if (needsNonce) await verifyReauthenticationNonce(ctx, q, user, nonce!)
    const fields: Partial<Record<UserColumn, unknown>> = {}
    if (data) fields.raw_user_meta_data = mergeMetadata(user.raw_user_meta_data, data)
    if (appMetadata) fields.raw_app_meta_data = mergeMetadata(user.raw_app_meta_data, appMetadata)
    if (newHash) {
      Object.assign(fields, { encrypted_password: newHash, confirmation_token: '', recovery_token: '', email_change_token_new: '', email_change_token_current: '' })
    }
    if (Object.keys(fields).length) user = await updateUser(q, user.id, fields, now)
    if (newHash) {
      await deleteOneTimeTokensOfUser(q, user.id)
      await deleteSessionsOfUser(q, user.id, sessionId)
      await audit(q, { action: 'user_updated_password', actorId: user.id, actorUsername: user.email, now })
    }
    if (changingEmail) {
      if (user.is_anonymous && !settings.mail_confirmation) {
        // Anonymous user + autoconfirm: the address is taken over at once.
        const meta = { ...(user.raw_user_meta_data ?? {}), email, email_verified: true }
        user = await updateUser(q, user.id, { email, email_confirmed_at: now, is_anonymous: false, raw_user_meta_data: meta }, now)
        await insertIdentity(q, { userId: user.id, provider: 'email', providerId: user.id, identityData: emailIdentityData(user.id, email, undefined, true), now })
        user = (await refreshProviders(ctx, q, user)).user
      } else {
        const extra = { email_change: email, email_change_confirm_status: 0, email_change_token_current: '' }
        if (pkce) await startEmailFlow(ctx, q, user.id, 'email_change', pkce)
        user = (await sendEmailToken(ctx, q, user, 'email_change_new', { address: email, redirectTo, newEmail: email, extra, pkce: !!pkce })).user
        if (user.email) {
          user = (await sendEmailToken(ctx, q, user, 'email_change_current', { address: user.email, redirectTo, newEmail: email, pkce: !!pkce })).user
        }
      }
    }
    await audit(q, { action: 'user_modified', actorId: user.id, actorUsername: user.email, now })
    return { user, identities: await identitiesForUser(q, user.id) }
  })
  return toUserJson(updated)
}

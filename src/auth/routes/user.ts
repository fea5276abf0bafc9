// GET /user and PUT /user (docs/auth-protocol.md §3.14-3.15): the signed-in user's record; metadata merge
// (null deletes a key), password change (policy, not the same password, other sessions
// ended), and email change with confirmation mails (GoTrue's secure mode: both addresses).
import type { FastifyRequest } from 'fastify'
import { withTransaction, type Queryable } from '../../shared/index.js'
import { insertEmailIdentity, refreshProviders } from '../accounts.js'
import { sendEmailChangeMails } from '../confirmations.js'
import { assertPasswordAcceptable, hashPassword, verifyPassword } from '../crypto.js'
import {
  InsufficientAalError,
  PhoneProviderDisabledError,
  EmailExistsError,
  MAX_OTP_ATTEMPTS,
  NotAdminError,
  ReauthenticationNeededError,
  ReauthenticationNotValidError,
  SamePasswordError,
  ValidationFailedError,
} from '../errors.js'
import { callerOf, contextOf } from '../request-state.js'
import { countOtpAttempt } from '../models/otp-attempts.js'
import { bodyOf, normaliseEmail, optObject, optString, redirectUrlOf } from '../http.js'
import { audit } from '../models/audit-log.js'
import { identitiesForUser } from '../models/identities.js'
import { deleteOneTimeTokensOfUser } from '../models/one-time-tokens.js'
import { deleteSessionsOfUser, findSession } from '../models/sessions.js'
import { isEmailTaken, lockUserById, toUserJson, updateUser, type UserColumn } from '../models/users.js'
import type { SessionRow, TenantContext, UserJson, UserRow } from '../types.js'
import { pkceParamsOf } from '../pkce.js'
import { verifyReauthenticationNonce } from './reauthenticate.js'

/** GoTrue's metadata update: keys merged, a null value deletes its key. */
export function mergeMetadata(
  current: Record<string, unknown> | null,
  patch: Record<string, unknown>,
): Record<string, unknown> {
  const out = { ...(current ?? {}) }
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete out[k]
    else out[k] = v
  }
  return out
}

export async function getUser(req: FastifyRequest): Promise<UserJson> {
  const { user } = callerOf(req)
  return toUserJson(user)
}

/** A PUT /user body, read and checked in GoTrue's order. */
interface UserPatch {
  email?: string
  phone?: string
  password?: string
  data?: Record<string, unknown>
  appMetadata?: Record<string, unknown>
  nonce?: string
  /** The body's PKCE fields (an email change of a PKCE client ends with ?code=). */
  codeChallenge: unknown
  codeChallengeMethod: unknown
}

function readUserPatch(ctx: TenantContext, req: FastifyRequest, u: UserRow): UserPatch {
  const b = bodyOf(req)
  const rawEmail = optString(b, 'email')
  const phone = optString(b, 'phone')
  const password = optString(b, 'password')
  const data = optObject(b, 'data')
  const appMetadata = optObject(b, 'app_metadata')
  const email = rawEmail ? normaliseEmail(rawEmail) : undefined
  if (phone) throw new PhoneProviderDisabledError('request', 'Phone provider is disabled for this database')
  if (password !== undefined) assertPasswordAcceptable(password, ctx.tenant.auth)
  if (appMetadata && u.role !== 'admin') throw new NotAdminError('Updating app_metadata requires admin privileges')
  const nonce = optString(b, 'nonce')
  return {
    email,
    phone,
    password,
    data,
    appMetadata,
    nonce,
    codeChallenge: b.code_challenge,
    codeChallengeMethod: b.code_challenge_method,
  }
}

/** A change GoTrue asks aal2 for when the user has a verified factor: a password, another address or phone. */
function isSensitiveChange(u: UserRow, p: UserPatch): boolean {
  return (
    (p.password !== undefined && p.password !== '') ||
    (p.email !== undefined && p.email !== (u.email ?? '')) ||
    (p.phone !== undefined && p.phone !== (u.phone ?? ''))
  )
}

/** The address the user changes to, or null when it stays; refused when another user has it. */
async function newEmailOf(ctx: TenantContext, u: UserRow, email: string | undefined): Promise<string | null> {
  if (email === undefined || email === (u.email ?? '').toLowerCase()) return null
  if (await isEmailTaken(ctx.db, email, u.id)) throw new EmailExistsError('signUp')
  return email
}

/** Secure password change: a session older than 24 h needs the nonce of GET /reauthenticate. */
function needsNonce(ctx: TenantContext, password: string | undefined, session: SessionRow | null): boolean {
  return (
    password !== undefined &&
    ctx.tenant.auth.secure_password_change &&
    (!session?.created_at || ctx.now().getTime() > session.created_at.getTime() + 24 * 3600 * 1000)
  )
}

/** The nonce to verify: required, and each try counts against the outstanding nonce before it is compared, as codes do. */
async function nonceToVerify(ctx: TenantContext, u: UserRow, nonce: string | undefined): Promise<string> {
  if (!nonce) throw new ReauthenticationNeededError()
  const attempts = await countOtpAttempt(ctx.db, u.email ?? '', ['reauthentication_token'])
  if (attempts > MAX_OTP_ATTEMPTS)
    throw new ReauthenticationNotValidError(
      `Nonce has expired or is invalid: after ${MAX_OTP_ATTEMPTS} tries this nonce no longer works, request a new one`,
    )
  return nonce
}

/** The new password's hash (bcrypt before the transaction), refused when it is the current one. */
async function newPasswordHash(
  ctx: TenantContext,
  u: UserRow,
  password: string | undefined,
): Promise<string | undefined> {
  if (password === undefined) return undefined
  if (await verifyPassword(password, u.encrypted_password, ctx.config.auth.bcrypt_cost)) throw new SamePasswordError()
  return hashPassword(password, ctx.config.auth.bcrypt_cost)
}

export async function putUser(req: FastifyRequest): Promise<UserJson> {
  const ctx = contextOf(req)
  const { user: current, sessionId } = callerOf(req)
  const u = current.user
  const p = readUserPatch(ctx, req, u)
  const session = sessionId ? await findSession(ctx.db, sessionId) : null
  const hasVerifiedFactor = current.factors?.some((f) => f.status === 'verified') ?? false
  if (hasVerifiedFactor && session?.aal !== 'aal2' && isSensitiveChange(u, p)) throw new InsufficientAalError('update')
  if (p.password !== undefined && u.is_anonymous && !u.email && !p.email) {
    throw new ValidationFailedError(
      'unprocessable',
      'Updating password of an anonymous user without an email or phone is not allowed',
    )
  }
  const newEmail = await newEmailOf(ctx, u, p.email)
  const nonce = needsNonce(ctx, p.password, session) ? await nonceToVerify(ctx, u, p.nonce) : null
  const newHash = await newPasswordHash(ctx, u, p.password)
  const redirectTo = redirectUrlOf(req, ctx.tenant.auth)
  const pkce = newEmail !== null ? pkceParamsOf(ctx, p.codeChallenge, p.codeChallengeMethod) : null
  // The change, in one transaction on the locked user row.
  const changed = await withTransaction(ctx.db, async (q) => {
    const now = ctx.now()
    let user = (await lockUserById(q, u.id))!
    if (nonce !== null) await verifyReauthenticationNonce(ctx, q, user, nonce)
    const fields = changedColumns(user, p, newHash)
    if (Object.keys(fields).length) user = await updateUser(q, user.id, fields, now)
    if (newHash !== undefined) await endOtherSessions(q, user, sessionId, now)
    if (newEmail !== null) {
      user =
        user.is_anonymous && !ctx.tenant.auth.mail_confirmation
          ? await takeOverEmail(ctx, q, user, newEmail, now)
          : await sendEmailChangeMails(ctx, q, user, newEmail, { redirectTo, pkce })
    }
    await audit(q, { action: 'user_modified', actorId: user.id, actorUsername: user.email, now })
    return { user, identities: await identitiesForUser(q, user.id) }
  })
  return toUserJson(changed)
}

/** The columns the patch writes: metadata merged, a new password with the tokens it voids. */
function changedColumns(
  user: UserRow,
  p: UserPatch,
  newHash: string | undefined,
): Partial<Record<UserColumn, unknown>> {
  const fields: Partial<Record<UserColumn, unknown>> = {}
  if (p.data) fields.raw_user_meta_data = mergeMetadata(user.raw_user_meta_data, p.data)
  if (p.appMetadata) fields.raw_app_meta_data = mergeMetadata(user.raw_app_meta_data, p.appMetadata)
  if (newHash === undefined) return fields
  const voided = {
    confirmation_token: '',
    recovery_token: '',
    email_change_token_new: '',
    email_change_token_current: '',
  }
  return { ...fields, encrypted_password: newHash, ...voided }
}

/** After a password change: the user's one-time tokens and other sessions end (audited). */
async function endOtherSessions(q: Queryable, user: UserRow, sessionId: string | null, now: Date): Promise<void> {
  await deleteOneTimeTokensOfUser(q, user.id)
  await deleteSessionsOfUser(q, user.id, sessionId)
  await audit(q, { action: 'user_updated_password', actorId: user.id, actorUsername: user.email, now })
}

/** An anonymous user with autoconfirm takes the address over at once, with its email identity. */
async function takeOverEmail(
  ctx: TenantContext,
  q: Queryable,
  user: UserRow,
  email: string,
  now: Date,
): Promise<UserRow> {
  const meta = { ...(user.raw_user_meta_data ?? {}), email, email_verified: true }
  const updated = await updateUser(
    q,
    user.id,
    { email, email_confirmed_at: now, is_anonymous: false, raw_user_meta_data: meta },
    now,
  )
  await insertEmailIdentity(q, updated.id, email, true, now)
  return (await refreshProviders(ctx, q, updated)).user
}

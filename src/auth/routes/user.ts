// GET /user and PUT /user (docs/auth-protocol.md §3.14-3.15): the signed-in user's record; metadata merge
// (null deletes a key), password change (policy, not the same password, other sessions
// ended), and email change with confirmation mails (GoTrue's secure mode: both addresses).
import type { FastifyRequest } from 'fastify'
import { withTransaction, type Queryable } from '../../shared/index.js'
import { emailIdentityData, refreshProviders } from '../accounts.js'
import { sendEmailToken } from '../confirmations.js'
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
import { identitiesForUser, insertIdentity } from '../models/identities.js'
import { deleteOneTimeTokensOfUser } from '../models/one-time-tokens.js'
import { deleteSessionsOfUser, findSession } from '../models/sessions.js'
import { isEmailTaken, lockUserById, toUserJson, updateUser, type UserColumn } from '../models/users.js'
import type { SessionRow, TenantContext, UserJson, UserRow, UserWithIdentities } from '../types.js'
import { pkceParamsOf, startEmailFlow, type PkceParams } from '../pkce.js'
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

/**
 * The checks against the stored user: aal2 for a sensitive change of a user with verified
 * factors, no password for an anonymous user without an address, a free new address.
 * Returns whether the email changes.
 */
async function checkUserPatch(
  ctx: TenantContext,
  current: UserWithIdentities,
  p: UserPatch,
  session: SessionRow | null,
): Promise<boolean> {
  const u = current.user
  if (current.factors?.some((f) => f.status === 'verified') && session?.aal !== 'aal2') {
    if (
      (p.password !== undefined && p.password !== '') ||
      (p.email !== undefined && p.email !== (u.email ?? '')) ||
      (p.phone !== undefined && p.phone !== (u.phone ?? ''))
    ) {
      throw new InsufficientAalError('update')
    }
  }
  if (p.password !== undefined && u.is_anonymous && !u.email && !p.email) {
    throw new ValidationFailedError(
      'unprocessable',
      'Updating password of an anonymous user without an email or phone is not allowed',
    )
  }
  const changingEmail = p.email !== undefined && p.email !== (u.email ?? '').toLowerCase()
  if (changingEmail && (await isEmailTaken(ctx.db, p.email!, u.id))) throw new EmailExistsError('signUp')
  return changingEmail
}

/**
 * Secure password change: a session older than 24 h needs the nonce of GET /reauthenticate;
 * each try counts against the outstanding nonce before it is compared, as codes do.
 * Returns whether the nonce is to be verified.
 */
async function checkNonceNeeded(
  ctx: TenantContext,
  u: UserRow,
  p: UserPatch,
  session: SessionRow | null,
): Promise<boolean> {
  const needsNonce =
    p.password !== undefined &&
    ctx.tenant.auth.secure_password_change &&
    (!session?.created_at || ctx.now().getTime() > session.created_at.getTime() + 24 * 3600 * 1000)
  if (needsNonce && !p.nonce) throw new ReauthenticationNeededError()
  if (needsNonce) {
    const attempts = await countOtpAttempt(ctx.db, u.email ?? '', ['reauthentication_token'])
    if (attempts > MAX_OTP_ATTEMPTS)
      throw new ReauthenticationNotValidError(
        `Nonce has expired or is invalid: after ${MAX_OTP_ATTEMPTS} tries this nonce no longer works, request a new one`,
      )
  }
  return needsNonce
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
  const changingEmail = await checkUserPatch(ctx, current, p, session)
  const needsNonce = await checkNonceNeeded(ctx, u, p, session)
  const newHash = await newPasswordHash(ctx, u, p.password)
  const redirectTo = redirectUrlOf(req, ctx.tenant.auth)
  const pkce = changingEmail ? pkceParamsOf(ctx, p.codeChallenge, p.codeChallengeMethod) : null
  const change: UserChange = { patch: p, needsNonce, newHash, sessionId, changingEmail, redirectTo, pkce }
  return toUserJson(await withTransaction(ctx.db, (q) => applyUserChange(ctx, q, u.id, change)))
}

interface UserChange {
  patch: UserPatch
  needsNonce: boolean
  newHash: string | undefined
  sessionId: string | null
  changingEmail: boolean
  redirectTo: string
  pkce: PkceParams | null
}

/** The change, in one transaction on the locked user row. */
async function applyUserChange(
  ctx: TenantContext,
  q: Queryable,
  id: string,
  c: UserChange,
): Promise<UserWithIdentities> {
  const now = ctx.now()
  const p = c.patch
  let user = (await lockUserById(q, id))!
  if (c.needsNonce) await verifyReauthenticationNonce(ctx, q, user, p.nonce!)
  const fields: Partial<Record<UserColumn, unknown>> = {}
  if (p.data) fields.raw_user_meta_data = mergeMetadata(user.raw_user_meta_data, p.data)
  if (p.appMetadata) fields.raw_app_meta_data = mergeMetadata(user.raw_app_meta_data, p.appMetadata)
  if (c.newHash) {
    Object.assign(fields, {
      encrypted_password: c.newHash,
      confirmation_token: '',
      recovery_token: '',
      email_change_token_new: '',
      email_change_token_current: '',
    })
  }
  if (Object.keys(fields).length) user = await updateUser(q, user.id, fields, now)
  if (c.newHash) {
    await deleteOneTimeTokensOfUser(q, user.id)
    await deleteSessionsOfUser(q, user.id, c.sessionId)
    await audit(q, { action: 'user_updated_password', actorId: user.id, actorUsername: user.email, now })
  }
  if (c.changingEmail) user = await changeEmail(ctx, q, user, p.email!, c, now)
  await audit(q, { action: 'user_modified', actorId: user.id, actorUsername: user.email, now })
  return { user, identities: await identitiesForUser(q, user.id) }
}

/** An anonymous user with autoconfirm takes the address over at once; anyone else gets the confirmation mails. */
async function changeEmail(
  ctx: TenantContext,
  q: Queryable,
  user: UserRow,
  email: string,
  c: UserChange,
  now: Date,
): Promise<UserRow> {
  const { redirectTo, pkce } = c
  if (user.is_anonymous && !ctx.tenant.auth.mail_confirmation) {
    const meta = { ...(user.raw_user_meta_data ?? {}), email, email_verified: true }
    user = await updateUser(
      q,
      user.id,
      { email, email_confirmed_at: now, is_anonymous: false, raw_user_meta_data: meta },
      now,
    )
    await insertIdentity(q, {
      userId: user.id,
      provider: 'email',
      providerId: user.id,
      identityData: emailIdentityData(user.id, email, undefined, true),
      now,
    })
    return (await refreshProviders(ctx, q, user)).user
  }
  const extra = { email_change: email, email_change_confirm_status: 0, email_change_token_current: '' }
  if (pkce) await startEmailFlow(ctx, q, user.id, 'email_change', pkce)
  user = (
    await sendEmailToken(ctx, q, user, 'email_change_new', {
      address: email,
      redirectTo,
      newEmail: email,
      extra,
      pkce: !!pkce,
    })
  ).user
  if (user.email) {
    user = (
      await sendEmailToken(ctx, q, user, 'email_change_current', {
        address: user.email,
        redirectTo,
        newEmail: email,
        pkce: !!pkce,
      })
    ).user
  }
  return user
}

// Emailed one-time tokens (docs/auth-protocol.md §5.4, §5.5): issuing a token of a kind (user column +
// auth.one_time_tokens row + *_sent_at), mailing it, and what verifying each kind does.
// Every kind (signup, invite, email_change, recovery, magic link) has its entry in
// EMAIL_TOKENS / VERIFY_KINDS and goes through the same functions.
import { ownValue, type Queryable } from '../shared/index.js'
import { generateOtp, hashOtp, randomPasswordHash } from './crypto.js'
import { OtpExpiredError, MAX_OTP_ATTEMPTS, UserBannedError } from './errors.js'
import type { MailKind, VerifyLinkType } from './mail/index.js'
import { audit } from './models/audit-log.js'
import { identitiesForUser, updateIdentity } from './models/identities.js'
import {
  deleteOneTimeToken,
  deleteOneTimeTokensOfUser,
  findOneTimeToken,
  putOneTimeToken,
  type OneTimeTokenType,
} from './models/one-time-tokens.js'
import { clearAddressAttempts, otpAttemptsOf } from './models/otp-attempts.js'
import { isUserBanned, lockUserById, toUserJson, updateUser, type UserColumn } from './models/users.js'
import { hookOf, runAuthHook } from './auth-hooks.js'
import { confirmEmail, insertEmailIdentity, refreshProviders } from './accounts.js'
import type { TenantContext, UserRow, UserWithIdentities } from './types.js'
import { recordEmailProof } from './models/email-proofs.js'
import { flowMethodOfVerifyType, startEmailFlow, type PkceParams } from './pkce.js'

interface EmailTokenSpec {
  /** The one-time token's type, also the user column that holds it. */
  ott: OneTimeTokenType & UserColumn
  sentAt: UserColumn
  mail: MailKind
  linkType: VerifyLinkType
}

/** Where each kind of emailed token lives and which mail carries it. */
const EMAIL_TOKENS = {
  confirmation: {
    ott: 'confirmation_token',
    sentAt: 'confirmation_sent_at',
    mail: 'confirmation',
    linkType: 'signup',
  },
  invite: {
    ott: 'confirmation_token',
    sentAt: 'confirmation_sent_at',
    mail: 'invite',
    linkType: 'invite',
  },
  recovery: {
    ott: 'recovery_token',
    sentAt: 'recovery_sent_at',
    mail: 'recovery',
    linkType: 'recovery',
  },
  magiclink: {
    ott: 'recovery_token',
    sentAt: 'recovery_sent_at',
    mail: 'magic_link',
    linkType: 'magiclink',
  },
  email_change_new: {
    ott: 'email_change_token_new',
    sentAt: 'email_change_sent_at',
    mail: 'email_change',
    linkType: 'email_change',
  },
  email_change_current: {
    ott: 'email_change_token_current',
    sentAt: 'email_change_sent_at',
    mail: 'email_change',
    linkType: 'email_change',
  },
} satisfies Record<string, EmailTokenSpec>

export type EmailTokenKind = keyof typeof EMAIL_TOKENS

interface IssuedToken {
  otp: string
  hash: string
  user: UserRow
}

/**
 * Creates the token of a kind for `address`: hex SHA-224(address + otp), `pkce_`-prefixed
 * in PKCE mode, stored in the user's column and in one_time_tokens; stamps *_sent_at.
 */
export async function issueEmailToken(
  ctx: TenantContext,
  q: Queryable,
  user: UserRow,
  kind: EmailTokenKind,
  opts: { address: string; pkce?: boolean; extra?: Partial<Record<UserColumn, unknown>> },
): Promise<IssuedToken> {
  const spec = EMAIL_TOKENS[kind]
  const now = ctx.now()
  const otp = generateOtp()
  const plain = hashOtp(opts.address.toLowerCase(), otp)
  const hash = opts.pkce ? 'pkce_' + plain : plain
  const updated = await updateUser(q, user.id, { ...(opts.extra ?? {}), [spec.ott]: hash, [spec.sentAt]: now }, now)
  await putOneTimeToken(q, { userId: user.id, type: spec.ott, hash, relatesTo: opts.address, now })
  return { otp, hash, user: updated }
}

/** Issues a token and mails it (inside the caller's transaction: a failed send rolls back). */
export async function sendEmailToken(
  ctx: TenantContext,
  q: Queryable,
  user: UserRow,
  kind: EmailTokenKind,
  opts: {
    address: string
    redirectTo: string
    /** A PKCE request's parameters: its flow state starts (an email change's with the mail to the new address). */
    pkce?: PkceParams | null
    newEmail?: string
    extra?: Partial<Record<UserColumn, unknown>>
  },
): Promise<IssuedToken> {
  const spec = EMAIL_TOKENS[kind]
  if (opts.pkce && kind !== 'email_change_current')
    await startEmailFlow(ctx, q, user.id, flowMethodOfVerifyType(spec.linkType), opts.pkce)
  const issued = await issueEmailToken(ctx, q, user, kind, { ...opts, pkce: !!opts.pkce })
  const deliver = sendEmailHookDelivery({ ctx, q }, issued.user, {
    ...issued,
    toNew: kind === 'email_change_new',
    action: spec.linkType,
    redirectTo: opts.redirectTo,
  })
  await ctx.mailer.send(ctx, q, {
    deliver,
    kind: spec.mail,
    to: opts.address,
    linkType: spec.linkType,
    tokenHash: issued.hash,
    otp: issued.otp,
    redirectTo: opts.redirectTo,
    email: user.email ?? '',
    newEmail: opts.newEmail,
    data: issued.user.raw_user_meta_data ?? {},
  })
  const action =
    kind === 'invite'
      ? 'user_invited'
      : kind === 'recovery' || kind === 'magiclink'
        ? 'user_recovery_requested'
        : 'user_confirmation_requested'
  await audit(q, { action, actorId: user.id, actorUsername: user.email, now: ctx.now() })
  return issued
}

/**
 * The send_email hook's delivery of a mail instead of SMTP, or undefined when the database has
 * no such hook: the user as the API shows it, and the mail's tokens as GoTrue's EmailData
 * has them (a mail to an email change's new address carries them as token_new, token_hash_new).
 */
export function sendEmailHookDelivery(
  call: { ctx: TenantContext; q: Queryable; ip?: string | null },
  user: UserRow,
  mail: { otp: string; hash: string; toNew: boolean; action: string; redirectTo: string },
): (() => Promise<void>) | undefined {
  if (hookOf(call.ctx, 'send_email') === null) return undefined
  const { otp, hash, toNew } = mail
  const emailData = {
    token: toNew ? '' : otp,
    token_hash: toNew ? '' : hash,
    redirect_to: mail.redirectTo,
    email_action_type: mail.action,
    site_url: call.ctx.tenant.auth.site_url,
    token_new: toNew ? otp : '',
    token_hash_new: toNew ? hash : '',
  }
  return async () => {
    const json = toUserJson({ user, identities: await identitiesForUser(call.q, user.id) })
    await runAuthHook(call, 'send_email', { user: json, email_data: emailData })
  }
}

/**
 * GoTrue's secure email change: a link to the new address, and one to the current address
 * if any; the change starts over (an earlier confirmation of one half no longer counts, the
 * earlier links stop working).
 */
export async function sendEmailChangeMails(
  ctx: TenantContext,
  q: Queryable,
  user: UserRow,
  newEmail: string,
  mail: { redirectTo: string; pkce: PkceParams | null },
): Promise<UserRow> {
  const extra = { email_change: newEmail, email_change_confirm_status: 0, email_change_token_current: '' }
  const opts = { ...mail, newEmail }
  const sent = await sendEmailToken(ctx, q, user, 'email_change_new', { ...opts, address: newEmail, extra })
  if (!sent.user.email) return sent.user
  return (await sendEmailToken(ctx, q, sent.user, 'email_change_current', { ...opts, address: sent.user.email })).user
}

// ----- verification --------------------------------------------------------------------------

export type VerifyOutcome =
  | { kind: 'signed_in'; user: UserWithIdentities }
  /** Secure email change: the first of two links was accepted; no session. */
  | { kind: 'first_email_change_confirmation' }

interface VerifyKind {
  ottTypes: OneTimeTokenType[]
  sentAt(u: UserRow): Date | null
  apply(ctx: TenantContext, q: Queryable, user: UserRow, tokenType: OneTimeTokenType): Promise<VerifyOutcome>
}

/** The verify `type`s this engine handles, by GoTrue name. */
const VERIFY_KINDS: Partial<Record<string, VerifyKind>> = {
  signup: {
    ottTypes: ['confirmation_token'],
    sentAt: (u) => u.confirmation_sent_at,
    async apply(ctx, q, user) {
      return { kind: 'signed_in', user: await confirmEmail(ctx, q, user) }
    },
  },
  invite: {
    ottTypes: ['confirmation_token'],
    sentAt: (u) => u.invited_at ?? u.confirmation_sent_at,
    async apply(ctx, q, user) {
      // An invited user has no password yet: a random one, the app then asks for a real one.
      if (!user.encrypted_password) {
        const hash = await randomPasswordHash(ctx.config.auth.bcrypt_cost)
        user = await updateUser(q, user.id, { encrypted_password: hash }, ctx.now())
      }
      return { kind: 'signed_in', user: await confirmEmail(ctx, q, user) }
    },
  },
  email_change: {
    ottTypes: ['email_change_token_new', 'email_change_token_current'],
    sentAt: (u) => u.email_change_sent_at,
    apply: applyEmailChange,
  },
  recovery: {
    ottTypes: ['recovery_token'],
    sentAt: (u) => u.recovery_sent_at,
    apply: applyRecoveryToken,
  },
  magiclink: {
    ottTypes: ['recovery_token'],
    sentAt: (u) => u.recovery_sent_at,
    apply: applyRecoveryToken,
  },
}

/** recovery / magiclink: the token is spent, an unconfirmed address becomes confirmed. */
async function applyRecoveryToken(ctx: TenantContext, q: Queryable, user: UserRow): Promise<VerifyOutcome> {
  if (!user.email_confirmed_at) return { kind: 'signed_in', user: await confirmEmail(ctx, q, user) }
  const updated = await updateUser(q, user.id, { recovery_token: '' }, ctx.now())
  await deleteOneTimeTokensOfUser(q, user.id)
  return { kind: 'signed_in', user: await refreshProviders(ctx, q, updated) }
}

/** The user's email identity names the new address (created when the user had none). */
async function setEmailIdentity(q: Queryable, userId: string, email: string, now: Date): Promise<void> {
  const identities = await identitiesForUser(q, userId)
  const ei = identities.find((i) => i.provider === 'email')
  if (ei) {
    const identityData = { ...ei.identity_data, email, email_verified: true }
    await updateIdentity(q, ei.id, { identityData }, now)
    return
  }
  await insertEmailIdentity(q, userId, email, true, now)
}

/** §5.5 email change: in secure mode the first of the two links only records the confirmation. */
async function applyEmailChange(
  ctx: TenantContext,
  q: Queryable,
  user: UserRow,
  tokenType: OneTimeTokenType,
): Promise<VerifyOutcome> {
  const now = ctx.now()
  const column: UserColumn =
    tokenType === 'email_change_token_current' ? 'email_change_token_current' : 'email_change_token_new'
  const bothPending = !!user.email && !!user.email_change_token_current && !!user.email_change_token_new
  if (bothPending && (user.email_change_confirm_status ?? 0) === 0) {
    await updateUser(q, user.id, { email_change_confirm_status: 1, [column]: '' }, now)
    await deleteOneTimeToken(q, user.id, tokenType)
    return { kind: 'first_email_change_confirmation' }
  }
  const newEmail = (user.email_change ?? '').toLowerCase()
  if (!newEmail) throw new OtpExpiredError('token')
  const meta = { ...(user.raw_user_meta_data ?? {}), email: newEmail, email_verified: true }
  let updated = await updateUser(
    q,
    user.id,
    {
      email: newEmail,
      email_change: '',
      email_change_token_new: '',
      email_change_token_current: '',
      email_change_confirm_status: 0,
      email_confirmed_at: user.email_confirmed_at ?? now,
      is_anonymous: false,
      raw_user_meta_data: meta,
    },
    now,
  )
  await setEmailIdentity(q, user.id, newEmail, now)
  await deleteOneTimeTokensOfUser(q, user.id)
  updated = (await refreshProviders(ctx, q, updated)).user
  await audit(q, {
    action: 'user_modified',
    actorId: user.id,
    actorUsername: newEmail,
    traits: { email_change: true },
    now,
  })
  return { kind: 'signed_in', user: { user: updated, identities: await identitiesForUser(q, user.id) } }
}

/** The token types a verify `type` may match (`email`: a confirmation or a magic link). */
export function ottTypesOfVerifyType(type: string): OneTimeTokenType[] {
  if (type === 'email') return ['confirmation_token', 'recovery_token']
  return ownValue(VERIFY_KINDS, type)?.ottTypes ?? []
}

/**
 * Verifies a token hash of one of the kind's token types: finds the one-time token, checks
 * expiry (sent_at + otp_expiry) and the ban, then applies the kind. Runs in the caller's
 * transaction. `relatesTo` (OTP verification) must match the address the token was sent to.
 */
export async function verifyTokenHash(
  ctx: TenantContext,
  q: Queryable,
  type: string,
  hash: string,
  opts: { relatesTo?: string; linkOpened?: boolean; attemptCounted?: boolean } = {},
): Promise<VerifyOutcome> {
  const expired = () => new OtpExpiredError(opts.linkOpened === true ? 'link' : 'token')
  const kind = ownValue(VERIFY_KINDS, type)
  if (!kind) throw expired()
  const found = await findOneTimeToken(q, hash, kind.ottTypes)
  if (!found) throw expired()
  // Lock the user, then read the token again: a concurrent verification of the same
  // token has deleted it by the time we get the lock, so a token works once.
  const user = await lockUserById(q, found.user_id)
  const ott = user ? await findOneTimeToken(q, hash, kind.ottTypes) : null
  if (!user || !ott || (opts.relatesTo !== undefined && ott.relates_to !== opts.relatesTo.toLowerCase()))
    throw expired()
  // A code burned by wrong codes (the caller may have counted this very attempt already).
  // Only the 6-digit code burns: the link's token hash (224 bits, guessed by no one) goes
  // on working until it is used or expires, whatever strangers typed (docs/edge.md).
  if (
    opts.relatesTo !== undefined &&
    (await otpAttemptsOf(q, ott.id)) >= MAX_OTP_ATTEMPTS + (opts.attemptCounted ? 1 : 0)
  )
    throw new OtpExpiredError('attempts')
  if (isUserBanned(user, ctx.now())) throw new UserBannedError('bearer')
  const sent = kind.sentAt(user) ?? ott.created_at
  if (sent.getTime() + ctx.tenant.auth.otp_expiry * 1000 < ctx.now().getTime()) throw expired()
  const outcome = await kind.apply(ctx, q, user, ott.token_type)
  // The token reached its address and came back: the user owns that address (and the
  // wrong codes strangers entered for it no longer count).
  if (ott.relates_to) {
    await recordEmailProof(q, user.id, ott.relates_to, ctx.now())
    await clearAddressAttempts(q, ott.relates_to)
  }
  return outcome
}

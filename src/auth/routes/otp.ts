// POST /otp and POST /magiclink (docs/auth-protocol.md §3.5-3.6): a sign-in link that also carries a 6-digit
// code. A confirmed user gets a magic-link mail (recovery_token, type magiclink); a new or
// unconfirmed one gets the confirmation mail (type signup), which doubles as the link.
// PKCE requests start a flow state and mail a `pkce_` token. Both answer 200 {}.
import type { FastifyRequest } from 'fastify'
import { withTransaction } from '../../shared/index.js'
import { createEmailUser } from '../accounts.js'
import { sendEmailToken } from '../confirmations.js'
import { randomPasswordHash } from '../crypto.js'
import {
  EmailProviderDisabledError,
  OtpDisabledError,
  PhoneProviderDisabledError,
  SignupDisabledError,
  ValidationFailedError,
} from '../errors.js'
import { contextOf } from '../request-state.js'
import { bodyOf, normaliseEmail, optBool, optObject, optString, redirectUrlOf } from '../http.js'
import { audit } from '../models/audit-log.js'
import { findUserByEmail, lockUserById } from '../models/users.js'
import { pkceParamsOf, type PkceParams } from '../pkce.js'
import type { TenantContext, UserRow } from '../types.js'

interface MagicLinkRequest {
  email: string
  data?: Record<string, unknown>
  createUser: boolean
  pkce: PkceParams | null
  redirectTo: string
}

/** GoTrue's MagicLink: mails a sign-in link (or the confirmation link of a new account). */
async function sendMagicLink(ctx: TenantContext, r: MagicLinkRequest): Promise<Record<string, never>> {
  const settings = ctx.tenant.auth
  const autoconfirm = !settings.mail_confirmation
  const known = await findUserByEmail(ctx.db, r.email, ctx.tenant.jwt.aud)
  if (!known && !r.createUser) throw new OtpDisabledError()
  if (!known && !settings.signup_enabled) throw new SignupDisabledError()
  // A new account gets a random password nobody knows (the link is how one signs in),
  // hashed before the transaction so bcrypt does not hold a connection.
  const randomHash = known ? null : await randomPasswordHash(ctx.config.auth.bcrypt_cost)
  try {
    await withTransaction(ctx.db, async (q) => {
      let user: UserRow | null = await findUserByEmail(q, r.email, ctx.tenant.jwt.aud)
      if (user) user = await lockUserById(q, user.id)
      if (!user) {
        // (Deleted since the first look: the same checks again; bcrypt here is the rare case.)
        if (!r.createUser) throw new OtpDisabledError()
        if (!settings.signup_enabled) throw new SignupDisabledError()
        const hash = randomHash ?? (await randomPasswordHash(ctx.config.auth.bcrypt_cost))
        user = (
          await createEmailUser(ctx, q, {
            email: r.email,
            encryptedPassword: hash,
            data: r.data,
            confirmed: autoconfirm,
          })
        ).user
        await audit(q, {
          action: 'user_signedup',
          actorId: user.id,
          actorUsername: r.email,
          traits: { provider: 'email', via: 'otp' },
          now: ctx.now(),
        })
      }
      if (!user.email_confirmed_at && !autoconfirm) {
        // Unconfirmed: the confirmation mail is the sign-in link (verify type signup).
        await sendEmailToken(ctx, q, user, 'confirmation', { address: r.email, redirectTo: r.redirectTo, pkce: r.pkce })
        return
      }
      // Confirmed (or autoconfirm, where verifying the link confirms the address).
      await sendEmailToken(ctx, q, user, 'magiclink', { address: r.email, redirectTo: r.redirectTo, pkce: r.pkce })
    })
  } catch (err) {
    // A concurrent request created the same account (unique email): its mail went out.
    if ((err as { code?: string }).code === '23505') return {}
    throw err
  }
  return {}
}

function magicLinkRequest(
  ctx: TenantContext,
  req: FastifyRequest,
  email: string,
  b: Record<string, unknown>,
  createUser: boolean,
): MagicLinkRequest {
  const address = normaliseEmail(email)
  const pkce = pkceParamsOf(ctx, b.code_challenge, b.code_challenge_method)
  return {
    email: address,
    data: optObject(b, 'data'),
    createUser,
    pkce,
    redirectTo: redirectUrlOf(req, ctx.tenant.auth),
  }
}

/** POST /otp: a magic link (with its code) to an email; phones are refused (no SMS here). */
export async function postOtp(req: FastifyRequest): Promise<Record<string, never>> {
  const ctx = contextOf(req)
  const b = bodyOf(req)
  const email = optString(b, 'email')
  const phone = optString(b, 'phone')
  const createUser = optBool(b, 'create_user') ?? true
  if (email && phone)
    throw new ValidationFailedError('request', 'Only an email address or phone number should be provided')
  if (email && optString(b, 'channel'))
    throw new ValidationFailedError('request', 'Channel should only be specified with Phone OTP')
  if (phone) throw new PhoneProviderDisabledError('request', 'Unsupported phone provider')
  if (!email) throw new ValidationFailedError('request', 'One of email or phone must be set')
  if (!ctx.tenant.auth.magic_link) throw new EmailProviderDisabledError()
  return sendMagicLink(ctx, magicLinkRequest(ctx, req, email, b, createUser))
}

/** POST /magiclink: auth-js's older call of the same. */
export async function postMagicLink(req: FastifyRequest): Promise<Record<string, never>> {
  const ctx = contextOf(req)
  const b = bodyOf(req)
  if (!ctx.tenant.auth.magic_link) throw new EmailProviderDisabledError()
  const email = optString(b, 'email')
  if (!email) throw new ValidationFailedError('unprocessable', 'Password recovery requires an email')
  return sendMagicLink(ctx, magicLinkRequest(ctx, req, email, b, true))
}

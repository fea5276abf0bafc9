// POST /resend (docs/auth-protocol.md §3.10): sends the pending confirmation (type signup) or both
// email-change mails again (the change starts over, as GoTrue's), with new tokens (the old
// ones stop working) and the same per-address interval. Unknown users and nothing pending
// answer 200 {}; a phone is refused as GoTrue refuses it with its phone provider off (this
// engine has none).
import type { FastifyRequest } from 'fastify'
import { withUserOfEmail } from '../accounts.js'
import { sendEmailChangeMails, sendEmailToken } from '../confirmations.js'
import { PhoneProviderDisabledError, ValidationFailedError } from '../errors.js'
import { contextOf } from '../request-state.js'
import { bodyOf, normaliseEmail, optString, redirectUrlOf } from '../http.js'
import { pkceParamsOf } from '../pkce.js'

const TYPES = ['signup', 'email_change', 'sms', 'phone_change']

export async function postResend(req: FastifyRequest): Promise<Record<string, never>> {
  const ctx = contextOf(req)
  const b = bodyOf(req)
  const type = optString(b, 'type') ?? ''
  const email = optString(b, 'email')
  const phone = optString(b, 'phone')
  // GoTrue's ResendConfirmationParams.Validate, in its order.
  if (!TYPES.includes(type))
    throw new ValidationFailedError('request', 'Missing one of these types: signup, email_change, sms, phone_change')
  const emailType = type === 'signup' || type === 'email_change'
  const pkce = emailType ? pkceParamsOf(ctx, b.code_challenge, b.code_challenge_method) : null
  if (!email && type === 'signup') throw new ValidationFailedError('request', 'Type provided requires an email address')
  if (!phone && type === 'sms') throw new ValidationFailedError('request', 'Type provided requires a phone number')
  if (email && phone)
    throw new ValidationFailedError('request', 'Only an email address or phone number should be provided.')
  if (!email && !phone) throw new ValidationFailedError('request', 'Missing email address or phone number')
  // This engine has no phone provider (GoTrue's answer with the phone provider off).
  if (phone) throw new PhoneProviderDisabledError('request', 'Phone logins are disabled')
  const address = normaliseEmail(email!)
  // phone_change by email: no user here has a pending phone change, GoTrue's 200 {}.
  if (!emailType) return {}
  const redirectTo = redirectUrlOf(req, ctx.tenant.auth)
  await withUserOfEmail(ctx, address, async (q, user) => {
    if (type === 'signup') {
      if (!user.email_confirmed_at) await sendEmailToken(ctx, q, user, 'confirmation', { address, redirectTo, pkce })
      return
    }
    // GoTrue's sendEmailChange starts the pending change over, both mails again.
    const newEmail = (user.email_change ?? '').toLowerCase()
    if (newEmail) await sendEmailChangeMails(ctx, q, user, newEmail, { redirectTo, pkce })
  })
  return {}
}

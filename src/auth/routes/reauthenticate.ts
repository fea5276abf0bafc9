// GET /reauthenticate (docs/auth-protocol.md §3.11): mails the signed-in user a nonce (a 6-digit code whose
// hash is kept in users.reauthentication_token and one_time_tokens); PUT /user takes it as
// `nonce` for a password change when the database has secure password change on.
import type { FastifyRequest } from 'fastify'
import { withTransaction, type Queryable } from '../../shared/index.js'
import { constantTimeEqual, generateOtp, hashOtp } from '../crypto.js'
import { EmailNotConfirmedError, ReauthenticationNotValidError, ValidationFailedError } from '../errors.js'
import { callerOf, contextOf } from '../request-state.js'
import { clientMeta } from '../http.js'
import { audit } from '../models/audit-log.js'
import { deleteOneTimeToken, putOneTimeToken } from '../models/one-time-tokens.js'
import { updateUser } from '../models/users.js'
import { sendEmailHookDelivery } from '../confirmations.js'
import type { TenantContext, UserRow } from '../types.js'

/**
 * Checks a reauthentication nonce of a user (GoTrue's verifyReauthentication) and spends it;
 * 422 reauthentication_not_valid when there is none, it is wrong or older than otp_expiry.
 */
export async function verifyReauthenticationNonce(
  ctx: TenantContext,
  q: Queryable,
  user: UserRow,
  nonce: string,
): Promise<void> {
  const r = await q.query<{ token: string | null; sent_at: Date | null }>(
    'SELECT reauthentication_token AS token, reauthentication_sent_at AS sent_at FROM auth.users WHERE id = $1',
    [user.id],
  )
  const row = r.rows[0]
  if (!row?.token || !row.sent_at) throw new ReauthenticationNotValidError('Nonce has expired or is invalid')
  if (!user.email) throw new ReauthenticationNotValidError('Nonce has expired or is invalid')
  const fresh = row.sent_at.getTime() + ctx.tenant.auth.otp_expiry * 1000 > ctx.now().getTime()
  if (!fresh || !constantTimeEqual(hashOtp(user.email.toLowerCase(), nonce), row.token))
    throw new ReauthenticationNotValidError('Nonce has expired or is invalid')
  await q.query(`UPDATE auth.users SET reauthentication_token = '', reauthentication_sent_at = NULL WHERE id = $1`, [
    user.id,
  ])
  await deleteOneTimeToken(q, user.id, 'reauthentication_token')
}

export async function getReauthenticate(req: FastifyRequest): Promise<Record<string, never>> {
  const ctx = contextOf(req)
  const user = callerOf(req).user.user
  const address = user.email ?? ''
  // No SMS here: a phone-only user has no address to send the nonce to.
  if (address === '')
    throw new ValidationFailedError('request', 'Reauthentication requires the user to have an email or a phone number')
  if (!user.email_confirmed_at) throw new EmailNotConfirmedError('reauthenticate')
  await withTransaction(ctx.db, async (q) => {
    const now = ctx.now()
    await audit(q, {
      action: 'user_reauthenticate_requested',
      actorId: user.id,
      actorUsername: address,
      ip: clientMeta(req).ip,
      now,
    })
    const otp = generateOtp()
    const hash = hashOtp(address.toLowerCase(), otp)
    await q.query('UPDATE auth.users SET reauthentication_token = $2 WHERE id = $1', [user.id, hash])
    await updateUser(q, user.id, { reauthentication_sent_at: now }, now)
    await putOneTimeToken(q, { userId: user.id, type: 'reauthentication_token', hash, relatesTo: address, now })
    const mail = { otp, hash, toNew: false, action: 'reauthentication', redirectTo: '' }
    const deliver = sendEmailHookDelivery({ ctx, q, ip: clientMeta(req).ip }, user, mail)
    await ctx.mailer.send(ctx, q, {
      kind: 'reauthentication',
      to: address,
      otp,
      redirectTo: ctx.tenant.auth.site_url,
      email: address,
      deliver,
    })
  })
  return {}
}

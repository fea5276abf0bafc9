// grant_type=password (docs/auth-protocol.md §3.4): email (or phone) + password -> a session. Unknown user,
// no password and wrong password all answer the same invalid_credentials (and take the
// same bcrypt time). Adds `weak_password` when the right password fails today's policy.
import type { FastifyRequest } from 'fastify'
import { withTransaction } from '../../shared/index.js'
import { passwordAttemptHook } from '../auth-hooks.js'
import { passwordStrength, verifyPassword } from '../crypto.js'
import {
  PhoneProviderDisabledError,
  InvalidCredentialsError,
  EmailNotConfirmedError,
  UserBannedError,
  ValidationFailedError,
} from '../errors.js'
import { clientMeta, normaliseEmail, optString, type Body } from '../http.js'
import { identitiesForUser } from '../models/identities.js'
import { deleteSessionsOfUser } from '../models/sessions.js'
import { findUserByEmail, isUserBanned } from '../models/users.js'
import { startSession } from '../tokens.js'
import type { AccessTokenResponse, TenantContext } from '../types.js'

export async function passwordGrant(ctx: TenantContext, req: FastifyRequest, b: Body): Promise<AccessTokenResponse> {
  const email = optString(b, 'email')
  const phone = optString(b, 'phone')
  const password = optString(b, 'password') ?? ''
  if (email && phone)
    throw new ValidationFailedError('request', 'Only an email address or phone number should be provided on login.')
  if (!email && !phone) throw new ValidationFailedError('request', 'missing email or phone')
  if (phone) throw new PhoneProviderDisabledError('passwordGrant', 'Phone logins are disabled')
  let address: string
  try {
    address = normaliseEmail(email!)
  } catch {
    address = ''
  }
  const cost = ctx.config.auth.bcrypt_cost
  const user = address ? await findUserByEmail(ctx.db, address, ctx.tenant.jwt.aud) : null
  const ok = await verifyPassword(password, user?.encrypted_password, cost)
  if (user)
    await passwordAttemptHook({ ctx, ip: clientMeta(req).ip }, user.id, ok, (id) => deleteSessionsOfUser(ctx.db, id))
  if (!user || !ok) throw new InvalidCredentialsError('Invalid login credentials')
  if (isUserBanned(user, ctx.now())) throw new UserBannedError('signIn')
  if (!user.email_confirmed_at) throw new EmailNotConfirmedError('signIn')
  const strength = passwordStrength(password, ctx.tenant.auth)
  const session = await withTransaction(ctx.db, async (q) =>
    startSession(
      ctx,
      q,
      { user, identities: await identitiesForUser(q, user.id) },
      { method: 'password', ...clientMeta(req) },
    ),
  )
  if (!strength.ok) session.weak_password = { message: strength.message, reasons: strength.reasons }
  return session
}

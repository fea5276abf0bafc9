// POST /recover (docs/auth-protocol.md §3.7): mails a password-recovery link (type recovery) with its code.
// Unknown addresses answer the same 200 {} (no enumeration). PKCE requests start a
// `recovery` flow state and mail a `pkce_` token.
import type { FastifyRequest } from 'fastify'
import { withUserOfEmail } from '../accounts.js'
import { sendEmailToken } from '../confirmations.js'
import { ValidationFailedError } from '../errors.js'
import { contextOf } from '../request-state.js'
import { bodyOf, normaliseEmail, optString, redirectUrlOf } from '../http.js'
import { pkceParamsOf } from '../pkce.js'

export async function postRecover(req: FastifyRequest): Promise<Record<string, never>> {
  const ctx = contextOf(req)
  const b = bodyOf(req)
  const email = optString(b, 'email')
  if (!email) throw new ValidationFailedError('request', 'Password recovery requires an email')
  const address = normaliseEmail(email)
  const pkce = pkceParamsOf(ctx, b.code_challenge, b.code_challenge_method)
  const redirectTo = redirectUrlOf(req, ctx.tenant.auth)
  await withUserOfEmail(ctx, address, async (q, user) => {
    await sendEmailToken(ctx, q, user, 'recovery', { address, redirectTo, pkce })
  })
  return {}
}

// GET /verify (the link in mails; 303 redirects with the session or the error in the
// fragment) and POST /verify (token_hash, or token + email; JSON answers), spec §3.8-3.9.
// The verify types themselves live in confirmations.ts (VERIFY_KINDS).
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { GatehouseError } from '../../shared/errors.js'
import { withTransaction } from '../../shared/pg.js'
import { verifyTokenHash, type VerifyOutcome } from '../confirmations.js'
import { hashOtp } from '../crypto.js'
import { oauthErrorForStatus, unexpectedFailure, validationFailed, validationFailed422 } from '../errors.js'
import { contextOf } from '../hooks/resolve-tenant.js'
import { bodyOf, clientMeta, normaliseEmail, optString, queryParam, redirectUrlOf } from '../http.js'
import { startSession } from '../tokens.js'
import type { AccessTokenResponse, TenantContext } from '../types.js'

const LINK_INVALID = 'Email link is invalid or has expired'
const FIRST_EMAIL_CHANGE = 'Confirmation link accepted. Please proceed to confirm link sent to the other email'

/** `<url>#k=v&...&sb=` with keys sorted, replacing any fragment of the URL (spec §5.8). */
export function withFragment (url: string, params: Record<string, string>): string {
  const qs = new URLSearchParams()
  for (const k of Object.keys(params).sort()) qs.set(k, params[k]!)
  const base = url.split('#')[0]!
  const enc = qs.toString()
  return `${base}#${enc ? enc + '&' : ''}sb=`
}

async function verifyAndSignIn (ctx: TenantContext, req: FastifyRequest, type: string, hash: string,
  opts: { relatesTo?: string, notFoundMessage?: string }): Promise<{ outcome: VerifyOutcome, session?: AccessTokenResponse }> {
  return withTransaction(ctx.db, async (q) => {
    const outcome = await verifyTokenHash(ctx, q, type, hash, opts)
    if (outcome.kind !== 'signed_in') return { outcome }
    const session = await startSession(ctx, q, outcome.user, { method: 'otp', ...clientMeta(req) })
    return { outcome, session }
  })
}

function errorRedirect (reply: FastifyReply, redirectTo: string, err: unknown, log: FastifyRequest['log']) {
  const e = err instanceof GatehouseError ? err : unexpectedFailure(err)
  if (e.status >= 500) log.error({ err: e.internal ?? err }, 'verify failed')
  const description = e.status >= 500 ? 'Unexpected failure, please check server logs for more information' : e.message
  return reply.code(303).redirect(withFragment(redirectTo, {
    error: oauthErrorForStatus(e.status), error_code: e.code, error_description: description
  }), 303)
}

export async function verifyRoutes (scope: FastifyInstance): Promise<void> {
  scope.get('/verify', async (req, reply) => {
    const ctx = contextOf(req)
    const type = queryParam(req, 'type')
    const token = queryParam(req, 'token')
    if (!type) throw validationFailed('Verify requires a verification type')
    if (!token) throw validationFailed('Verify requires a token or a token hash')
    const redirectTo = redirectUrlOf(req, ctx.tenant.auth)
    try {
      const { outcome, session } = await verifyAndSignIn(ctx, req, type, token, { notFoundMessage: LINK_INVALID })
      if (outcome.kind === 'first_email_change_confirmation') {
        return reply.redirect(withFragment(redirectTo, { message: FIRST_EMAIL_CHANGE }), 303)
      }
      const s = session!
      return reply.redirect(withFragment(redirectTo, {
        access_token: s.access_token,
        expires_at: String(s.expires_at),
        expires_in: String(s.expires_in),
        refresh_token: s.refresh_token,
        token_type: 'bearer',
        type
      }), 303)
    } catch (err) {
      return errorRedirect(reply, redirectTo, err, req.log)
    }
  })

  scope.post('/verify', async (req) => {
    const ctx = contextOf(req)
    const b = bodyOf(req)
    const type = optString(b, 'type')
    const token = optString(b, 'token')
    const tokenHash = optString(b, 'token_hash')
    const email = optString(b, 'email')
    const phone = optString(b, 'phone')
    if (!type) throw validationFailed('Verify requires a verification type')
    if ((token && tokenHash) || (!token && !tokenHash)) throw validationFailed('Verify requires either a token or a token hash')
    let hash: string
    let relatesTo: string | undefined
    if (tokenHash) {
      if (email || phone || optString(b, 'redirect_to')) throw validationFailed('Only the token_hash and type should be provided')
      hash = tokenHash
    } else {
      if (!email) throw validationFailed('Verify requires an email or a phone number')
      let address: string
      try { address = normaliseEmail(email) } catch { throw validationFailed422('Invalid email format') }
      hash = hashOtp(address, token!)
      relatesTo = address
    }
    const { outcome, session } = await verifyAndSignIn(ctx, req, type, hash, { relatesTo })
    if (outcome.kind === 'first_email_change_confirmation') return { msg: FIRST_EMAIL_CHANGE, code: '200' }
    return session!
  })
}

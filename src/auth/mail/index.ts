// The auth engine's mailer: checks the tenant's send limits (in its database), renders
// the tenant's template and sends over SMTP. Callers run it inside the transaction that
// stores the token, so a failed send rolls the token back (as GoTrue does).
import type { FastifyBaseLogger } from 'fastify'
import type { Config } from '../../config/index.js'
import type { Queryable } from '../../shared/index.js'
import type { Tenant } from '../../tenants/index.js'
import { UnexpectedFailureError } from '../errors.js'
import { reserveMailSend } from './rate-limit.js'
import { renderMail, throttleBucket, type MailKind, type TemplateVars } from './templates.js'
import { senderOf, smtpTargetOf, TransportPool } from './transport.js'

export type { MailKind } from './templates.js'

/** The `type` of a verify link (docs/auth-protocol.md §3.8). */
export type VerifyLinkType = 'signup' | 'invite' | 'recovery' | 'magiclink' | 'email_change'

interface MailRequest {
  kind: MailKind
  /** Recipient. */
  to: string
  /** Link `type`; omitted for mails without a link (reauthentication). */
  linkType?: VerifyLinkType
  /** The stored token hash (the link's `token=`), `pkce_`-prefixed in PKCE mode. */
  tokenHash?: string
  /** The numeric OTP the mail also carries. */
  otp?: string
  /** Validated redirect URL. */
  redirectTo: string
  /** The account's current email (`{{ .Email }}`). */
  email: string
  newEmail?: string
  data?: Record<string, unknown>
  /** Delivers the mail instead of SMTP (the database's send_email hook); limits still apply. */
  deliver?: () => Promise<void>
}

/** What a send needs of the request's tenant context (the engine's TenantContext has it). */
interface MailContext {
  readonly tenant: Tenant
  /** Public base of the tenant's auth API, the start of the links in mails. */
  readonly externalUrl: string
  readonly config: Config
  now(): Date
}

export interface Mailer {
  /** Reserves a send against the tenant's limits (429 when over), renders, sends (500 when SMTP fails). */
  send(ctx: MailContext, q: Queryable, req: MailRequest): Promise<void>
  close(): void
}

/** `{externalUrl}/verify?token=<hash>&type=<type>&redirect_to=<url>` (docs/auth-protocol.md §5.10). */
export function verifyLink(externalUrl: string, tokenHash: string, type: VerifyLinkType, redirectTo: string): string {
  const qs = new URLSearchParams({ token: tokenHash, type, redirect_to: redirectTo })
  return `${externalUrl}/verify?${qs.toString()}`
}

export function createMailer(deps: { config: Config; logger: FastifyBaseLogger }): Mailer {
  const transports = new TransportPool()
  return {
    async send(ctx, q, req) {
      await reserveMailSend(q, ctx.tenant.auth, { address: req.to, bucket: throttleBucket(req.kind), now: ctx.now() })
      if (req.deliver !== undefined) {
        await req.deliver()
        return
      }
      const vars: TemplateVars = {
        SiteURL: ctx.tenant.auth.site_url,
        ConfirmationURL:
          req.linkType && req.tokenHash
            ? verifyLink(ctx.externalUrl, req.tokenHash, req.linkType, req.redirectTo)
            : undefined,
        Email: req.email,
        Token: req.otp,
        TokenHash: req.tokenHash,
        RedirectTo: req.redirectTo,
        Data: req.data ?? {},
        NewEmail: req.newEmail,
        SendingTo: req.to,
      }
      const mail = renderMail(ctx.tenant, req.kind, vars)
      const sender = senderOf(ctx.tenant)
      try {
        await transports.get(smtpTargetOf(ctx.tenant, ctx.config)).sendMail({
          from: sender.name ? { name: sender.name, address: sender.address } : sender.address,
          to: req.to,
          subject: mail.subject,
          text: mail.text,
          html: mail.html,
        })
      } catch (err) {
        deps.logger.error({ err, tenant: ctx.tenant.database, kind: req.kind }, 'mail send failed')
        // The kind in words: `magic link`, `email change`, ...
        throw new UnexpectedFailureError('sendEmail', req.kind.replace('_', ' '), { internal: err })
      }
    },
    close() {
      transports.close()
    },
  }
}

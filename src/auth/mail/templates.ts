// The mail templates of the auth engine: GoTrue's kinds and default subjects (docs/auth-protocol.md §5.10),
// a tenant's overrides (tenant.auth.mail_templates), and a tiny renderer for GoTrue's
// `{{ .Name }}` placeholders (HTML-escaped in html bodies, raw in subject and text).
import type { Tenant } from '../../tenants/index.js'

export type MailKind = 'confirmation' | 'invite' | 'recovery' | 'magic_link' | 'email_change' | 'reauthentication'

/** Which throttle bucket a kind counts against (recovery and magic link share one, as in GoTrue). */
export function throttleBucket(kind: MailKind): string {
  return kind === 'magic_link' ? 'recovery' : kind
}

export interface TemplateVars {
  SiteURL: string
  ConfirmationURL?: string
  Email: string
  Token?: string
  TokenHash?: string
  RedirectTo?: string
  Data?: Record<string, unknown>
  NewEmail?: string
  SendingTo?: string
}

export interface Template {
  subject: string
  html: string
  text: string
}

const DEFAULTS: Record<MailKind, Template> = {
  confirmation: {
    subject: 'Confirm your email address',
    html: '<h2>Confirm your signup</h2>\n<p>Follow this link to confirm your account:</p>\n<p><a href="{{ .ConfirmationURL }}">Confirm your email address</a></p>\n<p>Or enter this code: {{ .Token }}</p>',
    text: 'Confirm your signup\n\nFollow this link to confirm your account:\n{{ .ConfirmationURL }}\n\nOr enter this code: {{ .Token }}\n',
  },
  invite: {
    subject: "You've been invited",
    html: '<h2>You have been invited</h2>\n<p>You have been invited to create an account on {{ .SiteURL }}. Follow this link to accept the invite:</p>\n<p><a href="{{ .ConfirmationURL }}">Accept the invite</a></p>\n<p>Or enter this code: {{ .Token }}</p>',
    text: 'You have been invited\n\nYou have been invited to create an account on {{ .SiteURL }}. Follow this link to accept the invite:\n{{ .ConfirmationURL }}\n\nOr enter this code: {{ .Token }}\n',
  },
  recovery: {
    subject: 'Reset your password',
    html: '<h2>Reset password</h2>\n<p>Follow this link to reset the password for your account:</p>\n<p><a href="{{ .ConfirmationURL }}">Reset password</a></p>\n<p>Or enter this code: {{ .Token }}</p>',
    text: 'Reset password\n\nFollow this link to reset the password for your account:\n{{ .ConfirmationURL }}\n\nOr enter this code: {{ .Token }}\n',
  },
  magic_link: {
    subject: 'Your sign-in link',
    html: '<h2>Magic link</h2>\n<p>Follow this link to sign in:</p>\n<p><a href="{{ .ConfirmationURL }}">Sign in</a></p>\n<p>Or enter this code: {{ .Token }}</p>',
    text: 'Magic link\n\nFollow this link to sign in:\n{{ .ConfirmationURL }}\n\nOr enter this code: {{ .Token }}\n',
  },
  email_change: {
    subject: 'Confirm your new email address',
    html: '<h2>Confirm change of email</h2>\n<p>Follow this link to confirm the update of your email from {{ .Email }} to {{ .NewEmail }}:</p>\n<p><a href="{{ .ConfirmationURL }}">Change email</a></p>\n<p>Or enter this code: {{ .Token }}</p>',
    text: 'Confirm change of email\n\nFollow this link to confirm the update of your email from {{ .Email }} to {{ .NewEmail }}:\n{{ .ConfirmationURL }}\n\nOr enter this code: {{ .Token }}\n',
  },
  reauthentication: {
    subject: '{{ .Token }} is your verification code',
    html: '<h2>Confirm reauthentication</h2>\n<p>Enter the code: {{ .Token }}</p>',
    text: 'Confirm reauthentication\n\nEnter the code: {{ .Token }}\n',
  },
}

function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!)
}

/** Replaces `{{ .Name }}` and `{{ .Data.key }}`; unknown names become ''. */
function renderTemplate(text: string, vars: TemplateVars, html: boolean): string {
  return text.replace(
    /\{\{\s*\.([A-Za-z]+)(?:\.([A-Za-z0-9_]+))?\s*\}\}/g,
    (_m, name: string, sub: string | undefined) => {
      let v: unknown = (vars as unknown as Record<string, unknown>)[name]
      if (sub !== undefined) v = v && typeof v === 'object' ? (v as Record<string, unknown>)[sub] : undefined
      const s = v === undefined || v === null ? '' : typeof v === 'string' ? v : JSON.stringify(v)
      return html ? escapeHtml(s) : s
    },
  )
}

/** The tenant's template of a kind (each part falling back to the default), rendered. */
export function renderMail(tenant: Tenant, kind: MailKind, vars: TemplateVars): Template {
  const override: Partial<Template> = tenant.auth.mail_templates?.[kind] ?? {}
  const t = {
    ...DEFAULTS[kind],
    ...Object.fromEntries(Object.entries(override).filter(([, v]) => typeof v === 'string' && v.length > 0)),
  }
  return {
    subject: renderTemplate(t.subject, vars, false),
    html: renderTemplate(t.html, vars, true),
    text: renderTemplate(t.text, vars, false),
  }
}

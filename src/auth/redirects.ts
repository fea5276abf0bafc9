// Redirect URLs of browser flows (spec §5.8, §6.2): parameters in the fragment (implicit:
// tokens, errors, with the `sb` marker) or in the query (PKCE `code`, and errors again),
// and the error parameters GoTrue derives from an error (OAuth `error` from the status).
import { AuthError, oauthErrorForStatus, toAuthError } from './errors.js'

/** `<url>#k=v&...&sb=` with keys sorted, replacing any fragment of the URL. */
export function withFragmentParams (url: string, params: Record<string, string>): string {
  const qs = new URLSearchParams()
  for (const k of Object.keys(params).sort()) qs.set(k, params[k]!)
  const base = url.split('#')[0]!
  const enc = qs.toString()
  return `${base}#${enc ? enc + '&' : ''}sb=`
}

/** `<url>` with the parameters added to its query (existing ones kept), fragment dropped. */
export function withQueryParams (url: string, params: Record<string, string>): string {
  const [base] = url.split('#')
  try {
    const u = new URL(base!)
    for (const [k, v] of Object.entries(params)) u.searchParams.set(k, v)
    return u.toString()
  } catch {
    const qs = new URLSearchParams(params).toString()
    return base + (base!.includes('?') ? '&' : '?') + qs
  }
}

/** A provider's own OAuth error, passed on as it came (no error_code). */
export class ProviderRedirectError extends AuthError {
  readonly error: string
  constructor (error: string, description: string) {
    super('', 400, description)
    this.error = error
  }
}

/** error, error_code, error_description of a failure; causes stay in the log. */
export function errorParams (err: unknown): Record<string, string> {
  if (err instanceof ProviderRedirectError) return { error: err.error, error_description: err.message }
  const e = toAuthError(err)
  const access = ['signup_disabled', 'user_banned', 'provider_email_needs_verification'].includes(e.code)
  return {
    error: access ? 'access_denied' : oauthErrorForStatus(e.status),
    error_code: e.code,
    // Our messages are written for users (causes stay in `internal`); foreign errors were
    // replaced by unexpectedFailure's generic text above.
    error_description: e.message
  }
}

/** The error in the fragment, and for PKCE and provider callbacks in the query as well. */
export function errorRedirectUrl (url: string, err: unknown, alsoInQuery: boolean): string {
  const p = errorParams(err)
  return withFragmentParams(alsoInQuery ? withQueryParams(url, p) : url, p)
}

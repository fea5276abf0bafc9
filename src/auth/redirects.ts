// Redirect URLs of browser flows (docs/auth-protocol.md §5.8, §6.2): parameters in the fragment (implicit:
// tokens, errors, with the `sb` marker) or in the query (PKCE `code`, and errors again),
// and the error parameters GoTrue derives from an error (OAuth `error` from the status).
import { oauthErrorForStatus, oauthErrorOfStatus, toAuthError } from './errors.js'

/**
 * `<url>#k=v&...` with the `sb` marker, keys sorted as Go's url.Values.Encode sorts them
 * (so `sb=` sits between `refresh_token` and `token_type`), replacing any fragment of the URL.
 */
export function withFragmentParams(url: string, params: Record<string, string>): string {
  const all: Record<string, string> = { ...params, sb: '' }
  const qs = new URLSearchParams()
  for (const k of Object.keys(all).sort()) qs.set(k, all[k]!)
  const base = url.split('#')[0]!
  return `${base}#${qs.toString()}`
}

/** `<url>` with the parameters added to its query (existing ones kept), fragment dropped. */
export function withQueryParams(url: string, params: Record<string, string>): string {
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

/**
 * A provider's own OAuth error (the `error` and `error_description` of its redirect to the
 * callback), passed on to the client's redirect as it came: not an error of ours, no error_code.
 */
export class ProviderRefusal {
  constructor(
    readonly error: string,
    readonly description: string,
  ) {}
}

/**
 * error, error_code, error_description of a failure; causes stay in the log. A provider
 * callback (GoTrue's getErrorQueryString) says access_denied for a refused sign-in and
 * server_error for a status without an OAuth name; a /verify link (prepErrorRedirectURL)
 * leaves `error` out for such a status (a 422 flow_state_expired has none).
 */
export function errorParams(err: unknown, source: 'callback' | 'verify' = 'callback'): Record<string, string> {
  if (err instanceof ProviderRefusal) return { error: err.error, error_description: err.description }
  const e = toAuthError(err)
  const out: Record<string, string> = {}
  if (source === 'verify') {
    const error = oauthErrorOfStatus(e.status)
    if (error) out.error = error
  } else {
    const access = ['signup_disabled', 'user_banned', 'provider_email_needs_verification'].includes(e.code)
    out.error = access ? 'access_denied' : oauthErrorForStatus(e.status)
  }
  out.error_code = e.code
  // Our messages are written for users (causes stay in `internal`); foreign errors were
  // replaced by unexpectedFailure's generic text above.
  out.error_description = e.message
  return out
}

/** The error in the fragment, and for PKCE and provider callbacks in the query as well. */
export function errorRedirectUrl(
  url: string,
  err: unknown,
  alsoInQuery: boolean,
  source: 'callback' | 'verify' = 'callback',
): string {
  const p = errorParams(err, source)
  return withFragmentParams(alsoInQuery ? withQueryParams(url, p) : url, p)
}

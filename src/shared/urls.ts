// URLs as messages, logs and dumps may show them: one place for what is left out. A
// connection string keeps its shape with the password masked (`config dump`, the tenant store's
// messages, tenant records); an endpoint a tenant configured (a hook, a provider) shows only
// scheme, host and path (docs/security.md "The tenant boundary").

/** A connection string with its password replaced by `mask` (the text as it was when it is no URL but for a `//user:pass@` part). */
export function maskUrlPassword(url: string, mask = '****'): string {
  try {
    const u = new URL(url)
    if (u.password) u.password = mask
    return u.toString()
  } catch {
    return url.replace(/(\/\/[^:/@\s]*:)[^@\s]*@/, `$1${mask}@`)
  }
}

/** Scheme, host and path of a URL, without credentials, query or fragment, which may hold a tenant's secrets. */
export function safeUrl(url: string): string {
  try {
    const u = new URL(url)
    return `${u.protocol}//${u.host}${u.pathname}`
  } catch {
    return '(not a URL)'
  }
}

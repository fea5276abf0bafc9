// HTTP towards providers: JSON GETs and the token request (form POST, RFC 6749 §4.1.3),
// with a time limit and a size limit, errors as ProviderError. Never logs tokens.
import type { ProviderSettings } from '../../tenants/index.js'
import { ProviderError, type OAuthProvider, type ProviderTokens } from './types.js'
import {
  DEFAULT_OUTBOUND_POLICY,
  OutboundRefusedError,
  outboundFetch,
  type OutboundPolicy,
} from '../../shared/index.js'

const TIMEOUT_MS = 10_000
const MAX_BYTES = 1024 * 1024

async function readJson(res: Response, what: string): Promise<unknown> {
  const text = await res.text()
  if (text.length > MAX_BYTES) throw new ProviderError(`${what}: response too large`)
  if (!res.ok) throw new ProviderError(`${what}: HTTP ${res.status}: ${text.slice(0, 300)}`)
  try {
    return JSON.parse(text)
  } catch {
    throw new ProviderError(`${what}: response is not JSON`)
  }
}

let policy: OutboundPolicy = DEFAULT_OUTBOUND_POLICY

/** The process's outbound policy (config `outbound`); the engine sets it when it is built. */
export function setProviderOutboundPolicy(p: OutboundPolicy): void {
  policy = p
}

/**
 * Every outbound request to a provider goes through here (discovery, JWKS, token, userinfo):
 * https to public addresses only unless the operator allows the host, DNS resolved once
 * and the connection pinned to the checked address, each redirect checked again (GET only),
 * a time and a size limit.
 */
export async function providerFetch(url: string | URL, init: RequestInit = {}): Promise<Response> {
  return outboundFetch(
    url,
    {
      method: init.method,
      headers: init.headers as Record<string, string> | Headers | undefined,
      body: typeof init.body === 'string' ? init.body : undefined,
      signal: init.signal ?? AbortSignal.timeout(TIMEOUT_MS),
      maxBytes: MAX_BYTES,
    },
    policy,
  )
}

export async function getJson(url: string, what: string, accessToken?: string): Promise<unknown> {
  const headers: Record<string, string> = { accept: 'application/json', 'user-agent': 'gatehouse-auth' }
  if (accessToken) headers.authorization = `Bearer ${accessToken}`
  let res: Response
  try {
    res = await providerFetch(url, { headers })
  } catch (err) {
    throw new ProviderError(`${what}: ${err instanceof OutboundRefusedError ? err.message : 'request failed'}`, {
      cause: err,
    })
  }
  return readJson(res, what)
}

/** The authorization_code grant at `tokenUrl`, the client authenticated in the body (client_secret_post). */
export async function exchangeAuthorizationCode(
  s: Pick<ProviderSettings, 'client_id' | 'secret'>,
  tokenUrl: string,
  code: string,
  redirectUri: string,
  codeVerifier: string | null,
): Promise<ProviderTokens> {
  const form = new URLSearchParams({
    grant_type: 'authorization_code',
    code,
    redirect_uri: redirectUri,
    client_id: s.client_id,
    client_secret: s.secret,
  })
  if (codeVerifier) form.set('code_verifier', codeVerifier)
  let res: Response
  try {
    res = await providerFetch(tokenUrl, {
      method: 'POST',
      headers: {
        accept: 'application/json',
        'content-type': 'application/x-www-form-urlencoded',
        'user-agent': 'gatehouse-auth',
      },
      body: form.toString(),
    })
  } catch (err) {
    throw new ProviderError(err instanceof OutboundRefusedError ? `token ${err.message}` : 'token request failed', {
      cause: err,
    })
  }
  const body = (await readJson(res, 'token request')) as Record<string, unknown>
  // GitHub answers 200 with {error, error_description} for a bad code.
  if (typeof body.error === 'string') throw new ProviderError(`token request: ${body.error}`)
  if (typeof body.access_token !== 'string' || body.access_token === '')
    throw new ProviderError('token request: no access_token')
  return {
    accessToken: body.access_token,
    refreshToken: typeof body.refresh_token === 'string' && body.refresh_token ? body.refresh_token : undefined,
    idToken: typeof body.id_token === 'string' && body.id_token ? body.id_token : undefined,
  }
}

/** An authorization URL: base + response_type=code, client, redirect, scope, state, extras. */
export function buildAuthorizeUrl(
  base: string,
  p: {
    clientId: string
    redirectUri: string
    scope: string
    state: string
    codeChallenge?: string
    extra?: Record<string, string>
  },
): string {
  const url = new URL(base)
  for (const [k, v] of Object.entries(p.extra ?? {})) url.searchParams.set(k, v)
  url.searchParams.set('response_type', 'code')
  url.searchParams.set('client_id', p.clientId)
  url.searchParams.set('redirect_uri', p.redirectUri)
  if (p.scope) url.searchParams.set('scope', p.scope)
  url.searchParams.set('state', p.state)
  if (p.codeChallenge) {
    url.searchParams.set('code_challenge', p.codeChallenge)
    url.searchParams.set('code_challenge_method', 'S256')
  }
  return url.toString()
}

/** Configured scopes (or the preset's) plus the request's, de-duplicated, space separated. */
export function joinScopes(base: string[], extra: string[]): string {
  return [...new Set([...base, ...extra].filter((s) => s.length > 0))].join(' ')
}

export function str(v: unknown): string | undefined {
  return typeof v === 'string' && v !== '' ? v : typeof v === 'number' ? String(v) : undefined
}

/**
 * The sign-in halves of a plain OAuth 2 preset (GitHub, GitLab): the authorization URL with
 * the configured scopes (else the preset's) plus the request's, and the code exchange at the
 * token URL; with `usesPkce` our own PKCE challenge travels along.
 */
export function oauth2SignIn(
  s: ProviderSettings,
  o: { authorizeUrl: string; tokenUrl: string; defaultScopes: string[]; usesPkce: boolean },
): Pick<OAuthProvider, 'usesPkce' | 'authorizeUrl' | 'exchangeCode'> {
  return {
    usesPkce: o.usesPkce,
    async authorizeUrl(r) {
      return buildAuthorizeUrl(o.authorizeUrl, {
        clientId: s.client_id,
        redirectUri: r.redirectUri,
        state: r.state,
        extra: r.params,
        codeChallenge: o.usesPkce ? r.codeChallenge : undefined,
        scope: joinScopes(s.scopes ?? o.defaultScopes, r.scopes),
      })
    },
    exchangeCode: (code, redirectUri, codeVerifier) =>
      exchangeAuthorizationCode(s, o.tokenUrl, code, redirectUri, codeVerifier),
  }
}

// The OAuth 2.1 server's authorization flow (docs/auth-protocol.md §3.22), GoTrue's
// oauthserver/authorize.go: GET /oauth/authorize checks the client and its exact redirect URI
// (refusals before that are JSON, never redirects), the rest (response_type=code, scopes, PKCE
// S256, resource) as error redirects, stores the request and sends the browser to the consent
// page (site_url + authorization_url_path?authorization_id=...). The signed-in user's consent
// page reads the request (GET /oauth/authorizations/:id; a client the user consented to before
// for these scopes is approved at once) and approves or denies it (POST .../consent), each
// answered with the redirect URL back to the client: its one-use code and state, or
// error=access_denied.
import { randomBytes } from 'node:crypto'
import type { FastifyReply, FastifyRequest } from 'fastify'
import { withTransaction, type Queryable } from '../../shared/index.js'
import { oauthServerOf } from '../../tenants/index.js'
import { UUID } from '../bearer.js'
import {
  BadJsonError,
  OAuthAuthorizationNotFoundError,
  OAuthClientNotFoundError,
  ValidationFailedError,
} from '../errors.js'
import { bodyOf, isRedirectAllowed, queryParam } from '../http.js'
import {
  approveAuthorization,
  findActiveConsent,
  insertAuthorization,
  lockAuthorization,
  setAuthorizationStatus,
  setAuthorizationUser,
  upsertConsent,
  type AuthorizationRow,
} from '../models/oauth-authorizations.js'
import { findOAuthClient, type OAuthClientRow } from '../models/oauth-clients.js'
import { redirectUriProblem } from '../oauth-client-rules.js'
import { callerOf, contextOf } from '../request-state.js'
import type { TenantContext } from '../types.js'

/** GoTrue's SupportedOAuthScopes, and its default scope. */
const SUPPORTED_SCOPES = ['openid', 'profile', 'email', 'phone', 'offline_access']
const DEFAULT_SCOPE = 'email'
/** How long a request (and its code) lives: GoTrue's OAUTH_SERVER_AUTHORIZATION_TTL default, 10 minutes. */
const AUTHORIZATION_TTL_MS = 10 * 60 * 1000

/** The scopes of a space-separated list, each once. */
export function scopesOf(scope: string): string[] {
  return [...new Set(scope.split(' ').filter((s) => s !== ''))]
}

/** `uri` with query parameters set (the client's own query is kept). */
function withQuery(uri: string, params: Record<string, string | null>): string {
  const u = new URL(uri)
  for (const [k, v] of Object.entries(params)) if (v !== null && v !== '') u.searchParams.set(k, v)
  return u.toString()
}

function errorRedirect(uri: string, error: string, description: string, state: string | null): string {
  return withQuery(uri, { error, error_description: description, state })
}

interface AuthorizeQuery {
  clientId: string
  redirectUri: string
  responseType: string
  scope: string
  state: string
  resource: string
  codeChallenge: string
  codeChallengeMethod: string
  nonce: string
}

function authorizeQuery(req: FastifyRequest): AuthorizeQuery {
  const p = (k: string) => queryParam(req, k) ?? ''
  return {
    clientId: p('client_id'),
    redirectUri: p('redirect_uri'),
    responseType: p('response_type') || 'code',
    scope: p('scope') || DEFAULT_SCOPE,
    state: p('state'),
    resource: p('resource'),
    codeChallenge: p('code_challenge'),
    codeChallengeMethod: p('code_challenge_method'),
    nonce: p('nonce'),
  }
}

/** The client and its exact redirect URI; refused as JSON, since the redirect URI is not trusted yet. */
async function trustedClient(ctx: TenantContext, a: AuthorizeQuery): Promise<OAuthClientRow> {
  if (a.clientId === '') throw new ValidationFailedError('request', 'client_id is required')
  if (a.redirectUri === '') throw new ValidationFailedError('request', 'redirect_uri is required')
  if (!UUID.test(a.clientId)) throw new OAuthClientNotFoundError('authorizeFormat')
  const client = await findOAuthClient(ctx.db, a.clientId.toLowerCase())
  if (!client) throw new OAuthClientNotFoundError('authorize')
  // Exact match, and the URI checked again: a row stored before migration 0275 may hold one
  // that registration refuses today (docs/security.md "The tenant boundary").
  if (!client.redirect_uris.includes(a.redirectUri) || redirectUriProblem(a.redirectUri) !== null)
    throw new ValidationFailedError('request', 'invalid redirect_uri')
  return client
}

/** Why the rest of the request is refused (sent to the client as invalid_request), or null. */
function requestProblem(a: AuthorizeQuery): string | null {
  if (a.responseType !== 'code') return 'only response_type=code is supported'
  const scopes = scopesOf(a.scope)
  if (scopes.length === 0) return 'scope parameter cannot be empty'
  const unsupported = scopes.find((s) => !SUPPORTED_SCOPES.includes(s))
  if (unsupported !== undefined) return `unsupported scope: ${unsupported}`
  if (a.resource !== '') {
    if (!URL.canParse(a.resource)) return 'resource must be an absolute URI'
    if (a.resource.includes('#')) return 'resource must not include a fragment component'
    if (a.resource.includes('?')) return 'resource must not include a query component'
  }
  if (a.codeChallenge === '' || a.codeChallengeMethod === '')
    return 'PKCE flow requires both code_challenge and code_challenge_method'
  // OAuth 2.1 §4.1.1: S256 only (GoTrue also takes plain).
  if (a.codeChallengeMethod.toLowerCase() !== 's256') return "code_challenge_method must be 'S256'"
  if (!/^[A-Za-z0-9._~-]{43,128}$/.test(a.codeChallenge)) return 'code_challenge must be between 43 and 128 characters'
  // Ours: what the request's columns hold at most (GoTrue fails on them with server_error).
  if (a.state.length > 4096 || a.scope.length > 4096 || a.resource.length > 2048 || a.nonce.length > 255)
    return 'state, scope, resource or nonce too long'
  return null
}

/** The consent page: the site URL with the configured path (GoTrue's buildAuthorizationURL). */
function consentPage(ctx: TenantContext, authorizationId: string): string {
  const path = oauthServerOf(ctx.tenant.auth).authorization_url_path
  const base = ctx.tenant.auth.site_url.replace(/\/+$/, '') + (path.startsWith('/') ? path : `/${path}`)
  return `${base}?authorization_id=${authorizationId}`
}

export async function getOAuthAuthorize(req: FastifyRequest, reply: FastifyReply): Promise<unknown> {
  const ctx = contextOf(req)
  const a = authorizeQuery(req)
  const client = await trustedClient(ctx, a)
  const problem = requestProblem(a)
  if (problem !== null) return reply.redirect(errorRedirect(a.redirectUri, 'invalid_request', problem, a.state), 302)
  const authorizationId = randomBytes(24).toString('base64url')
  const now = ctx.now()
  await insertAuthorization(ctx.db, {
    authorizationId,
    clientId: client.id,
    redirectUri: a.redirectUri,
    scope: a.scope,
    state: a.state || null,
    resource: a.resource || null,
    codeChallenge: a.codeChallenge,
    codeChallengeMethod: 's256',
    nonce: a.nonce || null,
    now,
    expiresAt: new Date(now.getTime() + AUTHORIZATION_TTL_MS),
  })
  return reply.redirect(consentPage(ctx, authorizationId), 302)
}

/** A browser request must come from an allowed origin (GoTrue's validateRequestOrigin); none is fine. */
function checkOrigin(ctx: TenantContext, req: FastifyRequest): void {
  const origin = req.headers.origin
  if (typeof origin !== 'string' || origin === '') return
  if (!isRedirectAllowed(origin, ctx.tenant.auth))
    throw new ValidationFailedError('request', 'unauthorized request origin')
}

/** The success redirect: the client's redirect URI with the code and state. */
function codeRedirect(a: AuthorizationRow, code: string): string {
  return withQuery(a.redirect_uri, { code, state: a.state })
}

/**
 * Runs `decide` on the locked, pending request of the path; an expired one is marked so (that
 * is committed) and then not found.
 */
async function onPendingRequest<T>(
  ctx: TenantContext,
  req: FastifyRequest,
  notPending: string,
  decide: (q: Queryable, a: AuthorizationRow) => Promise<T>,
): Promise<T> {
  const id = (req.params as { id?: string }).id ?? ''
  const out = await withTransaction(ctx.db, async (q) => {
    const a = await lockAuthorization(q, id)
    if (!a) throw new OAuthAuthorizationNotFoundError()
    if (a.status === 'pending' && a.expires_at.getTime() < ctx.now().getTime()) {
      await setAuthorizationStatus(q, a.id, 'expired')
      return { expired: true as const }
    }
    if (a.status !== 'pending') throw new ValidationFailedError('request', notPending)
    return { expired: false as const, value: await decide(q, a) }
  })
  if (out.expired) throw new OAuthAuthorizationNotFoundError()
  return out.value
}

/** A client as the consent page and the user's grants show it: id, and name, uri and logo_uri when set. */
export function clientDetails(c: Pick<OAuthClientRow, 'id' | 'client_name' | 'client_uri' | 'logo_uri'>) {
  const out: Record<string, string> = { id: c.id }
  if (c.client_name) out.name = c.client_name
  if (c.client_uri) out.uri = c.client_uri
  if (c.logo_uri) out.logo_uri = c.logo_uri
  return out
}

export async function getOAuthAuthorization(req: FastifyRequest): Promise<unknown> {
  const ctx = contextOf(req)
  checkOrigin(ctx, req)
  const user = callerOf(req).user.user
  const seen = await onPendingRequest(ctx, req, 'authorization request cannot be processed', async (q, a) => {
    if (a.user_id !== null && a.user_id !== user.id) throw new OAuthAuthorizationNotFoundError()
    if (a.user_id === null) {
      await setAuthorizationUser(q, a.id, user.id)
      const consent = await findActiveConsent(q, user.id, a.client_id)
      const granted = consent === null ? [] : scopesOf(consent.scopes)
      if (consent !== null && scopesOf(a.scope).every((s) => granted.includes(s))) {
        const code = randomBytes(32).toString('base64url')
        await approveAuthorization(q, a.id, code, ctx.now())
        return { redirect_url: codeRedirect(a, code) }
      }
    }
    return a
  })
  if ('redirect_url' in seen) return seen
  const client = await findOAuthClient(ctx.db, seen.client_id)
  if (!client) throw new OAuthAuthorizationNotFoundError()
  const who: Record<string, string> = { id: user.id }
  if (user.email) who.email = user.email
  return {
    authorization_id: seen.authorization_id,
    redirect_uri: seen.redirect_uri,
    client: clientDetails(client),
    user: who,
    scope: seen.scope,
  }
}

export async function postOAuthConsent(req: FastifyRequest): Promise<unknown> {
  const ctx = contextOf(req)
  checkOrigin(ctx, req)
  const user = callerOf(req).user.user
  const action = bodyOf(req).action
  if (action !== undefined && typeof action !== 'string') throw new BadJsonError('invalid JSON body')
  if (action !== 'approve' && action !== 'deny')
    throw new ValidationFailedError('request', "action must be 'approve' or 'deny'")
  const redirectUrl = await onPendingRequest(ctx, req, 'authorization request is no longer pending', async (q, a) => {
    if (a.user_id !== user.id) throw new OAuthAuthorizationNotFoundError()
    if (action === 'deny') {
      await setAuthorizationStatus(q, a.id, 'denied')
      return errorRedirect(a.redirect_uri, 'access_denied', 'User denied the request', a.state)
    }
    const code = randomBytes(32).toString('base64url')
    await approveAuthorization(q, a.id, code, ctx.now())
    await upsertConsent(q, {
      userId: user.id,
      clientId: a.client_id,
      scopes: scopesOf(a.scope).join(' '),
      now: ctx.now(),
    })
    return codeRedirect(a, code)
  })
  return { redirect_url: redirectUrl }
}

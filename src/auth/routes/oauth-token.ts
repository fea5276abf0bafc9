// POST /oauth/token (docs/auth-protocol.md §3.22), GoTrue's requireOAuthClientAuth and
// OAuthToken: the client authenticates as it registered (client_secret_basic: the Basic header;
// client_secret_post: client_id and client_secret in the body; none: a public client sends only
// client_id and proves the flow with PKCE), secrets compared in constant time; then
// grant_type=authorization_code exchanges a one-use code for a session bound to the client
// (sessions.oauth_client_id, the scopes in sessions.scopes), and grant_type=refresh_token
// refreshes such a session for the client it was issued to. Answers are OAuth's: {access_token,
// token_type, expires_in, refresh_token}, errors in the OAuth form.
import type { FastifyRequest } from 'fastify'
import { withTransaction } from '../../shared/index.js'
import { UUID } from '../bearer.js'
import {
  InvalidCredentialsError,
  OAuthAccessDeniedError,
  OAuthInvalidGrantError,
  OAuthInvalidRequestError,
  OAuthUnsupportedGrantTypeError,
} from '../errors.js'
import { bodyOf, clientMeta, type Body } from '../http.js'
import { takeApprovedCode } from '../models/oauth-authorizations.js'
import { findOAuthClient, type OAuthClientRow, type TokenEndpointAuthMethod } from '../models/oauth-clients.js'
import { isUserBanned, loadUserWithIdentities } from '../models/users.js'
import { listOf, secretMatches } from '../oauth-client-rules.js'
import { idTokenOf } from '../oauth-claims.js'
import { verifierMatches } from '../pkce.js'
import { contextOf } from '../request-state.js'
import { startSession } from '../tokens.js'
import type { AccessTokenResponse, TenantContext } from '../types.js'
import { refreshTokenGrant } from '../grants/refresh-token.js'
import { scopesOf } from './oauth-authorize.js'

interface Credentials {
  clientId: string
  secret: string
  method: TokenEndpointAuthMethod
}

function field(b: Body, key: string): string {
  const v = b[key]
  return typeof v === 'string' ? v : ''
}

/** The client's credentials as sent (GoTrue's ExtractClientCredentials). */
function credentialsOf(req: FastifyRequest, b: Body): Credentials {
  const header = req.headers.authorization
  if (typeof header === 'string' && header.startsWith('Basic ')) {
    const decoded = Buffer.from(header.slice(6), 'base64').toString('utf8')
    const colon = decoded.indexOf(':')
    if (colon < 0) throw new InvalidCredentialsError('Invalid client credentials: invalid basic auth format')
    return { clientId: decoded.slice(0, colon), secret: decoded.slice(colon + 1), method: 'client_secret_basic' }
  }
  const clientId = field(b, 'client_id')
  if (clientId === '') throw new InvalidCredentialsError('Invalid client credentials: client_id is required')
  const secret = field(b, 'client_secret')
  return { clientId, secret, method: secret === '' ? 'none' : 'client_secret_post' }
}

/** The client, authenticated by the method it registered; 400 invalid_credentials otherwise. */
async function authenticateClient(ctx: TenantContext, req: FastifyRequest, b: Body): Promise<OAuthClientRow> {
  const creds = credentialsOf(req, b)
  if (!UUID.test(creds.clientId)) throw new InvalidCredentialsError('Invalid client_id format')
  const client = await findOAuthClient(ctx.db, creds.clientId.toLowerCase())
  if (!client) throw new InvalidCredentialsError('Invalid client credentials')
  if (creds.method !== client.token_endpoint_auth_method)
    throw new InvalidCredentialsError(
      `invalid authentication method: client is registered for '${client.token_endpoint_auth_method}' but '${creds.method}' was used`,
    )
  if (client.client_type === 'confidential') {
    if (creds.secret === '') throw new InvalidCredentialsError('confidential clients must provide client_secret')
    if (!secretMatches(creds.secret, client.client_secret_hash))
      throw new InvalidCredentialsError('invalid client credentials')
  }
  return client
}

/** The OAuth answer: the session without the user (GoTrue leaves it out for OAuth clients). */
function oauthAnswer(s: AccessTokenResponse): Record<string, unknown> {
  return {
    access_token: s.access_token,
    token_type: s.token_type,
    expires_in: s.expires_in,
    refresh_token: s.refresh_token,
  }
}

async function authorizationCodeGrant(
  ctx: TenantContext,
  req: FastifyRequest,
  b: Body,
  client: OAuthClientRow,
): Promise<Record<string, unknown>> {
  const code = field(b, 'code')
  if (code === '') throw new OAuthInvalidRequestError('described', 'code is required for authorization_code grant')
  return withTransaction(ctx.db, async (q) => {
    const a = await takeApprovedCode(q, code)
    if (!a || a.user_id === null) throw new OAuthInvalidGrantError('Invalid authorization code')
    if (a.expires_at.getTime() < ctx.now().getTime()) throw new OAuthInvalidGrantError('Authorization code has expired')
    if (a.client_id !== client.id) throw new OAuthInvalidGrantError('Authorization code was not issued for this client')
    const resource = field(b, 'resource')
    if (resource !== '' && resource !== (a.resource ?? ''))
      throw new OAuthInvalidGrantError('Authorization code resource does not match the resource parameter')
    const redirectUri = field(b, 'redirect_uri')
    if (redirectUri !== '' && redirectUri !== a.redirect_uri) throw new OAuthInvalidGrantError('Invalid redirect_uri')
    const verifier = field(b, 'code_verifier')
    if (verifier === '')
      throw new OAuthInvalidGrantError(
        'PKCE verification failed: code_verifier is required when PKCE challenge is present',
      )
    if (!verifierMatches(a, verifier))
      throw new OAuthInvalidGrantError(
        'PKCE verification failed: code challenge does not match previously saved code verifier',
      )
    const user = await loadUserWithIdentities(q, a.user_id)
    if (!user) throw new OAuthInvalidGrantError('User not found for authorization code')
    if (isUserBanned(user.user, ctx.now())) throw new OAuthAccessDeniedError('User is banned')
    const scopes = scopesOf(a.scope)
    const session = await startSession(ctx, q, user, {
      method: 'oauth_provider/authorization_code',
      ...clientMeta(req),
      oauth: { clientId: client.id, scopes: scopes.join(' ') },
    })
    // OpenID Connect: an ID token when the app asked for scope openid.
    const idToken = scopes.includes('openid')
      ? idTokenOf(ctx, user.user, { clientId: client.id, scopes, nonce: a.nonce, authTime: ctx.now() })
      : undefined
    return { ...oauthAnswer(session), ...(idToken === undefined ? {} : { id_token: idToken }) }
  })
}

export async function postOAuthToken(req: FastifyRequest): Promise<unknown> {
  const ctx = contextOf(req)
  const b = bodyOf(req)
  const client = await authenticateClient(ctx, req, b)
  const grantType = field(b, 'grant_type')
  if (grantType === '') throw new OAuthInvalidRequestError('described', 'grant_type is required')
  if (!listOf(client.grant_types).includes(grantType))
    throw new OAuthUnsupportedGrantTypeError(`Client is not allowed to use grant type: ${grantType}`)
  if (grantType === 'authorization_code') return authorizationCodeGrant(ctx, req, b, client)
  if (grantType === 'refresh_token') {
    if (field(b, 'refresh_token') === '')
      throw new OAuthInvalidRequestError('described', 'refresh_token is required for refresh_token grant')
    return oauthAnswer(await refreshTokenGrant(ctx, req, b, client.id))
  }
  throw new OAuthUnsupportedGrantTypeError(`Unsupported grant type: ${grantType}`)
}

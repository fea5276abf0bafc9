// The refresh grant's client check for sessions of the OAuth 2.1 server (docs/auth-protocol.md
// §3.22; GoTrue's RefreshTokenGrant): a session issued to an OAuth client refreshes only at POST
// /oauth/token, authenticated as that client; an ordinary session only without a client. The
// hot statements take ordinary sessions asked for without a client; everything else comes here.
import { OAuthInvalidClientError } from '../errors.js'
import { oauthBindingOf, type OAuthBinding } from '../models/sessions.js'
import type { TenantContext } from '../types.js'

/** The session's binding when `client` (null: plain /token) may refresh it; else invalid_client. */
export async function checkOAuthBinding(
  ctx: TenantContext,
  sessionId: string,
  client: string | null,
): Promise<OAuthBinding | null> {
  const binding = await oauthBindingOf(ctx.db, sessionId)
  if (binding === null) {
    if (client !== null) throw new OAuthInvalidClientError('Client authentication not allowed for non-OAuth session')
    return null
  }
  if (client === null) throw new OAuthInvalidClientError('Client authentication required for OAuth session')
  if (client !== binding.clientId) throw new OAuthInvalidClientError("Client does not match the session's OAuth client")
  return binding
}

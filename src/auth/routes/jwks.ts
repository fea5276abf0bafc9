// GET /.well-known/jwks.json (docs/auth-protocol.md §3.18): the public halves of this tenant's asymmetric
// signing keys (every listed key, the one that signs now and the older ones that still
// verify), in GoTrue's shape. The HS256 secret is never published. GET
// /.well-known/openid-configuration: GoTrue's discovery document for this tenant's issuer,
// so OIDC libraries find the JWKS from `iss`; the /oauth endpoints it names are those of the
// OAuth 2.1 server (docs/auth-protocol.md §3.22), whose own metadata document (RFC 8414,
// /.well-known/oauth-authorization-server) is the same.
import type { FastifyReply, FastifyRequest } from 'fastify'
import { oauthServerOf } from '../../tenants/index.js'
import { contextOf } from '../request-state.js'

export async function getJwks(req: FastifyRequest, reply: FastifyReply): Promise<unknown> {
  const ctx = contextOf(req)
  reply.header('cache-control', 'public, max-age=600')
  return { keys: (ctx.tenant.jwt.signing_keys ?? []).map((k) => k.public_jwk) }
}

export async function getOpenIdConfiguration(req: FastifyRequest, reply: FastifyReply): Promise<unknown> {
  const ctx = contextOf(req)
  const issuer = ctx.issuer.replace(/\/+$/, '')
  const oauth = oauthServerOf(ctx.tenant.auth)
  reply.header('cache-control', 'public, max-age=600')
  const doc: Record<string, unknown> = {
    issuer,
    authorization_endpoint: `${issuer}/oauth/authorize`,
    token_endpoint: `${issuer}/oauth/token`,
    jwks_uri: `${issuer}/.well-known/jwks.json`,
    userinfo_endpoint: `${issuer}/oauth/userinfo`,
    scopes_supported: ['openid', 'profile', 'email', 'phone', 'offline_access'],
    response_types_supported: ['code'],
    response_modes_supported: ['query'],
    grant_types_supported: ['authorization_code', 'refresh_token'],
    subject_types_supported: ['public'],
    id_token_signing_alg_values_supported: ['RS256', 'HS256', 'ES256'],
    token_endpoint_auth_methods_supported: ['client_secret_basic', 'client_secret_post', 'none'],
    claims_supported: [
      'sub',
      'aud',
      'iss',
      'exp',
      'iat',
      'auth_time',
      'nonce',
      'email',
      'email_verified',
      'phone_number',
      'phone_number_verified',
      'name',
      'picture',
      'preferred_username',
      'updated_at',
    ],
    // Our OAuth 2.1 server takes S256 only (GoTrue also plain).
    code_challenge_methods_supported: ['S256'],
  }
  if (oauth.enabled && oauth.allow_dynamic_registration) doc.registration_endpoint = `${issuer}/oauth/clients/register`
  return doc
}

/** RFC 8414 metadata of the OAuth 2.1 server: GoTrue answers it with the discovery document. */
export const getOAuthServerMetadata = getOpenIdConfiguration

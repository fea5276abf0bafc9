// OAuth 2.1 server clients (docs/auth-protocol.md §3.22), as GoTrue's oauthserver package
// registers them: the checks of a registration or an update (redirect URIs absolute, no
// fragment, http only on loopback, no script schemes; grant types; client type and token
// endpoint auth method consistent), the secret (32 random bytes, shown once, stored as its
// SHA-256 and compared in constant time) and the JSON a client is shown as. We never fetch
// any URL a client registers: client_uri and logo_uri are only shown to the consent page.
import { createHash, randomBytes, randomUUID, timingSafeEqual } from 'node:crypto'
import { BadJsonError, ValidationFailedError } from './errors.js'
import { optString, type Body } from './http.js'
import type { ClientType, OAuthClientFields, OAuthClientRow, TokenEndpointAuthMethod } from './models/oauth-clients.js'

const GRANT_TYPES = ['authorization_code', 'refresh_token'] as const
const AUTH_METHODS: readonly TokenEndpointAuthMethod[] = ['none', 'client_secret_basic', 'client_secret_post']
const SCRIPT_SCHEMES = ['javascript', 'data', 'file', 'vbscript', 'about', 'blob']
const LOOPBACK_HOSTS = ['localhost', '127.0.0.1', '[::1]']

/** A new client secret: 32 random bytes, base64url. */
export function newClientSecret(): string {
  return randomBytes(32).toString('base64url')
}

/** What is stored of a secret: its SHA-256, base64url (GoTrue's hashClientSecret). */
export function hashClientSecret(secret: string): string {
  return createHash('sha256').update(secret).digest('base64url')
}

/** Whether `secret` is the one whose hash is stored, compared in constant time. */
export function secretMatches(secret: string, storedHash: string | null): boolean {
  if (storedHash === null) return false
  const stored = Buffer.from(storedHash, 'base64url')
  const given = createHash('sha256').update(secret).digest()
  return stored.length === given.length && timingSafeEqual(stored, given)
}

/**
 * Why a redirect URI is refused (RFC 6749 §3.1.2, GoTrue's validateRedirectURI), or null.
 * Checked at registration, at update and again at authorize (docs/security.md "The tenant
 * boundary"). A comma is refused as well (ours): GoTrue stores the list comma-joined, so one URI
 * holding a comma would come back as two.
 */
export function redirectUriProblem(uri: string): string | null {
  if (uri === '') return 'redirect URI cannot be empty'
  // Ours: an authorization request keeps its redirect URI in a column of at most 2048 characters.
  if (uri.length > 2048) return 'must be at most 2048 characters'
  if (uri.includes(',')) return "must not contain ','"
  let u: URL
  try {
    u = new URL(uri)
  } catch {
    return 'must have scheme and host'
  }
  const scheme = u.protocol.slice(0, -1)
  if (u.host === '') return 'must have scheme and host'
  if (SCRIPT_SCHEMES.includes(scheme.toLowerCase())) return `scheme '${scheme}' is not allowed for security reasons`
  if (scheme === 'http' && !LOOPBACK_HOSTS.includes(u.hostname)) return 'HTTP scheme only allowed for localhost'
  if (u.hash !== '' || uri.includes('#')) return 'fragment not allowed in redirect URI'
  return null
}

function checkRedirectUris(uris: string[], required: boolean): void {
  if (uris.length === 0)
    throw new ValidationFailedError('request', required ? 'redirect_uris is required' : 'redirect_uris cannot be empty')
  if (uris.length > 10) throw new ValidationFailedError('request', 'redirect_uris cannot exceed 10 items')
  for (const uri of uris) {
    const problem = redirectUriProblem(uri)
    if (problem !== null) throw new ValidationFailedError('request', `invalid redirect_uri '${uri}': ${problem}`)
  }
}

function checkGrantTypes(types: string[]): void {
  if (types.length === 0) throw new ValidationFailedError('request', 'grant_types cannot be empty')
  if (!types.every((g) => (GRANT_TYPES as readonly string[]).includes(g)))
    throw new ValidationFailedError(
      'request',
      "grant_types must only contain 'authorization_code' and/or 'refresh_token'",
    )
}

/** client_uri and logo_uri: at most 2048 characters, an absolute URL when given. */
function checkShownUri(field: 'client_uri' | 'logo_uri', value: string): void {
  if (value === '') return
  if (value.length > 2048) throw new ValidationFailedError('request', `${field} cannot exceed 2048 characters`)
  if (!URL.canParse(value)) throw new ValidationFailedError('request', `${field} must be a valid URL`)
}

function checkAuthMethod(method: string, message: string): asserts method is TokenEndpointAuthMethod {
  if (!(AUTH_METHODS as readonly string[]).includes(method)) throw new ValidationFailedError('request', message)
}

/** A body field that must be an array of strings when present. */
function optStrings(b: Body, key: string): string[] | undefined {
  const v = b[key]
  if (v === undefined || v === null) return undefined
  if (!Array.isArray(v) || !v.every((x) => typeof x === 'string'))
    throw new BadJsonError(`Could not parse request body as JSON: field ${key} must be an array of strings`)
  return v as string[]
}

/** The client type an auth method implies: none is public, a secret method confidential. */
function typeOfMethod(method: TokenEndpointAuthMethod): ClientType {
  return method === 'none' ? 'public' : 'confidential'
}

/** A registration's type and auth method: explicit, inferred from each other, else confidential. */
function typeAndMethod(b: Body): { clientType: ClientType; method: TokenEndpointAuthMethod } {
  const type = optString(b, 'client_type') ?? ''
  const method = optString(b, 'token_endpoint_auth_method') ?? ''
  if (type !== '' && type !== 'public' && type !== 'confidential')
    throw new ValidationFailedError('request', "client_type must be 'public' or 'confidential'")
  if (method !== '') checkAuthMethod(method, `token_endpoint_auth_method must be one of: [${AUTH_METHODS.join(' ')}]`)
  if (type !== '' && method !== '' && typeOfMethod(method) !== type)
    throw new ValidationFailedError(
      'request',
      `client_type '${type}' is inconsistent with token_endpoint_auth_method '${method}' (expected client_type '${typeOfMethod(method)}')`,
    )
  const clientType: ClientType = type !== '' ? type : method !== '' ? typeOfMethod(method) : 'confidential'
  return { clientType, method: method !== '' ? method : clientType === 'public' ? 'none' : 'client_secret_basic' }
}

/** A checked registration (POST /admin/oauth/clients, POST /oauth/clients/register). */
export interface Registration {
  clientType: ClientType
  fields: Required<Omit<OAuthClientFields, 'client_secret_hash'>>
}

export function parseRegistration(b: Body): Registration {
  const uris = optStrings(b, 'redirect_uris') ?? []
  checkRedirectUris(uris, true)
  const grants = optStrings(b, 'grant_types')
  if (grants !== undefined && grants.length > 0) checkGrantTypes(grants)
  const name = optString(b, 'client_name') ?? ''
  if (name.length > 1024) throw new ValidationFailedError('request', 'client_name cannot exceed 1024 characters')
  const clientUri = optString(b, 'client_uri') ?? ''
  checkShownUri('client_uri', clientUri)
  const logoUri = optString(b, 'logo_uri') ?? ''
  checkShownUri('logo_uri', logoUri)
  const { clientType, method } = typeAndMethod(b)
  return {
    clientType,
    fields: {
      token_endpoint_auth_method: method,
      redirect_uris: uris,
      grant_types: (grants !== undefined && grants.length > 0 ? grants : GRANT_TYPES).join(','),
      client_name: name === '' ? null : name,
      client_uri: clientUri === '' ? null : clientUri,
      logo_uri: logoUri === '' ? null : logoUri,
    },
  }
}

/** A checked update (PUT /admin/oauth/clients/:client_id): only the fields sent. */
export function parseClientUpdate(b: Body, client: OAuthClientRow): OAuthClientFields {
  const out: OAuthClientFields = {}
  const uris = optStrings(b, 'redirect_uris')
  const grants = optStrings(b, 'grant_types')
  const name = optString(b, 'client_name')
  const clientUri = optString(b, 'client_uri')
  const logoUri = optString(b, 'logo_uri')
  const method = optString(b, 'token_endpoint_auth_method')
  if ([uris, grants, name, clientUri, logoUri, method].every((v) => v === undefined))
    throw new ValidationFailedError('request', 'No fields provided for update')
  if (uris !== undefined) checkRedirectUris(uris, false)
  if (grants !== undefined) checkGrantTypes(grants)
  if (name !== undefined && name.length > 1024)
    throw new ValidationFailedError('request', 'client_name cannot exceed 1024 characters')
  if (clientUri !== undefined) checkShownUri('client_uri', clientUri)
  if (logoUri !== undefined) checkShownUri('logo_uri', logoUri)
  if (method !== undefined) {
    checkAuthMethod(method, `invalid token_endpoint_auth_method: must be one of [${AUTH_METHODS.join(' ')}]`)
    if (typeOfMethod(method) !== client.client_type) {
      const valid = client.client_type === 'public' ? 'none' : 'client_secret_basic client_secret_post'
      throw new ValidationFailedError(
        'request',
        `token_endpoint_auth_method '${method}' is not valid for client_type '${client.client_type}'; valid methods: [${valid}]`,
      )
    }
    out.token_endpoint_auth_method = method
  }
  if (uris !== undefined) out.redirect_uris = uris
  if (grants !== undefined) out.grant_types = grants.join(',')
  if (name !== undefined) out.client_name = name
  if (clientUri !== undefined) out.client_uri = clientUri
  if (logoUri !== undefined) out.logo_uri = logoUri
  return out
}

/** A new client's id and, for a confidential one, its secret and the hash to store. */
export function newClientCredentials(clientType: ClientType): {
  id: string
  secret: string | null
  hash: string | null
} {
  const secret = clientType === 'confidential' ? newClientSecret() : null
  return { id: randomUUID(), secret, hash: secret === null ? null : hashClientSecret(secret) }
}

export function listOf(joined: string): string[] {
  return joined === '' ? [] : joined.split(',')
}

/** A client as the API shows it (GoTrue's OAuthServerClientResponse); the secret only when just made. */
export function clientJson(c: OAuthClientRow, secret?: string | null): Record<string, unknown> {
  const out: Record<string, unknown> = { client_id: c.id }
  if (secret) out.client_secret = secret
  out.client_type = c.client_type
  out.redirect_uris = c.redirect_uris
  out.token_endpoint_auth_method = c.token_endpoint_auth_method
  out.grant_types = listOf(c.grant_types)
  out.response_types = ['code']
  if (c.client_name) out.client_name = c.client_name
  if (c.client_uri) out.client_uri = c.client_uri
  if (c.logo_uri) out.logo_uri = c.logo_uri
  out.registration_type = c.registration_type
  out.created_at = c.created_at
  out.updated_at = c.updated_at
  return out
}

// The contract of an external identity provider (docs/auth-protocol.md §3.12-3.13, §5.9): build the
// authorization URL, exchange the callback's code for tokens, read who the person is.
// Presets (github, gitlab, google, generic OIDC) implement it; nothing here does I/O.

/** What /authorize hands a provider to build its authorization URL. */
interface AuthorizeRequest {
  /** Our state: the flow_state id. */
  state: string
  /** `<tenant auth URL>/callback`. */
  redirectUri: string
  /** Scopes asked for by the client, added to the provider's own. */
  scopes: string[]
  /** Other query parameters of /authorize, forwarded to the provider. */
  params: Record<string, string>
  /** Our own PKCE challenge (S256) towards the provider, when it uses one. */
  codeChallenge?: string
}

export interface ProviderTokens {
  accessToken: string
  refreshToken?: string
  idToken?: string
}

export interface ProviderEmail {
  email: string
  verified: boolean
  primary: boolean
}

/** The person as the provider describes them. */
export interface ProviderUser {
  /** The provider's subject (identities.provider_id). */
  id: string
  emails: ProviderEmail[]
  /** Claims kept as identity_data: iss, name, full_name, avatar_url, picture, user_name ... */
  claims: Record<string, unknown>
}

export interface OAuthProvider {
  /** The tenant's name for it (identities.provider). */
  readonly name: string
  /** Whether we send our own PKCE challenge to this provider (its verifier kept in oauth_client_states). */
  readonly usesPkce: boolean
  authorizeUrl(r: AuthorizeRequest): Promise<string>
  exchangeCode(code: string, redirectUri: string, codeVerifier: string | null): Promise<ProviderTokens>
  /** Reads the person; `state` lets OIDC check the nonce it derived from it. */
  userData(tokens: ProviderTokens, ctx: { state: string }): Promise<ProviderUser>
}

/** A failure talking to the provider; logged with its detail, answered as a generic error. */
export class ProviderError extends Error {
  constructor(message: string, opts: { cause?: unknown } = {}) {
    super(message, opts)
    this.name = 'ProviderError'
  }
}

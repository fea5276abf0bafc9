// A real OpenID Provider for tests: `oidc-provider` on 127.0.0.1:0 with one confidential
// client per call, accounts the test defines, and its development login form, which
// `signIn()` fills in over plain HTTP (cookies kept by hand, redirects followed one by
// one) until the provider sends the browser back to the client. Not a test file.
import http from 'node:http'
import { generateKeyPairSync, randomBytes } from 'node:crypto'
import type { AddressInfo } from 'node:net'
import { SignJWT } from 'jose'

interface Teardown {
  teardown(fn: () => unknown): void
}

export interface OidcAccount {
  email: string
  email_verified?: boolean
  name?: string
  picture?: string
}

interface OidcClient {
  client_id: string
  client_secret: string
  redirect_uris: string[]
}

export interface OidcProviderHandle {
  /** The issuer, http://127.0.0.1:<port> (discovery at /.well-known/openid-configuration). */
  issuer: string
  client: OidcClient
  /** Accounts by id (the id is the subject); add or change them at any time. */
  accounts: Map<string, OidcAccount>
  /**
   * Plays the browser from the provider's authorization URL: logs `accountId` in through
   * the development form (consent is pre-granted) and returns the URL the provider then
   * redirects to (the client's redirect_uri with code and state, or with an error).
   */
  signIn(authorizationUrl: string, accountId: string): Promise<string>
  /**
   * An ID token as this provider's key signs it (iss, aud = the client, iat; `exp` in
   * seconds from now unless null): what an app hands to grant_type=id_token.
   */
  signIdToken(claims: Record<string, unknown>, opts?: { expiresIn?: number | null }): Promise<string>
  close(): Promise<void>
}

/** A minimal cookie jar: name -> value, per provider (all paths, one host). */
class CookieJar {
  readonly #cookies = new Map<string, string>()
  store(res: Response): void {
    for (const line of res.headers.getSetCookie()) {
      const [pair] = line.split(';')
      const i = pair!.indexOf('=')
      if (i <= 0) continue
      const name = pair!.slice(0, i).trim()
      const value = pair!.slice(i + 1).trim()
      if (value === '' || /expires=Thu, 01 Jan 1970/i.test(line)) this.#cookies.delete(name)
      else this.#cookies.set(name, value)
    }
  }

  header(): string {
    return [...this.#cookies].map(([k, v]) => `${k}=${v}`).join('; ')
  }
}

export async function startOidcProvider(
  t: Teardown,
  opts: { redirectUris: string[]; accounts?: Record<string, OidcAccount> },
): Promise<OidcProviderHandle> {
  // oidc-provider ships no type declarations; a non-literal specifier keeps tsc out of it.
  const specifier: string = 'oidc-provider'
  const { default: Provider } = (await import(specifier)) as { default: any }
  const accounts = new Map(Object.entries(opts.accounts ?? {}))
  const client: OidcClient = {
    client_id: `gatehouse-${randomBytes(4).toString('hex')}`,
    client_secret: randomBytes(24).toString('base64url'),
    redirect_uris: opts.redirectUris,
  }
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 })
  const jwk = { ...privateKey.export({ format: 'jwk' }), kid: 'test-key', use: 'sig', alg: 'RS256' }

  // Listen first: the issuer must carry the port.
  const server = http.createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`

  const provider = new Provider(issuer, {
    clients: [
      {
        ...client,
        grant_types: ['authorization_code'],
        response_types: ['code'],
        token_endpoint_auth_method: 'client_secret_post',
      },
    ],
    jwks: { keys: [jwk] },
    cookies: { keys: [randomBytes(16).toString('hex')] },
    claims: { openid: ['sub'], email: ['email', 'email_verified'], profile: ['name', 'picture'] },
    features: { devInteractions: { enabled: true } },
    pkce: { required: () => false },
    async findAccount(_ctx: unknown, id: string) {
      const a = accounts.get(id)
      if (!a) return undefined
      return {
        accountId: id,
        async claims() {
          return { sub: id, email: a.email, email_verified: a.email_verified ?? true, name: a.name, picture: a.picture }
        },
      }
    },
    // First-party client: consent is granted without asking.
    async loadExistingGrant(ctx: any) {
      const grantId = ctx.oidc.result?.consent?.grantId || ctx.oidc.session.grantIdFor(ctx.oidc.client.clientId)
      if (grantId) return ctx.oidc.provider.Grant.find(grantId)
      const grant = new ctx.oidc.provider.Grant({
        clientId: ctx.oidc.client.clientId,
        accountId: ctx.oidc.session.accountId,
      })
      grant.addOIDCScope('openid email profile')
      await grant.save()
      return grant
    },
  })
  server.on('request', provider.callback())
  const close = () =>
    new Promise<void>((resolve) => {
      server.closeAllConnections()
      server.close(() => resolve())
    })
  t.teardown(close)

  async function signIn(authorizationUrl: string, accountId: string): Promise<string> {
    const jar = new CookieJar()
    let url = authorizationUrl
    let method = 'GET'
    let body: string | undefined
    for (let step = 0; step < 12; step++) {
      const res = await fetch(url, {
        method,
        redirect: 'manual',
        headers: { cookie: jar.header(), ...(body ? { 'content-type': 'application/x-www-form-urlencoded' } : {}) },
        body,
      })
      jar.store(res)
      const text = await res.text()
      method = 'GET'
      body = undefined
      if (res.status >= 300 && res.status < 400) {
        const next = new URL(res.headers.get('location')!, url).toString()
        if (!next.startsWith(issuer + '/')) return next
        url = next
        continue
      }
      if (res.status === 200 && /\/interaction\//.test(url) && /name="prompt" value="login"/.test(text)) {
        // The development login form: POST it back with the account id.
        method = 'POST'
        body = new URLSearchParams({ prompt: 'login', login: accountId, password: 'x' }).toString()
        continue
      }
      throw new Error(`the OpenID provider answered ${res.status} at ${url}: ${text.slice(0, 300)}`)
    }
    throw new Error('too many redirects at the OpenID provider')
  }

  async function signIdToken(claims: Record<string, unknown>, o: { expiresIn?: number | null } = {}): Promise<string> {
    const now = Math.floor(Date.now() / 1000)
    let jwt = new SignJWT(claims)
      .setProtectedHeader({ alg: 'RS256', kid: 'test-key' })
      .setIssuer(issuer)
      .setAudience(client.client_id)
      .setIssuedAt(now)
    const exp = o.expiresIn === undefined ? 600 : o.expiresIn
    if (exp !== null) jwt = jwt.setExpirationTime(now + exp)
    return jwt.sign(privateKey)
  }

  return { issuer, client, accounts, signIn, signIdToken, close }
}

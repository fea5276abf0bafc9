// The GitHub preset (OAuth 2, not OIDC): the user from /user, addresses from /user/emails
// (GitHub says which are verified and which is primary). `issuer` names a GitHub
// Enterprise host (its API under /api/v3); explicit URLs override either.
import type { ProviderSettings } from '../../tenants/index.js'
import { getJson, oauth2SignIn, str } from './http.js'
import { ProviderError, type OAuthProvider, type ProviderEmail } from './types.js'

export function githubProvider(name: string, s: ProviderSettings): OAuthProvider {
  const host = (s.issuer ?? 'https://github.com').replace(/\/+$/, '')
  const api = host === 'https://github.com' ? 'https://api.github.com' : `${host}/api/v3`
  const authorizeUrl = s.authorize_url ?? `${host}/login/oauth/authorize`
  const tokenUrl = s.token_url ?? `${host}/login/oauth/access_token`
  const userUrl = s.userinfo_url ?? `${api}/user`
  return {
    name,
    ...oauth2SignIn(s, { authorizeUrl, tokenUrl, defaultScopes: ['user:email'], usesPkce: false }),
    async userData(tokens) {
      const u = (await getJson(userUrl, 'github user', tokens.accessToken)) as Record<string, unknown>
      const id = str(u.id)
      if (!id) throw new ProviderError('github user: no id')
      const list = await getJson(`${userUrl}/emails`, 'github emails', tokens.accessToken)
      const emails: ProviderEmail[] = Array.isArray(list)
        ? list
            .filter((e) => e && typeof e.email === 'string')
            .map((e) => ({ email: e.email, verified: e.verified === true, primary: e.primary === true }))
        : []
      return {
        id,
        emails,
        claims: {
          iss: api,
          name: str(u.name) ?? str(u.login),
          full_name: str(u.name),
          user_name: str(u.login),
          preferred_username: str(u.login),
          avatar_url: str(u.avatar_url),
          picture: str(u.avatar_url),
        },
      }
    },
  }
}

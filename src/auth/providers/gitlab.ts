// The GitLab preset (OAuth 2 API, gitlab.com or the host named by `issuer`): the user from
// /api/v4/user (its primary address is confirmed by GitLab), other addresses from
// /api/v4/user/emails, which say nothing of confirmation, so they count as unverified.
import type { ProviderSettings } from '../../tenants/index.js'
import { getJson, oauth2SignIn, str } from './http.js'
import { ProviderError, type OAuthProvider, type ProviderEmail } from './types.js'

export function gitlabProvider(name: string, s: ProviderSettings): OAuthProvider {
  const host = (s.issuer ?? 'https://gitlab.com').replace(/\/+$/, '')
  const authorizeUrl = s.authorize_url ?? `${host}/oauth/authorize`
  const tokenUrl = s.token_url ?? `${host}/oauth/token`
  const userUrl = s.userinfo_url ?? `${host}/api/v4/user`
  return {
    name,
    ...oauth2SignIn(s, { authorizeUrl, tokenUrl, defaultScopes: ['read_user'], usesPkce: true }),
    async userData(tokens) {
      const u = (await getJson(userUrl, 'gitlab user', tokens.accessToken)) as Record<string, unknown>
      const id = str(u.id)
      if (!id) throw new ProviderError('gitlab user: no id')
      const emails: ProviderEmail[] = []
      const list = await getJson(`${userUrl}/emails`, 'gitlab emails', tokens.accessToken).catch(() => [])
      if (Array.isArray(list)) {
        for (const e of list)
          if (e && typeof e.email === 'string') emails.push({ email: e.email, verified: false, primary: false })
      }
      const primary = str(u.email)
      if (primary) emails.push({ email: primary, verified: true, primary: true })
      return {
        id,
        emails,
        claims: {
          iss: host,
          name: str(u.name),
          full_name: str(u.name),
          user_name: str(u.username),
          preferred_username: str(u.username),
          avatar_url: str(u.avatar_url),
          picture: str(u.avatar_url),
        },
      }
    },
  }
}

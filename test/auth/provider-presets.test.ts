// The GitHub and GitLab presets. github.com and gitlab.com cannot be reached from
// tests, so a scripted HTTP server on loopback stands in for their OAuth and REST APIs
// (the GitHub Enterprise / self-hosted GitLab form: the preset's `issuer` names the host).
// It answers as those APIs document and records what the engine sent. The OpenID preset
// runs against a real provider in external-providers.test.ts.
import t from 'tap'
import http from 'node:http'
import { randomBytes } from 'node:crypto'
import type { AddressInfo } from 'node:net'
import { startAuth, call, decodeJwt, email } from '../helpers/auth-harness.js'
import type { TestTenant } from '../helpers/tenants.js'

interface Person {
  id: number
  login: string
  name: string
  emails: Array<{ email: string; primary: boolean; verified: boolean }>
}

t.test('github and gitlab presets', async (t) => {
  // ----- the stand-in API ----------------------------------------------------------------------
  const tokens = new Map<string, Person>() // access token -> person
  const codes = new Map<string, Person>() // code -> person
  const tokenRequests: URLSearchParams[] = []
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      const url = new URL(req.url ?? '/', 'http://x')
      const json = (status: number, body: unknown) => {
        res.writeHead(status, { 'content-type': 'application/json' })
        res.end(JSON.stringify(body))
      }
      if (req.method === 'POST' && (url.pathname === '/login/oauth/access_token' || url.pathname === '/oauth/token')) {
        const form = new URLSearchParams(Buffer.concat(chunks).toString('utf8'))
        tokenRequests.push(form)
        const person = codes.get(form.get('code') ?? '')
        codes.delete(form.get('code') ?? '')
        // GitHub answers a bad code with 200 and an error object.
        if (!person)
          return json(200, {
            error: 'bad_verification_code',
            error_description: 'The code passed is incorrect or expired.',
          })
        const access = randomBytes(12).toString('hex')
        tokens.set(access, person)
        return json(200, {
          access_token: access,
          token_type: 'bearer',
          scope: 'user:email',
          refresh_token: 'r-' + access,
        })
      }
      const person = tokens.get((req.headers.authorization ?? '').replace(/^Bearer /, ''))
      if (!person) return json(401, { message: 'Bad credentials' })
      const primary = person.emails.find((e) => e.primary)
      switch (url.pathname) {
        case '/api/v3/user':
          return json(200, {
            id: person.id,
            login: person.login,
            name: person.name,
            avatar_url: `https://avatars.example.com/${person.id}`,
          })
        case '/api/v3/user/emails':
          return json(
            200,
            person.emails.map((e) => ({ ...e, visibility: 'private' })),
          )
        case '/api/v4/user':
          return json(200, {
            id: person.id,
            username: person.login,
            name: person.name,
            email: primary?.email,
            avatar_url: null,
          })
        case '/api/v4/user/emails':
          return json(
            200,
            person.emails.filter((e) => !e.primary).map((e, i) => ({ id: i, email: e.email })),
          )
        default:
          return json(404, { message: 'Not Found' })
      }
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(
    () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      }),
  )
  const api = `http://127.0.0.1:${(server.address() as AddressInfo).port}`

  const providers = {
    github: { client_id: 'gh-client', secret: 'gh-secret', issuer: api },
    gitlab: { client_id: 'gl-client', secret: 'gl-secret', issuer: api },
  }
  const h = await startAuth(t, {
    tenants: [{ auth: { providers } }, { auth: { providers, mail_confirmation: true } }],
  })
  const [auto, confirming] = h.list as [TestTenant, TestTenant]

  async function location(url: string, init: RequestInit = {}): Promise<{ status: number; url: URL }> {
    const res = await fetch(url, { redirect: 'manual', ...init })
    await res.arrayBuffer()
    return { status: res.status, url: new URL(res.headers.get('location') ?? 'about:blank') }
  }
  const fragment = (u: URL) => Object.fromEntries(new URLSearchParams(u.hash.slice(1)))

  /** /authorize, then the provider "returns" with a code for `person`. */
  async function signIn(x: TestTenant, provider: 'github' | 'gitlab', person: Person, opts: { post?: boolean } = {}) {
    const a = await location(`${h.base(x)}/authorize?provider=${provider}`)
    if (a.status !== 302) throw new Error(`authorize answered ${a.status}`)
    const code = randomBytes(8).toString('hex')
    codes.set(code, person)
    const state = a.url.searchParams.get('state')!
    const cb = opts.post
      ? await location(`${h.base(x)}/callback`, {
          method: 'POST',
          headers: { 'content-type': 'application/x-www-form-urlencoded' },
          body: new URLSearchParams({ code, state }).toString(),
        })
      : await location(`${h.base(x)}/callback?code=${code}&state=${state}`)
    return { authorize: a.url, landed: cb.url }
  }

  t.test('github: the authorization URL and the verified primary address', async (t) => {
    const e = email('octo')
    const person: Person = {
      id: 583231,
      login: 'octocat',
      name: 'The Octocat',
      emails: [
        { email: email('other'), primary: false, verified: true },
        { email: e, primary: true, verified: true },
      ],
    }
    const { authorize, landed } = await signIn(auto, 'github', person)
    t.equal(authorize.origin + authorize.pathname, `${api}/login/oauth/authorize`)
    t.match(Object.fromEntries(authorize.searchParams), {
      client_id: 'gh-client',
      response_type: 'code',
      scope: 'user:email',
      redirect_uri: `http://gatehouse.test/${auto.database}/auth/v1/callback`,
    })
    t.notOk(authorize.searchParams.get('code_challenge'), 'no PKCE towards GitHub')
    const form = tokenRequests.at(-1)!
    t.match(Object.fromEntries(form), {
      grant_type: 'authorization_code',
      client_id: 'gh-client',
      client_secret: 'gh-secret',
      redirect_uri: `http://gatehouse.test/${auto.database}/auth/v1/callback`,
    })
    const f = fragment(landed)
    t.ok(f.provider_token && f.provider_refresh_token, 'provider tokens in the fragment')
    const user = (await call(`${h.base(auto)}/user`, { token: f.access_token })).body
    t.equal(user.email, e, 'the primary address')
    t.same(user.app_metadata, { provider: 'github', providers: ['github'] })
    t.match(user.identities[0], { provider: 'github', id: '583231' })
    t.match(user.user_metadata, {
      user_name: 'octocat',
      full_name: 'The Octocat',
      avatar_url: 'https://avatars.example.com/583231',
      email_verified: true,
      provider_id: '583231',
    })

    // Again, by form_post: the same user.
    const again = await signIn(auto, 'github', person, { post: true })
    t.equal(decodeJwt(fragment(again.landed).access_token!).sub, user.id)
  })

  t.test('gitlab: our own PKCE towards the provider, the primary address', async (t) => {
    const e = email('tanuki')
    const person: Person = {
      id: 77,
      login: 'tanuki',
      name: 'Tanuki',
      emails: [
        { email: e, primary: true, verified: true },
        { email: email('alt'), primary: false, verified: false },
      ],
    }
    const { authorize, landed } = await signIn(auto, 'gitlab', person)
    t.equal(authorize.origin + authorize.pathname, `${api}/oauth/authorize`)
    t.equal(authorize.searchParams.get('scope'), 'read_user')
    t.equal(authorize.searchParams.get('code_challenge_method'), 'S256')
    const verifier = tokenRequests.at(-1)!.get('code_verifier')
    t.ok(verifier, 'the verifier goes with the token request')
    const f = fragment(landed)
    const claims = decodeJwt(f.access_token!)
    t.equal(claims.email, e)
    t.equal(claims.app_metadata.provider, 'gitlab')
  })

  t.test('an unverified address with mail confirmation on: access_denied', async (t) => {
    const person: Person = {
      id: 9001,
      login: 'unverified',
      name: 'U',
      emails: [{ email: email('unverified'), primary: true, verified: false }],
    }
    const { landed } = await signIn(confirming, 'github', person)
    t.equal(landed.origin, 'http://localhost:3000')
    t.match(Object.fromEntries(landed.searchParams), {
      error: 'access_denied',
      error_code: 'provider_email_needs_verification',
    })
  })

  t.test('no address at all: the sign-in fails', async (t) => {
    const { landed } = await signIn(auto, 'github', { id: 404, login: 'nomail', name: 'N', emails: [] })
    t.match(Object.fromEntries(landed.searchParams), {
      error: 'server_error',
      error_code: 'unexpected_failure',
      error_description: 'Error getting user email from external provider',
    })
  })

  t.test('a refused code is a server_error redirect without the provider detail', async (t) => {
    const a = await location(`${h.base(auto)}/authorize?provider=github`)
    const r = await location(`${h.base(auto)}/callback?code=stale&state=${a.url.searchParams.get('state')}`)
    t.match(Object.fromEntries(r.url.searchParams), {
      error: 'server_error',
      error_code: 'unexpected_failure',
      error_description: 'Unable to exchange external code',
    })
  })
})

// GET|POST /callback (docs/auth-protocol.md §3.13): the provider sends the browser back here with `state`
// (our flow_state id) and `code`. The code is exchanged, the person read, and the user
// found, linked by verified email or created (accounts.resolveIdentityUser, the path the
// panel exchange uses too). Implicit flows end with the session in the fragment; PKCE
// flows with `?code=<auth_code>` for the pkce grant. Failures are redirects, never JSON.
import type { FastifyReply, FastifyRequest } from 'fastify'
import { withTransaction } from '../../shared/index.js'
import { resolveIdentityUser, signInWithIdentity, type ExternalIdentity } from '../accounts.js'
import {
  AuthError,
  BadOAuthCallbackError,
  BadOAuthStateError,
  FlowStateAlreadyUsedError,
  toAuthError,
  UnexpectedFailureError,
  unexpectedFailure,
} from '../errors.js'
import { contextOf } from '../request-state.js'
import { linkIdentityToUser } from '../linking.js'
import { startSession } from '../tokens.js'
import { UUID } from '../bearer.js'
import { clientMeta, isRedirectAllowed } from '../http.js'
import {
  deleteFlowState,
  findFlowStateById,
  takeOAuthClientState,
  updateFlowState,
  type FlowStateRow,
} from '../models/flow-state.js'
import { isFlowStateExpired } from '../pkce.js'
import {
  providerOf,
  ProviderError,
  type OAuthProvider,
  type ProviderTokens,
  type ProviderUser,
} from '../providers/index.js'
import { errorParams, errorRedirectUrl, ProviderRefusal, withFragmentParams, withQueryParams } from '../redirects.js'
import type { TenantContext } from '../types.js'
import { callbackUrl } from './authorize.js'

const noEmail = () => new UnexpectedFailureError('providerEmail')

function paramsOf(req: FastifyRequest): Record<string, string> {
  const out: Record<string, string> = {}
  const add = (src: unknown) => {
    if (!src || typeof src !== 'object') return
    for (const [k, v] of Object.entries(src as Record<string, unknown>))
      if (typeof v === 'string' && !(k in out)) out[k] = v
  }
  add(req.query)
  if (req.method === 'POST') add(req.body) // form_post providers (Apple)
  return out
}

/** The address used for the account: the primary one, else the last listed (GoTrue). */
function pickEmail(u: ProviderUser): { email: string | null; verified: boolean } {
  const e = u.emails.find((x) => x.primary) ?? u.emails[u.emails.length - 1]
  return e ? { email: e.email, verified: e.verified } : { email: null, verified: false }
}

/** Loads the flow of a state; its problems redirect to the site URL (GoTrue: 303). */
async function loadFlow(ctx: TenantContext, state: string | undefined): Promise<FlowStateRow> {
  if (!state) throw new BadOAuthCallbackError('OAuth state parameter missing')
  if (!UUID.test(state)) throw new BadOAuthStateError('OAuth state not found or expired')
  const flow = await findFlowStateById(ctx.db, state)
  if (!flow || flow.authentication_method !== 'oauth') throw new BadOAuthStateError('OAuth state not found or expired')
  if (isFlowStateExpired(flow, ctx.now())) throw new BadOAuthStateError('OAuth state has expired')
  if (flow.auth_code && flow.user_id) throw new FlowStateAlreadyUsedError()
  return flow
}

/** The provider's tokens for the code and the person they name, as an external identity. */
async function exchangeCode(
  ctx: TenantContext,
  provider: OAuthProvider,
  code: string,
  flow: FlowStateRow,
): Promise<{ tokens: ProviderTokens; ext: ExternalIdentity }> {
  const verifier = flow.oauth_client_state_id ? await takeOAuthClientState(ctx.db, flow.oauth_client_state_id) : null
  let person: ProviderUser
  let tokens: ProviderTokens
  try {
    tokens = await provider.exchangeCode(code, callbackUrl(ctx), verifier)
    person = await provider.userData(tokens, { state: flow.id })
  } catch (err) {
    if (err instanceof ProviderError) {
      throw new UnexpectedFailureError('codeExchange', { internal: err })
    }
    throw err
  }
  const { email, verified } = pickEmail(person)
  if (!email) throw noEmail()
  return {
    tokens,
    ext: {
      provider: provider.name,
      providerId: person.id,
      email,
      emailVerified: verified,
      identityData: person.claims,
    },
  }
}

/** PKCE: the user is known now and kept on the flow; the session starts when the code is exchanged. */
async function keepPkceUser(
  ctx: TenantContext,
  flow: FlowStateRow,
  tokens: ProviderTokens,
  ext: ExternalIdentity,
): Promise<void> {
  await withTransaction(ctx.db, async (q) => {
    const current = await findFlowStateById(q, flow.id, true)
    if (!current) throw new BadOAuthStateError('OAuth state not found or expired')
    if (current.user_id) throw new FlowStateAlreadyUsedError()
    const user = flow.linking_target_id
      ? await linkIdentityToUser(ctx, q, flow.linking_target_id, ext)
      : (await resolveIdentityUser(ctx, q, ext)).user
    await updateFlowState(
      q,
      flow.id,
      {
        userId: user.user.id,
        providerAccessToken: tokens.accessToken,
        providerRefreshToken: tokens.refreshToken ?? null,
        authCodeIssuedAt: ctx.now(),
      },
      ctx.now(),
    )
  })
}

/** Implicit: a session now (of the linking target, or of the identity's user), as the fragment's parameters. */
async function implicitSession(
  ctx: TenantContext,
  req: FastifyRequest,
  flow: FlowStateRow,
  tokens: ProviderTokens,
  ext: ExternalIdentity,
): Promise<Record<string, string>> {
  const linkTo = flow.linking_target_id
  const session = linkTo
    ? await withTransaction(ctx.db, async (q) =>
        startSession(ctx, q, await linkIdentityToUser(ctx, q, linkTo, ext), { method: 'oauth', ...clientMeta(req) }),
      )
    : await signInWithIdentity(ctx, ext, clientMeta(req))
  const fragment: Record<string, string> = {
    access_token: session.access_token,
    expires_at: String(session.expires_at),
    expires_in: String(session.expires_in),
    refresh_token: session.refresh_token,
    token_type: 'bearer',
    provider_token: tokens.accessToken,
  }
  if (tokens.refreshToken) fragment.provider_refresh_token = tokens.refreshToken
  return fragment
}

export async function handleCallback(req: FastifyRequest, reply: FastifyReply) {
  const ctx = contextOf(req)
  const p = paramsOf(req)
  let flow: FlowStateRow
  try {
    flow = await loadFlow(ctx, p.state)
  } catch (err) {
    // GoTrue's loadFlowState: the site URL with the error in its query only (no fragment).
    return reply.redirect(withQueryParams(ctx.tenant.auth.site_url, errorParams(err)), 303)
  }
  // Checked again: the allow list may have changed since /authorize.
  const target =
    flow.referrer && isRedirectAllowed(flow.referrer, ctx.tenant.auth) ? flow.referrer : ctx.tenant.auth.site_url
  try {
    if (p.error)
      return reply.redirect(
        errorRedirectUrl(target, new ProviderRefusal(p.error, p.error_description ?? p.error), true),
        302,
      )
    const provider = providerOf(ctx.tenant, flow.provider_type)
    if (!p.code) throw new BadOAuthCallbackError('OAuth callback with missing authorization code')
    if (!flow.auth_code) {
      // Implicit: the state is spent now, whatever happens next.
      await deleteFlowState(ctx.db, flow.id)
    }
    const { tokens, ext } = await exchangeCode(ctx, provider, p.code, flow)
    if (flow.auth_code) {
      await keepPkceUser(ctx, flow, tokens, ext)
      return reply.redirect(withQueryParams(target, { code: flow.auth_code }), 302)
    }
    return reply.redirect(withFragmentParams(target, await implicitSession(ctx, req, flow, tokens, ext)), 302)
  } catch (err) {
    const e = toAuthError(err instanceof AuthError ? err : unexpectedFailure(err))
    if (e.status >= 500) req.log.error({ err: e.internal ?? err }, 'provider callback failed')
    return reply.redirect(errorRedirectUrl(target, e, true), 302)
  }
}

// GET /authorize (docs/auth-protocol.md §3.12): starts an external sign-in. The flow is kept in
// auth.flow_state (its id is the OAuth `state`; the client's PKCE challenge and the
// validated redirect URL with it) and the browser is sent to the provider. Errors are
// JSON; with skip_http_redirect=true the URL is answered as {url}.
import { createHash, randomBytes } from 'node:crypto'
import type { FastifyReply, FastifyRequest } from 'fastify'
import { unexpectedFailure } from '../errors.js'
import { contextOf } from '../request-state.js'
import { queryParam, redirectUrlOf } from '../http.js'
import { insertFlowState, insertOAuthClientState } from '../models/flow-state.js'
import { pkceParamsOf } from '../pkce.js'
import { providerOf, ProviderError } from '../providers/index.js'
import type { TenantContext } from '../types.js'
import { bareRecord } from '../../shared/index.js'

/** Parameters of ours or of the OAuth protocol that are never forwarded to the provider. */
const RESERVED = new Set([
  'provider',
  'scopes',
  'redirect_to',
  'invite_token',
  'skip_http_redirect',
  'client_id',
  'client_secret',
  'redirect_uri',
  'response_type',
  'state',
  'code_challenge',
  'code_challenge_method',
  'code_verifier',
])

export function callbackUrl(ctx: TenantContext): string {
  return `${ctx.externalUrl}/callback`
}

/**
 * Starts an external sign-in (or, with `linkingTargetId`, the linking of an identity to that
 * user): the flow state stored, the provider's authorization URL answered.
 */
export async function startExternalFlow(
  ctx: TenantContext,
  req: FastifyRequest,
  linkingTargetId: string | null = null,
): Promise<string> {
  const name = queryParam(req, 'provider') ?? ''
  const provider = providerOf(ctx.tenant, name)
  const pkce = pkceParamsOf(ctx, queryParam(req, 'code_challenge'), queryParam(req, 'code_challenge_method'))
  const redirectTo = redirectUrlOf(req, ctx.tenant.auth)
  const scopes = (queryParam(req, 'scopes') ?? '').split(/[\s,]+/).filter((x) => x.length > 0)
  const params = bareRecord<string>()
  for (const [k, v] of Object.entries(req.query as Record<string, unknown>)) {
    if (!RESERVED.has(k) && typeof v === 'string') params[k] = v
  }
  const now = ctx.now()
  // Our own PKCE towards the provider: the verifier stays here, the challenge travels.
  let codeChallenge: string | undefined
  let clientStateId: string | null = null
  if (provider.usesPkce) {
    const verifier = randomBytes(48).toString('base64url')
    codeChallenge = createHash('sha256').update(verifier).digest('base64url')
    clientStateId = await insertOAuthClientState(ctx.db, { providerType: name, codeVerifier: verifier, now })
  }
  const flow = await insertFlowState(ctx.db, {
    providerType: name,
    authenticationMethod: 'oauth',
    pkce,
    referrer: redirectTo,
    oauthClientStateId: clientStateId,
    linkingTargetId,
    now,
  })
  try {
    return await provider.authorizeUrl({ state: flow.id, redirectUri: callbackUrl(ctx), scopes, params, codeChallenge })
  } catch (err) {
    if (err instanceof ProviderError) throw unexpectedFailure(err)
    throw err
  }
}

export async function getAuthorize(req: FastifyRequest, reply: FastifyReply): Promise<unknown> {
  const url = await startExternalFlow(contextOf(req), req)
  if (queryParam(req, 'skip_http_redirect') === 'true') return { url }
  return reply.redirect(url, 302)
}

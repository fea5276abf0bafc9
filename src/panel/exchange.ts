// POST app-session: a session of the database's users for the panel member (docs/panel-api.md).
import type { FastifyRequest } from 'fastify'
import { panelContext } from './context.js'
import { TenantEngineMissingError } from './errors.js'
import type { PanelRouteDeps } from './route-deps.js'

/** The documented lifetime of an exchanged access token (docs/service.md §9). */
const EXCHANGE_EXPIRES_IN = 3600

/** The exchange needs the database's auth engine (checked before the exchange's limit). */
export async function requireAuthEngine(_deps: PanelRouteDeps, req: FastifyRequest): Promise<void> {
  const { tenant, database } = panelContext(req)
  if (!tenant.engines?.auth) throw new TenantEngineMissingError(database, 'auth engine')
}

/** The exchange is a sign-in: limited per database and panel user (exchange-limit.ts). */
export async function takeExchange(deps: PanelRouteDeps, req: FastifyRequest): Promise<void> {
  const { tenant, session } = panelContext(req)
  await deps.exchangeLimiter.consume(tenant, session.userId)
}

export async function postAppSession(deps: PanelRouteDeps, req: FastifyRequest): Promise<unknown> {
  const { tenant, session, database } = panelContext(req)
  // The exchange's access token lives 3600 s whatever the tenant's own expiry (docs/service.md §8).
  const t =
    tenant.jwt.expiry === EXCHANGE_EXPIRES_IN
      ? tenant
      : { ...tenant, jwt: { ...tenant.jwt, expiry: EXCHANGE_EXPIRES_IN } }
  // Never hand a member an account the exchange did not establish as theirs: link only to
  // a user that already has this panel identity, or whose address was proven by a mail
  // round trip; when a stranger holds the address unproven, the member gets a user of
  // their own, linked by the panel identity alone (docs/edge.md).
  const r = await deps.auth.findOrCreateUserByIdentity({
    tenant: t,
    provider: 'panel',
    providerId: session.userId,
    email: session.email,
    emailVerified: session.emailVerified,
    requireEmailProof: true,
  })
  const user = r.user as { id: string; email?: string | null }
  return {
    url: `${deps.config.public_url.replace(/\/+$/, '')}/${database}`,
    access_token: r.session.access_token,
    refresh_token: r.session.refresh_token,
    expires_in: EXCHANGE_EXPIRES_IN,
    token_type: 'bearer',
    user: { id: user.id, email: user.email ?? '' },
  }
}

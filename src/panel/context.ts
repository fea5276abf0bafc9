// The per-request guard of every database route of the panel: the panel session (401), the
// membership of the organization in the path (403), and the database belonging to that
// organization (404, also when it does not exist). Routes read the result with panelContext();
// it is kept on the request (fastify's decorateRequest).
import type { FastifyInstance, FastifyRequest } from 'fastify'
import { DATABASE_NAME, type Tenant, type TenantLookup } from '../tenants/index.js'
import { DatabaseNotFoundError, InternalError, NoSessionError, NotAMemberError } from './errors.js'
import type { PanelSession, SessionVerifier } from './session.js'

interface PanelRequestContext {
  session: PanelSession
  organization: string
  database: string
  tenant: Tenant
}

declare module 'fastify' {
  interface FastifyRequest {
    /** What the panel's guard proved about this request (null before it ran). */
    panelState: PanelRequestContext | null
  }
}

/** Gives the panel's requests their state slot (once, on the panel's app). */
export function decoratePanelRequests(app: FastifyInstance): void {
  app.decorateRequest('panelState', null)
}

/** The bearer token of an Authorization header, or null. */
function bearerOf(header: string | string[] | undefined): string | null {
  const v = Array.isArray(header) ? header[0] : header
  if (typeof v !== 'string') return null
  const m = /^Bearer[ \t]+([^\s]+)[ \t]*$/i.exec(v)
  return m === null ? null : m[1]!
}

export function guardHook(deps: { verifier: SessionVerifier; tenants: TenantLookup }) {
  return async function guard(req: FastifyRequest): Promise<void> {
    const token = bearerOf(req.headers.authorization)
    if (token === null) throw new NoSessionError()
    const session = await deps.verifier.verify(token)
    const { org, db } = req.params as { org?: string; db?: string }
    const organization = org ?? ''
    const database = db ?? ''
    if (organization === '' || organization.length > 200 || !session.orgs.includes(organization)) {
      throw new NotAMemberError(organization.slice(0, 200))
    }
    if (!DATABASE_NAME.test(database)) throw new DatabaseNotFoundError(organization, database.slice(0, 63))
    const tenant = await deps.tenants.get(database)
    if (tenant === null || tenant.organization !== organization) throw new DatabaseNotFoundError(organization, database)
    req.panelState = { session, organization, database, tenant }
  }
}

export function panelContext(req: FastifyRequest): PanelRequestContext {
  const c = req.panelState
  if (c === null) throw new InternalError({ internal: new Error('panel route registered outside the guarded scope') })
  return c
}

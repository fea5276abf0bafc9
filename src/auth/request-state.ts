// What the auth engine knows about a request while it runs, kept on the request itself
// (fastify's decorateRequest): the tenant's context (resolved first, from the path's
// database), the signed-in caller and the MFA factor the route's checks loaded
// (routes/table.ts). Handlers read it with contextOf, callerOf and factorOf.
import type { FastifyInstance, FastifyRequest } from 'fastify'
import { UNKNOWN_TENANT_LABEL } from '../shared/index.js'
import { DATABASE_NAME, type TenantLookup } from '../tenants/index.js'
import { buildTenantContext, type ContextDeps } from './context.js'
import { tenantNotFound, unexpectedFailure } from './errors.js'
import type { AuthenticatedUser, FactorRow, TenantContext } from './types.js'

interface AuthRequestState {
  readonly ctx: TenantContext
  caller: AuthenticatedUser | null
  factor: FactorRow | null
}

declare module 'fastify' {
  interface FastifyRequest {
    /** The auth engine's state of this request (null outside the tenant scope). */
    authState: AuthRequestState | null
  }
}

/** Gives the engine's requests their state slot (once, on the engine's app). */
export function decorateAuthRequests(app: FastifyInstance): void {
  app.decorateRequest('authState', null)
}

/** onRequest hook of the tenant-scoped routes: the first path segment names the database; unknown -> 404. */
export function resolveTenantHook(deps: ContextDeps & { tenants: TenantLookup }) {
  return async function resolveTenant(req: FastifyRequest): Promise<void> {
    const database = (req.params as { database?: string }).database ?? ''
    if (!DATABASE_NAME.test(database)) throw tenantNotFound(database)
    const tenant = await deps.tenants.get(database)
    if (!tenant) throw tenantNotFound(database)
    req.authState = { ctx: buildTenantContext(deps, tenant, req.log), caller: null, factor: null }
  }
}

/**
 * The request's tenant label for the request metrics: the database the tenant hook resolved,
 * else `_unknown`; read from the request, without a second look-up of the tenant.
 */
export function tenantLabelOf(req: FastifyRequest): string {
  return req.authState?.ctx.tenant.database ?? UNKNOWN_TENANT_LABEL
}

function stateOf(req: FastifyRequest): AuthRequestState {
  const s = req.authState
  if (!s) throw unexpectedFailure(new Error('route registered outside the tenant scope'))
  return s
}

/** The context the hook built for this request. */
export function contextOf(req: FastifyRequest): TenantContext {
  return stateOf(req).ctx
}

/** The signed-in caller a route's `user` check proved. */
export function callerOf(req: FastifyRequest): AuthenticatedUser {
  const caller = stateOf(req).caller
  if (!caller) throw unexpectedFailure(new Error('route reads the caller without the user check'))
  return caller
}

export function setCaller(req: FastifyRequest, caller: AuthenticatedUser): void {
  stateOf(req).caller = caller
}

/** The caller's factor a route's `factor` check loaded. */
export function factorOf(req: FastifyRequest): FactorRow {
  const factor = stateOf(req).factor
  if (!factor) throw unexpectedFailure(new Error('route reads the factor without the factor check'))
  return factor
}

export function setFactor(req: FastifyRequest, factor: FactorRow): void {
  stateOf(req).factor = factor
}

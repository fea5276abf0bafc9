// onRequest hook of the tenant-scoped routes: the first path segment names the database;
// the tenant is looked up and the request's TenantContext built. Unknown -> 404.
import type { FastifyRequest } from 'fastify'
import { DATABASE_NAME, type TenantLookup } from '../../tenants/index.js'
import { buildTenantContext, type ContextDeps } from '../context.js'
import { tenantNotFound, unexpectedFailure } from '../errors.js'
import type { TenantContext } from '../types.js'

const contexts = new WeakMap<FastifyRequest, TenantContext>()

export function resolveTenantHook (deps: ContextDeps & { tenants: TenantLookup }) {
  return async function resolveTenant (req: FastifyRequest): Promise<void> {
    const database = (req.params as { database?: string }).database ?? ''
    if (!DATABASE_NAME.test(database)) throw tenantNotFound(database)
    const tenant = await deps.tenants.get(database)
    if (!tenant) throw tenantNotFound(database)
    contexts.set(req, buildTenantContext(deps, tenant, req.log))
  }
}

/** The context the hook built for this request. */
export function contextOf (req: FastifyRequest): TenantContext {
  const ctx = contexts.get(req)
  if (!ctx) throw unexpectedFailure(new Error('route registered outside the tenant scope'))
  return ctx
}

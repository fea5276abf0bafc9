// ApiRequest + SchemaCache -> ActionPlan (PostgREST's Plan.hs). Pure: knows the schema
// cache but not SQL. planAction plans every action kind; the plan types are in types.ts.
import { OpenApiDisabledError } from '../errors.js'
import type { ApiRequest } from '../api-request/types.js'
import { qnKey, type SchemaCache } from '../schema-cache/types.js'
import { checkPreferences, isDefaultSelect, negotiatePlan, negotiateRead } from './negotiate.js'
import { planReadTree } from './read-plan.js'
import type { ActionPlan, ReadPlan } from './types.js'
import { planMutate } from './mutate-plan.js'
import { planCall } from './call-plan.js'
import { planInfo, planOpenApi } from './info-plan.js'

export type * from './types.js'
export { negotiateRead } from './negotiate.js'

interface PlanOptions {
  /** Tenant max_rows (rest.max_rows), null = none. */
  maxRows: number | null
  /** Tenant rest.aggregates_enabled: `count()`, `col.sum()`, ... in select (otherwise PGRST123). */
  aggregates?: boolean
  /** Tenant rest.plan_enabled: `Accept: application/vnd.pgrst.plan` answers the EXPLAIN (otherwise not offered). */
  plans?: boolean
  /** Tenant rest.openapi_mode (PostgREST's openapi-mode); follow-privileges when absent. */
  openapiMode?: 'follow-privileges' | 'ignore-privileges' | 'disabled'
  /** Tenant rest.openapi_security_active (PostgREST's openapi-security-active): the document names the JWT scheme. */
  openapiSecurity?: boolean
}

function planRead(
  req: ApiRequest,
  relation: string,
  headersOnly: boolean,
  cache: SchemaCache,
  opts: PlanOptions,
): ReadPlan {
  // Negotiate first: PostgREST answers PGRST107 before looking at the table (it does so
  // again with the database's media handlers once the table is known).
  const early =
    cache.mediaHandlers === undefined || !cache.tables.has(qnKey(req.schema, relation))
      ? negotiateRead(req.accept)
      : null
  const { table, tree } = planReadTree(req, relation, cache, opts)
  const media =
    cache.mediaHandlers === undefined && early !== null
      ? early
      : negotiateRead(req.accept, { handlers: cache.mediaHandlers, target: table, defaultSelect: isDefaultSelect(req) })
  checkPreferences(req)
  const ranged = tree.range.limit !== null || tree.range.offset > 0 || opts.maxRows !== null
  return {
    kind: 'read',
    table,
    tree,
    media,
    count: req.preferences.count,
    headersOnly,
    maxRows: opts.maxRows,
    ranged,
  }
}

/** The plan of any request; throws the PGRST error of the first problem found. */
export function planAction(req: ApiRequest, cache: SchemaCache, opts: PlanOptions): ActionPlan {
  const a = req.action
  if (a.kind === 'read' || a.kind === 'mutate' || a.kind === 'call') {
    // The plan media type wraps the media type it is for: plan for that one, then explain.
    const p = negotiatePlan(req.accept, opts.plans === true, cache.mediaHandlers)
    if (p !== null) {
      const plan = planOf({ ...req, accept: p.accept }, cache, opts)
      if (plan.kind === 'read' || plan.kind === 'mutate' || plan.kind === 'call') return { ...plan, explain: p.explain }
      return plan
    }
  }
  return planOf(req, cache, opts)
}

function planOf(req: ApiRequest, cache: SchemaCache, opts: PlanOptions): ActionPlan {
  const a = req.action
  switch (a.kind) {
    case 'read':
      return planRead(req, a.relation, a.headersOnly, cache, opts)
    case 'mutate':
      return planMutate(req, a.relation, a.mutation, cache, opts.aggregates === true)
    case 'call':
      return planCall(req, a.routine, a.invoke, cache, { maxRows: opts.maxRows, aggregates: opts.aggregates === true })
    case 'info':
      return planInfo(req, a.resource, cache, { maxRows: opts.maxRows, aggregates: opts.aggregates === true })
    case 'openapi':
      if (opts.openapiMode === 'disabled') throw new OpenApiDisabledError()
      return planOpenApi(req, a.headersOnly, cache, {
        ignorePrivileges: opts.openapiMode === 'ignore-privileges',
        securityActive: opts.openapiSecurity === true,
      })
  }
}

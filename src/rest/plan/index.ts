// ApiRequest + SchemaCache -> ActionPlan (PostgREST's Plan.hs). Pure: knows the schema
// cache but not SQL. Issue 4 plans reads; the other action kinds are routed here and
// answered "not implemented" until issue 5 adds mutate-plan.ts, call-plan.ts, ...
import { NotImplementedError } from '../errors.js'
import type { ApiRequest } from '../api-request/types.js'
import type { SchemaCache } from '../schema-cache/types.js'
import { negotiateRead } from './negotiate.js'
import { planReadTree } from './read-plan.js'
import type { ActionPlan, ReadPlan } from './types.js'

export type * from './types.js'
export { negotiateRead } from './negotiate.js'
export { planReadTree, findTable, topRange } from './read-plan.js'
export { findRelationship, relationshipMatches, describeRelationship } from './relationships.js'

export interface PlanOptions {
  /** Tenant max_rows (rest.max_rows), null = none. */
  maxRows: number | null
}

export function planRead (req: ApiRequest, relation: string, headersOnly: boolean, cache: SchemaCache, opts: PlanOptions): ReadPlan {
  // Negotiate first: PostgREST answers PGRST107 before looking at the table.
  const media = negotiateRead(req.accept)
  const { table, tree, implicitLimit } = planReadTree(req, relation, cache, opts)
  const ranged = tree.range.limit !== null || tree.range.offset > 0 || opts.maxRows !== null
  return {
    kind: 'read',
    table,
    tree,
    media,
    count: req.preferences.count,
    headersOnly,
    implicitLimit,
    maxRows: opts.maxRows,
    ranged
  }
}

/** The plan of any request; throws the PGRST error of the first problem found. */
export function planRequest (req: ApiRequest, cache: SchemaCache, opts: PlanOptions): ActionPlan {
  const a = req.action
  switch (a.kind) {
    case 'read':
      return planRead(req, a.relation, a.headersOnly, cache, opts)
    case 'mutate':
    case 'call':
    case 'info':
    case 'openapi':
      // Issue 5: writes, RPC, OPTIONS and the OpenAPI root.
      throw new NotImplementedError({ details: `The ${a.kind} action is not available yet.` })
  }
}

// Execution results -> {status, headers, body} (PostgREST's Response.hs): one entry,
// respond(), shapes the answer of every action from its plan and the rows its transaction
// returned. Pure: knows HTTP, not SQL.
import type { ApiRequest, RawRequest } from '../api-request/index.js'
import type { ActionPlan } from '../plan/types.js'
import { toMainResult, type RestResponse } from './gucs.js'
import { shapeInfoResponse } from './info.js'
import { shapeCallResponse, shapeMutateResponse } from './mutate.js'
import { openApiServer, shapeOpenApiResponse } from './openapi.js'
import { shapePlanResponse } from './plan.js'
import { shapeReadResponse, toReadResult } from './read.js'

export { type RestResponse } from './gucs.js'

export { resultCheck } from './checks.js'

/** What the transaction of a plan returned: the main statement's row, and the rows of the count's EXPLAIN when one ran. */
export interface ExecutionResult {
  main: Record<string, unknown>
  /** Every row of the main statement (the EXPLAIN output of a plan request). */
  rows: ReadonlyArray<Record<string, unknown>>
  countPlan: ReadonlyArray<Record<string, unknown>> | null
}

/** The request as the response needs it: parsed, its raw headers, the tenant's database. */
interface ResponseContext {
  req: ApiRequest
  headers: RawRequest['headers']
  database: string
}

/** The response of a plan; `result` is null only for plans that run no SQL (OPTIONS). */
export function respond(ctx: ResponseContext, plan: ActionPlan, result: ExecutionResult | null): RestResponse {
  if (plan.kind === 'info') return shapeInfoResponse(plan)
  if (result === null) throw new TypeError(`a ${plan.kind} plan needs the result of its transaction`)
  if (plan.kind !== 'openapi' && plan.explain !== undefined)
    return shapePlanResponse(ctx.req, plan.explain, result.rows)
  switch (plan.kind) {
    case 'read':
      return shapeReadResponse(ctx.req, plan, toReadResult(result.main, result.countPlan))
    case 'mutate':
      return shapeMutateResponse(ctx.req, plan, toMainResult(result.main))
    case 'call':
      return shapeCallResponse(ctx.req, plan, toMainResult(result.main))
    case 'openapi':
      return shapeOpenApiResponse(ctx.req, plan, result.main, openApiServer(ctx.headers, ctx.database))
  }
}

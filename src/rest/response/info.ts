// OPTIONS (docs/rest-protocol.md §1.1): the Allow list of the resource, no body. Pure.
import type { InfoPlan } from '../plan/types.js'
import type { RestResponse } from './gucs.js'

export function shapeInfoResponse(plan: InfoPlan): RestResponse {
  return { status: 200, headers: { allow: plan.allow, 'access-control-allow-origin': '*' }, body: null }
}

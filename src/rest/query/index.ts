// ActionPlan -> statements. The only place SQL text is made (through sql.ts); renderAction
// gives the whole transaction of any plan.
export { renderRead, type ReadStatements } from './read.js'
export { renderPreRequest, renderPreRequestCall, transactionIsolation } from './pre-request.js'
export { renderMutate } from './mutate.js'
export { renderCall } from './call.js'
export { renderAction, type ActionStatements, type ExecutablePlan } from './action.js'

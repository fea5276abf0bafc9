// ActionPlan -> statements. The only place SQL text is made (through sql.ts); renderAction
// gives the whole transaction of any plan.
export { sql, ident, qualified, param, raw, typeName, join, render, empty, Sql, type Keyword, type Statement } from './sql.js'
export { renderRead, renderNode, type ReadStatements } from './read.js'
export { renderPreRequest, renderPreRequestCall } from './pre-request.js'
export { renderMutate } from './mutate.js'
export { renderRowsBody } from './read.js'
export { renderCall } from './call.js'
export { renderOpenApiPrivileges } from './openapi.js'
export { renderAction, type ActionStatements, type ExecutablePlan } from './action.js'

// ActionPlan -> statements. The only place SQL text is made (through sql.ts); renderAction
// gives the whole transaction of any plan.
export { sql, ident, qualified, param, raw, typeName, join, render, empty, Sql, KEYWORDS, type Keyword, type Statement } from './sql.js'
export { renderRead, renderNode, renderCountNode, renderField, arrayLiteral, type ReadStatements } from './read.js'
export { renderPreRequest, renderPreRequestCall, legacyClaims, searchPathValue, PRE_REQUEST_NAME, type RequestSettings } from './pre-request.js'
export { renderMutate } from './mutate.js'
export { renderRowsBody } from './read.js'
export { renderCall, paramType } from './call.js'
export { renderOpenApiPrivileges } from './openapi.js'
export { renderAction, renderExplain, CONSTRAINTS_IMMEDIATE, type ActionStatements, type ExecutablePlan } from './action.js'

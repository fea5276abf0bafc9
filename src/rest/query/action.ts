// ActionPlan -> the statements of its one transaction: READ ONLY or READ WRITE, the main
// statement, the EXPLAIN of a planned count, and before a deliberate rollback (Prefer:
// tx=rollback) `SET CONSTRAINTS ALL IMMEDIATE`, as PostgREST runs it so that deferred
// constraints still report. Pure.
import type { CallPlan, MutatePlan, OpenApiPlan, ReadPlan, ReturnPreference } from '../plan/types.js'
import { renderCall } from './call.js'
import { renderMutate } from './mutate.js'
import { renderOpenApiPrivileges } from './openapi.js'
import { renderRead, type ReadStatements } from './read.js'
import type { Statement } from './sql.js'

/** The plans that run SQL (OPTIONS runs none). */
export type ExecutablePlan = ReadPlan | MutatePlan | CallPlan | OpenApiPlan

export interface ActionStatements extends ReadStatements {
  readonly readOnly: boolean
  /** Statements after the main one (and after `planned`). */
  readonly after: readonly Statement[]
  /** Roll back instead of committing. */
  readonly rollback: boolean
}

/** Run before a deliberate rollback, so deferred constraints still report. */
export const CONSTRAINTS_IMMEDIATE: Statement = { text: 'SET CONSTRAINTS ALL IMMEDIATE', values: [] }

function rollbackTail (rollback: boolean): readonly Statement[] {
  return rollback ? [CONSTRAINTS_IMMEDIATE] : []
}

/** The transaction of a plan. `returning` overrides a write's return preference. */
export function renderAction (plan: ExecutablePlan, returning?: ReturnPreference): ActionStatements {
  switch (plan.kind) {
    case 'read':
      return { ...renderRead(plan), readOnly: true, after: [], rollback: false }
    case 'mutate':
      return { main: renderMutate(plan, returning ?? plan.returning), planned: null, readOnly: false, after: rollbackTail(plan.rollback), rollback: plan.rollback }
    case 'call':
      return { main: renderCall(plan), planned: null, readOnly: plan.readOnly, after: rollbackTail(plan.rollback), rollback: plan.rollback }
    case 'openapi':
      return {
        main: renderOpenApiPrivileges(plan.tables.map((t) => t.oid), plan.routines.map((r) => r.oid), plan.schema),
        planned: null,
        readOnly: true,
        after: [],
        rollback: false
      }
  }
}

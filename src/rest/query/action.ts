// ActionPlan -> the statements of its one transaction: READ ONLY or READ WRITE, the main
// statement, the EXPLAIN of a planned count, and before a deliberate rollback (Prefer:
// tx=rollback) `SET CONSTRAINTS ALL IMMEDIATE`, as PostgREST runs it so that deferred
// constraints still report. Pure.
import type {
  CallPlan,
  ExplainSpec,
  MutatePlan,
  OpenApiPlan,
  PlanOption,
  ReadPlan,
  ReturnPreference,
} from '../plan/types.js'
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
const CONSTRAINTS_IMMEDIATE: Statement = { text: 'SET CONSTRAINTS ALL IMMEDIATE', values: [] }

const EXPLAIN_OPTIONS: Readonly<Record<PlanOption, string>> = {
  analyze: 'ANALYZE',
  verbose: 'VERBOSE',
  settings: 'SETTINGS',
  buffers: 'BUFFERS',
  wal: 'WAL',
}

/** `EXPLAIN (FORMAT ..., <options>) <statement>`: the statement's parameters are unchanged. */
function renderExplain(st: Statement, e: ExplainSpec): Statement {
  const opts = [e.format === 'json' ? 'FORMAT JSON' : 'FORMAT TEXT', ...e.options.map((o) => EXPLAIN_OPTIONS[o])]
  return { text: `EXPLAIN (${opts.join(', ')}) ${st.text}`, values: st.values, textResult: true }
}

/**
 * The transaction of a plan. `returning` overrides a write's return preference. With the
 * plan media type the main statement is explained instead (PostgREST's explainF); with
 * `analyze` it runs, and commits unless the request asked for a rollback.
 */
export function renderAction(plan: ExecutablePlan, returning?: ReturnPreference): ActionStatements {
  const st = renderStatements(plan, returning)
  if (plan.kind === 'openapi' || plan.explain === undefined) return st
  return { ...st, main: renderExplain(st.main, plan.explain), planned: null }
}

function renderStatements(plan: ExecutablePlan, returning?: ReturnPreference): ActionStatements {
  switch (plan.kind) {
    case 'read':
      return { ...renderRead(plan), readOnly: true, after: [], rollback: false }
    case 'mutate':
    case 'call':
      return {
        main: plan.kind === 'mutate' ? renderMutate(plan, returning ?? plan.returning) : renderCall(plan),
        planned: null,
        readOnly: plan.kind === 'call' && plan.readOnly,
        after: plan.rollback ? [CONSTRAINTS_IMMEDIATE] : [],
        rollback: plan.rollback,
      }
    case 'openapi':
      return {
        main: renderOpenApiPrivileges(
          plan.tables.map((t) => t.oid),
          plan.routines.map((r) => r.oid),
          plan.schema,
        ),
        planned: null,
        readOnly: true,
        after: [],
        rollback: false,
      }
  }
}

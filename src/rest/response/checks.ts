// The checks of a result made inside its transaction, before COMMIT: a failing one throws
// and the transaction rolls back (PostgREST's PGRST116, PGRST115, PGRST124). Pure.
import { MaxAffectedError, PutPayloadMismatchError, SingularityError } from '../errors.js'
import type { ActionPlan } from '../plan/types.js'

interface RowRules {
  singular: boolean
  put: boolean
  maxAffected: number | null
}

function checkRows(n: number, o: RowRules): void {
  // Matches PostgREST: an object was requested and 0 or more than 1 rows came back (roll back).
  if (o.singular && n !== 1) throw new SingularityError(n)
  if (o.put && n !== 1) throw new PutPayloadMismatchError()
  if (o.maxAffected !== null && n > o.maxAffected) throw new MaxAffectedError(n)
}

function rulesOf(plan: ActionPlan): RowRules | null {
  // An EXPLAIN has no result rows to check (PostgREST checks none for plans).
  if ((plan.kind === 'read' || plan.kind === 'mutate' || plan.kind === 'call') && plan.explain !== undefined)
    return null
  switch (plan.kind) {
    case 'read':
      return { singular: plan.media.kind === 'singular', put: false, maxAffected: null }
    case 'mutate':
      return { singular: plan.singular, put: plan.mutation === 'single-upsert', maxAffected: plan.maxAffected }
    case 'call':
      return {
        singular: plan.singular && (plan.shape === 'setof-composite' || plan.shape === 'setof-scalar'),
        put: false,
        maxAffected: plan.maxAffected,
      }
    case 'info':
    case 'openapi':
      return null
  }
}

/** The check of the main statement's row (its `page_total`), or undefined when the plan has none. */
export function resultCheck(plan: ActionPlan): ((main: Record<string, unknown>) => void) | undefined {
  const rules = rulesOf(plan)
  // No rule to apply: no check, so the transaction may commit without waiting for the result.
  if (rules === null || (!rules.singular && !rules.put && rules.maxAffected === null)) return undefined
  return (main) => checkRows(Number(main.page_total ?? 0), rules)
}

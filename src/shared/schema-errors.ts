// Ajv's errors as a person reads them: one line per problem. For a value that matches no
// branch of an anyOf (a union of literals such as `jwt.signing_algorithm`, or `integer | null`
// such as `rest.max_limit`), Ajv reports each branch's failure and then "must match a schema in
// anyOf"; those become one error that names what the field takes.
import type { ErrorObject } from 'ajv'

/** The branch errors of an anyOf error: those under its schema path. */
function branchErrors(errors: readonly ErrorObject[], anyOf: ErrorObject): ErrorObject[] {
  return errors.filter((e) => e !== anyOf && e.schemaPath.startsWith(anyOf.schemaPath + '/'))
}

/**
 * "must be one of "a", "b"" or "must be integer or null" when every branch failed as a const or
 * a type of the value itself; else null (a branch that failed deeper inside says more).
 */
function choicesMessage(anyOf: ErrorObject, branches: readonly ErrorObject[]): string | null {
  if (branches.length === 0 || branches.some((b) => b.instancePath !== anyOf.instancePath)) return null
  if (branches.every((b) => b.keyword === 'const')) {
    const values = branches.map((b) => JSON.stringify((b.params as { allowedValue: unknown }).allowedValue))
    return `must be one of ${values.join(', ')}`
  }
  if (branches.every((b) => b.keyword === 'const' || b.keyword === 'type')) {
    const kinds = branches.map((b) =>
      b.keyword === 'type'
        ? String((b.params as { type: unknown }).type)
        : JSON.stringify((b.params as { allowedValue: unknown }).allowedValue),
    )
    return `must be ${[...new Set(kinds)].join(' or ')}`
  }
  return null
}

/** Ajv's errors with each anyOf of plain choices folded into one error naming them. */
export function readableSchemaErrors(errors: readonly ErrorObject[]): ErrorObject[] {
  const folded = new Set<ErrorObject>()
  const replaced = new Map<ErrorObject, ErrorObject>()
  for (const e of errors) {
    if (e.keyword !== 'anyOf') continue
    const branches = branchErrors(errors, e)
    const message = choicesMessage(e, branches)
    if (message === null) continue
    for (const b of branches) folded.add(b)
    replaced.set(e, { ...e, message })
  }
  return errors.filter((e) => !folded.has(e)).map((e) => replaced.get(e) ?? e)
}

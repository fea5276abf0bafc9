// Error codes of type generation (`gatehouse gen types typescript`). Append-only.
import { defineError, type CodeOf } from '../shared/index.js'

/** A `gen` command that cannot run: no database named, an unknown tenant, no connection. */
export const GenTypesError = defineError('gen_types_failed', 400, (message: string) => message)

/** Every error of type generation. */
export const TYPEGEN_ERRORS = { GenTypesError } as const

export type TypegenErrorCode = CodeOf<typeof TYPEGEN_ERRORS>

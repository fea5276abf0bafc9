// The auth engine's error registry: every error class of errors.ts (GoTrue's error_code,
// status and message, the OAuth-form ones and the shared codes the engine answers). The
// code list, the code type and docs/errors.md come from it.
import { errorCodes, registryOf, type CodeOf } from '../shared/index.js'
import * as errors from './errors.js'

export const AUTH_ERRORS = registryOf(errors)

export type AuthErrorCode = CodeOf<typeof AUTH_ERRORS>

/** Every code of the registry, sorted. */
export const AUTH_ERROR_CODES: readonly AuthErrorCode[] = errorCodes(AUTH_ERRORS)

// Error codes of the tenant store. Append-only: a retired code stays listed as retired.
// Look-up failures reach clients through the gateway as JSON with these codes.
import { defineError, errorCodes, type CodeOf } from '../shared/index.js'

// ---- look-ups ----------------------------------------------------------------------------

/** The store cannot be reached and nothing is cached for this database. */
export const TenantStoreUnavailableError = defineError('tenant_store_unavailable', 503,
  (database: string) => `the tenant store is unreachable and database "${database}" is not cached; try again shortly`)

/** A Redis operation failed (unreachable, timed out, malformed record); the message names the server, password masked. */
export const TenantStoreBackendError = defineError('tenant_store_backend', 503,
  (message: string) => message)

/**
 * The store answered but holds none of the tenants it held before (Redis restarted without
 * persistence, or its data was flushed): `gatehouse tenants apply` restores them.
 */
export const TenantStoreEmptyError = defineError('tenant_store_empty', 503,
  (where: string) => `the tenant store at ${where} lost its tenants (restarted without persistence or flushed); run \`gatehouse tenants apply\` to restore them`)

// ---- commands ----------------------------------------------------------------------------

/** A store or command used in a way the configuration or the record does not allow. */
export const TenantStoreConfigError = defineError('tenant_store_config', 400,
  (message: string) => message)

/**
 * `tenants show|delete` of a database the store does not hold: an operator's command, not a
 * request for a database (that is the shared tenant_not_found).
 */
export const TenantNotInStoreError = defineError('tenant_not_in_store', 404,
  (database: string) => `no tenant "${database}" in the store`)

/** Every error of the tenant store and its commands. */
export const TENANT_ERRORS = {
  TenantStoreUnavailableError, TenantStoreBackendError, TenantStoreEmptyError, TenantStoreConfigError, TenantNotInStoreError
} as const

export type TenantErrorCode = CodeOf<typeof TENANT_ERRORS>

/** Every code of the registry, sorted. */
export const TENANT_ERROR_CODES: readonly TenantErrorCode[] = errorCodes(TENANT_ERRORS)

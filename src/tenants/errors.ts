// Error codes of the tenant store. Append-only: a retired code stays listed as retired.
// Look-up failures reach clients through the gateway as JSON with these codes.
import { defineError, errorCodes, type CodeOf } from '../shared/index.js'

// ---- look-ups ----------------------------------------------------------------------------

/** The store cannot be reached and nothing is cached for this database. */
export const TenantStoreUnavailableError = defineError(
  'tenant_store_unavailable',
  503,
  (database: string) => `the tenant store is unreachable and database "${database}" is not cached; try again shortly`,
)

/** A Redis operation failed (unreachable, timed out, malformed record); the message names the server, password masked. */
export const TenantStoreBackendError = defineError('tenant_store_backend', 503, (message: string) => message)

/**
 * The store answered but holds none of the tenants it held before (Redis restarted without
 * persistence, or its data was flushed): `gatehouse tenants apply` restores them.
 */
export const TenantStoreEmptyError = defineError(
  'tenant_store_empty',
  503,
  (where: string) =>
    `the tenant store at ${where} lost its tenants (restarted without persistence or flushed); run \`gatehouse tenants apply\` to restore them`,
)

// ---- commands ----------------------------------------------------------------------------

/** A store or command used in a way the configuration or the record does not allow. */
export const TenantStoreConfigError = defineError('tenant_store_config', 400, (message: string) => message)

/**
 * `tenants show|delete` of a database the store does not hold: an operator's command, not a
 * request for a database (that is the shared tenant_not_found).
 */
export const TenantNotInStoreError = defineError(
  'tenant_not_in_store',
  404,
  (database: string) => `no tenant "${database}" in the store`,
)

// ---- changes (docs/tenant-state.md) --------------------------------------------------------

/** A change sent with the version it was made on (If-Match) when the record has moved on. */
export const TenantVersionMismatchError = defineError(
  'version_mismatch',
  412,
  (database: string, expected: string, current: string | null) =>
    `database "${database}" is at version ${current ?? '(none)'}, not ${expected}: ` +
    'another change came first; read it again and resend your change with its version',
)

/** A change that lost the compare-and-set to other writers at every attempt. */
export const TenantStoreBusyError = defineError(
  'tenant_store_busy',
  503,
  (database: string, attempts: number) =>
    `database "${database}" was changed by others at each of ${attempts} attempts; try again`,
)

/** `tenants apply` of a field changed both in the file and elsewhere since the last apply. */
export const TenantApplyConflictError = defineError('apply_conflict', 409, (message: string) => message)

/** A change whose record breaks the schema, a bound or the size cap of a tenant record. */
export const TenantRecordInvalidError = defineError(
  'tenant_record_invalid',
  400,
  (database: string, problems: string) => `the change would leave database "${database}" invalid: ${problems}`,
)

/** A tenant file that would not read back as the change made it (nothing was written). */
export const TenantFileRoundTripError = defineError(
  'tenant_file_round_trip',
  500,
  (file: string, why: string) => `${file}: the change was not written: the file would not read back as it: ${why}`,
)

/** Every error of the tenant store and its commands. */
/** A record write no replica confirmed in time (redis.write_replicas): undone where it could be. */
export const TenantStoreNotDurableError = defineError(
  'tenant_store_not_durable',
  503,
  (database: string, wanted: number, got: number, undone: boolean) =>
    `the change to "${database}" was not confirmed by ${wanted} Redis replica${wanted === 1 ? '' : 's'} (${got} did) and ` +
    (undone
      ? 'was undone: nothing changed; try again shortly'
      : 'could not be undone: read the record before trying again'),
)

export const TENANT_ERRORS = {
  TenantStoreUnavailableError,
  TenantStoreBackendError,
  TenantStoreNotDurableError,
  TenantStoreEmptyError,
  TenantStoreConfigError,
  TenantNotInStoreError,
  TenantVersionMismatchError,
  TenantStoreBusyError,
  TenantApplyConflictError,
  TenantRecordInvalidError,
  TenantFileRoundTripError,
} as const

export type TenantErrorCode = CodeOf<typeof TENANT_ERRORS>

/** Every code of the registry, sorted. */
export const TENANT_ERROR_CODES: readonly TenantErrorCode[] = errorCodes(TENANT_ERRORS)

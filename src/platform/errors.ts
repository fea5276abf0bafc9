// Error codes of provisioning (tenant databases, roles, migrations). Append-only: a
// retired code stays listed as retired. These reach people through the CLI and the
// development stack; the messages never carry passwords or SQL text.
import { defineError, errorCodes, type CodeOf } from '../shared/index.js'

// ---- input -------------------------------------------------------------------------------

/** A database name that is not a valid URL segment, or a reserved one. */
export const DatabaseNameInvalidError = defineError(
  'database_name_invalid',
  400,
  (database: string) =>
    `invalid database name ${JSON.stringify(database)}: use ^[a-z][a-z0-9_-]{0,62}$ (not postgres, template0, template1)`,
)

/** A tenant id that is not `t_<10 hex>`. */
export const TenantIdInvalidError = defineError(
  'tenant_id_invalid',
  400,
  (id: string) => `invalid tenant id ${JSON.stringify(id)}: expected t_ and 10 lower-case hex digits`,
)

/** Provisioning options that do not make a valid tenant file. */
export const TenantOptionsInvalidError = defineError('tenant_options_invalid', 400, (message: string) => message)

// ---- cluster -----------------------------------------------------------------------------

/** The admin connection cannot be opened. */
export const ClusterUnreachableError = defineError(
  'cluster_unreachable',
  503,
  (where: string, why: string) => `cannot connect to the Postgres cluster at ${where}: ${why}`,
)

/** The admin role lacks what provisioning needs (event triggers need a superuser). */
export const AdminNotSuperuserError = defineError(
  'admin_not_superuser',
  403,
  (role: string) =>
    `the admin role ${JSON.stringify(role)} is not a superuser; provisioning needs one (event triggers, BYPASSRLS roles)`,
)

/** `tenants create` of a database that already exists on the cluster. */
export const DatabaseExistsError = defineError(
  'database_exists',
  409,
  (database: string) => `database "${database}" already exists on this cluster`,
)

/** A tenant role name already exists (only with a chosen tenant id, or a very unlucky draw). */
export const TenantRoleExistsError = defineError(
  'tenant_role_exists',
  409,
  (id: string) => `roles of tenant id ${id} already exist on this cluster; nothing was created`,
)

/** A provisioning step failed; what had been created was dropped again. */
export const ProvisioningFailedError = defineError(
  'provisioning_failed',
  500,
  (database: string, step: string, why: string) =>
    `provisioning of "${database}" failed at ${step}: ${why}; everything created was removed`,
)

// ---- migrations --------------------------------------------------------------------------

/** A database with pending migrations but no roles in platform.roles (not provisioned by us). */
export const RolesNotRegisteredError = defineError(
  'roles_not_registered',
  409,
  (database: string, missing: string) =>
    `database "${database}" has no tenant roles registered (missing: ${missing}); provision it with \`gatehouse tenants create\``,
)

/** Roles passed for registration differ from those already registered. */
export const RolesMismatchError = defineError(
  'roles_mismatch',
  409,
  (database: string, kind: string) =>
    `database "${database}" already has a different role registered for kind "${kind}"`,
)

/** One migration file failed; its transaction was rolled back. */
export const MigrationFailedError = defineError(
  'migration_failed',
  500,
  (database: string, file: string, why: string) => `migration ${file} failed on database "${database}": ${why}`,
)

/** Another session held the database's migration lock longer than the runner waits. */
export const MigrationLockBusyError = defineError(
  'migration_lock_busy',
  409,
  (database: string) =>
    `database "${database}" was not migrated: another session holds the migration lock (pg_advisory_lock(${0x6761_7465})); end that session and run the migration again`,
)

/** A migrations directory with a malformed or duplicate file name. */
export const MigrationFileInvalidError = defineError(
  'migration_file_invalid',
  500,
  (file: string, why: string) => `migration file ${file}: ${why}`,
)

/** A file of `gatehouse db push` failed: it was rolled back (statement, line and Postgres' error in the message). */
export const DbPushFailedError = defineError(
  'db_push_failed',
  422,
  (file: string, why: string) => `migration ${file} was rolled back: ${why}`,
)

// ---- commands ----------------------------------------------------------------------------

/** A command refused for a reason given in the message (no admin URL, no TTY, ...). */
export const PlatformCommandError = defineError('platform_command_refused', 400, (message: string) => message)

/** Every error of provisioning and migrations. */
export const PLATFORM_ERRORS = {
  DatabaseNameInvalidError,
  TenantIdInvalidError,
  TenantOptionsInvalidError,
  ClusterUnreachableError,
  AdminNotSuperuserError,
  DatabaseExistsError,
  TenantRoleExistsError,
  ProvisioningFailedError,
  RolesNotRegisteredError,
  RolesMismatchError,
  MigrationFailedError,
  MigrationFileInvalidError,
  MigrationLockBusyError,
  DbPushFailedError,
  PlatformCommandError,
} as const

export type PlatformErrorCode = CodeOf<typeof PLATFORM_ERRORS>

/** Every code of the registry, sorted. */
export const PLATFORM_ERROR_CODES: readonly PlatformErrorCode[] = errorCodes(PLATFORM_ERRORS)

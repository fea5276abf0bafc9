// Provisioning: tenant databases and roles on a Postgres cluster, the
// `platform` and `auth` schemas by numbered migrations, and the generated tenant file.
// The one entry of this part; other parts import only from here.
export { provisionTenant, dropTenant, ensureTenant, assertDatabaseName } from './provision.js'
export {
  connectAdmin,
  withAdmin,
  connectionLimitsOf,
  pingPostgres,
  ensureClusterRoles,
  tenantRoleNames,
  allTenantRoleNames,
  tenantIdOf,
  newTenantId,
  engineVerifier,
  ROLE_KINDS,
  TENANT_ROLE,
  type ConnectionLimits,
  type TenantRoleNames,
} from './roles.js'
export {
  migrateDatabase,
  migrateAll,
  listMigrations,
  MIGRATIONS_DIR,
  type Migration,
  type MigrateOptions,
} from './migrate.js'
export {
  setSupabaseDefaultPrivileges,
  supabaseDefaultPrivileges,
  type DefaultPrivilegesState,
} from './default-privileges.js'
export * from './errors.js'
export { registerPlatformCommands, renderTenantFile } from './commands.js'
export { registerDbCommands } from './db-commands.js'

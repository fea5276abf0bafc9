// The tenant store part: the record schema, the YAML loader, the Redis and memory
// backends, and the per-process cache. Other parts import from here only; the HTTP
// parts depend on the TenantLookup interface, usually a TenantCache over the store.
export {
  DATABASE_NAME,
  parseTenantFile,
  toTenant,
  hashKey,
  keyKind,
  keyMatches,
  tenantIssuer,
  maskTenant,
  maskRecordPart,
  fileValues,
  validateTenantRecord,
  tenantRecordProblems,
  RECORD_BOUNDS,
  TenantFileSchema,
  AuthSettingsSchema,
  DEFAULT_RATE_LIMITS,
  bucketWindow,
  DEFAULT_EXTRA_SEARCH_PATH,
  AuthHooksSchema,
  type AuthHook,
  type AuthHooks,
  type WebAuthnSettings,
  type OAuthServerSettings,
  oauthServerOf,
  type Tenant,
  type TenantFile,
  type AuthSettings,
  type ProviderSettings,
  type RoleKind,
  type RateLimits,
  type RateLimitBucket,
  type RateLimitBucketName,
  type RestRateLimits,
} from './schema.js'
export {
  ALL_TENANTS,
  AUDIT_KEEP,
  type TenantLookup,
  type TenantStore,
  type ChangeListener,
  type StoreLogger,
  type VersionedTenant,
  type AuditEntry,
  type WriteOptions,
  type WriteResult,
} from './types.js'
export { updateTenant, type UpdateResult } from './update.js'
export {
  fieldsOf,
  fieldName,
  changedFields,
  displayValue,
  threeWayMerge,
  keepRevocations,
  type FieldConflict,
} from './fields.js'
export { writeTenantChanges } from './file-writer.js'
export { loadTenantFiles, loadTenantFileEntries, type LoadedTenantFile } from './yaml-loader.js'
export { createMemoryStore } from './memory-store.js'
export { createRedisStore, connectRedis, type RedisTenantStore } from './redis-store.js'
export { createTenantCache, tenantCacheOptions, type TenantCache } from './cache.js'
export {
  TenantStoreUnavailableError,
  TenantStoreBackendError,
  TenantStoreEmptyError,
  TenantNotInStoreError,
  TenantStoreConfigError,
  TenantVersionMismatchError,
  TenantStoreBusyError,
  TenantApplyConflictError,
  TENANT_ERRORS,
  TENANT_ERROR_CODES,
  type TenantErrorCode,
} from './errors.js'
export {
  SIGNING_ALGORITHMS,
  ASYMMETRIC_ALGORITHMS,
  generateSigningKey,
  runtimeSigningKey,
  privateKeyObject,
  currentSigningKey,
  signingAlgorithmOf,
  withRotatedKey,
  withRevokedKey,
  withRetiredLegacySecret,
  describeSigningKeys,
  SigningKeyChangeError,
  revokedKeysListed,
  revivalProblem,
  mergeTombstones,
  type RevokedKey,
  type SigningAlgorithm,
  type AsymmetricAlgorithm,
  type SigningKeyFile,
  type TenantSigningKey,
  type PublicSigningJwk,
} from './signing-keys.js'
export { createTenantStore, withTenantStore, type TenantStoreDeps } from './store.js'
export { registerTenantStoreCommands, registerSigningKeyCommands } from './commands.js'
export { declareCommands, out, type CommandRow } from './command-table.js'
export {
  planApply,
  applyTenantFiles,
  diffTenantFiles,
  exportTenantFile,
  conflictMessage,
  describeDiffRow,
  type ApplyPlan,
} from './apply.js'
export { redactSecrets } from './redact.js'

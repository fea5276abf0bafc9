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
  ProviderSchema,
  SmtpSchema,
  RateLimitsSchema,
  DEFAULT_RATE_LIMITS,
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
  type KeyHash,
  type RateLimits,
  type RateLimitBucket,
  type RateLimitBucketName,
  RestRateLimitsSchema,
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
  type AuditInput,
  type WriteOptions,
  type WriteResult,
} from './types.js'
export { updateTenant, type UpdateOptions, type UpdateResult } from './update.js'
export {
  fieldsOf,
  fieldName,
  changedFields,
  displayValue,
  threeWayMerge,
  keepRevocations,
  type FieldConflict,
  type MergeResult,
} from './fields.js'
export { writeTenantChanges, changedTenantText, replaceFileIfUnchanged } from './file-writer.js'
export { loadTenantFiles, loadTenantFileEntries, listTenantFiles, type LoadedTenantFile } from './yaml-loader.js'
export { createMemoryStore, contentVersion, type MemoryStoreOptions, type MemoryTenantStore } from './memory-store.js'
export {
  createRedisStore,
  connectRedis,
  type RedisStoreOptions,
  type RedisTenantStore,
  type TenantMeta,
} from './redis-store.js'
export {
  createTenantCache,
  tenantCacheOptions,
  type TenantCache,
  type TenantCacheOptions,
  type TenantStoreHealth,
} from './cache.js'
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
  publicJwkOf,
  privateKeyObject,
  currentSigningKey,
  signingAlgorithmOf,
  withRotatedKey,
  withRevokedKey,
  withRetiredLegacySecret,
  legacySecretRetired,
  describeSigningKeys,
  SigningKeyChangeError,
  revokedKeysListed,
  revivalProblem,
  mergeTombstones,
  jwkThumbprint,
  type RevokedKey,
  type ChangeStamp,
  type SigningAlgorithm,
  type AsymmetricAlgorithm,
  type SigningKeyFile,
  type TenantSigningKey,
  type PublicSigningJwk,
} from './signing-keys.js'
export { createTenantStore, type TenantStoreDeps } from './store.js'
export { registerTenantStoreCommands, registerSigningKeyCommands } from './commands.js'
export { declareCommands, type CommandRow } from './command-table.js'
export {
  planApply,
  applyTenantFiles,
  diffTenantFiles,
  exportTenantFile,
  conflictMessage,
  describeDiffRow,
  lastChangeOf,
  type ApplyPlan,
  type ApplyOutcome,
  type DiffRow,
} from './apply.js'
export { redactSecrets } from './redact.js'

// The tenant store part: the record schema, the YAML loader, the Redis and memory
// backends, and the per-process cache. Other parts import from here only; the HTTP
// parts depend on the TenantLookup interface, usually a TenantCache over the store.
export {
  DATABASE_NAME, parseTenantFile, toTenant, hashKey, keyKind, keyMatches, tenantIssuer, maskTenant,
  interpolateEnv, TenantFileSchema, AuthSettingsSchema, ProviderSchema, SmtpSchema, RateLimitsSchema, DEFAULT_RATE_LIMITS,
  type Tenant, type TenantFile, type AuthSettings, type ProviderSettings, type RoleKind, type KeyHash,
  type RateLimits, type RateLimitBucket, type RateLimitBucketName
} from './schema.js'
export { ALL_TENANTS, type TenantLookup, type TenantStore, type ChangeListener, type StoreLogger } from './types.js'
export { loadTenantFiles, loadTenantFileEntries, listTenantFiles, type LoadedTenantFile } from './yaml-loader.js'
export { createMemoryStore, type MemoryStoreOptions, type MemoryTenantStore } from './memory-store.js'
export { createRedisStore, connectRedis, type RedisStoreOptions, type RedisTenantStore, type TenantMeta } from './redis-store.js'
export { createTenantCache, tenantCacheOptions, type TenantCache, type TenantCacheOptions, type TenantStoreHealth } from './cache.js'
export { TenantStoreUnavailableError, TenantStoreBackendError, TenantStoreEmptyError, TenantNotInStoreError, TenantStoreConfigError, TENANT_ERRORS, TENANT_ERROR_CODES, type TenantErrorCode } from './errors.js'
export {
  SIGNING_ALGORITHMS, ASYMMETRIC_ALGORITHMS, generateSigningKey, runtimeSigningKey, publicJwkOf, privateKeyObject,
  currentSigningKey, signingAlgorithmOf, withRotatedKey, withRevokedKey, describeSigningKeys, SigningKeyChangeError,
  type SigningAlgorithm, type AsymmetricAlgorithm, type SigningKeyFile, type TenantSigningKey, type PublicSigningJwk
} from './signing-keys.js'
export { createTenantStore, type TenantStoreDeps } from './store.js'
export { registerTenantStoreCommands, registerSigningKeyCommands } from './commands.js'

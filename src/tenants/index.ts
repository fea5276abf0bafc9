// The tenant store part: the record schema, the YAML loader, the Redis and memory
// backends, and the per-process cache. Other parts import from here only; the HTTP
// parts depend on the TenantLookup interface, usually a TenantCache over the store.
import type { Redis } from 'ioredis'
import type { Config } from '../config/index.js'
import { ConfigError } from '../shared/errors.js'
import { createMemoryStore } from './memory-store.js'
import { createRedisStore } from './redis-store.js'
import type { StoreLogger, TenantStore } from './types.js'

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

/** Optional dependencies of createTenantStore. */
export interface TenantStoreDeps {
  /** Values for `${ENV}` in tenant files (files source). Default: process.env. */
  env?: NodeJS.ProcessEnv
  logger?: StoreLogger
  /** An existing ioredis client (redis source); not closed by the store. */
  redis?: Redis
}

/**
 * The store the configuration names: `tenants.source = files` reads `tenants.dir` into
 * memory now (throws a ConfigError naming file and field when a file is bad);
 * `tenants.source = redis` connects lazily to `redis.url` under `redis.key_prefix`.
 */
export function createTenantStore (config: Pick<Config, 'tenants' | 'redis'>, deps: TenantStoreDeps = {}): TenantStore {
  if (config.tenants.source === 'redis') {
    if (!config.redis.url && !deps.redis) {
      throw new ConfigError('tenants.source is redis but redis.url is not set (GATEHOUSE_REDIS_URL or REDIS_URL)')
    }
    return createRedisStore({ url: config.redis.url, prefix: config.redis.key_prefix, redis: deps.redis, logger: deps.logger })
  }
  return createMemoryStore({ dir: config.tenants.dir, env: deps.env })
}
export {
  SIGNING_ALGORITHMS, ASYMMETRIC_ALGORITHMS, generateSigningKey, runtimeSigningKey, publicJwkOf, privateKeyObject,
  currentSigningKey, signingAlgorithmOf, withRotatedKey, withRevokedKey, describeSigningKeys, SigningKeyChangeError,
  type SigningAlgorithm, type AsymmetricAlgorithm, type SigningKeyFile, type TenantSigningKey, type PublicSigningJwk
} from './signing-keys.js'

// The tenant store the process configuration names: the YAML files held in memory, or the
// Redis hashes. Only chooses and constructs; the backends live in their own modules.
import type { Redis } from 'ioredis'
import type { Config } from '../config/index.js'
import { ConfigError } from '../shared/index.js'
import { createMemoryStore } from './memory-store.js'
import { createRedisStore } from './redis-store.js'
import type { StoreLogger, TenantStore } from './types.js'

/** Optional dependencies of createTenantStore. */
export interface TenantStoreDeps {
  /** Values for `${ENV}` in tenant files (files source). Default: the process's (config's tenantFileEnvironment). */
  env?: NodeJS.ProcessEnv
  logger?: StoreLogger
  /** An existing ioredis client (redis source); not closed by the store. */
  redis?: Redis
  /** files source: the tenant file a change is written into (default the file it was read from). */
  fileOf?: (database: string) => string | null
  /** files source: told of each text the store wrote into a tenant file. */
  onFileWritten?: (file: string, text: string, previous: string) => void
}

/**
 * The store the configuration names: `tenants.source = files` reads `tenants.dir` into
 * memory now (throws a ConfigError naming file and field when a file is bad);
 * `tenants.source = redis` connects lazily to `redis.url` under `redis.key_prefix`.
 */
export function createTenantStore(config: Pick<Config, 'tenants' | 'redis'>, deps: TenantStoreDeps = {}): TenantStore {
  if (config.tenants.source === 'redis') {
    if (!config.redis.url && !deps.redis) {
      throw new ConfigError('tenants.source is redis but redis.url is not set (GATEHOUSE_REDIS_URL or REDIS_URL)')
    }
    return createRedisStore({
      url: config.redis.url,
      prefix: config.redis.key_prefix,
      redis: deps.redis,
      logger: deps.logger,
      writeReplicas: config.redis.write_replicas,
      writeReplicasTimeoutMs: config.redis.write_replicas_timeout_ms,
    })
  }
  return createMemoryStore({
    dir: config.tenants.dir,
    env: deps.env,
    stateDir: config.tenants.state_dir,
    logger: deps.logger,
    ...(deps.fileOf !== undefined ? { fileOf: deps.fileOf } : {}),
    ...(deps.onFileWritten !== undefined ? { onFileWritten: deps.onFileWritten } : {}),
  })
}

/** Runs `fn` with the store the configuration names, closed once `fn` is done (the CLI's commands). */
export async function withTenantStore<T>(
  config: Pick<Config, 'tenants' | 'redis'>,
  fn: (store: TenantStore) => Promise<T>,
): Promise<T> {
  const store = createTenantStore(config)
  try {
    return await fn(store)
  } finally {
    await store.close()
  }
}

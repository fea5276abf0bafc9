// `gatehouse tenants apply|list|show|delete`: the tenant store commands.
// `apply` validates every file before it writes anything, writes all in one transaction,
// then publishes one invalidation per database. Failures are GatehouseError/ConfigError,
// which the CLI prints as one clear message with exit code 1 (never a stack).
import type { Command } from 'commander'
import { stringify as toYaml } from 'yaml'
import type { Config } from '../config/index.js'
import { createTenantStore } from './index.js'
import { createRedisStore, type RedisTenantStore } from './redis-store.js'
import { loadTenantFileEntries } from './yaml-loader.js'
import { DATABASE_NAME, maskTenant, toTenant } from './schema.js'
import { TenantNotFoundError, TenantStoreConfigError } from './errors.js'
import type { TenantStore } from './types.js'

type Out = (text: string) => void
const out: Out = (text) => { process.stdout.write(text.endsWith('\n') ? text : text + '\n') }

async function withStore<T> (config: Config, fn: (store: TenantStore) => Promise<T>): Promise<T> {
  const store = createTenantStore(config)
  try { return await fn(store) } finally { await store.close() }
}

function checkName (database: string): void {
  if (!DATABASE_NAME.test(database)) {
    throw new TenantStoreConfigError(`"${database}" is not a database name (${DATABASE_NAME.source})`)
  }
}

function redisStoreOf (config: Config, what: string): RedisTenantStore {
  if (config.tenants.source !== 'redis') {
    throw new TenantStoreConfigError(
      `tenants.source is "files": every process reads the tenant files of ${config.tenants.dir} directly, so there is nothing to ${what}. ` +
      'Set tenants.source: redis and redis.url (GATEHOUSE_TENANTS_SOURCE=redis, GATEHOUSE_REDIS_URL) to use the Redis store.')
  }
  if (!config.redis.url) throw new TenantStoreConfigError('tenants.source is redis but redis.url is not set (GATEHOUSE_REDIS_URL or REDIS_URL)')
  return createRedisStore({ url: config.redis.url, prefix: config.redis.key_prefix })
}

export function registerTenantStoreCommands (tenants: Command, config: () => Config): void {
  tenants.command('apply')
    .description('validate tenant files (a file or a directory of *.yaml), then write them all to the Redis store and publish an invalidation; nothing is written when any file is bad')
    .argument('<dir|file>', 'a tenant file or a directory of tenant files (<database>.yaml)')
    .option('--dry-run', 'validate only; write nothing')
    .action(async (target: string, opts: { dryRun?: boolean }) => {
      const cfg = config()
      // 1. Validate ALL files first (throws a ConfigError naming every bad file and field).
      const entries = loadTenantFileEntries(target)
      if (entries.length === 0) throw new TenantStoreConfigError(`no tenant files (*.yaml, *.yml) in ${target}`)
      const names = entries.map((e) => e.file.database)
      if (opts.dryRun) { out(`${entries.length} tenant file(s) valid: ${names.join(', ')} (dry run, nothing written)`); return }
      // 2. Write all in one transaction, 3. publish one invalidation per database.
      const store = redisStoreOf(cfg, 'apply')
      try {
        await store.putAll(entries.map((e) => toTenant(e.file)))
      } finally {
        await store.close()
      }
      out(`applied ${entries.length} tenant(s): ${names.join(', ')}`)
    })

  tenants.command('list')
    .description('list the databases in the tenant store (tenants.source)')
    .option('--json', 'print a JSON array')
    .action(async (opts: { json?: boolean }) => {
      const names = await withStore(config(), (s) => s.list())
      if (opts.json) out(JSON.stringify(names))
      else if (names.length) out(names.join('\n'))
      else process.stderr.write('no tenants\n')
    })

  tenants.command('show')
    .description('print one tenant record, secrets masked')
    .argument('<database>', 'the database name')
    .option('--json', 'print JSON instead of YAML')
    .action(async (database: string, opts: { json?: boolean }) => {
      checkName(database)
      const cfg = config()
      const { tenant, meta } = await withStore(cfg, async (s) => ({
        tenant: await s.get(database),
        meta: s.kind === 'redis' ? await (s as RedisTenantStore).meta(database) : null
      }))
      if (!tenant) throw new TenantNotFoundError(database)
      const masked = maskTenant(tenant)
      if (opts.json) { out(JSON.stringify(masked, null, 2)); return }
      const head = meta ? `# ${database}: version ${meta.version}, updated ${meta.updated_at ?? 'unknown'}\n` : ''
      out(head + toYaml(JSON.parse(JSON.stringify(masked))))
    })

  tenants.command('delete')
    .description('remove a tenant from the Redis store and publish an invalidation (the database itself is kept)')
    .argument('<database>', 'the database name')
    .action(async (database: string) => {
      checkName(database)
      const store = redisStoreOf(config(), 'delete (remove its file instead)')
      let removed: boolean
      try { removed = await store.delete(database) } finally { await store.close() }
      if (!removed) throw new TenantNotFoundError(database)
      out(`deleted ${database} from the tenant store`)
    })
}

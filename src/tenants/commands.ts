// `gatehouse tenants apply|list|show|delete|keys`: the tenant store commands.
// `apply` validates every file before it writes anything, writes all in one transaction,
// then publishes one invalidation per database. Failures are GatehouseError/ConfigError,
// which the CLI prints as one clear message with exit code 1 (never a stack).
import { existsSync, readFileSync, renameSync, statSync, writeFileSync } from 'node:fs'
import path from 'node:path'
import type { Command } from 'commander'
import { parseDocument, stringify as toYaml } from 'yaml'
import type { Config } from '../config/index.js'
import { createTenantStore } from './store.js'
import { createRedisStore, type RedisTenantStore } from './redis-store.js'
import { loadTenantFileEntries } from './yaml-loader.js'
import { DATABASE_NAME, maskTenant, toTenant } from './schema.js'
import { TenantNotInStoreError, TenantStoreConfigError } from './errors.js'
import type { TenantStore } from './types.js'
import {
  ASYMMETRIC_ALGORITHMS, SigningKeyChangeError, describeSigningKeys, generateSigningKey, runtimeSigningKey, signingAlgorithmOf,
  withRevokedKey, withRotatedKey, type AsymmetricAlgorithm, type SigningAlgorithm, type SigningKeyFile
} from './signing-keys.js'

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
        // Keys rotated in the store only (the panel) and missing from a file are revoked by
        // this apply: say so, naming them, so it is never a surprise.
        for (const e of entries) {
          const stored = await store.get(e.file.database)
          const inFile = new Set(e.file.jwt.signing_keys.map((k) => k.kid))
          const dropped = (stored?.jwt.signing_keys ?? []).map((k) => k.kid).filter((kid) => !inFile.has(kid))
          if (dropped.length > 0) {
            process.stderr.write(`gatehouse: warning: ${e.file.database}: the store holds signing key(s) ${dropped.join(', ')} that ${e.path} does not list (rotated from the panel?); this apply removes them and tokens they signed stop verifying\n`)
          }
        }
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
      if (!tenant) throw new TenantNotInStoreError(database)
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
      if (!removed) throw new TenantNotInStoreError(database)
      out(`deleted ${database} from the tenant store`)
    })
}

// ---- signing keys ----------------------------------------------------------------------------

type KeyChange = { kind: 'rotate', key: SigningKeyFile } | { kind: 'revoke', kid: string }

/** The error of a refused change, as the CLI reports it. */
function refusal (err: unknown): unknown {
  if (err instanceof SigningKeyChangeError) return new TenantStoreConfigError(err.message, { cause: err })
  return err
}

/**
 * Applies a key change to a tenant file in place, keeping everything else as written
 * (comments, `${ENV}` references, other fields). Throws when the file does not allow it.
 */
export function changeKeysInFile (file: string, change: KeyChange): void {
  const doc = parseDocument(readFileSync(file, 'utf8'))
  if (doc.errors.length > 0) throw new TenantStoreConfigError(`${file}: not valid YAML: ${doc.errors[0]!.message.split('\n')[0]}`)
  const raw = doc.toJS() as { jwt?: { signing_algorithm?: SigningAlgorithm, signing_keys?: SigningKeyFile[] } } | null
  if (!raw || typeof raw !== 'object' || !raw.jwt || typeof raw.jwt !== 'object') throw new TenantStoreConfigError(`${file}: has no jwt: mapping`)
  const keys = Array.isArray(raw.jwt.signing_keys) ? raw.jwt.signing_keys : []
  if (change.kind === 'rotate') {
    doc.setIn(['jwt', 'signing_algorithm'], change.key.alg)
    const entry = doc.createNode({ kid: change.key.kid, alg: change.key.alg, private_key: change.key.private_key })
    if (doc.hasIn(['jwt', 'signing_keys']) && Array.isArray(raw.jwt.signing_keys)) doc.addIn(['jwt', 'signing_keys'], entry)
    else doc.setIn(['jwt', 'signing_keys'], doc.createNode([entry]))
  } else {
    try { withRevokedKey(raw.jwt, change.kid) } catch (err) { throw refusal(err) }
    doc.deleteIn(['jwt', 'signing_keys', keys.findIndex((k) => k?.kid === change.kid)])
  }
  const tmp = `${file}.${process.pid}.tmp`
  writeFileSync(tmp, doc.toString({ lineWidth: 0 }), { mode: statSync(file).mode & 0o777 })
  renameSync(tmp, file)
}

export function registerSigningKeyCommands (tenants: Command, config: () => Config): void {
  const keys = tenants.command('keys').description('asymmetric signing keys of a database (ES256, RS256): list, rotate, revoke')

  keys.command('list')
    .description('the signing keys of a database: kid, algorithm, which one signs now (never private parts)')
    .argument('<database>', 'the database name')
    .option('--json', 'print JSON')
    .action(async (database: string, opts: { json?: boolean }) => {
      checkName(database)
      const tenant = await withStore(config(), (s) => s.get(database))
      if (!tenant) throw new TenantNotInStoreError(database)
      const list = describeSigningKeys(tenant.jwt)
      if (opts.json) { out(JSON.stringify({ database, signing_algorithm: signingAlgorithmOf(tenant.jwt), keys: list })); return }
      out([`${database}: signs with ${signingAlgorithmOf(tenant.jwt)}`, ...list.map((k) => `  ${k.kid}  ${k.alg}${k.current ? '  (current)' : ''}`)].join('\n'))
    })

  const change = async (database: string, flags: { file?: string }, c: KeyChange): Promise<string[]> => {
    checkName(database)
    const cfg = config()
    const file = flags.file ?? path.join(cfg.tenants.dir, `${database}.yaml`)
    const hasFile = existsSync(file)
    const lines: string[] = []
    if (cfg.tenants.source === 'redis') {
      // The store holds what every process serves: change it, then the file (when there is
      // one) the same way, so a later `tenants apply` keeps the change.
      const store = redisStoreOf(cfg, 'change')
      try {
        const current = await store.get(database)
        if (!current) throw new TenantNotInStoreError(database)
        let jwt
        try {
          jwt = c.kind === 'rotate' ? withRotatedKey(current.jwt, runtimeSigningKey(c.key)) : withRevokedKey(current.jwt, c.kid)
        } catch (err) { throw refusal(err) }
        await store.putAll([{ ...current, jwt }])
      } finally {
        await store.close()
      }
      lines.push(`tenant store updated; every process drops its cached record of ${database}`)
      if (hasFile) {
        changeKeysInFile(file, c)
        lines.push(`tenant file updated: ${file}`)
      } else {
        lines.push(`no tenant file at ${file}: a later \`tenants apply\` of another copy of it would undo this (pass --file)`)
      }
    } else {
      if (!hasFile) throw new TenantStoreConfigError(`no tenant file ${file} (tenants.source is files: the file is the record; pass --file)`)
      changeKeysInFile(file, c)
      // Validate what was written, as every process will when it reads it.
      loadTenantFileEntries(file)
      lines.push(`tenant file updated: ${file} (processes reading ${cfg.tenants.dir} use it from their next start; \`npm start\` picks it up at once)`)
    }
    return lines
  }

  keys.command('rotate')
    .description('generate a new signing key and make it the one that signs; the older keys keep verifying (and stay in the JWKS) until revoked')
    .argument('<database>', 'the database name')
    .option('--alg <alg>', 'ES256 or RS256; default the algorithm the database signs with, ES256 when that is HS256')
    .option('--file <file>', 'the tenant file to change too; default <tenants.dir>/<database>.yaml')
    .action(async (database: string, flags: { alg?: string, file?: string }) => {
      checkName(database)
      let alg = flags.alg as AsymmetricAlgorithm | undefined
      if (alg !== undefined && !(ASYMMETRIC_ALGORITHMS as readonly string[]).includes(alg)) {
        throw new TenantStoreConfigError(`--alg must be one of ${ASYMMETRIC_ALGORITHMS.join(', ')}`)
      }
      if (alg === undefined) {
        const tenant = await withStore(config(), (s) => s.get(database))
        if (!tenant) throw new TenantNotInStoreError(database)
        const now = signingAlgorithmOf(tenant.jwt)
        alg = now === 'HS256' ? 'ES256' : now
      }
      const key = await generateSigningKey(alg)
      const lines = await change(database, flags, { kind: 'rotate', key })
      out([`${database}: new ${alg} signing key ${key.kid} signs from now on`, ...lines.map((l) => '  ' + l)].join('\n'))
    })

  keys.command('revoke')
    .description('remove a signing key: tokens it signed stop verifying, and it leaves the JWKS. The key that signs now cannot be revoked (rotate first)')
    .argument('<database>', 'the database name')
    .argument('<kid>', 'the key id (`tenants keys list`)')
    .option('--file <file>', 'the tenant file to change too; default <tenants.dir>/<database>.yaml')
    .action(async (database: string, kid: string, flags: { file?: string }) => {
      const lines = await change(database, flags, { kind: 'revoke', kid })
      out([`${database}: signing key ${kid} revoked`, ...lines.map((l) => '  ' + l)].join('\n'))
    })
}

// `gatehouse tenants apply|diff|export|history|list|show|delete|keys`: the tenant store
// commands (docs/tenant-state.md). `apply` validates every file before it writes anything and
// merges three ways (apply.ts); every change is compare-and-set and audited. Failures are
// GatehouseError/ConfigError, which the CLI prints as one clear message with exit code 1.
import { existsSync, renameSync, statSync, writeFileSync } from 'node:fs'
import path from 'node:path'
import type { Command } from 'commander'
import { stringify as toYaml } from 'yaml'
import type { Config } from '../config/index.js'
import { createTenantStore } from './store.js'
import { createRedisStore, type RedisTenantStore } from './redis-store.js'
import { loadTenantFileEntries } from './yaml-loader.js'
import { DATABASE_NAME, maskTenant, type Tenant } from './schema.js'
import { createMemoryStore } from './memory-store.js'
import { updateTenant } from './update.js'
import { writeTenantChanges } from './file-writer.js'
import { TenantApplyConflictError, TenantNotInStoreError, TenantStoreConfigError } from './errors.js'
import { applyTenantFiles, conflictMessage, describeDiffRow, diffTenantFiles, exportTenantFile, planApply, type ApplyPlan } from './apply.js'
import type { TenantStore } from './types.js'
import {
  ASYMMETRIC_ALGORITHMS, SigningKeyChangeError, describeSigningKeys, generateSigningKey, runtimeSigningKey, signingAlgorithmOf,
  withRetiredLegacySecret, withRevokedKey, withRotatedKey, type AsymmetricAlgorithm, type SigningKeyFile
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

function warnRevoked (database: string, file: string, kids: string[]): void {
  for (const kid of kids) process.stderr.write(`gatehouse: warning: ${database}: ${file} lists signing key ${kid}, which was revoked: applied without it (it never verifies again)\n`)
}

function describePlan (p: ApplyPlan, version?: string | null): string {
  const lines = [`  ${p.database}: ${p.expected === null ? 'new record' : p.fields.length === 0 ? 'unchanged' : `${p.fields.length} field(s) changed`}${version ? ` (version ${version})` : ''}`]
  if (p.fields.length > 0) lines.push(`    from the file: ${p.fields.join(', ')}`)
  if (p.kept.length > 0) lines.push(`    kept (changed in the store since the last apply): ${p.kept.join(', ')}`)
  if (p.noLastApplied) lines.push('    (no last apply was recorded: the file\'s values were taken)')
  return lines.join('\n')
}

/** Writes a file only its owner reads, atomically. */
function writePrivateFile (file: string, text: string): void {
  const tmp = `${file}.${process.pid}.tmp`
  writeFileSync(tmp, text, { mode: 0o600 })
  renameSync(tmp, file)
}

export function registerTenantStoreCommands (tenants: Command, config: () => Config): void {
  tenants.command('apply')
    .description('validate tenant files (a file or a directory of *.yaml), then merge each into the Redis store three ways (file now, file as last applied, store now): fields the file changed are taken, fields changed elsewhere (panel, CLI) are kept, a field changed on both sides refuses the apply; nothing is written when any file is bad or conflicts')
    .argument('<dir|file>', 'a tenant file or a directory of tenant files (<database>.yaml)')
    .option('--dry-run', 'validate and show what would change; write nothing')
    .option('--force', 'a field changed both in the file and in the store takes the file\'s value')
    .action(async (target: string, opts: { dryRun?: boolean, force?: boolean }) => {
      const cfg = config()
      // 1. Validate ALL files first (throws a ConfigError naming every bad file and field).
      const entries = loadTenantFileEntries(target)
      if (entries.length === 0) throw new TenantStoreConfigError(`no tenant files (*.yaml, *.yml) in ${target}`)
      const names = entries.map((e) => e.file.database)
      if (opts.dryRun && cfg.tenants.source !== 'redis') { out(`${entries.length} tenant file(s) valid: ${names.join(', ')} (dry run, nothing written)`); return }
      const store = redisStoreOf(cfg, 'apply')
      try {
        if (opts.dryRun) {
          const plans = await Promise.all(entries.map((e) => planApply(store, e, opts.force === true)))
          out(`${entries.length} tenant file(s) valid: ${names.join(', ')} (dry run, nothing written)`)
          for (const p of plans) { warnRevoked(p.database, p.path, p.revokedListed); out(describePlan(p)) }
          if (!opts.force && plans.some((p) => p.conflicts.length > 0)) throw new TenantApplyConflictError(conflictMessage(plans))
          return
        }
        const done = await applyTenantFiles(store, entries, { force: opts.force === true, who: 'cli' })
        for (const d of done) {
          warnRevoked(d.plan.database, d.plan.path, d.plan.revokedListed)
          if (d.plan.conflicts.length > 0) process.stderr.write(`gatehouse: warning: --force: ${d.plan.database}: the file's values replaced the store's for ${d.plan.conflicts.map((c) => c.field).join(', ')}\n`)
        }
        out(`applied ${entries.length} tenant(s): ${names.join(', ')}`)
        for (const d of done) out(describePlan(d.plan, d.version))
      } finally {
        await store.close()
      }
    })

  tenants.command('diff')
    .description('show, field by field, where the Redis store and tenant files differ and who changed what since the last apply (secrets masked); exit code 1 when they differ')
    .argument('<dir|file>', 'a tenant file or a directory of tenant files')
    .option('--json', 'print JSON')
    .action(async (target: string, opts: { json?: boolean }) => {
      const entries = loadTenantFileEntries(target)
      const store = redisStoreOf(config(), 'diff')
      let rows
      let onlyStored: string[] = []
      try {
        rows = await diffTenantFiles(store, entries)
        if (statSync(target).isDirectory()) {
          const named = new Set(entries.map((e) => e.file.database))
          onlyStored = (await store.list()).filter((d) => !named.has(d))
        }
      } finally { await store.close() }
      for (const d of onlyStored) rows.push({ database: d, field: '(record)', file: '(absent)', store: 'present', changed: 'store' as const, by: null })
      if (opts.json) out(JSON.stringify(rows, null, 2))
      else out(rows.length === 0 ? `no differences: the store holds what ${target} says` : rows.map(describeDiffRow).join('\n'))
      if (rows.length > 0) process.exitCode = 1
    })

  tenants.command('export')
    .description('write the effective record of a database (with every panel and CLI change) as a tenant file; secrets are ${ENV} references unless --include-secrets')
    .argument('<database>', 'the database name')
    .option('-o, --out <file>', 'write the file (mode 0600) instead of printing it')
    .option('--include-secrets', 'write the JWT secrets, private keys and passwords themselves')
    .action(async (database: string, opts: { out?: string, includeSecrets?: boolean }) => {
      checkName(database)
      const v = await withStore(config(), (s) => s.read(database))
      if (!v) throw new TenantNotInStoreError(database)
      const { text, env } = exportTenantFile(v.tenant, { includeSecrets: opts.includeSecrets === true, version: v.version })
      if (opts.out === undefined) { process.stdout.write(text); return }
      writePrivateFile(opts.out, text)
      out(`wrote ${opts.out} (${database}, version ${v.version})${env.length > 0 ? `; set ${env.join(', ')} before applying it` : ''}`)
    })

  tenants.command('history')
    .description('the last control-plane changes of a database (panel, CLI, apply): when, who, which fields, versions')
    .argument('<database>', 'the database name')
    .option('--json', 'print JSON')
    .action(async (database: string, opts: { json?: boolean }) => {
      checkName(database)
      const entries = await withStore(config(), (s) => s.history(database))
      if (opts.json) { out(JSON.stringify(entries, null, 2)); return }
      if (entries.length === 0) { process.stderr.write(`no recorded changes of ${database}\n`); return }
      out(entries.map((e) => `${e.at}  ${e.who} (${e.via})  ${e.action}  ${e.old_version ?? '-'} -> ${e.new_version}  ${e.fields.join(', ')}`).join('\n'))
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

type KeyChange = { kind: 'rotate', key: SigningKeyFile } | { kind: 'revoke', kid: string } | { kind: 'retire-legacy' }

/** The error of a refused change, as the CLI reports it. */
function refusal (err: unknown): unknown {
  if (err instanceof SigningKeyChangeError) return new TenantStoreConfigError(err.message, { cause: err })
  return err
}

/** The jwt block after a key change made by the CLI. */
function changedJwt (jwt: Tenant['jwt'], c: KeyChange): Tenant['jwt'] {
  const stamp = { by: 'cli', at: new Date().toISOString() }
  try {
    if (c.kind === 'rotate') return withRotatedKey(jwt, runtimeSigningKey(c.key))
    if (c.kind === 'revoke') return withRevokedKey(jwt, c.kid, stamp)
    return withRetiredLegacySecret(jwt, stamp)
  } catch (err) { throw refusal(err) }
}

export function registerSigningKeyCommands (tenants: Command, config: () => Config): void {
  const keys = tenants.command('keys').description('signing keys of a database (ES256, RS256): list, rotate, revoke, retire-legacy')

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
    const how = { who: 'cli', via: 'cli' as const, action: c.kind }
    if (cfg.tenants.source === 'redis') {
      // The store holds what every process serves: change it (compare-and-set, audited), then
      // the file (when there is one) the same way, so the file says what the store holds.
      const store = redisStoreOf(cfg, 'change')
      let before: Tenant | null = null
      let r
      try {
        r = await updateTenant(store, database, (current) => { before = structuredClone(current); return { ...current, jwt: changedJwt(current.jwt, c) } }, how)
      } finally {
        await store.close()
      }
      lines.push(`tenant store updated (version ${r.version}); every process drops its cached record of ${database}`)
      if (hasFile && before !== null) {
        writeTenantChanges(file, before, r.tenant)
        lines.push(`tenant file updated: ${file}`)
      } else {
        lines.push(`no tenant file at ${file}: \`gatehouse tenants export ${database}\` writes one with this change`)
      }
    } else {
      if (!hasFile) throw new TenantStoreConfigError(`no tenant file ${file} (tenants.source is files: the file is the record; pass --file)`)
      // The file is the record: change it through a store over that one file (compare-and-set,
      // comments kept, audited in tenants.state_dir), then validate it as every process will.
      const store = createMemoryStore({ dir: file, stateDir: cfg.tenants.state_dir })
      const r = await updateTenant(store, database, (current) => ({ ...current, jwt: changedJwt(current.jwt, c) }), how)
      loadTenantFileEntries(file)
      lines.push(`tenant file updated: ${file} (version ${r.version}; processes reading ${cfg.tenants.dir} use it from their next start; \`npm start\` picks it up at once)`)
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

  keys.command('retire-legacy')
    .description('retire the legacy HS256 secret: tokens it signed are refused from then on (only while an ES256 or RS256 key signs). The upstream secret the gateway signs REST requests with is not affected')
    .argument('<database>', 'the database name')
    .option('--file <file>', 'the tenant file to change too; default <tenants.dir>/<database>.yaml')
    .action(async (database: string, flags: { file?: string }) => {
      const lines = await change(database, flags, { kind: 'retire-legacy' })
      out([`${database}: legacy JWT secret retired: HS256 tokens are refused from now on`, ...lines.map((l) => '  ' + l)].join('\n'))
    })

  keys.command('revoke')
    .description('revoke a signing key: tokens it signed stop verifying, it leaves the JWKS, and its tombstone keeps it from ever coming back. The key that signs now cannot be revoked (rotate first)')
    .argument('<database>', 'the database name')
    .argument('<kid>', 'the key id (`tenants keys list`)')
    .option('--file <file>', 'the tenant file to change too; default <tenants.dir>/<database>.yaml')
    .action(async (database: string, kid: string, flags: { file?: string }) => {
      const lines = await change(database, flags, { kind: 'revoke', kid })
      out([`${database}: signing key ${kid} revoked`, ...lines.map((l) => '  ' + l)].join('\n'))
    })
}

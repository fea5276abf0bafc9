// `gatehouse tenants apply|diff|export|history|list|show|delete|keys`: the tenant store
// commands (docs/tenant-state.md). `apply` validates every file before it writes anything and
// merges three ways (apply.ts); every change is compare-and-set and audited. Failures are
// GatehouseError/ConfigError, which the CLI prints as one clear message with exit code 1.
import { existsSync, statSync } from 'node:fs'
import path from 'node:path'
import type { Command } from 'commander'
import { stringify as toYaml } from 'yaml'
import type { Config } from '../config/index.js'
import { writeFileAtomic } from '../shared/index.js'
import { withTenantStore } from './store.js'
import { declareCommands, out, type CommandRow } from './command-table.js'
import { createRedisStore, type RedisTenantStore } from './redis-store.js'
import { loadTenantFileEntries, type LoadedTenantFile } from './yaml-loader.js'
import { DATABASE_NAME, maskTenant, type Tenant } from './schema.js'
import { createMemoryStore } from './memory-store.js'
import { updateTenant } from './update.js'
import { writeTenantChanges } from './file-writer.js'
import { TenantApplyConflictError, TenantNotInStoreError, TenantStoreConfigError } from './errors.js'
import {
  applyTenantFiles,
  conflictMessage,
  describeDiffRow,
  diffTenantFiles,
  exportTenantFile,
  planApply,
  type ApplyPlan,
} from './apply.js'
import {
  ASYMMETRIC_ALGORITHMS,
  SigningKeyChangeError,
  describeSigningKeys,
  generateSigningKey,
  runtimeSigningKey,
  signingAlgorithmOf,
  withRetiredLegacySecret,
  withRevokedKey,
  withRotatedKey,
  type AsymmetricAlgorithm,
  type SigningKeyFile,
} from './signing-keys.js'

function checkName(database: string): void {
  if (!DATABASE_NAME.test(database)) {
    throw new TenantStoreConfigError(`"${database}" is not a database name (${DATABASE_NAME.source})`)
  }
}

/** Runs `fn` with the Redis store, closed after; with files as the source there is nothing to `what`. */
async function withRedisStore<T>(
  config: Config,
  what: string,
  fn: (store: RedisTenantStore) => Promise<T>,
): Promise<T> {
  if (config.tenants.source !== 'redis') {
    throw new TenantStoreConfigError(
      `tenants.source is "files": every process reads the tenant files of ${config.tenants.dir} directly, so there is nothing to ${what}. ` +
        'Set tenants.source: redis and redis.url (GATEHOUSE_TENANTS_SOURCE=redis, GATEHOUSE_REDIS_URL) to use the Redis store.',
    )
  }
  if (!config.redis.url)
    throw new TenantStoreConfigError(
      'tenants.source is redis but redis.url is not set (GATEHOUSE_REDIS_URL or REDIS_URL)',
    )
  const store = createRedisStore({ url: config.redis.url, prefix: config.redis.key_prefix })
  try {
    return await fn(store)
  } finally {
    await store.close()
  }
}

function warnRevoked(database: string, file: string, kids: string[]): void {
  for (const kid of kids)
    process.stderr.write(
      `gatehouse: warning: ${database}: ${file} lists signing key ${kid}, which was revoked: applied without it (it never verifies again)\n`,
    )
}

function describePlan(p: ApplyPlan, version?: string | null): string {
  const lines = [
    `  ${p.database}: ${p.expected === null ? 'new record' : p.fields.length === 0 ? 'unchanged' : `${p.fields.length} field(s) changed`}${version ? ` (version ${version})` : ''}`,
  ]
  if (p.fields.length > 0) lines.push(`    from the file: ${p.fields.join(', ')}`)
  if (p.kept.length > 0) lines.push(`    kept (changed in the store since the last apply): ${p.kept.join(', ')}`)
  if (p.noLastApplied) lines.push("    (no last apply was recorded: the file's values were taken)")
  return lines.join('\n')
}

interface ApplyFlags {
  dryRun?: boolean
  force?: boolean
}

/** `--dry-run` against Redis: what each file would change, and its conflicts. */
async function dryRunApply(store: RedisTenantStore, entries: LoadedTenantFile[], force: boolean): Promise<void> {
  const plans = await Promise.all(entries.map((e) => planApply(store, e, force)))
  out(
    `${entries.length} tenant file(s) valid: ${entries.map((e) => e.file.database).join(', ')} (dry run, nothing written)`,
  )
  for (const p of plans) {
    warnRevoked(p.database, p.path, p.revokedListed)
    out(describePlan(p))
  }
  if (!force && plans.some((p) => p.conflicts.length > 0)) throw new TenantApplyConflictError(conflictMessage(plans))
}

async function applyToStore(store: RedisTenantStore, entries: LoadedTenantFile[], force: boolean): Promise<void> {
  const done = await applyTenantFiles(store, entries, { force, who: 'cli' })
  for (const d of done) {
    warnRevoked(d.plan.database, d.plan.path, d.plan.revokedListed)
    if (d.plan.conflicts.length > 0)
      process.stderr.write(
        `gatehouse: warning: --force: ${d.plan.database}: the file's values replaced the store's for ${d.plan.conflicts.map((c) => c.field).join(', ')}\n`,
      )
  }
  out(`applied ${entries.length} tenant(s): ${entries.map((e) => e.file.database).join(', ')}`)
  for (const d of done) out(describePlan(d.plan, d.version))
}

async function apply(cfg: Config, target: string, opts: ApplyFlags): Promise<void> {
  // 1. Validate ALL files first (throws a ConfigError naming every bad file and field).
  const entries = loadTenantFileEntries(target)
  if (entries.length === 0) throw new TenantStoreConfigError(`no tenant files (*.yaml, *.yml) in ${target}`)
  if (opts.dryRun && cfg.tenants.source !== 'redis') {
    out(
      `${entries.length} tenant file(s) valid: ${entries.map((e) => e.file.database).join(', ')} (dry run, nothing written)`,
    )
    return
  }
  await withRedisStore(cfg, 'apply', (store) =>
    opts.dryRun ? dryRunApply(store, entries, opts.force === true) : applyToStore(store, entries, opts.force === true),
  )
}

async function diff(cfg: Config, target: string, opts: { json?: boolean }): Promise<void> {
  const entries = loadTenantFileEntries(target)
  const { rows, onlyStored } = await withRedisStore(cfg, 'diff', async (store) => {
    const rows = await diffTenantFiles(store, entries)
    if (!statSync(target).isDirectory()) return { rows, onlyStored: [] }
    const named = new Set(entries.map((e) => e.file.database))
    return { rows, onlyStored: (await store.list()).filter((d) => !named.has(d)) }
  })
  for (const d of onlyStored)
    rows.push({
      database: d,
      field: '(record)',
      file: '(absent)',
      store: 'present',
      changed: 'store' as const,
      by: null,
    })
  if (opts.json) out(JSON.stringify(rows, null, 2))
  else
    out(
      rows.length === 0 ? `no differences: the store holds what ${target} says` : rows.map(describeDiffRow).join('\n'),
    )
  if (rows.length > 0) process.exitCode = 1
}

async function exportTenant(
  cfg: Config,
  database: string,
  opts: { out?: string; includeSecrets?: boolean },
): Promise<void> {
  checkName(database)
  const v = await withTenantStore(cfg, (s) => s.read(database))
  if (!v) throw new TenantNotInStoreError(database)
  const { text, env } = exportTenantFile(v.tenant, { includeSecrets: opts.includeSecrets === true, version: v.version })
  if (opts.out === undefined) {
    process.stdout.write(text)
    return
  }
  writeFileAtomic(opts.out, text, { mode: 0o600 })
  out(
    `wrote ${opts.out} (${database}, version ${v.version})${env.length > 0 ? `; set ${env.join(', ')} before applying it` : ''}`,
  )
}

async function history(cfg: Config, database: string, opts: { json?: boolean }): Promise<void> {
  checkName(database)
  const entries = await withTenantStore(cfg, (s) => s.history(database))
  // No history and no record: a name the store never held (a deleted one keeps its history).
  if (entries.length === 0 && !(await withTenantStore(cfg, (s) => s.read(database))))
    throw new TenantNotInStoreError(database)
  if (opts.json) {
    out(JSON.stringify(entries, null, 2))
    return
  }
  if (entries.length === 0) {
    process.stderr.write(`no recorded changes of ${database}\n`)
    return
  }
  out(
    entries
      .map(
        (e) =>
          `${e.at}  ${e.who} (${e.via})  ${e.action}  ${e.old_version ?? '-'} -> ${e.new_version}  ${e.fields.join(', ')}`,
      )
      .join('\n'),
  )
}

async function list(cfg: Config, opts: { json?: boolean }): Promise<void> {
  const names = await withTenantStore(cfg, (s) => s.list())
  if (opts.json) out(JSON.stringify(names))
  else if (names.length) out(names.join('\n'))
  else process.stderr.write('no tenants\n')
}

async function show(cfg: Config, database: string, opts: { json?: boolean }): Promise<void> {
  checkName(database)
  const { tenant, meta } = await withTenantStore(cfg, async (s) => ({
    tenant: await s.get(database),
    meta: s.kind === 'redis' ? await (s as RedisTenantStore).meta(database) : null,
  }))
  if (!tenant) throw new TenantNotInStoreError(database)
  const masked = maskTenant(tenant)
  if (opts.json) {
    out(JSON.stringify(masked, null, 2))
    return
  }
  const head = meta ? `# ${database}: version ${meta.version}, updated ${meta.updated_at ?? 'unknown'}\n` : ''
  out(head + toYaml(JSON.parse(JSON.stringify(masked))))
}

async function deleteTenant(cfg: Config, database: string): Promise<void> {
  checkName(database)
  const removed = await withRedisStore(cfg, 'delete (remove its file instead)', (store) => store.delete(database))
  if (!removed) throw new TenantNotInStoreError(database)
  out(`deleted ${database} from the tenant store`)
}

const DATABASE_ARG = ['<database>', 'the database name'] as const

const JSON_OPTION = ['--json', 'print JSON'] as const

export function registerTenantStoreCommands(tenants: Command, config: () => Config): void {
  declareCommands(tenants, [...fileCommands(config), ...recordCommands(config)])
}

/** apply, diff, export: between tenant files and the store. */
function fileCommands(config: () => Config): CommandRow[] {
  return [
    {
      name: 'apply',
      description:
        'validate tenant files (a file or a directory of *.yaml), then merge each into the Redis store three ways (file now, file as last applied, store now): fields the file changed are taken, fields changed elsewhere (panel, CLI) are kept, a field changed on both sides refuses the apply; nothing is written when any file is bad or conflicts',
      args: [['<dir|file>', 'a tenant file or a directory of tenant files (<database>.yaml)']],
      options: [
        ['--dry-run', 'validate and show what would change; write nothing'],
        ['--force', "a field changed both in the file and in the store takes the file's value"],
      ],
      action: (target: string, opts: ApplyFlags) => apply(config(), target, opts),
    },
    {
      name: 'diff',
      description:
        'show, field by field, where the Redis store and tenant files differ and who changed what since the last apply (secrets masked); exit code 1 when they differ',
      args: [['<dir|file>', 'a tenant file or a directory of tenant files']],
      options: [JSON_OPTION],
      action: (target: string, opts: { json?: boolean }) => diff(config(), target, opts),
    },
    {
      name: 'export',
      description:
        'write the effective record of a database (with every panel and CLI change) as a tenant file; secrets are ${ENV} references unless --include-secrets',
      args: [DATABASE_ARG],
      options: [
        ['-o, --out <file>', 'write the file (mode 0600) instead of printing it'],
        ['--include-secrets', 'write the JWT secrets, private keys and passwords themselves'],
      ],
      action: (database: string, opts: { out?: string; includeSecrets?: boolean }) =>
        exportTenant(config(), database, opts),
    },
  ]
}

/** history, list, show, delete: the records in the store. */
function recordCommands(config: () => Config): CommandRow[] {
  return [
    {
      name: 'history',
      description:
        'the last control-plane changes of a database (panel, CLI, apply): when, who, which fields, versions',
      args: [DATABASE_ARG],
      options: [JSON_OPTION],
      action: (database: string, opts: { json?: boolean }) => history(config(), database, opts),
    },
    {
      name: 'list',
      description: 'list the databases in the tenant store (tenants.source)',
      options: [['--json', 'print a JSON array']],
      action: (opts: { json?: boolean }) => list(config(), opts),
    },
    {
      name: 'show',
      description: 'print one tenant record, secrets masked',
      args: [DATABASE_ARG],
      options: [['--json', 'print JSON instead of YAML']],
      action: (database: string, opts: { json?: boolean }) => show(config(), database, opts),
    },
    {
      name: 'delete',
      description: 'remove a tenant from the Redis store and publish an invalidation (the database itself is kept)',
      args: [DATABASE_ARG],
      action: (database: string) => deleteTenant(config(), database),
    },
  ]
}

// ---- signing keys ----------------------------------------------------------------------------

type KeyChange = { kind: 'rotate'; key: SigningKeyFile } | { kind: 'revoke'; kid: string } | { kind: 'retire-legacy' }

/** The error of a refused change, as the CLI reports it. */
function refusal(err: unknown): unknown {
  if (err instanceof SigningKeyChangeError) return new TenantStoreConfigError(err.message, { cause: err })
  return err
}

/** The jwt block after a key change made by the CLI. */
function changedJwt(jwt: Tenant['jwt'], c: KeyChange): Tenant['jwt'] {
  const stamp = { by: 'cli', at: new Date().toISOString() }
  try {
    if (c.kind === 'rotate') return withRotatedKey(jwt, runtimeSigningKey(c.key))
    if (c.kind === 'revoke') return withRevokedKey(jwt, c.kid, stamp)
    return withRetiredLegacySecret(jwt, stamp)
  } catch (err) {
    throw refusal(err)
  }
}

/** A key change in the Redis store (compare-and-set, audited), then in the tenant file when there is one. */
async function changeInStore(cfg: Config, database: string, file: string, c: KeyChange): Promise<string[]> {
  // The store holds what every process serves: change it, then the file the same way, so the
  // file says what the store holds.
  let before: Tenant | null = null
  const r = await withRedisStore(cfg, 'change', (store) =>
    updateTenant(
      store,
      database,
      (current) => {
        before = structuredClone(current)
        return { ...current, jwt: changedJwt(current.jwt, c) }
      },
      { who: 'cli', via: 'cli', action: c.kind },
    ),
  )
  const lines = [`tenant store updated (version ${r.version}); every process drops its cached record of ${database}`]
  if (existsSync(file) && before !== null) {
    writeTenantChanges(file, before, r.tenant)
    lines.push(`tenant file updated: ${file}`)
  } else {
    lines.push(`no tenant file at ${file}: \`gatehouse tenants export ${database}\` writes one with this change`)
  }
  return lines
}

/**
 * A key change in the tenant file, which is the record: through a store over that one file
 * (compare-and-set, comments kept, audited in tenants.state_dir), then validated as every process will.
 */
async function changeInFile(cfg: Config, database: string, file: string, c: KeyChange): Promise<string[]> {
  if (!existsSync(file))
    throw new TenantStoreConfigError(
      `no tenant file ${file} (tenants.source is files: the file is the record; pass --file)`,
    )
  const store = createMemoryStore({ dir: file, stateDir: cfg.tenants.state_dir })
  const r = await updateTenant(store, database, (current) => ({ ...current, jwt: changedJwt(current.jwt, c) }), {
    who: 'cli',
    via: 'cli',
    action: c.kind,
  })
  loadTenantFileEntries(file)
  return [
    `tenant file updated: ${file} (version ${r.version}; processes reading ${cfg.tenants.dir} use it from their next start; \`npm start\` picks it up at once)`,
  ]
}

/** Applies a key change where the record lives; prints `head` and what was changed. */
async function changeKeys(
  cfg: Config,
  database: string,
  flags: { file?: string },
  c: KeyChange,
  head: string,
): Promise<void> {
  checkName(database)
  const file = flags.file ?? path.join(cfg.tenants.dir, `${database}.yaml`)
  const lines =
    cfg.tenants.source === 'redis'
      ? await changeInStore(cfg, database, file, c)
      : await changeInFile(cfg, database, file, c)
  out([head, ...lines.map((l) => '  ' + l)].join('\n'))
}

async function listKeys(cfg: Config, database: string, opts: { json?: boolean }): Promise<void> {
  checkName(database)
  const tenant = await withTenantStore(cfg, (s) => s.get(database))
  if (!tenant) throw new TenantNotInStoreError(database)
  const keys = describeSigningKeys(tenant.jwt)
  if (opts.json) {
    out(JSON.stringify({ database, signing_algorithm: signingAlgorithmOf(tenant.jwt), keys }))
    return
  }
  out(
    [
      `${database}: signs with ${signingAlgorithmOf(tenant.jwt)}`,
      ...keys.map((k) => `  ${k.kid}  ${k.alg}${k.current ? '  (current)' : ''}`),
    ].join('\n'),
  )
}

/** --alg, or the algorithm the database signs with (ES256 when that is HS256). */
async function rotationAlgorithm(
  cfg: Config,
  database: string,
  flag: string | undefined,
): Promise<AsymmetricAlgorithm> {
  if (flag !== undefined) {
    if (!(ASYMMETRIC_ALGORITHMS as readonly string[]).includes(flag))
      throw new TenantStoreConfigError(`--alg must be one of ${ASYMMETRIC_ALGORITHMS.join(', ')}`)
    return flag as AsymmetricAlgorithm
  }
  const tenant = await withTenantStore(cfg, (s) => s.get(database))
  if (!tenant) throw new TenantNotInStoreError(database)
  const now = signingAlgorithmOf(tenant.jwt)
  return now === 'HS256' ? 'ES256' : now
}

async function rotateKey(cfg: Config, database: string, flags: { alg?: string; file?: string }): Promise<void> {
  checkName(database)
  const alg = await rotationAlgorithm(cfg, database, flags.alg)
  const key = await generateSigningKey(alg)
  await changeKeys(
    cfg,
    database,
    flags,
    { kind: 'rotate', key },
    `${database}: new ${alg} signing key ${key.kid} signs from now on`,
  )
}

const FILE_OPTION = ['--file <file>', 'the tenant file to change too; default <tenants.dir>/<database>.yaml'] as const

export function registerSigningKeyCommands(tenants: Command, config: () => Config): void {
  const keys = tenants
    .command('keys')
    .description('signing keys of a database (ES256, RS256): list, rotate, revoke, retire-legacy')
  declareCommands(keys, [
    {
      name: 'list',
      description: 'the signing keys of a database: kid, algorithm, which one signs now (never private parts)',
      args: [DATABASE_ARG],
      options: [JSON_OPTION],
      action: (database: string, opts: { json?: boolean }) => listKeys(config(), database, opts),
    },
    {
      name: 'rotate',
      description:
        'generate a new signing key and make it the one that signs; the older keys keep verifying (and stay in the JWKS) until revoked',
      args: [DATABASE_ARG],
      options: [
        ['--alg <alg>', 'ES256 or RS256; default the algorithm the database signs with, ES256 when that is HS256'],
        FILE_OPTION,
      ],
      action: (database: string, flags: { alg?: string; file?: string }) => rotateKey(config(), database, flags),
    },
    {
      name: 'retire-legacy',
      description:
        'retire the legacy HS256 secret: tokens it signed are refused from then on (only while an ES256 or RS256 key signs). The upstream secret the gateway signs REST requests with is not affected',
      args: [DATABASE_ARG],
      options: [FILE_OPTION],
      action: (database: string, flags: { file?: string }) =>
        changeKeys(
          config(),
          database,
          flags,
          { kind: 'retire-legacy' },
          `${database}: legacy JWT secret retired: HS256 tokens are refused from now on`,
        ),
    },
    {
      name: 'revoke',
      description:
        'revoke a signing key: tokens it signed stop verifying, it leaves the JWKS, and its tombstone keeps it from ever coming back. The key that signs now cannot be revoked (rotate first)',
      args: [DATABASE_ARG, ['<kid>', 'the key id (`tenants keys list`)']],
      options: [FILE_OPTION],
      action: (database: string, kid: string, flags: { file?: string }) =>
        changeKeys(config(), database, flags, { kind: 'revoke', kid }, `${database}: signing key ${kid} revoked`),
    },
  ])
}

// The development stack (`gatehouse dev`, what `npm start` runs), started in this order:
//   1. the lock of .gatehouse/ (a second start in the same checkout stops here, touching nothing);
//   2. every part's listeners (public and admin), bound before anything else: a port of 0 is
//      the kernel's choice, known from here on;
//   3. Postgres (embedded, or DATABASE_URL's) and the mail catcher, each reporting its port;
//   4. the configuration with the ports actually bound, the generated tenant files pointed at
//      the engines' real URLs, the tenants provisioned, the store;
//   5. the parts, each taking over its bound listeners; the tenant file watcher; dev.json.
// What it started is stopped in reverse order, also when a later step fails.
import path from 'node:path'
import { existsSync, readFileSync, rmSync } from 'node:fs'
import { loadConfig, mergeDeep, type Config } from '../config/index.js'
import {
  parseTenantFile,
  applyTenantFiles,
  TenantApplyConflictError,
  type TenantStore,
  type TenantFile,
  type LoadedTenantFile,
} from '../tenants/index.js'
import { connectionLimitsOf, ensureClusterRoles, ensureTenant } from '../platform/index.js'
import { signHS256 } from '../shared/index.js'
import {
  PARTS,
  startPart,
  bindPartListeners,
  boundPort,
  createStoreAndCache,
  partLogger,
  type PartName,
  type PartListeners,
  type RunningPart,
  type PartDeps,
} from '../serve.js'
import { acquireDevLock } from './lock.js'
import { startDevPostgres, type DevPostgres } from './postgres.js'
import { startDevMail, type DevMail } from './mail.js'
import { parsePortOffset, offsetPortOverrides, devPgPort, DEV_CONFIG_DEFAULTS } from './ports.js'
import {
  writeRuntimeTenantFiles,
  writeRuntimeTenantFile,
  runtimeTenantRecord,
  tenantSourceFiles,
  type DevEngines,
} from './tenant-files.js'
import { watchTenantFiles } from './watch.js'
import { devSecrets, writeDevInfo, describeRunningStack, type DevInfo } from './info.js'

export interface DevOptions {
  /** Project root (config/tenants and .gatehouse live there). */
  root: string
  env: NodeJS.ProcessEnv
  /** Config file given with -c, if any. */
  configFile?: string
  /** Where state lives (embedded data, runtime tenant files, dev.json); default <root>/.gatehouse. */
  stateDir?: string
  /** Config values that win over file and env (tests use other ports: 0 for the kernel's choice). */
  overrides?: Record<string, unknown>
  /** Added to every port of the stack (--port-offset; else GATEHOUSE_DEV_PORT_OFFSET). */
  portOffset?: number
  /** Called once everything listens. */
  onReady?: (info: DevInfo) => void
}

export interface DevStack {
  info: DevInfo
  stop(): Promise<void>
}

/**
 * The stack's tenant files into its Redis store, merged three ways as `tenants apply` does so
 * panel changes survive a restart; a field changed both in a file and from the panel since the
 * last start takes the file's value, with a warning naming it.
 */
async function applyDevFiles(
  store: TenantStore,
  entries: LoadedTenantFile[],
  log: { warn(o: object, m: string): void },
): Promise<void> {
  try {
    await applyTenantFiles(store, entries, { who: 'dev' })
  } catch (err) {
    if (!(err instanceof TenantApplyConflictError)) throw err
    log.warn({}, `${err.message.split('\n').slice(0, -1).join('\n')}\nThe development stack takes the files' values.`)
    await applyTenantFiles(store, entries, { who: 'dev', force: true })
  }
}

/** A database as dev.json (and so the banner and `gatehouse status`) lists it. */
function servedDatabase(gatewayUrl: string, file: TenantFile): DevInfo['databases'][number] {
  return {
    database: file.database,
    organization: file.organization,
    url: `${gatewayUrl}/${file.database}`,
    public_key: file.keys.public,
    secret_key: file.keys.secret,
    owner_url: file.postgres,
  }
}

/** What went wrong while the stack runs: in its log (stderr before it has one), in dev.json and so in `gatehouse status`. */
class Problems {
  readonly #stateDir: string
  readonly #list: string[] = []
  #log: ((message: string) => void) | undefined
  #written: DevInfo | undefined

  constructor(stateDir: string) {
    this.#stateDir = stateDir
  }

  get list(): string[] {
    return [...this.#list]
  }

  add(message: string): void {
    this.#list.push(message)
    if (this.#log !== undefined) this.#log(message)
    else process.stderr.write(`gatehouse dev: ${message}\n`)
    if (this.#written !== undefined) writeDevInfo(this.#stateDir, { ...this.#written, problems: this.list })
  }

  /** From now on problems go to the stack's log. */
  logTo(log: (message: string) => void): void {
    this.#log = log
  }

  /** dev.json was written with `info`: a later problem is added to it. */
  written(info: DevInfo): void {
    this.#written = info
  }

  /**
   * A tenant file loaded (or removed: null) while the stack runs, `tenants create` in another
   * shell say: dev.json, and so `gatehouse status`, list the database as the banner would.
   */
  served(database: string, file: TenantFile | null): void {
    const info = this.#written
    if (info === undefined) return
    const databases = info.databases.filter((d) => d.database !== database)
    if (file !== null) databases.push(servedDatabase(info.gateway_url, file))
    this.#written = { ...info, databases }
    writeDevInfo(this.#stateDir, this.#list.length > 0 ? { ...this.#written, problems: this.list } : this.#written)
  }
}

/**
 * What the store wrote into the developer's tenant files (a panel or CLI change), so the
 * watcher skips it. Every text written lately (not only the last one): the watcher may read a
 * file between two of a burst of panel writes, and an older text of ours is no edit. With the
 * text each file's record was last made from: a write over any other text merged a person's
 * edit, which must be loaded.
 */
class OwnWrites {
  readonly #texts = new Map<string, string[]>()
  readonly #loaded = new Map<string, string>()

  constructor(files: string[]) {
    for (const f of files) {
      try {
        this.#loaded.set(f, readFileSync(f, 'utf8'))
      } catch {
        /* read when it changes */
      }
    }
  }

  /** The store wrote `text` over `previous`. */
  wrote(file: string, text: string, previous: string): void {
    const texts = this.#texts.get(file) ?? []
    // Written over an edit nobody loaded yet: the watcher loads the result (both changes).
    if (previous !== this.#loaded.get(file) && !texts.includes(previous)) return
    texts.push(text)
    if (texts.length > 256) texts.shift()
    this.#texts.set(file, texts)
  }

  /** Whether the watcher's `text` of `file` is the store's own; otherwise it is loaded now. */
  isOwn(file: string, text: string): boolean {
    if (this.#texts.get(file)?.includes(text) === true) return true
    this.#loaded.set(file, text)
    return false
  }
}

/** The stack's tenant files: where they are kept, where the generated copies go, their records. */
interface DevTenants {
  sourceDir: string
  runtimeDir: string
  engines: DevEngines
  files: TenantFile[]
  sourceOf(database: string): string | null
}

/** One start of the stack: what it started, stopped in reverse order. */
class DevStart {
  readonly #opts: DevOptions
  readonly #env: NodeJS.ProcessEnv
  readonly #stateDir: string
  readonly #stops: Array<() => Promise<void>> = []
  readonly #problems: Problems
  /** Bound listeners no part has taken over yet (closed on a failed start). */
  readonly #unclaimed = new Map<PartName, PartListeners>()

  constructor(opts: DevOptions) {
    this.#opts = opts
    this.#env = opts.env
    this.#stateDir = opts.stateDir ?? path.join(opts.root, '.gatehouse')
    this.#problems = new Problems(this.#stateDir)
  }

  async stop(): Promise<void> {
    for (const l of this.#unclaimed.values()) {
      l.public.close()
      l.admin.close()
    }
    this.#unclaimed.clear()
    while (this.#stops.length) await this.#stops.pop()!().catch(() => {})
  }

  async run(): Promise<DevStack> {
    // Before anything is started or stopped: a stack already running here keeps all it has.
    const lock = acquireDevLock(this.#stateDir, (owner) => describeRunningStack(this.#stateDir, owner.pid))
    this.#stops.push(async () => {
      lock.release()
    })
    const { overrides, offset } = this.#requested()
    await this.#bindListeners(this.#load(overrides))
    const postgres = await this.#startPostgres(offset)
    const mail = await this.#startMail(this.#load(overrides))
    const bound = mergeDeep(overrides, this.#boundPorts(mail))
    const base = this.#load(bound)
    const tenants = await this.#prepareTenants(base, postgres.url)
    const config = this.#load(mergeDeep(bound, this.#stackOverrides(base, postgres.url, tenants.runtimeDir)))
    const deps = await this.#startStore(config, tenants, postgres.url)
    const running = await this.#startParts(deps)
    this.#watch(deps, tenants, postgres.url)
    const info = await this.#devInfo(config, running, mail, postgres, tenants)
    writeDevInfo(this.#stateDir, info)
    this.#problems.written(info)
    this.#opts.onReady?.(info)
    return { info, stop: () => this.stop() }
  }

  #load(overrides: Record<string, unknown>): Config {
    return loadConfig({ file: this.#opts.configFile, env: this.#env, defaults: DEV_CONFIG_DEFAULTS, overrides })
  }

  /** The overrides asked for, every port moved by the offset. */
  #requested(): { overrides: Record<string, unknown>; offset: number } {
    const { portOffset } = this.#opts
    const offset = parsePortOffset(
      portOffset ?? this.#env.GATEHOUSE_DEV_PORT_OFFSET,
      portOffset !== undefined ? '--port-offset' : undefined,
    )
    const asked = this.#opts.overrides ?? {}
    return { overrides: mergeDeep(asked, offsetPortOverrides(this.#load(asked), offset)), offset }
  }

  async #bindListeners(config: Config): Promise<void> {
    for (const name of PARTS) this.#unclaimed.set(name, await bindPartListeners(config, name))
  }

  /** The ports bound (the parts' listeners, the mail catcher's) as config overrides. */
  #boundPorts(mail: DevMail): Record<string, unknown> {
    const out: Record<string, unknown> = { mail: { smtp_port: mail.smtpPort, web_port: mail.webPort } }
    for (const [name, l] of this.#unclaimed) out[name] = { port: boundPort(l.public), admin_port: boundPort(l.admin) }
    return out
  }

  async #startPostgres(offset: number): Promise<DevPostgres> {
    const url = this.#env.DATABASE_URL
    if (url) return { url, port: Number(new URL(url).port || 5432), stop: async () => {} }
    let where = ''
    const postgres = await startDevPostgres(this.#stateDir, devPgPort(this.#env, offset), undefined, (how) => {
      this.#problems.add(
        `the development Postgres (${where}) exited unexpectedly (${how}): requests that need a database fail ` +
          '(REST PGRST002, auth 503) until the stack starts again: stop it (Ctrl-C) and run `npm start`',
      )
    })
    where = `127.0.0.1:${postgres.port}`
    this.#stops.push(() => postgres.stop())
    return postgres
  }

  async #startMail(config: Config): Promise<DevMail> {
    const mail = await startDevMail(config.mail.smtp_port, config.mail.web_port, path.join(this.#stateDir, 'mail'))
    this.#stops.push(() => mail.stop())
    return mail
  }

  /**
   * The generated copies, made anew from the source files at every start (a copy whose source
   * is gone must not be served), and their databases provisioned.
   */
  async #prepareTenants(base: Config, clusterUrl: string): Promise<DevTenants> {
    const runtimeDir = path.join(this.#stateDir, 'tenants')
    const sourceDir = path.resolve(this.#opts.root, base.tenants.dir)
    const engines = {
      rest: `http://${base.rest.host}:${base.rest.port}`,
      auth: `http://${base.auth.host}:${base.auth.port}`,
    }
    rmSync(runtimeDir, { recursive: true, force: true })
    const raws = writeRuntimeTenantFiles(sourceDir, runtimeDir, clusterUrl, engines)
    const files = raws.map((raw) => parseTenantFile(raw, `config/tenants/${String(raw.database)}.yaml`, this.#env))
    await ensureClusterRoles(clusterUrl)
    const connectionLimits = connectionLimitsOf(base)
    for (const file of files) await ensureTenant({ adminUrl: clusterUrl, file, connectionLimits })
    const sourceOf = (database: string): string | null => {
      for (const ext of ['.yaml', '.yml']) {
        const f = path.join(sourceDir, database + ext)
        if (existsSync(f)) return f
      }
      return null
    }
    return { sourceDir, runtimeDir, engines, files, sourceOf }
  }

  #useRedis(): boolean {
    return Boolean(this.#env.REDIS_URL ?? this.#env.GATEHOUSE_REDIS_URL)
  }

  /** What the stack sets on top of the asked configuration: its cluster, its tenant files, its gateway's URL. */
  #stackOverrides(base: Config, clusterUrl: string, runtimeDir: string): Record<string, unknown> {
    const secrets = devSecrets(this.#stateDir)
    const publicUrl = this.#env.GATEHOUSE_PUBLIC_URL || this.#opts.overrides?.public_url
    return {
      tenants: { source: this.#useRedis() ? 'redis' : 'files', dir: runtimeDir, state_dir: this.#stateDir },
      postgres: { url: clusterUrl },
      // The gateway of this stack is the public address unless one was configured.
      ...(publicUrl ? {} : { public_url: `http://${base.gateway.host}:${base.gateway.port}` }),
      panel: { session_secret: secrets.panel_session_secret },
      // The development stack's identity providers run on this machine, over http.
      outbound: { allow_hosts: [...new Set([...base.outbound.allow_hosts, '127.0.0.1', 'localhost', '::1'])] },
    }
  }

  /**
   * The store and cache. A panel or CLI change is written into the tenant file a developer
   * keeps (config/tenants), and its generated copy made again; the watcher skips what the
   * store itself wrote.
   */
  async #startStore(
    config: Config,
    tenants: DevTenants,
    clusterUrl: string,
  ): Promise<PartDeps & { writes: OwnWrites }> {
    const writes = new OwnWrites(tenantSourceFiles(tenants.sourceDir))
    const { store, tenants: cache } = createStoreAndCache(config, {
      fileOf: tenants.sourceOf,
      onFileWritten: (file, text, previous) => {
        writeRuntimeTenantFile(tenants.runtimeDir, runtimeTenantRecord(file, clusterUrl, tenants.engines))
        writes.wrote(file, text, previous)
      },
    })
    this.#stops.push(async () => {
      cache.close()
      await store.close()
    })
    if (this.#useRedis()) {
      const entries = tenants.files.map((file) => ({ path: tenants.sourceOf(file.database) ?? file.database, file }))
      await applyDevFiles(store, entries, partLogger(config, 'dev'))
    }
    return { config, tenants: cache, store, writes }
  }

  async #startParts(deps: PartDeps): Promise<RunningPart[]> {
    const running: RunningPart[] = []
    for (const name of PARTS) {
      const listeners = this.#unclaimed.get(name)
      this.#unclaimed.delete(name)
      const part = await startPart(name, deps, { listeners })
      running.push(part)
      this.#stops.push(() => part.app.close())
    }
    return running
  }

  /** Tenant files created or edited from now on are picked up while the stack runs. */
  #watch(deps: PartDeps & { writes: OwnWrites }, tenants: DevTenants, clusterUrl: string): void {
    const devLog = partLogger(deps.config, 'dev')
    this.#problems.logTo((message) => {
      devLog.error(message)
    })
    const watcher = watchTenantFiles({
      isOwnWrite: (file, text) => deps.writes.isOwn(file, text),
      apply: (entries) => applyDevFiles(deps.store, entries, devLog),
      sourceDir: tenants.sourceDir,
      runtimeDir: tenants.runtimeDir,
      adminUrl: clusterUrl,
      connectionLimits: connectionLimitsOf(deps.config),
      engines: tenants.engines,
      store: deps.store,
      env: this.#env,
      report: (level, message, fields) => {
        devLog[level](fields, message)
      },
      served: (database, file) => {
        this.#problems.served(database, file)
      },
    })
    this.#stops.push(async () => {
      watcher.close()
    })
  }

  async #devInfo(
    config: Config,
    running: RunningPart[],
    mail: DevMail,
    postgres: DevPostgres,
    tenants: DevTenants,
  ): Promise<DevInfo> {
    const secrets = devSecrets(this.#stateDir)
    const urlOf = (n: PartName): string => running.find((p) => p.name === n)?.url ?? ''
    const panelSession = await signHS256(
      { email: 'developer@gatehouse.local', orgs: ['org_demo'] },
      { secret: secrets.panel_session_secret, subject: 'panel-user-dev', expiresInSeconds: 30 * 24 * 3600 },
    )
    const gatewayUrl = config.public_url.replace(/\/+$/, '')
    const info: DevInfo = {
      gateway_url: gatewayUrl,
      panel_url: urlOf('panel'),
      panel_session: panelSession,
      mail_url: mail.webUrl,
      rest_engine_url: urlOf('rest'),
      auth_engine_url: urlOf('auth'),
      pid: process.pid,
      postgres_admin_url: postgres.url,
      tenants_source: this.#useRedis() ? 'redis' : 'files',
      tenants_dir: tenants.runtimeDir,
      tenants_source_dir: tenants.sourceDir,
      ...(this.#useRedis() && config.redis.url !== undefined
        ? { redis_url: config.redis.url, redis_key_prefix: config.redis.key_prefix }
        : {}),
      admin_urls: Object.fromEntries(running.map((p) => [p.name, p.adminUrl])),
      databases: tenants.files.map((f) => servedDatabase(gatewayUrl, f)),
    }
    if (this.#problems.list.length > 0) info.problems = this.#problems.list
    return info
  }
}

/** Starts the whole service on embedded defaults (what `npm start` runs). */
export async function startDev(opts: DevOptions): Promise<DevStack> {
  const start = new DevStart(opts)
  try {
    return await start.run()
  } catch (err) {
    await start.stop()
    throw err
  }
}

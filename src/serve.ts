// `gatehouse serve gateway|rest|auth|panel` for production, `gatehouse dev` (the whole
// stack on embedded defaults, what `npm start` runs) and `gatehouse status`.
// The only module besides cli.ts that listens or reads the environment.
import cluster from 'node:cluster'
import os from 'node:os'
import type { Command } from 'commander'
import type { FastifyInstance } from 'fastify'
import { loadConfig, type Config } from './config/index.js'
import {
  createTenantStore, createTenantCache, tenantCacheOptions, parseTenantFile, applyTenantFiles, TenantApplyConflictError,
  type TenantStore, type TenantCache, type TenantFile, type TenantStoreDeps, type LoadedTenantFile
} from './tenants/index.js'
import { buildGateway, installGracefulShutdown, createRefusalRewriter } from './gateway/index.js'
import { buildAuthEngine } from './auth/index.js'
import { buildRestEngine } from './rest/index.js'
import { buildPanel } from './panel/index.js'
import {
  ConfigError, loggerOptions, bufferedStdout, type BatchedDestination, startPartTracing, packageVersion, signHS256, buildAdminApp, buildPartAdmin, partOps,
  readiness, registerPoolMetrics, type PartTracer, type PartOps, type Readiness,
  type ReadinessCheck
} from './shared/index.js'
import { pino } from 'pino'
import path from 'node:path'
import { existsSync, readFileSync, rmSync } from 'node:fs'
import { ensureClusterRoles, ensureTenant } from './platform/index.js'
import pg from 'pg'
import { AggregatorRegistry, collectDefaultMetrics, type Registry } from 'prom-client'
import {
  startDevPostgres, startDevMail, devSecrets, writeRuntimeTenantFiles, writeDevInfo, readDevInfo,
  renderDevInfo, runningDevInfo, watchTenantFiles, acquireDevLock, runtimeTenantRecord, writeRuntimeTenantFile, tenantSourceFiles,
  parsePortOffset, offsetPortOverrides, devPgPort, devEnvironmentHelp, resetDevState, type DevInfo
} from './dev/index.js'

export const PARTS = ['gateway', 'rest', 'auth', 'panel'] as const
export type PartName = typeof PARTS[number]

export interface RunningPart {
  name: PartName
  app: FastifyInstance
  url: string
  /** The admin listener (/healthz, /readyz, /metrics); '' when it was not started. */
  adminUrl: string
}

export interface PartDeps {
  config: Config
  tenants: TenantCache
  store: TenantStore
}

/**
 * The process's log sink: stdout, batched, never holding the process (a closed pipe drops
 * lines, the exit flush is bounded: see createBatchedDestination). One per process.
 */
let stdoutSink: BatchedDestination | null = null
function logSink (): BatchedDestination {
  stdoutSink ??= bufferedStdout()
  return stdoutSink
}

/** A part's logger: every line it writes carries `part` (gateway, rest, auth, panel, ...). */
export function partLogger (config: Config, part: string): ReturnType<typeof pino> {
  return pino(loggerOptions(config.log), logSink()).child({ part })
}

/** Builds one part (unstarted) with its dependencies. */
export async function buildPart (name: PartName, deps: PartDeps, tracer?: PartTracer): Promise<FastifyInstance> {
  const { config, tenants } = deps
  switch (name) {
    case 'gateway': {
      const logger = partLogger(config, 'gateway')
      const rewriteError = createRefusalRewriter({ config, logger })
      const app = buildGateway({ config, tenants, logger, rewriteError, tracer })
      app.addHook('onClose', async () => { await rewriteError.close() })
      // The refusal rewriter's catalog pools (keys are JSON [database, url]).
      const ops = partOps(app)
      if (ops !== undefined) {
        registerPoolMetrics(ops.registry, {
          part: 'gateway-catalog',
          snapshot: () => rewriteError.poolSnapshot(),
          tenantOf: (key) => { try { return String((JSON.parse(key) as unknown[])[0]) } catch { return key } }
        })
      }
      return app
    }
    case 'rest': {
      // Its pools and LISTEN connections end with app.close().
      return buildRestEngine({ config, tenants, logger: partLogger(config, 'rest'), tracer })
    }
    case 'auth':
      return buildAuthEngine({ config, tenants, logger: partLogger(config, 'auth'), tracer })
    case 'panel':
      return buildPanel({ config, tenants, store: deps.store, logger: partLogger(config, 'panel'), tracer })
  }
}

/** Answers when `url`'s server accepts a connection and runs `select 1`. */
async function pingPostgres (url: string): Promise<void> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 2_000, application_name: 'gatehouse-readyz' })
  client.on('error', () => {})
  try {
    await client.connect()
    await client.query('select 1')
  } catch (err) {
    const where = (() => { try { const u = new URL(url); return `${u.hostname}:${u.port || '5432'}` } catch { return 'the configured server' } })()
    throw new Error(`postgres at ${where}: ${(err as Error).message}`, { cause: err })
  } finally {
    await client.end().catch(() => {})
  }
}

/** What every part needs for any request: the tenant store (Redis when used) and Postgres. */
function dependencyChecks (deps: PartDeps): ReadinessCheck[] {
  const checks: ReadinessCheck[] = []
  if (deps.store.kind === 'redis') checks.push({ name: 'redis', check: () => deps.store.ping() })
  const url = deps.config.postgres.url
  if (url !== undefined && url !== '') checks.push({ name: 'postgres', check: () => pingPostgres(url) })
  return checks
}

/** Process metrics (CPU, memory, event loop, GC) in `registry`, once. */
function collectProcessMetrics (registry: Registry): void {
  if (registry.getSingleMetric('process_cpu_user_seconds_total') === undefined) collectDefaultMetrics({ register: registry })
}

function listenUrl (host: string, server: { address (): unknown }, fallback: number): string {
  const addr = server.address()
  const port = typeof addr === 'object' && addr !== null ? (addr as { port: number }).port : fallback
  return `http://${host.includes(':') ? `[${host}]` : host}:${port}`
}

/** A busy port named with its config key and variable; other errors as they are. */
function busyPort (err: unknown, name: PartName, key: 'port' | 'admin_port', port: number): unknown {
  if ((err as NodeJS.ErrnoException).code !== 'EADDRINUSE') return err
  const env = `GATEHOUSE_${name.toUpperCase()}_${key.toUpperCase()}`
  return new ConfigError(`port ${port} (${name}.${key}, ${env}) is in use by another process: ` +
    `stop it, or give the ${name} a free port (${env}=<port> or ${name}.${key} in the config file)`)
}

export interface StartPartOptions {
  /** Start the admin listener (default true; cluster workers leave it to the primary). */
  admin?: boolean
}

/** Builds and listens (the public port, then the admin port); returns the part and its URLs. */
export async function startPart (name: PartName, deps: PartDeps, opts: StartPartOptions = {}): Promise<RunningPart> {
  // Tracing (its packages loaded only then) when an OTLP endpoint is configured; the
  // spans still buffered are exported when the part closes.
  const { otlp_endpoint: endpoint, service_name: serviceName, resource_attributes: resourceAttributes } = deps.config.tracing
  const tracer = endpoint !== undefined
    ? await startPartTracing({ endpoint, part: name, serviceName, resourceAttributes, version: packageVersion() })
    : undefined
  let app: FastifyInstance
  try {
    app = await buildPart(name, deps, tracer)
  } catch (err) {
    await tracer?.shutdown().catch(() => {})
    throw err
  }
  if (tracer !== undefined) app.addHook('onClose', async () => { await tracer.shutdown().catch(() => {}) })
  const section = deps.config[name]
  const ops = partOps(app)
  if (ops !== undefined) {
    ops.checks.push(...dependencyChecks(deps))
    collectProcessMetrics(ops.registry)
  }
  const admin = opts.admin !== false && ops !== undefined ? buildPartAdmin(app) : null
  if (admin !== null) app.addHook('onClose', async () => { await admin.close() })
  try {
    await app.listen({ host: section.host, port: section.port })
  } catch (err) {
    await app.close().catch(() => {})
    throw busyPort(err, name, 'port', section.port)
  }
  let adminUrl = ''
  if (admin !== null) {
    try {
      await admin.listen({ host: section.admin_host, port: section.admin_port })
    } catch (err) {
      await app.close().catch(() => {})
      throw busyPort(err, name, 'admin_port', section.admin_port)
    }
    adminUrl = listenUrl(section.admin_host, admin.server, section.admin_port)
  }
  return { name, app, url: listenUrl(section.host, app.server, section.port), adminUrl }
}

const READYZ_REQ = 'gatehouse:readyz'
const READYZ_RES = 'gatehouse:readyz:res'

/** Readiness of every worker (primary of `--workers`): ready when each live worker is. */
function clusterReadiness (timeoutMs = 3_000): Promise<Readiness> {
  const workers = Object.values(cluster.workers ?? {}).filter((w) => w !== undefined && w.isConnected())
  if (workers.length === 0) return Promise.resolve({ ready: false, checks: [{ name: 'workers', ok: false, error: 'no worker is running' }] })
  const id = Math.random().toString(36).slice(2)
  return new Promise((resolve) => {
    const answers = new Map<number, Readiness>()
    const finish = (): void => {
      clearTimeout(timer)
      cluster.off('message', onMessage)
      const checks = workers.flatMap((w) => {
        const r = answers.get(w!.id)
        if (r === undefined) return [{ name: `worker ${w!.process.pid}`, ok: false, error: `no answer within ${timeoutMs} ms` }]
        if (r.stopping === true) return [{ name: `worker ${w!.process.pid}`, ok: false, error: 'shutting down' }]
        return [{ name: `worker ${w!.process.pid}`, ok: true }, ...r.checks.map((c) => ({ ...c, name: `worker ${w!.process.pid}: ${c.name}` }))]
      })
      resolve({ ready: checks.every((c) => c.ok), checks })
    }
    const onMessage = (worker: { id: number }, msg: { type?: string, id?: string, readiness?: Readiness }): void => {
      if (msg?.type !== READYZ_RES || msg.id !== id || msg.readiness === undefined) return
      answers.set(worker.id, msg.readiness)
      if (answers.size === workers.length) finish()
    }
    const timer = setTimeout(finish, timeoutMs)
    cluster.on('message', onMessage)
    for (const w of workers) w!.send({ type: READYZ_REQ, id })
  })
}

/** A worker of `--workers`: answers the primary's metrics and readiness requests. */
function serveWorkerOps (ops: PartOps): void {
  // Constructing it installs prom-client's worker-side listener.
  void new AggregatorRegistry()
  AggregatorRegistry.setRegistries([ops.registry])
  process.on('message', (msg: { type?: string, id?: string }) => {
    if (msg?.type !== READYZ_REQ) return
    void readiness(ops).then((r) => process.send?.({ type: READYZ_RES, id: msg.id, readiness: r }))
  })
}

export function createStoreAndCache (config: Config, deps: TenantStoreDeps = {}): { store: TenantStore, tenants: TenantCache } {
  // Outages and a store that lost its data are logged (once per episode) by the store and cache.
  const logger = partLogger(config, 'tenants')
  const store = createTenantStore(config, { env: process.env, logger, ...deps })
  const tenants = createTenantCache(store, { ...tenantCacheOptions(config.tenants), logger })
  return { store, tenants }
}

async function serve (name: PartName, config: Config, workers: number): Promise<void> {
  if (workers > 1 && cluster.isPrimary) {
    for (let i = 0; i < workers; i++) cluster.fork()
    // The admin port is the primary's: metrics merged from every worker, readiness of all.
    const aggregator = new AggregatorRegistry()
    const section = config[name]
    const admin = buildAdminApp({
      part: name,
      ready: () => clusterReadiness(),
      metrics: async () => ({ contentType: aggregator.contentType, body: await aggregator.clusterMetrics() })
    })
    await admin.listen({ host: section.admin_host, port: section.admin_port })
    pino(loggerOptions(config.log), logSink()).info({ part: name, admin: listenUrl(section.admin_host, admin.server, section.admin_port), workers }, 'admin listening (metrics of every worker)')
    let stopping = false
    cluster.on('exit', (worker, code) => {
      if (!stopping && code !== 0) { console.error(`worker ${worker.process.pid} exited (${code}); starting another`); cluster.fork() }
    })
    const stop = () => {
      stopping = true
      for (const w of Object.values(cluster.workers ?? {})) w?.process.kill('SIGTERM')
      void admin.close()
    }
    process.on('SIGTERM', stop)
    process.on('SIGINT', stop)
    return
  }
  const { store, tenants } = createStoreAndCache(config)
  const clustered = cluster.isWorker
  let part: RunningPart
  try {
    part = await startPart(name, { config, tenants, store }, { admin: !clustered })
  } catch (err) {
    // A part that cannot start (a config error, a busy port) must not leave the process
    // held open by its store's connection: the CLI prints the reason and exits.
    tenants.close()
    await store.close().catch(() => {})
    throw err
  }
  const ops = partOps(part.app)
  if (clustered && ops !== undefined) serveWorkerOps(ops)
  part.app.log.info({ url: part.url, ...(part.adminUrl !== '' ? { admin: part.adminUrl } : {}), part: name }, 'listening')
  installGracefulShutdown(part.app, {
    graceMs: config.gateway.shutdown_grace_ms,
    exit: (code) => {
      tenants.close()
      void store.close().catch(() => {})
      void Promise.resolve().then(() => process.exit(code))
    }
  })
}

export function registerServeCommands (program: Command, config: () => Config): void {
  program.command('serve')
    .description('run one part for production: gateway | rest | auth | panel')
    .argument('<part>', PARTS.join(' | '))
    .option('-w, --workers <n>', 'worker processes (Node cluster); "auto" = one per core', '1')
    .action(async (part: string, opts: { workers: string }) => {
      if (!(PARTS as readonly string[]).includes(part)) throw new ConfigError(`unknown part "${part}": expected one of ${PARTS.join(', ')}`)
      const workers = opts.workers === 'auto' ? os.availableParallelism() : Number(opts.workers)
      if (!Number.isInteger(workers) || workers < 1) throw new ConfigError('--workers must be a positive integer or "auto"')
      await serve(part as PartName, config(), workers)
    })
}

function mergeDeep (a: Record<string, unknown>, b: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = { ...a }
  for (const [k, v] of Object.entries(b)) {
    const prev = out[k]
    out[k] = v && typeof v === 'object' && !Array.isArray(v) && prev && typeof prev === 'object' && !Array.isArray(prev)
      ? mergeDeep(prev as Record<string, unknown>, v as Record<string, unknown>)
      : v
  }
  return out
}

/**
 * The stack's tenant files into its Redis store, merged three ways as `tenants apply` does so
 * panel changes survive a restart; a field changed both in a file and from the panel since the
 * last start takes the file's value, with a warning naming it.
 */
async function applyDevFiles (store: TenantStore, entries: LoadedTenantFile[], log: { warn (o: object, m: string): void }): Promise<void> {
  try {
    await applyTenantFiles(store, entries, { who: 'dev' })
  } catch (err) {
    if (!(err instanceof TenantApplyConflictError)) throw err
    log.warn({}, `${err.message.split('\n').slice(0, -1).join('\n')}\nThe development stack takes the files' values.`)
    await applyTenantFiles(store, entries, { who: 'dev', force: true })
  }
}

export interface DevOptions {
  /** Project root (config/tenants and .gatehouse live there). */
  root: string
  env: NodeJS.ProcessEnv
  /** Config file given with -c, if any. */
  configFile?: string
  /** Where state lives (embedded data, runtime tenant files, dev.json); default <root>/.gatehouse. */
  stateDir?: string
  /** Config values that win over file and env (tests use other ports). */
  overrides?: Record<string, unknown>
  /** Added to every port of the stack (--port-offset; else GATEHOUSE_DEV_PORT_OFFSET). */
  portOffset?: number
  /** Called once everything listens. */
  onReady?: (info: DevInfo) => void
}

export interface DevStack {
  info: DevInfo
  stop (): Promise<void>
  /** Resolves once every tenant file change seen so far is handled. */
  tenantFilesIdle (): Promise<void>
}

/** Starts the whole service on embedded defaults (what `npm start` runs). */
export async function startDev (opts: DevOptions): Promise<DevStack> {
  const { env, root } = opts
  const stateDir = opts.stateDir ?? path.join(root, '.gatehouse')
  const stops: Array<() => Promise<void>> = []
  const stopAll = async () => {
    while (stops.length) await stops.pop()!().catch(() => {})
  }
  // Before anything is started or stopped: a stack already running here keeps all it has.
  const lock = acquireDevLock(stateDir, (owner) => describeRunningStack(stateDir, owner.pid))
  stops.push(async () => { lock.release() })
  // What went wrong while the stack runs: in its log, in dev.json and so in `gatehouse status`.
  const problems: string[] = []
  let report: ((message: string) => void) | undefined
  let written: DevInfo | undefined
  const problem = (message: string): void => {
    problems.push(message)
    if (report !== undefined) report(message)
    else process.stderr.write(`gatehouse dev: ${message}\n`)
    if (written !== undefined) writeDevInfo(stateDir, { ...written, problems: [...problems] })
  }
  try {
    const offset = parsePortOffset(opts.portOffset ?? env.GATEHOUSE_DEV_PORT_OFFSET, opts.portOffset !== undefined ? '--port-offset' : undefined)
    const overrides = mergeDeep(opts.overrides ?? {},
      offsetPortOverrides(loadConfig({ file: opts.configFile, env, overrides: opts.overrides }), offset))
    const pgPort = devPgPort(env, offset)
    const postgres = env.DATABASE_URL
      ? { url: env.DATABASE_URL, pid: undefined, stop: async () => {} }
      : await startDevPostgres(stateDir, pgPort, undefined, (how) => {
        problem(`the development Postgres (127.0.0.1:${pgPort}) exited unexpectedly (${how}): requests that need a database fail ` +
          '(REST PGRST002, auth 503) until the stack starts again: stop it (Ctrl-C) and run `npm start`')
      })
    stops.push(() => postgres.stop())
    const base = loadConfig({ file: opts.configFile, env, overrides })
    const mail = await startDevMail(base.mail.smtp_port, base.mail.web_port, path.join(stateDir, 'mail'))
    stops.push(() => mail.stop())

    // The generated copies are made anew from the source files at every start (a copy
    // whose source is gone must not be served).
    const runtimeDir = path.join(stateDir, 'tenants')
    const sourceDir = path.resolve(root, base.tenants.dir)
    const engines = { rest: `http://${base.rest.host}:${base.rest.port}`, auth: `http://${base.auth.host}:${base.auth.port}` }
    rmSync(runtimeDir, { recursive: true, force: true })
    const raws = writeRuntimeTenantFiles(sourceDir, runtimeDir, postgres.url, engines)
    const files: TenantFile[] = raws.map((raw) => parseTenantFile(raw, `config/tenants/${String(raw.database)}.yaml`, env))
    await ensureClusterRoles(postgres.url)
    for (const file of files) await ensureTenant({ adminUrl: postgres.url, file })

    const secrets = devSecrets(stateDir)
    const useRedis = Boolean(env.REDIS_URL ?? env.GATEHOUSE_REDIS_URL)
    const config = loadConfig({
      file: opts.configFile,
      env,
      overrides: mergeDeep(overrides, {
        tenants: { source: useRedis ? 'redis' : 'files', dir: runtimeDir, state_dir: stateDir },
        postgres: { url: postgres.url },
        // The gateway of this stack is the public address unless one was configured.
        ...(env.GATEHOUSE_PUBLIC_URL || opts.overrides?.public_url ? {} : { public_url: `http://${base.gateway.host}:${base.gateway.port}` }),
        panel: { session_secret: secrets.panel_session_secret },
        // The development stack's identity providers run on this machine, over http.
        outbound: { allow_hosts: [...new Set([...base.outbound.allow_hosts, '127.0.0.1', 'localhost', '::1'])] }
      })
    })
    // A panel or CLI change is written into the tenant file a developer keeps (config/tenants),
    // and its generated copy made again; the watcher skips what the store itself wrote.
    // Every text the store wrote lately (not only the last one): the watcher may read the
    // file between two of a burst of panel writes, and an older text of ours is no edit.
    const ownWrites = new Map<string, string[]>()
    // The text of each file the store's record was last made from (read at start or by the
    // watcher): a write over any other text merged a person's edit, which must be loaded.
    const loaded = new Map<string, string>()
    for (const f of tenantSourceFiles(sourceDir)) { try { loaded.set(f, readFileSync(f, 'utf8')) } catch { /* read when it changes */ } }
    const sourceOf = (database: string): string | null => {
      for (const ext of ['.yaml', '.yml']) { const f = path.join(sourceDir, database + ext); if (existsSync(f)) return f }
      return null
    }
    const { store, tenants } = createStoreAndCache(config, {
      fileOf: sourceOf,
      onFileWritten: (file, text, previous) => {
        writeRuntimeTenantFile(runtimeDir, runtimeTenantRecord(file, postgres.url, engines))
        const texts = ownWrites.get(file) ?? []
        // Written over an edit nobody loaded yet: the watcher loads the result (both changes).
        if (previous !== loaded.get(file) && !texts.includes(previous)) return
        texts.push(text)
        if (texts.length > 256) texts.shift()
        ownWrites.set(file, texts)
      }
    })
    stops.push(async () => { tenants.close(); await store.close() })
    const devLog = partLogger(config, 'dev')
    if (useRedis) await applyDevFiles(store, files.map((file) => ({ path: sourceOf(file.database) ?? file.database, file })), devLog)

    const deps = { config, tenants, store }
    const running: RunningPart[] = []
    for (const name of PARTS) {
      try {
        const part = await startPart(name, deps)
        running.push(part)
        stops.push(() => part.app.close())
      } catch (err) {
        if (err instanceof ConfigError && /not available/.test(err.message)) continue
        throw err
      }
    }
    // Tenant files created or edited from now on are picked up while the stack runs.
    report = (message) => { devLog.error(message) }
    const watcher = watchTenantFiles({
      isOwnWrite: (file, text) => {
        if (ownWrites.get(file)?.includes(text) === true) return true
        loaded.set(file, text)
        return false
      },
      apply: (entries) => applyDevFiles(store, entries, devLog),
      sourceDir,
      runtimeDir,
      adminUrl: postgres.url,
      engines,
      store,
      env,
      report: (level, message, fields) => { devLog[level](fields, message) }
    })
    stops.push(async () => { watcher.close() })
    const urlOf = (n: PartName) => running.find((p) => p.name === n)?.url ?? ''
    const panelSession = await signHS256(
      { email: 'developer@gatehouse.local', orgs: ['org_demo'] },
      { secret: secrets.panel_session_secret, subject: 'panel-user-dev', expiresInSeconds: 30 * 24 * 3600 })
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
      tenants_source: useRedis ? 'redis' : 'files',
      tenants_dir: runtimeDir,
      tenants_source_dir: sourceDir,
      admin_urls: Object.fromEntries(running.map((p) => [p.name, p.adminUrl])),
      databases: files.map((f) => ({
        database: f.database,
        organization: f.organization,
        url: `${gatewayUrl}/${f.database}`,
        public_key: f.keys.public,
        secret_key: f.keys.secret,
        owner_url: f.postgres
      }))
    }
    if (problems.length > 0) info.problems = [...problems]
    writeDevInfo(stateDir, info)
    written = info
    opts.onReady?.(info)
    return { info, stop: stopAll, tenantFilesIdle: () => watcher.idle() }
  } catch (err) {
    await stopAll()
    throw err
  }
}

/** What a second start says of the stack running in `stateDir` (its URLs once it is up). */
function describeRunningStack (stateDir: string, pid: number): string {
  let info: DevInfo | null = null
  try { info = readDevInfo(stateDir) } catch {}
  if (info === null || info.pid !== pid) return ', still starting'
  return `: gateway ${info.gateway_url}, panel API ${info.panel_url}, mail UI ${info.mail_url}`
}

export function registerDevCommands (program: Command): void {
  program.command('dev')
    .description('run the whole service on embedded defaults (npm start): Postgres, tenants, engines, gateway, panel, mail catcher')
    .option('--port-offset <n>', 'add n to every port of the stack (a second checkout\'s stack beside the first); also GATEHOUSE_DEV_PORT_OFFSET')
    .option('--reset', 'remove this checkout\'s development state (.gatehouse/: the cluster wherever it lives, keys, mails) and exit')
    .addHelpText('after', devEnvironmentHelp())
    .action(async (o: { portOffset?: string, reset?: boolean }) => {
      const stateDir = path.join(process.cwd(), '.gatehouse')
      if (o.reset === true) {
        const removed = await resetDevState(stateDir, (pid) => describeRunningStack(stateDir, pid))
        process.stdout.write(`removed ${removed.join(', ')}\nThe next \`npm start\` makes a fresh cluster, new keys and a new panel session.\n`)
        return
      }
      const configFile = program.opts().config as string | undefined
      const portOffset = o.portOffset === undefined ? undefined : parsePortOffset(o.portOffset, '--port-offset')
      const stack = await startDev({ root: process.cwd(), env: process.env, configFile, portOffset, onReady: (info) => process.stdout.write(renderDevInfo(info)) })
      let stopping = false
      const stop = (): void => {
        if (stopping) return
        stopping = true
        process.stdout.write('\nstopping...\n')
        void stack.stop().then(() => process.exit(0))
      }
      process.on('SIGINT', stop)
      process.on('SIGTERM', stop)
      process.on('SIGHUP', stop)
      // A failure nobody caught: the cluster and the mail catcher this process started go too.
      process.on('uncaughtException', (err) => {
        process.stderr.write(`gatehouse dev: unexpected failure: ${err.message}\n`)
        if (stopping) return
        stopping = true
        void stack.stop().finally(() => process.exit(1))
      })
    })
  program.command('status')
    .description('print the development stack\'s URLs and keys (.gatehouse/dev.json)')
    .option('--json', 'print JSON')
    .addHelpText('after', '\nExit status: 0 running, 3 not running (dev.json of its last start printed), 4 running with a problem (its Postgres gone, say).')
    .action(async (o: { json?: boolean }) => {
      const info = readDevInfo(path.join(process.cwd(), '.gatehouse'))
      if (!info) throw new ConfigError('no development stack has run here: start one with `npm start`')
      // dev.json stays after a stop: tell a stack that runs from one that did.
      const running = runningDevInfo(process.cwd()) !== null
      if (running && !(info.problems?.length)) {
        // A Postgres the stack did not notice going (DATABASE_URL's, say).
        try { await pingPostgres(info.postgres_admin_url) } catch (err) {
          info.problems = [`${(err as Error).message}: requests that need a database fail`]
        }
      }
      process.stdout.write(o.json ? JSON.stringify(info, null, 2) + '\n' : renderDevInfo(info, { running }))
      if (!running) {
        if (o.json) process.stderr.write('gatehouse: the development stack is not running (npm start starts it)\n')
        process.exitCode = 3
      } else if (info.problems?.length) {
        if (o.json) process.stderr.write(`gatehouse: the development stack runs with a problem: ${info.problems.join('; ')}\n`)
        process.exitCode = 4
      }
    })
}

// `gatehouse serve gateway|rest|auth|panel` for production: one part built and listening.
// The development stack (src/dev, what `npm start` runs) starts its parts with startPart too.
// With cli.ts and src/dev the only modules that listen or read the environment.
import cluster, { type Worker } from 'node:cluster'
import os from 'node:os'
import type { Command } from 'commander'
import type { FastifyInstance, FastifyListenOptions } from 'fastify'
import type { Config } from './config/index.js'
import {
  createTenantStore,
  createTenantCache,
  tenantCacheOptions,
  type TenantStore,
  type TenantCache,
  type TenantStoreDeps,
} from './tenants/index.js'
import { buildGateway, installGracefulShutdown, createRefusalRewriter } from './gateway/index.js'
import { buildAuthEngine } from './auth/index.js'
import { buildRestEngine } from './rest/index.js'
import { buildPanel } from './panel/index.js'
import {
  ConfigError,
  createLogger,
  bufferedStdout,
  type BatchedDestination,
  startPartTracing,
  packageVersion,
  buildAdminApp,
  buildPartAdmin,
  partOps,
  readiness,
  registerPoolMetrics,
  sidePoolTenant,
  type PartTracer,
  type PartOps,
  type Readiness,
  type ReadinessCheck,
} from './shared/index.js'
import net, { type AddressInfo } from 'node:net'
import { pingPostgres } from './platform/index.js'
import { AggregatorRegistry, collectDefaultMetrics, type Registry } from 'prom-client'

export const PARTS = ['gateway', 'rest', 'auth', 'panel'] as const
export type PartName = (typeof PARTS)[number]

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
function logSink(): BatchedDestination {
  stdoutSink ??= bufferedStdout()
  return stdoutSink
}

/**
 * Exits once the log batch in flight reached stdout, so the exit flush writes no line twice
 * (bounded: a sink that takes nothing does not hold the exit).
 */
function exitAfterLogs(code: number): void {
  void logSink()
    .settled(250)
    .then(() => process.exit(code))
}

/** A part's logger: every line it writes carries `part` (gateway, rest, auth, panel, ...). */
export function partLogger(config: Config, part: string): ReturnType<typeof createLogger> {
  return createLogger(config.log, logSink()).child({ part })
}

/** Builds one part (unstarted) with its dependencies. */
async function buildPart(name: PartName, deps: PartDeps, tracer?: PartTracer): Promise<FastifyInstance> {
  const { config, tenants } = deps
  switch (name) {
    case 'gateway': {
      const logger = partLogger(config, 'gateway')
      const rewriteError = createRefusalRewriter({ logger })
      const app = buildGateway({ config, tenants, logger, rewriteError, tracer })
      app.addHook('onClose', async () => {
        await rewriteError.close()
      })
      // The refusal rewriter's catalog pools (keys are JSON [database, url]).
      const ops = partOps(app)
      if (ops !== undefined) {
        registerPoolMetrics(ops.registry, {
          part: 'gateway-catalog',
          snapshot: () => rewriteError.poolSnapshot(),
          tenantOf: sidePoolTenant,
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

/** What every part needs for any request: the tenant store (Redis when used) and Postgres. */
function dependencyChecks(deps: PartDeps): ReadinessCheck[] {
  const checks: ReadinessCheck[] = []
  if (deps.store.kind === 'redis') checks.push({ name: 'redis', check: () => deps.store.ping() })
  const url = deps.config.postgres.url
  if (url !== undefined && url !== '') checks.push({ name: 'postgres', check: () => pingPostgres(url) })
  return checks
}

/** Process metrics (CPU, memory, event loop, GC) in `registry`, once. */
function collectProcessMetrics(registry: Registry): void {
  if (registry.getSingleMetric('process_cpu_user_seconds_total') === undefined)
    collectDefaultMetrics({ register: registry })
}

function listenUrl(host: string, server: { address(): unknown }, fallback: number): string {
  const addr = server.address()
  const port = typeof addr === 'object' && addr !== null ? (addr as { port: number }).port : fallback
  return `http://${host.includes(':') ? `[${host}]` : host}:${port}`
}

/** A busy port named with its config key and variable; other errors as they are. */
function busyPort(err: unknown, name: PartName, key: 'port' | 'admin_port', port: number): unknown {
  if ((err as NodeJS.ErrnoException).code !== 'EADDRINUSE') return err
  const env = `GATEHOUSE_${name.toUpperCase()}_${key.toUpperCase()}`
  return new ConfigError(
    `port ${port} (${name}.${key}, ${env}) is in use by another process: ` +
      `stop it, or give the ${name} a free port (${env}=<port> or ${name}.${key} in the config file)`,
  )
}

export interface StartPartOptions {
  /** Start the admin listener (default true; cluster workers leave it to the primary). */
  admin?: boolean
  /**
   * Sockets already bound for the part (bindPartListeners): it takes them over instead of
   * binding its configured ports, and closes them if it cannot start. The development stack
   * binds every listener first, so a port of 0 is known before the parts are built.
   */
  listeners?: PartListeners
  /** Listen with SO_REUSEPORT (Linux): processes of the part replaced one by one share the ports. */
  reusePort?: boolean
}

/** A part's public and admin sockets, bound and listening before the part exists. */
export interface PartListeners {
  public: net.Server
  admin: net.Server
}

/** Binds `host:port` (0: a port the kernel picks); a connection before a part takes it over is closed. */
function bindPort(name: PartName, key: 'port' | 'admin_port', host: string, port: number): Promise<net.Server> {
  return new Promise((resolve, reject) => {
    const server = net.createServer((socket) => {
      socket.destroy()
    })
    server.once('error', (err) => {
      reject(busyPort(err, name, key, port))
    })
    server.listen(port, host, () => {
      server.removeAllListeners('error')
      resolve(server)
    })
  })
}

/** Binds a part's public and admin ports of `config` (each may be 0); see StartPartOptions.listeners. */
export async function bindPartListeners(config: Config, name: PartName): Promise<PartListeners> {
  const section = config[name]
  const pub = await bindPort(name, 'port', section.host, section.port)
  try {
    return { public: pub, admin: await bindPort(name, 'admin_port', section.admin_host, section.admin_port) }
  } catch (err) {
    pub.close()
    throw err
  }
}

/** The port a bound socket got (the kernel's choice for 0). */
export function boundPort(server: net.Server): number {
  return (server.address() as AddressInfo).port
}

/**
 * `app` listens on `host:port`, or takes over `bound`'s socket: Node's server.listen(handle)
 * accepts an object with the `_handle` of a listening server
 * (https://nodejs.org/api/net.html#serverlistenhandle-backlog-callback).
 */
function listenOn(
  app: FastifyInstance,
  host: string,
  port: number,
  bound: net.Server | undefined,
  reusePort = false,
): Promise<string> {
  if (bound === undefined)
    return app.listen({ host, port, ...(reusePort ? { reusePort } : {}) } as FastifyListenOptions)
  const address = (bound.address() as AddressInfo).address
  // eslint-disable-next-line no-restricted-syntax -- Node documents listen() with a server's _handle (above)
  const handle = (bound as unknown as { _handle: unknown })._handle
  return app.listen({ host: address, _handle: handle } as FastifyListenOptions)
}

/** Tracing (its packages loaded only then) when an OTLP endpoint is configured. */
async function partTracer(name: PartName, config: Config): Promise<PartTracer | undefined> {
  const { otlp_endpoint: endpoint, service_name: serviceName, resource_attributes: resourceAttributes } = config.tracing
  if (endpoint === undefined) return undefined
  return startPartTracing({ endpoint, part: name, serviceName, resourceAttributes, version: packageVersion() })
}

/** Builds the part with its tracer; the spans still buffered are exported when it closes. */
async function buildTracedPart(name: PartName, deps: PartDeps): Promise<FastifyInstance> {
  const tracer = await partTracer(name, deps.config)
  let app: FastifyInstance
  try {
    app = await buildPart(name, deps, tracer)
  } catch (err) {
    await tracer?.shutdown().catch(() => {})
    throw err
  }
  if (tracer !== undefined)
    app.addHook('onClose', async () => {
      await tracer.shutdown().catch(() => {})
    })
  return app
}

/** Builds and listens (the public port, then the admin port); returns the part and its URLs. */
export async function startPart(name: PartName, deps: PartDeps, opts: StartPartOptions = {}): Promise<RunningPart> {
  const bound = opts.listeners
  let app: FastifyInstance
  try {
    app = await buildTracedPart(name, deps)
  } catch (err) {
    bound?.public.close()
    bound?.admin.close()
    throw err
  }
  const ops = partOps(app)
  if (ops !== undefined) {
    ops.checks.push(...dependencyChecks(deps))
    collectProcessMetrics(ops.registry)
  }
  const admin = opts.admin !== false && ops !== undefined ? buildPartAdmin(app) : null
  if (admin !== null)
    app.addHook('onClose', async () => {
      await admin.close()
    })
  else bound?.admin.close()
  const section = deps.config[name]
  try {
    await listenOn(app, section.host, section.port, bound?.public, opts.reusePort)
  } catch (err) {
    if (admin !== null) bound?.admin.close()
    await app.close().catch(() => {})
    throw busyPort(err, name, 'port', section.port)
  }
  let adminUrl = ''
  if (admin !== null) {
    try {
      await listenOn(admin, section.admin_host, section.admin_port, bound?.admin, opts.reusePort)
    } catch (err) {
      bound?.admin.close()
      await app.close().catch(() => {})
      throw busyPort(err, name, 'admin_port', section.admin_port)
    }
    adminUrl = listenUrl(section.admin_host, admin.server, section.admin_port)
  }
  return { name, app, url: listenUrl(section.host, app.server, section.port), adminUrl }
}

const READYZ_REQ = 'gatehouse:readyz'
const READYZ_RES = 'gatehouse:readyz:res'

/**
 * Readiness of every worker (primary of `--workers`): ready when each live worker is. Each
 * worker leaves out the checks named in `exclude` (the query of the primary's /readyz).
 */
function clusterReadiness(exclude: readonly string[], timeoutMs = 3_000): Promise<Readiness> {
  const workers = Object.values(cluster.workers ?? {}).filter((w) => w !== undefined && w.isConnected())
  if (workers.length === 0)
    return Promise.resolve({ ready: false, checks: [{ name: 'workers', ok: false, error: 'no worker is running' }] })
  const id = Math.random().toString(36).slice(2)
  return new Promise((resolve) => {
    const answers = new Map<number, Readiness>()
    const finish = (): void => {
      clearTimeout(timer)
      cluster.off('message', onMessage)
      const checks = workers.flatMap((w) => {
        const r = answers.get(w!.id)
        if (r === undefined)
          return [{ name: `worker ${w!.process.pid}`, ok: false, error: `no answer within ${timeoutMs} ms` }]
        if (r.stopping === true) return [{ name: `worker ${w!.process.pid}`, ok: false, error: 'shutting down' }]
        return [
          { name: `worker ${w!.process.pid}`, ok: true },
          ...r.checks.map((c) => ({ ...c, name: `worker ${w!.process.pid}: ${c.name}` })),
        ]
      })
      const excluded = new Set([...answers.values()].flatMap((r) => r.excluded ?? []))
      resolve({ ready: checks.every((c) => c.ok), checks, excluded: [...excluded] })
    }
    const onMessage = (worker: { id: number }, msg: { type?: string; id?: string; readiness?: Readiness }): void => {
      if (msg?.type !== READYZ_RES || msg.id !== id || msg.readiness === undefined) return
      answers.set(worker.id, msg.readiness)
      if (answers.size === workers.length) finish()
    }
    const timer = setTimeout(finish, timeoutMs)
    cluster.on('message', onMessage)
    for (const w of workers) w!.send({ type: READYZ_REQ, id, exclude })
  })
}

/** A worker of `--workers`: answers the primary's metrics and readiness requests. */
function serveWorkerOps(ops: PartOps): void {
  // Constructing it installs prom-client's worker-side listener.
  void new AggregatorRegistry()
  AggregatorRegistry.setRegistries([ops.registry])
  process.on('message', (msg: { type?: string; id?: string; exclude?: unknown }) => {
    if (msg?.type !== READYZ_REQ) return
    const exclude = Array.isArray(msg.exclude) ? msg.exclude.filter((n): n is string => typeof n === 'string') : []
    void readiness(ops, exclude).then((r) => process.send?.({ type: READYZ_RES, id: msg.id, readiness: r }))
  })
}

export function createStoreAndCache(
  config: Config,
  deps: TenantStoreDeps = {},
): { store: TenantStore; tenants: TenantCache } {
  // Outages and a store that lost its data are logged (once per episode) by the store and cache.
  const logger = partLogger(config, 'tenants')
  const store = createTenantStore(config, { logger, ...deps })
  const tenants = createTenantCache(store, { ...tenantCacheOptions(config.tenants), logger })
  return { store, tenants }
}

/** The message a primary sends a worker it retires on a reload: drain, then exit. */
const RETIRE = 'gatehouse:retire'
/**
 * How long a retired worker keeps answering (each response closing its connection) before it
 * stops accepting: kept-alive clients move to the new workers on their next request.
 */
const RELOAD_DRAIN_MS = 1_000

/** How long a new worker of a reload may take to listen before the reload is given up. */
const RELOAD_START_MS = 60_000
/** What a retired worker may take to drain beyond RELOAD_DRAIN_MS and the grace period (its close hooks, exit). */
const RELOAD_EXIT_MARGIN_MS = 5_000

/** `promise`, or null when `ms` passed first. */
function within<T>(promise: Promise<T>, ms: number): Promise<T | null> {
  let timer: NodeJS.Timeout | undefined
  const late = new Promise<null>((resolve) => (timer = setTimeout(() => resolve(null), ms)))
  return Promise.race([promise, late]).finally(() => clearTimeout(timer))
}

/** Resolves once `worker` listens; rejects when it exits first, or does not listen within RELOAD_START_MS. */
async function listening(worker: Worker): Promise<void> {
  const listened = new Promise<true>((resolve, reject) => {
    const onExit = (code: number): void => reject(new Error(`the new worker exited (code ${code}) before listening`))
    worker.once('listening', () => {
      worker.off('exit', onExit)
      resolve(true)
    })
    worker.once('exit', onExit)
  })
  if ((await within(listened, RELOAD_START_MS)) === null) {
    worker.process.kill('SIGKILL')
    throw new Error(`the new worker did not listen within ${RELOAD_START_MS} ms`)
  }
}

/** Resolves once `worker` exited (at once when it is gone already). */
function exited(worker: Worker): Promise<void> {
  return new Promise((resolve) => {
    if (worker.isDead()) resolve()
    else worker.once('exit', () => resolve())
  })
}

interface Reload {
  log: ReturnType<typeof partLogger>
  /** Workers retired on purpose (their exit starts no other). */
  retired: Set<number>
  /** The primary stops (SIGTERM): no worker is started any more. */
  stopping: () => boolean
  /** How long a retired worker may take to exit before it is killed. */
  exitMs: number
}

/**
 * nginx's reload for `--workers`: each worker in turn is replaced by a new one that listens
 * first, then the old one drains (its in-flight requests answered, kept-alive clients told to
 * reconnect) and exits. A new worker that cannot start (or does not listen in time) ends the
 * reload; the old ones stay. Every step is bounded: a retired worker that has not exited in time
 * (it never got the message, or its drain hangs) is killed, one already gone is not waited for,
 * and a reload stops when the primary does.
 */
async function replaceWorkers({ log, retired, stopping, exitMs }: Reload): Promise<void> {
  const old = Object.values(cluster.workers ?? {}).filter((w): w is Worker => w !== undefined && w.isConnected())
  log.info({ workers: old.map((w) => w.process.pid) }, 'SIGHUP: replacing the workers one by one')
  for (const w of old) {
    if (stopping()) throw new Error('the primary is stopping')
    if (w.isDead()) continue
    const fresh = cluster.fork()
    await listening(fresh)
    if (stopping()) throw new Error('the primary is stopping')
    const gone = exited(w)
    retired.add(w.id)
    if (w.isConnected()) w.send({ type: RETIRE })
    if ((await within(gone, exitMs)) === null) {
      log.warn({ pid: w.process.pid, ms: exitMs }, 'the retired worker did not exit in time: killing it')
      w.process.kill('SIGKILL')
      await gone
    }
    log.info({ old: w.process.pid, new: fresh.process.pid }, 'worker replaced')
  }
  log.info({ workers: Object.values(cluster.workers ?? {}).map((w) => w?.process.pid) }, 'reload done')
}

/** The primary of `--workers N`: forks, serves the admin port, restarts crashed workers, reloads on SIGHUP. */
async function runPrimary(name: PartName, config: Config, workers: number): Promise<void> {
  for (let i = 0; i < workers; i++) cluster.fork()
  // The admin port is the primary's: metrics merged from every worker, readiness of all.
  const aggregator = new AggregatorRegistry()
  const section = config[name]
  const admin = buildAdminApp({
    part: name,
    ready: (exclude) => clusterReadiness(exclude),
    metrics: async () => ({ contentType: aggregator.contentType, body: await aggregator.clusterMetrics() }),
  })
  await admin.listen({ host: section.admin_host, port: section.admin_port })
  const log = partLogger(config, name)
  log.info(
    { admin: listenUrl(section.admin_host, admin.server, section.admin_port), workers },
    'admin listening (metrics of every worker)',
  )
  let stopping = false
  const retired = new Set<number>()
  cluster.on('exit', (worker, code) => {
    if (!stopping && !retired.delete(worker.id) && code !== 0) {
      log.error({ pid: worker.process.pid, code }, 'worker exited; starting another')
      cluster.fork()
    }
  })
  let reloading: Promise<void> | null = null
  process.on('SIGHUP', () => {
    if (stopping || reloading !== null) return
    const exitMs = RELOAD_DRAIN_MS + config.gateway.shutdown_grace_ms + RELOAD_EXIT_MARGIN_MS
    reloading = replaceWorkers({ log, retired, stopping: () => stopping, exitMs })
      .catch((err: unknown) => log.error({ err }, 'reload stopped: the old workers keep serving'))
      .finally(() => {
        reloading = null
      })
  })
  const stop = () => {
    stopping = true
    for (const w of Object.values(cluster.workers ?? {})) w?.process.kill('SIGTERM')
    void admin.close()
  }
  process.on('SIGTERM', stop)
  process.on('SIGINT', stop)
}

interface ServeOptions {
  workers: number
  /** Listen with SO_REUSEPORT: several processes of the part share the port. */
  reusePort: boolean
}

/** Under `--workers N` the engines' cluster-sized pool budgets (pool_budget 0) are split among the workers. */
function workerShare(config: Config, workers: number): Config {
  return {
    ...config,
    rest: { ...config.rest, pool_cluster_share: config.rest.pool_cluster_share / workers },
    auth: { ...config.auth, pool_cluster_share: config.auth.pool_cluster_share / workers },
  }
}

async function serve(name: PartName, whole: Config, opts: ServeOptions): Promise<void> {
  if (opts.workers > 1 && cluster.isPrimary) return runPrimary(name, whole, opts.workers)
  const clustered = cluster.isWorker
  const config = clustered ? workerShare(whole, opts.workers) : whole
  const { store, tenants } = createStoreAndCache(config)
  let part: RunningPart
  try {
    part = await startPart(name, { config, tenants, store }, { admin: !clustered, reusePort: opts.reusePort })
  } catch (err) {
    // A part that cannot start (a config error, a busy port) must not leave the process
    // held open by its store's connection: the CLI prints the reason and exits.
    tenants.close()
    await store.close().catch(() => {})
    throw err
  }
  const ops = partOps(part.app)
  if (clustered && ops !== undefined) serveWorkerOps(ops)
  part.app.log.info(
    { url: part.url, ...(part.adminUrl !== '' ? { admin: part.adminUrl } : {}), part: name },
    'listening',
  )
  const shutdown = installGracefulShutdown(part.app, {
    graceMs: config.gateway.shutdown_grace_ms,
    // Sharing the port with other processes: kept-alive clients move to them before this one
    // stops accepting, as a retired worker's do.
    ...(opts.reusePort ? { drainDelayMs: RELOAD_DRAIN_MS } : {}),
    exit: (code) => {
      tenants.close()
      void store.close().catch(() => {})
      exitAfterLogs(code)
    },
  })
  if (clustered)
    process.on('message', (msg: { type?: string }) => {
      if (msg?.type === RETIRE) void shutdown.shutdown('reload', RELOAD_DRAIN_MS)
    })
  else
    process.on('SIGHUP', () => {
      part.app.log.warn(
        {},
        'SIGHUP: one process has no workers to replace (run with --workers 2 or more, or --reuse-port)',
      )
    })
}

export function registerServeCommands(program: Command, config: () => Config): void {
  program
    .command('serve')
    .description('run one part for production: gateway | rest | auth | panel')
    .argument('<part>', PARTS.join(' | '))
    .option('-w, --workers <n>', 'worker processes (Node cluster); "auto" = one per core; SIGHUP replaces them', '1')
    .option('--reuse-port', 'listen with SO_REUSEPORT, so that several processes of the part share its ports')
    .action(async (part: string, opts: { workers: string; reusePort?: boolean }) => {
      if (!(PARTS as readonly string[]).includes(part))
        throw new ConfigError(`unknown part "${part}": expected one of ${PARTS.join(', ')}`)
      const workers = opts.workers === 'auto' ? os.availableParallelism() : Number(opts.workers)
      if (!Number.isInteger(workers) || workers < 1)
        throw new ConfigError('--workers must be a positive integer or "auto"')
      await serve(part as PartName, config(), { workers, reusePort: opts.reusePort === true })
    })
}

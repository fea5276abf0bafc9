// The operator's side of a part, served on its admin listener (never on the public port):
// `/healthz` (the process is alive), `/readyz` (every dependency the part needs for any
// request answers: 503 naming the failing one otherwise, and 503 while the part drains;
// `?exclude=<check>` and `?verbose` as kube-apiserver's, see readyz.ts),
// `/metrics` (Prometheus text: the part's registry, or every worker's merged under
// `--workers`). A part registers what it has with instrumentPart(); serve.ts adds the
// process-level checks (tenant store, Postgres) and listens.
import Fastify, { type FastifyInstance, type FastifyRequest } from 'fastify'
import { Counter, Gauge, Histogram, Registry } from 'prom-client'
import { packageVersion } from './version.js'
import { registerPoolMetrics, type PoolMetricsSource } from './pool-metrics.js'
import { readyzQuery, sendReadyz, type CheckResult, type Readiness } from './readyz.js'

export type { Readiness } from './readyz.js'

/** A dependency of the part: check() rejects (with the reason) when it does not answer. */
export interface ReadinessCheck {
  name: string
  check(): Promise<void>
}

export interface PartOps {
  part: string
  registry: Registry
  checks: ReadinessCheck[]
  /** True once the part drains or closes: readiness fails first. */
  stopping(): boolean
}

export interface InstrumentOptions {
  part: string
  /** Where the part's metrics go (default a new registry). */
  registry?: Registry
  /**
   * Request count and latency per tenant: the tenant label of a finished request (a known
   * database, or `_unknown`). Parts with their own request metrics (the gateway) omit it.
   */
  tenantOf?: (request: FastifyRequest) => string | Promise<string>
  /** Label the request metrics with the tenant (metrics.tenant_label; default true). */
  tenantLabel?: boolean
  /** The part's per-tenant pools, reported as gatehouse_pool_* gauges. */
  pools?: Array<Omit<PoolMetricsSource, 'part'> & { part?: string }>
  checks?: ReadinessCheck[]
  /** Extra stop signal (the gateway's drain flag); closing the app always counts. */
  stopping?: () => boolean
}

/** The tenant label of a request whose database no tenant has (labels stay bounded by the known tenants). */
export const UNKNOWN_TENANT_LABEL = '_unknown'
const CHECK_TIMEOUT_MS = 2_000
const BUCKETS = [0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30]

const opsByApp = new WeakMap<FastifyInstance, PartOps>()

/** The ops handle of a part built with instrumentPart (undefined for others). */
export function partOps(app: FastifyInstance): PartOps | undefined {
  return opsByApp.get(app)
}

/** Registers the part's metrics, pools and readiness checks on `app`. */
export function instrumentPart(app: FastifyInstance, opts: InstrumentOptions): PartOps {
  const registry = opts.registry ?? new Registry()
  let closing = false
  app.addHook('preClose', (done) => {
    closing = true
    done()
  })
  const extra = opts.stopping
  const ops: PartOps = {
    part: opts.part,
    registry,
    checks: [...(opts.checks ?? [])],
    stopping: () => closing || (extra !== undefined && extra()),
  }
  opsByApp.set(app, ops)

  for (const p of opts.pools ?? []) registerPoolMetrics(registry, { ...p, part: p.part ?? opts.part })

  registerBuildInfo(registry, opts.part)
  const tenantOf = opts.tenantOf
  if (tenantOf !== undefined) countRequests(app, registry, opts.part, opts.tenantLabel === false ? undefined : tenantOf)
  return ops
}

/**
 * gatehouse_requests_total{part,tenant,status} (the request counter of every part; the gateway
 * renders the same name from its own series) and gatehouse_request_duration_seconds{part,tenant};
 * without `tenantOf` (metrics.tenant_label off) the series have no tenant label.
 */
function countRequests(
  app: FastifyInstance,
  registry: Registry,
  part: string,
  tenantOf: ((request: FastifyRequest) => string | Promise<string>) | undefined,
): void {
  const withTenant = tenantOf !== undefined
  const counter =
    (registry.getSingleMetric('gatehouse_requests_total') as Counter<'part' | 'tenant' | 'status'> | undefined) ??
    new Counter({
      name: 'gatehouse_requests_total',
      help: 'Requests answered, by part (gateway, rest, auth, panel), tenant database and status code',
      labelNames: withTenant ? ['part', 'tenant', 'status'] : ['part', 'status'],
      registers: [registry],
    })
  const latency =
    (registry.getSingleMetric('gatehouse_request_duration_seconds') as Histogram<'part' | 'tenant'> | undefined) ??
    new Histogram({
      name: 'gatehouse_request_duration_seconds',
      help: `Time from request to the end of the response in a part (rest, auth, panel)${withTenant ? ', by tenant database' : ''}`,
      labelNames: withTenant ? ['part', 'tenant'] : ['part'],
      buckets: BUCKETS,
      registers: [registry],
    })
  app.addHook('onResponse', (request, reply, done) => {
    const seconds = reply.elapsedTime / 1000
    if (tenantOf === undefined) {
      counter.inc({ part, status: reply.statusCode })
      latency.observe({ part }, seconds)
      done()
      return
    }
    const count = (tenant: string): void => {
      counter.inc({ part, tenant, status: reply.statusCode })
      latency.observe({ part, tenant }, seconds)
    }
    let tenant: string | Promise<string>
    try {
      tenant = tenantOf(request)
    } catch {
      tenant = UNKNOWN_TENANT_LABEL
    }
    // A label known at once (the part resolved the tenant for the request) costs no promise.
    if (typeof tenant === 'string') {
      count(tenant)
      done()
      return
    }
    tenant.then(count, () => count(UNKNOWN_TENANT_LABEL)).finally(() => done())
  })
}

/**
 * gatehouse_build_info{part,version,node_version} 1 (once per registry): what runs, for
 * dashboards and alerts across a fleet. Its value is taken from one worker under `--workers`.
 */
function registerBuildInfo(registry: Registry, part: string): void {
  if (registry.getSingleMetric('gatehouse_build_info') !== undefined) return
  const g = new Gauge({
    name: 'gatehouse_build_info',
    help: 'The running build: part, Gatehouse version and Node.js version (value 1)',
    labelNames: ['part', 'version', 'node_version'],
    aggregator: 'first',
    registers: [registry],
  })
  g.set({ part, version: packageVersion(), node_version: process.versions.node }, 1)
}

/**
 * The tenant label of a request whose route names the database in `param`: the name when
 * the tenant look-up knows it, else `_unknown` (labels stay bounded by the known tenants).
 */
export function tenantLabel(
  lookup: { get(database: string): Promise<unknown> },
  param = 'database',
): (request: FastifyRequest) => Promise<string> {
  return async (request) => {
    const params = request.params as Record<string, unknown> | undefined
    const db = params !== undefined && Object.hasOwn(params, param) ? params[param] : undefined
    if (typeof db !== 'string' || db === '' || db.length > 63) return UNKNOWN_TENANT_LABEL
    return (await lookup.get(db)) ? db : UNKNOWN_TENANT_LABEL
  }
}

/** `p`, or a rejection with `message` when it has not settled after `ms`. */
export function withTimeout<T>(p: Promise<T>, ms: number, message = `no answer within ${ms} ms`): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  return Promise.race([
    p,
    new Promise<never>((_resolve, reject) => {
      timer = setTimeout(() => reject(new Error(message)), ms)
    }),
  ]).finally(() => clearTimeout(timer))
}

/**
 * Runs every check of the part at once (each with a time limit), but those named in
 * `exclude`. A part that is stopping is not ready, whatever is excluded.
 */
export async function readiness(
  ops: Pick<PartOps, 'checks' | 'stopping'>,
  exclude: readonly string[] = [],
  timeoutMs = CHECK_TIMEOUT_MS,
): Promise<Readiness> {
  const left = new Set(exclude)
  const run = ops.checks.filter((c) => !left.has(c.name))
  const excluded = ops.checks.filter((c) => left.has(c.name)).map((c) => c.name)
  if (ops.stopping()) return { ready: false, stopping: true, checks: [], excluded }
  const checks = await Promise.all(
    run.map(async (c): Promise<CheckResult> => {
      try {
        await withTimeout(
          Promise.resolve().then(() => c.check()),
          timeoutMs,
        )
        return { name: c.name, ok: true }
      } catch (err) {
        return { name: c.name, ok: false, error: err instanceof Error ? err.message : String(err) }
      }
    }),
  )
  return { ready: checks.every((c) => c.ok), checks, excluded }
}

export interface AdminAppOptions {
  part: string
  /** Readiness of the part, leaving out the checks named in `exclude`. */
  ready(exclude: readonly string[]): Promise<Readiness>
  metrics(): Promise<{ contentType: string; body: string }>
}

/** The admin app of a part built with instrumentPart (this process's metrics and checks). */
export function buildPartAdmin(app: FastifyInstance): FastifyInstance {
  const ops = partOps(app)
  if (ops === undefined) throw new TypeError('not an instrumented part')
  return buildAdminApp({
    part: ops.part,
    ready: (exclude) => readiness(ops, exclude),
    metrics: async () => ({ contentType: ops.registry.contentType, body: await ops.registry.metrics() }),
  })
}

/** The admin listener's app (unstarted): /healthz, /readyz, /metrics; JSON 404 elsewhere. */
export function buildAdminApp(opts: AdminAppOptions): FastifyInstance {
  const app = Fastify({ logger: false }) as unknown as FastifyInstance
  app.get('/healthz', async () => ({ status: 'ok', part: opts.part }))
  app.get('/readyz', async (request, reply) => {
    const query = readyzQuery(request.query)
    return sendReadyz(reply, opts.part, query, await opts.ready(query.exclude))
  })
  app.get('/metrics', async (_request, reply) => {
    const m = await opts.metrics()
    return reply.header('content-type', m.contentType).send(m.body)
  })
  app.setNotFoundHandler((_request, reply) => {
    void reply.code(404).send({
      code: 'not_found',
      message: 'the admin listener serves /healthz, /readyz and /metrics',
      details: null,
      hint: null,
    })
  })
  return app
}

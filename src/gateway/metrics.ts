// Prometheus metrics of the gateway: requests by part, tenant and status code (the one
// request counter every part shares, gatehouse_requests_total), a latency histogram by tenant
// and service, upstream failures. The hot path only bumps numbers in plain arrays and maps
// (prom-client's own observe() hashes and validates labels on every call, which cost more
// than the rest of the request's bookkeeping); the series are handed to a prom-client
// Registry as metric objects rendered at scrape time. Label cardinality is bounded: the
// tenant label is a known database, `_unknown` for anything that did not resolve, and with
// metrics.tenant_label off there is none (series summed over the databases at scrape time).
import { Registry } from 'prom-client'

export const UNKNOWN_TENANT = '_unknown'

export interface GatewayMetricsOptions {
  /** Label series with the tenant database (metrics.tenant_label; default true). */
  tenantLabel?: boolean
}

export interface GatewayMetrics {
  registry: Registry
  observe(tenant: string, service: string, status: number, seconds: number): void
  upstreamError(tenant: string, service: string, code: string): void
}

const BUCKETS = [0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30]

interface Series {
  tenant: string
  service: string
  /** Responses by status code. */
  statuses: Map<number, number>
  /** Per-bucket counts (not cumulative); the last slot is above the largest bound. */
  buckets: number[]
  sum: number
  count: number
}

interface Value {
  labels: Record<string, string | number>
  value: number
  metricName?: string
}

/** The shape prom-client's Registry renders (what its own metrics return from get()). */
interface ScrapedMetric {
  name: string
  help: string
  type: 'counter' | 'histogram' | 'gauge'
  aggregator: 'sum'
  get(): Promise<{ name: string; help: string; type: string; values: Value[]; aggregator: string }>
  reset(): void
}

/** A metric prom-client's Registry renders from `collect()` at scrape time. */
function scraped(
  name: string,
  help: string,
  type: ScrapedMetric['type'],
  collect: () => Value[],
  reset: () => void,
): ScrapedMetric {
  return {
    name,
    help,
    type,
    aggregator: 'sum',
    get: async () => ({ name, help, type, values: collect(), aggregator: 'sum' }),
    reset,
  }
}

/** Two-level map (tenant -> key -> T): no string building per request. */
class Table<T> {
  readonly #rows = new Map<string, Map<string, T>>()
  get(a: string, b: string): T | undefined {
    return this.#rows.get(a)?.get(b)
  }

  set(a: string, b: string, v: T): T {
    let row = this.#rows.get(a)
    if (row === undefined) {
      row = new Map()
      this.#rows.set(a, row)
    }
    row.set(b, v)
    return v
  }

  *values(): IterableIterator<T> {
    for (const row of this.#rows.values()) yield* row.values()
  }
  clear(): void {
    this.#rows.clear()
  }
}

class RequestMetrics {
  readonly series = new Table<Series>()
  readonly errors = new Table<{ tenant: string; service: string; code: string; n: number }>()

  observe(tenant: string, service: string, status: number, seconds: number): void {
    const s =
      this.series.get(tenant, service) ??
      this.series.set(tenant, service, {
        tenant,
        service,
        statuses: new Map(),
        buckets: new Array<number>(BUCKETS.length + 1).fill(0),
        sum: 0,
        count: 0,
      })
    s.statuses.set(status, (s.statuses.get(status) ?? 0) + 1)
    let i = 0
    while (i < BUCKETS.length && seconds > BUCKETS[i]!) i++
    s.buckets[i]!++
    s.sum += seconds
    s.count++
  }

  upstreamError(tenant: string, service: string, code: string): void {
    const key = `${service}\u0000${code}`
    ;(this.errors.get(tenant, key) ?? this.errors.set(tenant, key, { tenant, service, code, n: 0 })).n++
  }

  /** The series summed by `key` (tenant and service, or service only). */
  #merged(tenantLabel: boolean): Series[] {
    if (tenantLabel) return [...this.series.values()]
    const by = new Map<string, Series>()
    for (const s of this.series.values()) {
      let m = by.get(s.service)
      if (m === undefined) {
        m = {
          tenant: '',
          service: s.service,
          statuses: new Map(),
          buckets: new Array<number>(BUCKETS.length + 1).fill(0),
          sum: 0,
          count: 0,
        }
        by.set(s.service, m)
      }
      for (const [status, n] of s.statuses) m.statuses.set(status, (m.statuses.get(status) ?? 0) + n)
      s.buckets.forEach((n, i) => {
        m!.buckets[i]! += n
      })
      m.sum += s.sum
      m.count += s.count
    }
    return [...by.values()]
  }

  metrics(tenantLabel: boolean): ScrapedMetric[] {
    const clearSeries = (): void => this.series.clear()
    return [
      scraped(
        'gatehouse_requests_total',
        'Requests answered, by part (gateway, rest, auth, panel), tenant database and status code',
        'counter',
        () => this.#requestCounts(tenantLabel),
        clearSeries,
      ),
      scraped(
        LATENCY_NAME,
        `Time from request to the end of the response, by ${tenantLabel ? 'tenant database and ' : ''}service`,
        'histogram',
        () => this.#latencies(tenantLabel),
        clearSeries,
      ),
      scraped(
        'gatehouse_gateway_upstream_errors_total',
        `Upstream requests that failed (refused, reset, timed out), by ${tenantLabel ? 'tenant, ' : ''}service and error code`,
        'counter',
        () => this.#upstreamErrors(tenantLabel),
        () => this.errors.clear(),
      ),
    ]
  }

  #requestCounts(tenantLabel: boolean): Value[] {
    const counts = new Map<string, { tenant: string; status: number; n: number }>()
    for (const s of this.series.values()) {
      for (const [status, n] of s.statuses) {
        const key = tenantLabel ? `${s.tenant}\u0000${status}` : String(status)
        const c = counts.get(key)
        if (c === undefined) counts.set(key, { tenant: s.tenant, status, n })
        else c.n += n
      }
    }
    return [...counts.values()].map((c) => ({
      labels: { part: 'gateway', ...tenantLabels(tenantLabel, c.tenant), status: c.status },
      value: c.n,
    }))
  }

  #latencies(tenantLabel: boolean): Value[] {
    const values: Value[] = []
    const bucketName = `${LATENCY_NAME}_bucket`
    for (const s of this.#merged(tenantLabel)) {
      const labels = { ...tenantLabels(tenantLabel, s.tenant), service: s.service }
      let acc = 0
      BUCKETS.forEach((le, i) => {
        acc += s.buckets[i]!
        values.push({ labels: { le, ...labels }, value: acc, metricName: bucketName })
      })
      values.push({ labels: { le: '+Inf', ...labels }, value: s.count, metricName: bucketName })
      values.push({ labels, value: s.sum, metricName: `${LATENCY_NAME}_sum` })
      values.push({ labels, value: s.count, metricName: `${LATENCY_NAME}_count` })
    }
    return values
  }

  #upstreamErrors(tenantLabel: boolean): Value[] {
    const by = new Map<string, Value>()
    for (const e of this.errors.values()) {
      const key = tenantLabel ? `${e.tenant}\u0000${e.service}\u0000${e.code}` : `${e.service}\u0000${e.code}`
      const v = by.get(key)
      if (v === undefined)
        by.set(key, {
          labels: { ...tenantLabels(tenantLabel, e.tenant), service: e.service, code: e.code },
          value: e.n,
        })
      else v.value += e.n
    }
    return [...by.values()]
  }
}

const LATENCY_NAME = 'gatehouse_gateway_request_duration_seconds'

/** The tenant label, when metrics.tenant_label is on. */
function tenantLabels(tenantLabel: boolean, tenant: string): Record<string, string> {
  return tenantLabel ? { tenant } : {}
}

/** The gateway's metrics, in a registry of their own. */
export function createGatewayMetrics(opts: GatewayMetricsOptions = {}): GatewayMetrics {
  const registry = new Registry()
  const m = new RequestMetrics()
  for (const metric of m.metrics(opts.tenantLabel !== false)) registry.registerMetric(metric as never)
  return {
    registry,
    observe: (tenant, service, status, seconds) => m.observe(tenant, service, status, seconds),
    upstreamError: (tenant, service, code) => m.upstreamError(tenant, service, code),
  }
}

type StoreHealth = () => { state: 'ok' | 'unreachable' | 'empty'; lastGood: number; lastGoodServed: number }

/**
 * The tenant store's health in `registry` (once per registry): its state as a gauge per
 * state (1 = current), the last good records held and how many look-ups they answered.
 */
export function registerStoreHealth(registry: Registry, health: StoreHealth): void {
  const stateName = 'gatehouse_tenant_store_state'
  if (registry.getSingleMetric(stateName) !== undefined) return
  const metrics = [
    scraped(
      stateName,
      'State of the tenant store as this process sees it (1 for the current state): ok, unreachable, or empty (it lost the tenants it held; serving last good records until `gatehouse tenants apply`)',
      'gauge',
      () => {
        const h = health()
        return (['ok', 'unreachable', 'empty'] as const).map((s) => ({
          labels: { state: s },
          value: h.state === s ? 1 : 0,
        }))
      },
      () => {},
    ),
    scraped(
      'gatehouse_tenant_store_last_good_records',
      'Tenant records this process can fall back to while the store fails',
      'gauge',
      () => [{ labels: {}, value: health().lastGood }],
      () => {},
    ),
    scraped(
      'gatehouse_tenant_store_last_good_served_total',
      'Tenant look-ups answered from a last good record because the store failed',
      'counter',
      () => [{ labels: {}, value: health().lastGoodServed }],
      () => {},
    ),
  ]
  for (const m of metrics) registry.registerMetric(m as never)
}

// Prometheus metrics of the gateway (prom-client): requests by tenant, service and
// status class, latency histogram, upstream failures. Label cardinality is bounded: the
// tenant label is a known database, `_unknown` for anything that did not resolve.
import { Counter, Histogram, Registry } from 'prom-client'

export const UNKNOWN_TENANT = '_unknown'

export interface GatewayMetrics {
  registry: Registry
  observe (tenant: string, service: string, status: number, seconds: number): void
  upstreamError (tenant: string, service: string, code: string): void
}

function reuse<T> (registry: Registry, name: string, make: () => T): T {
  return (registry.getSingleMetric(name) as T | undefined) ?? make()
}

export function createGatewayMetrics (registry: Registry = new Registry()): GatewayMetrics {
  const requests = reuse(registry, 'gatehouse_gateway_requests_total', () => new Counter({
    name: 'gatehouse_gateway_requests_total',
    help: 'Requests answered by the gateway, by tenant database, service and status class',
    labelNames: ['tenant', 'service', 'status_class'] as const,
    registers: [registry]
  }))
  const latency = reuse(registry, 'gatehouse_gateway_request_duration_seconds', () => new Histogram({
    name: 'gatehouse_gateway_request_duration_seconds',
    help: 'Time from request to the end of the response, by tenant database and service',
    labelNames: ['tenant', 'service'] as const,
    buckets: [0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [registry]
  }))
  const upstreamErrors = reuse(registry, 'gatehouse_gateway_upstream_errors_total', () => new Counter({
    name: 'gatehouse_gateway_upstream_errors_total',
    help: 'Upstream requests that failed (refused, reset, timed out), by tenant, service and error code',
    labelNames: ['tenant', 'service', 'code'] as const,
    registers: [registry]
  }))
  const classes = ['1xx', '2xx', '3xx', '4xx', '5xx']
  // Labelled children cached per label set: prom-client hashes the labels on every call
  // otherwise. Bounded like the labels themselves (tenants x services x classes).
  const counters = new Map<string, { inc: () => void }>()
  const histograms = new Map<string, { observe: (v: number) => void }>()
  return {
    registry,
    observe (tenant, service, status, seconds) {
      const cls = classes[Math.floor(status / 100) - 1] ?? '5xx'
      const hk = JSON.stringify([tenant, service])
      const ck = JSON.stringify([tenant, service, cls])
      let c = counters.get(ck)
      if (c === undefined) { c = requests.labels({ tenant, service, status_class: cls }); counters.set(ck, c) }
      let h = histograms.get(hk)
      if (h === undefined) { h = latency.labels({ tenant, service }); histograms.set(hk, h) }
      c.inc()
      h.observe(seconds)
    },
    upstreamError (tenant, service, code) {
      upstreamErrors.inc({ tenant, service, code })
    }
  }
}

// OpenTelemetry tracing of a part: one server span per request, continuing the caller's
// W3C `traceparent`, exported over OTLP/HTTP. The OpenTelemetry packages are imported only
// by startPartTracing(), so a process without an OTLP endpoint never loads them.
import type { IncomingMessage, OutgoingHttpHeaders } from 'node:http'
import type { Span } from '@opentelemetry/api'

export interface PartTracer {
  /** Starts the request's server span, a child of its `traceparent` when it has a valid one. */
  start(req: IncomingMessage): void
  /** Ends the request's span with its status and route. */
  end(req: IncomingMessage, status: number, route: string | undefined): void
  /** Sets `traceparent` (and `tracestate`) of an upstream request to the request's span. */
  inject(req: IncomingMessage, headers: OutgoingHttpHeaders): void
  /** `trace_id` and `span_id` of the request's span, for its log lines; undefined when untraced. */
  logFields?(req: IncomingMessage): TraceLogFields | undefined
  /** Exports the spans still buffered and stops. */
  shutdown(): Promise<void>
}

export interface TraceLogFields {
  trace_id: string
  span_id: string
}

export interface PartTracingOptions {
  /** OTLP base URL (OTEL_EXPORTER_OTLP_ENDPOINT); spans are posted to <endpoint>/v1/traces. */
  endpoint: string
  /** The part: `gatehouse.part` of the resource, and the service `gatehouse-<part>` by default. */
  part: string
  /** service.name (OTEL_SERVICE_NAME); default `gatehouse-<part>`. */
  serviceName?: string
  /** More resource attributes, OTEL_RESOURCE_ATTRIBUTES' format: `k=v,k2=v2`, values percent-encoded. */
  resourceAttributes?: string
  /** service.version. */
  version?: string
}

/**
 * OTEL_RESOURCE_ATTRIBUTES' format (OpenTelemetry's resource SDK spec): comma-separated
 * `key=value` pairs, values percent-decoded; a malformed pair is skipped.
 */
export function parseResourceAttributes(text: string | undefined): Record<string, string> {
  const out: Record<string, string> = {}
  if (text === undefined) return out
  for (const pair of text.split(',')) {
    const eq = pair.indexOf('=')
    if (eq <= 0) continue
    const key = pair.slice(0, eq).trim()
    let value: string
    try {
      value = decodeURIComponent(pair.slice(eq + 1).trim())
    } catch {
      continue
    }
    if (key !== '') out[key] = value
  }
  return out
}

/** The resource of a part's spans: attributes, then the part's own; OTEL_SERVICE_NAME wins. */
export function partResource(opts: PartTracingOptions): Record<string, string> {
  const attrs = parseResourceAttributes(opts.resourceAttributes)
  return {
    ...attrs,
    'service.name': opts.serviceName ?? attrs['service.name'] ?? `gatehouse-${opts.part}`,
    ...(opts.version !== undefined && attrs['service.version'] === undefined
      ? { 'service.version': opts.version }
      : {}),
    'gatehouse.part': opts.part,
  }
}

/** The OTLP/HTTP traces URL of a base endpoint. */
function otlpTracesUrl(endpoint: string): string {
  return `${endpoint.replace(/\/+$/, '')}/v1/traces`
}

/** A part's tracer with its own provider and exporter. */
export async function startPartTracing(opts: PartTracingOptions): Promise<PartTracer> {
  const [api, core, base, otlp, resources] = await Promise.all([
    import('@opentelemetry/api'),
    import('@opentelemetry/core'),
    import('@opentelemetry/sdk-trace-base'),
    import('@opentelemetry/exporter-trace-otlp-http'),
    import('@opentelemetry/resources'),
  ])
  const provider = new base.BasicTracerProvider({
    resource: resources.resourceFromAttributes(partResource(opts)),
    spanProcessors: [new base.BatchSpanProcessor(new otlp.OTLPTraceExporter({ url: otlpTracesUrl(opts.endpoint) }))],
  })
  const tracer = provider.getTracer('gatehouse')
  const propagator = new core.W3CTraceContextPropagator()
  const spans = new WeakMap<IncomingMessage, Span>()
  return {
    start(req) {
      const parent = propagator.extract(api.ROOT_CONTEXT, req.headers, api.defaultTextMapGetter)
      const method = req.method ?? 'GET'
      const url = req.url ?? '/'
      const q = url.indexOf('?')
      spans.set(
        req,
        tracer.startSpan(
          method,
          {
            kind: api.SpanKind.SERVER,
            attributes: { 'http.request.method': method, 'url.path': q === -1 ? url : url.slice(0, q) },
          },
          parent,
        ),
      )
    },
    end(req, status, route) {
      const span = spans.get(req)
      if (span === undefined) return
      spans.delete(req)
      if (route !== undefined) {
        span.updateName(`${req.method ?? 'GET'} ${route}`)
        span.setAttribute('http.route', route)
      }
      span.setAttribute('http.response.status_code', status)
      if (status >= 500) span.setStatus({ code: api.SpanStatusCode.ERROR })
      span.end()
    },
    inject(req, headers) {
      const span = spans.get(req)
      if (span === undefined) return
      propagator.inject(api.trace.setSpan(api.ROOT_CONTEXT, span), headers, api.defaultTextMapSetter)
    },
    logFields(req) {
      const ctx = spans.get(req)?.spanContext()
      return ctx === undefined ? undefined : { trace_id: ctx.traceId, span_id: ctx.spanId }
    },
    shutdown: () => provider.shutdown(),
  }
}

// OpenTelemetry tracing of a part: one server span per request, continuing the caller's
// W3C `traceparent`, exported over OTLP/HTTP. The OpenTelemetry packages are imported only
// by startPartTracing(), so a process without an OTLP endpoint never loads them.
import type { IncomingMessage, OutgoingHttpHeaders } from 'node:http'
import type { Span } from '@opentelemetry/api'

export interface PartTracer {
  /** Starts the request's server span, a child of its `traceparent` when it has a valid one. */
  start (req: IncomingMessage): void
  /** Ends the request's span with its status and route. */
  end (req: IncomingMessage, status: number, route: string | undefined): void
  /** Sets `traceparent` (and `tracestate`) of an upstream request to the request's span. */
  inject (req: IncomingMessage, headers: OutgoingHttpHeaders): void
  /** Exports the spans still buffered and stops. */
  shutdown (): Promise<void>
}

export interface PartTracingOptions {
  /** OTLP base URL (OTEL_EXPORTER_OTLP_ENDPOINT); spans are posted to <endpoint>/v1/traces. */
  endpoint: string
  /** Names the service `gatehouse-<part>`. */
  part: string
}

/** The OTLP/HTTP traces URL of a base endpoint. */
export function otlpTracesUrl (endpoint: string): string {
  return `${endpoint.replace(/\/+$/, '')}/v1/traces`
}

/** A part's tracer with its own provider and exporter. */
export async function startPartTracing (opts: PartTracingOptions): Promise<PartTracer> {
  const [api, core, base, otlp, resources] = await Promise.all([
    import('@opentelemetry/api'),
    import('@opentelemetry/core'),
    import('@opentelemetry/sdk-trace-base'),
    import('@opentelemetry/exporter-trace-otlp-http'),
    import('@opentelemetry/resources')
  ])
  const provider = new base.BasicTracerProvider({
    resource: resources.resourceFromAttributes({ 'service.name': `gatehouse-${opts.part}` }),
    spanProcessors: [new base.BatchSpanProcessor(new otlp.OTLPTraceExporter({ url: otlpTracesUrl(opts.endpoint) }))]
  })
  const tracer = provider.getTracer('gatehouse')
  const propagator = new core.W3CTraceContextPropagator()
  const spans = new WeakMap<IncomingMessage, Span>()
  return {
    start (req) {
      const parent = propagator.extract(api.ROOT_CONTEXT, req.headers, api.defaultTextMapGetter)
      const method = req.method ?? 'GET'
      const url = req.url ?? '/'
      const q = url.indexOf('?')
      spans.set(req, tracer.startSpan(method, {
        kind: api.SpanKind.SERVER,
        attributes: { 'http.request.method': method, 'url.path': q === -1 ? url : url.slice(0, q) }
      }, parent))
    },
    end (req, status, route) {
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
    inject (req, headers) {
      const span = spans.get(req)
      if (span === undefined) return
      propagator.inject(api.trace.setSpan(api.ROOT_CONTEXT, span), headers, api.defaultTextMapSetter)
    },
    shutdown: () => provider.shutdown()
  }
}

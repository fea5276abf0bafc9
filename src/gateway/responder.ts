// How the gateway answers what it answers itself, in one place: the headers every response
// carries (request id, CORS, `Connection: close` while shutting down), errors rendered in
// our JSON shape (GoTrue's on /auth/v1) and logged, and the one access-log line and metrics
// observation per request. No onRequest/onResponse hook on the hot path (fastify's hook
// runner per request cost more than the work itself): the pipeline and the upstream client
// call these where each response is made.
import type http from 'node:http'
import { performance } from 'node:perf_hooks'
import type { FastifyBaseLogger } from 'fastify'
import { firstHeader, redactUrl } from '../shared/index.js'
import type { Cors } from './cors.js'
import type { GatewayMetrics } from './metrics.js'
import { renderError } from './render.js'
import { requestInfo, type Exchange } from './pipeline.js'
import type { RequestInfo } from './types.js'
import { accessLogWriter, type AccessLine, type AccessLogWriter } from './access-log.js'

/** What baseHeaders() reads of a request (fastify's request or an Exchange). */
export interface HeaderSource {
  id: string
  raw: { method?: string; headers: Record<string, string | string[] | undefined> }
}

/** An error as the client gets it. */
export interface RenderedAnswer {
  /** The error code (for the log line). */
  code: string
  status: number
  headers: Record<string, string>
  body: string
}

export class GatewayResponder {
  readonly #cors: Cors
  readonly #metrics: GatewayMetrics
  readonly #shuttingDown: () => boolean
  readonly #accessLog: AccessLogWriter

  constructor(opts: { cors: Cors; metrics: GatewayMetrics; shuttingDown: () => boolean; log: FastifyBaseLogger }) {
    this.#cors = opts.cors
    this.#metrics = opts.metrics
    this.#shuttingDown = opts.shuttingDown
    // The root logger, with reqId as a field: no per-request child logger is made; every
    // field is ours, so the censoring formatter is skipped.
    this.#accessLog = accessLogWriter(
      opts.log.child({}, { formatters: { log: (o: Record<string, unknown>) => o } } as never),
    )
  }

  /** Headers of every response: request id, CORS, `Connection: close` while shutting down. */
  baseHeaders(request: HeaderSource): Record<string, string> {
    const h: Record<string, string> = { 'x-request-id': request.id }
    const origin = request.raw.headers.origin
    if (origin !== undefined) {
      const c = this.#cors.response(firstHeader(origin))
      if (c !== null) Object.assign(h, c)
    } else if (request.raw.method === 'OPTIONS' && this.#cors.anyOrigin) {
      // PostgREST answers every OPTIONS (a table's, a function's, the root's) with this.
      h['access-control-allow-origin'] = '*'
    }
    if (this.#shuttingDown()) h.connection = 'close'
    return h
  }

  /** The request is answered: one log line (URL redacted) and the metrics, once. */
  complete(info: RequestInfo, status: number): void {
    if (info.done) return
    info.done = true
    const ms = performance.now() - info.start
    this.#metrics.observe(info.tenant, info.service, status, ms / 1000)
    const line: AccessLine = {
      reqId: info.reqId,
      tenant: info.tenant,
      method: info.method,
      url: redactUrl(info.url),
      status,
      ms: Math.round(ms * 10) / 10,
    }
    if (info.errorCode !== null) line.code = info.errorCode
    if (info.trace !== undefined) {
      line.trace_id = info.trace.trace_id
      line.span_id = info.trace.span_id
    }
    this.#accessLog(line)
  }

  /** An error answered: rendered, logged (5xx with the cause; refusals at debug). */
  render(err: unknown, ex: { id: string; raw: http.IncomingMessage; log: FastifyBaseLogger }): RenderedAnswer {
    const info = requestInfo(ex.raw)
    const r = renderError(err, ex.id, {
      auth: info?.service === 'auth',
      apiVersion: ex.raw.headers['x-supabase-api-version'],
    })
    if (info !== undefined) info.errorCode = r.error.code
    const tenant = info?.tenant
    // The tenant store's outage is logged once by the store (docs/operating.md), not per request.
    if (r.error.code === 'tenant_store_unavailable') ex.log.debug({ code: r.error.code }, 'request refused')
    else if (r.status >= 500) ex.log.error({ tenant, err: r.error.cause ?? err, code: r.error.code }, 'request failed')
    else if (r.error.details !== null)
      ex.log.debug({ tenant, code: r.error.code, details: r.error.details }, 'request refused')
    return { code: r.error.code, status: r.status, headers: { ...this.baseHeaders(ex), ...r.headers }, body: r.body }
  }

  /** The pipeline's errors, on the raw response (the same bytes fastify's reply.send writes). */
  fail(ex: Exchange, err: unknown): void {
    const r = this.render(err, ex)
    const res = ex.res
    if (res.headersSent || res.destroyed) {
      res.destroy()
    } else {
      r.headers['content-length'] = String(Buffer.byteLength(r.body))
      res.writeHead(r.status, r.headers)
      res.end(r.body)
    }
    const info = requestInfo(ex.raw)
    if (info !== undefined) this.complete(info, r.status)
  }

  /** An error answered before any request info exists (404 of unknown paths, undecodable URLs). */
  bare(err: unknown, request: HeaderSource): RenderedAnswer {
    const r = renderError(err, request.id)
    return {
      code: r.error.code,
      status: r.status,
      headers: { ...this.baseHeaders(request), ...r.headers },
      body: r.body,
    }
  }
}

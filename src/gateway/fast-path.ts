// The gateway's node:http fast path: the requests the proxy pipeline can take straight from
// the server's request listener, without fastify's routing, request/reply objects, hooks or
// hijack (what fastify's catch-all route would do for them is done here). What it does not
// take (the three admin paths, other methods, paths with a `%`, bodies whose content type
// fastify vets, `/`) goes to fastify, whose catch-all route runs the same pipeline; both give
// the same answers, headers, logs, metrics and spans.
import type http from 'node:http'
import type { FastifyBaseLogger } from 'fastify'
import { requestIdOf, type PartTracer } from '../shared/index.js'
import { PROXY_METHODS, type ProxyPipeline } from './pipeline.js'
import { LazyRequestLogger } from './request-logger.js'

/** The request listener's first try: true when the fast path took the request. */
export type FastPath = (req: http.IncomingMessage, res: http.ServerResponse) => boolean

export interface FastPathOptions {
  pipeline: ProxyPipeline
  log: FastifyBaseLogger
  tracer?: PartTracer
  /** True once app.close() began: responses then close their connection. */
  isClosing: () => boolean
}

const METHODS = new Set(PROXY_METHODS)

// A content type fastify's parser takes as valid (its lib/content-type.js: `type/subtype`
// tokens before any `;`; parameters never make it invalid).
const VALID_MEDIA_TYPE = /^[\w!#$%&'*+.^`|~-]+\/[\w!#$%&'*+.^`|~-]+\s*(?:;|$)/

export function createFastPath(opts: FastPathOptions): FastPath {
  const { pipeline, log, tracer } = opts
  return (req, res) => {
    if (!takes(req)) return false
    const id = requestIdOf(req)
    if (opts.isClosing() && req.httpVersionMajor !== 2) res.setHeader('Connection', 'close')
    if (tracer !== undefined) traceResponse(tracer, req, res)
    const bindings = tracer === undefined ? { reqId: id } : { reqId: id, ...tracer.logFields?.(req) }
    void pipeline.handle({ raw: req, res, id, log: new LazyRequestLogger(log, bindings) })
    return true
  }
}

/** Whether the fast path may take the request (else fastify routes it). */
function takes(req: http.IncomingMessage): boolean {
  const url = req.url
  const method = req.method
  if (url === undefined || url.charCodeAt(0) !== 47 /* / */ || method === undefined || !METHODS.has(method))
    return false
  const q = url.indexOf('?')
  const pct = url.indexOf('%')
  // Percent-encoded paths: fastify's router decodes them (400 when it cannot).
  if (pct !== -1 && (q === -1 || pct < q)) return false
  const pathLength = q === -1 ? url.length : q
  if (pathLength === 1 || isAdminPath(url, pathLength)) return false
  // A body with a content type: fastify vets the type (415 for a malformed one) before its
  // route; without a type, fastify parses none. GET and HEAD bodies are never vetted.
  if (method === 'GET' || method === 'HEAD') return true
  const ct = req.headers['content-type']
  return ct !== undefined ? VALID_MEDIA_TYPE.test(ct) : !hasBodyHeaders(req)
}

/** The request's span, ended when its response is (what fastify's tracing hooks do). */
function traceResponse(tracer: PartTracer, req: http.IncomingMessage, res: http.ServerResponse): void {
  tracer.start(req)
  const end = (): void => {
    res.removeListener('finish', end)
    res.removeListener('error', end)
    tracer.end(req, res.statusCode, '/*')
  }
  res.on('finish', end)
  res.on('error', end)
}

function hasBodyHeaders(req: http.IncomingMessage): boolean {
  const cl = req.headers['content-length']
  return req.headers['transfer-encoding'] !== undefined || (cl !== undefined && cl !== '0')
}

/** `/healthz`, `/readyz`, `/metrics` (fastify routes here: answered 404 before any look-up). */
function isAdminPath(url: string, pathLength: number): boolean {
  if (pathLength === 8) return url.startsWith('/healthz') || url.startsWith('/metrics')
  return pathLength === 7 && url.startsWith('/readyz')
}

// The fastify set-up every part starts from: its logger (a given pino instance, or pino
// with the shared options: level and one redaction of credentials; or none), request ids
// (a well-formed X-Request-Id from the caller, else a random UUID, logged as `reqId`),
// no per-request log lines from fastify (each part logs what it decides), and the part's
// error and not-found handlers, and (given a tracer) a server span per request. Everything else is the part's own fastify options.
import { STATUS_CODES, maxHeaderSize } from 'node:http'
import type { Duplex } from 'node:stream'
import Fastify, {
  LogController,
  type FastifyBaseLogger,
  type FastifyError,
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
  type FastifyServerOptions,
} from 'fastify'
import type { LoggerOptions } from 'pino'
import { firstHeader, isValidRequestId } from './http.js'
import { requestUuid } from './request-uuid.js'
import { loggerOptions, type LogSettings } from './logger.js'
import {
  BadRequestError,
  HeaderFieldsTooLargeError,
  HeadersTimeoutError,
  ShuttingDownError,
  type GatehouseError,
} from './errors.js'
import type { PartTracer } from './tracing.js'

export interface PartAppOptions {
  /**
   * A ready logger, or fastify's logger setting (false: none); when absent, fastify's pino
   * with loggerOptions(log, loggerOptions) if `log` is given, else none.
   */
  logger?: FastifyBaseLogger | FastifyServerOptions['logger']
  /** Level of the default logger. */
  log?: LogSettings
  /** Extra pino options of the default logger (formatters and serializers are merged). */
  loggerOptions?: LoggerOptions
  /** The part's own fastify options (body limit, router, proxies ...). */
  fastify?: Omit<FastifyServerOptions, 'logger' | 'loggerInstance' | 'genReqId' | 'logController'>
  /** Replaces fastify's per-request child logger (the gateway's lazy one). */
  childLoggerFactory?: FastifyServerOptions['childLoggerFactory']
  errorHandler?: (err: FastifyError, request: FastifyRequest, reply: FastifyReply) => unknown
  notFoundHandler?: (request: FastifyRequest, reply: FastifyReply) => unknown
  /** Traces every request (a server span continuing its `traceparent`); none when absent. */
  tracer?: PartTracer
}

/** The request id: the caller's X-Request-Id when well-formed, else a random UUID. */
export function requestIdOf(req: { headers: Record<string, string | string[] | undefined> }): string {
  const v = firstHeader(req.headers['x-request-id'])
  return isValidRequestId(v) ? v : requestUuid()
}

function isLogger(x: unknown): x is FastifyBaseLogger {
  return (
    typeof x === 'object' &&
    x !== null &&
    typeof (x as { child?: unknown }).child === 'function' &&
    typeof (x as { info?: unknown }).info === 'function'
  )
}

/**
 * What a part answers to a request Node's HTTP parser refused before any route saw it
 * (malformed request line or headers, Content-Length with Transfer-Encoding, a bad chunk,
 * headers over the size limit or too slow): the JSON error shape of every other answer,
 * with its code in `x-gatehouse-error-code`, then the connection is closed.
 */
function clientErrorResponse(err: Error & { code?: string }): string {
  let e: GatehouseError
  if (err.code === 'ERR_HTTP_REQUEST_TIMEOUT') e = new HeadersTimeoutError()
  else if (err.code === 'HPE_HEADER_OVERFLOW') e = new HeaderFieldsTooLargeError(maxHeaderSize)
  else e = new BadRequestError('the HTTP request could not be parsed')
  const body = JSON.stringify(e.toWire())
  return (
    `HTTP/1.1 ${e.status} ${STATUS_CODES[e.status] ?? ''}\r\nContent-Type: application/json; charset=utf-8\r\n` +
    `x-gatehouse-error-code: ${e.code}\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`
  )
}

function onClientError(err: Error & { code?: string }, socket: Duplex): void {
  // A reset connection has nobody left to answer.
  if (err.code === 'ECONNRESET' || socket.destroyed) return
  if (socket.writable) socket.write(clientErrorResponse(err))
  socket.destroy(err)
}

/**
 * From `app.close()` on, a request that still arrives (on a kept-alive connection) is refused
 * with 503 shutting_down, Retry-After and `Connection: close`, rendered by the part's own error
 * handler in the part's shape. Fastify's own `return503OnClosing` answer is a body of its own
 * (`{"error":"Service Unavailable",...}`) that no client of ours reads.
 */
function refuseWhileClosing(app: FastifyInstance): void {
  let closing = false
  app.addHook('preClose', (done) => {
    closing = true
    done()
  })
  app.addHook('onRequest', (_request, reply, done) => {
    if (!closing) {
      done()
      return
    }
    void reply.header('connection', 'close')
    done(new ShuttingDownError({ headers: { 'retry-after': '1' } }))
  })
  // close() ends the connections idle at that moment; one whose request was in flight turns
  // idle when its answer is sent, and would stay open (close() waiting) until the client's
  // keep-alive timeout (the gateway's upstream_keepalive_ms): it is ended then. A request
  // pipelined behind it keeps it busy and is answered as above.
  app.addHook('onResponse', (_request, _reply, done) => {
    if (closing) setImmediate(() => app.server.closeIdleConnections())
    done()
  })
}

/** fastify's refusals before routing: an over-long path parameter is the part's 404, the rest as fastify answers. */
function refusedBeforeRouting(notFound: PartAppOptions['notFoundHandler']) {
  return (error: Error, request: FastifyRequest, reply: FastifyReply): void => {
    if ((error as { code?: string }).code === 'FST_ERR_MAX_PARAM_LENGTH' && notFound !== undefined)
      void notFound(request, reply)
    else void reply.send(error)
  }
}

/** An unstarted fastify instance with the common set-up; the part adds its routes and hooks. */
export function createPartApp(opts: PartAppOptions): FastifyInstance {
  const logging = isLogger(opts.logger)
    ? { loggerInstance: opts.logger }
    : { logger: opts.logger ?? (opts.log === undefined ? false : loggerOptions(opts.log, opts.loggerOptions)) }
  // A part that answers requests while closing itself (the gateway) sets return503OnClosing: false.
  const ownClosing = opts.fastify?.return503OnClosing !== false
  const app = Fastify({
    ...opts.fastify,
    return503OnClosing: false,
    ...logging,
    ...(opts.childLoggerFactory !== undefined ? { childLoggerFactory: opts.childLoggerFactory } : {}),
    logController: new LogController({ disableRequestLogging: true, requestIdLogLabel: 'reqId' }),
    genReqId: requestIdOf,
    clientErrorHandler: onClientError,
    // A path parameter over maxParamLength names nothing that exists: the part's own 404
    // (fastify's route-event context knows no handler the part sets later).
    frameworkErrors: opts.fastify?.frameworkErrors ?? refusedBeforeRouting(opts.notFoundHandler),
  } as never) as unknown as FastifyInstance
  if (opts.errorHandler !== undefined) app.setErrorHandler(opts.errorHandler)
  if (opts.notFoundHandler !== undefined) app.setNotFoundHandler(opts.notFoundHandler)
  if (ownClosing) refuseWhileClosing(app)
  const tracer = opts.tracer
  if (tracer !== undefined) {
    app.addHook('onRequest', (request, _reply, done) => {
      tracer.start(request.raw)
      // The request's log lines carry its trace (OpenTelemetry's log correlation fields).
      const ids = tracer.logFields?.(request.raw)
      if (ids !== undefined) request.log = request.log.child(ids)
      done()
    })
    app.addHook('onResponse', (request, reply, done) => {
      tracer.end(request.raw, reply.statusCode, request.is404 ? undefined : request.routeOptions.url)
      done()
    })
  }
  return app
}

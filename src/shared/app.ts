// The fastify set-up every part starts from: its logger (a given pino instance, or pino
// with the shared options: level and one redaction of credentials; or none), request ids
// (a well-formed X-Request-Id from the caller, else a random UUID, logged as `reqId`),
// no per-request log lines from fastify (each part logs what it decides), and the part's
// error and not-found handlers, and (given a tracer) a server span per request. Everything else is the part's own fastify options.
import { randomUUID } from 'node:crypto'
import Fastify, {
  LogController, type FastifyBaseLogger, type FastifyError, type FastifyInstance, type FastifyReply,
  type FastifyRequest, type FastifyServerOptions
} from 'fastify'
import type { LoggerOptions } from 'pino'
import { firstHeader, isValidRequestId } from './http.js'
import { loggerOptions, type LogSettings } from './logger.js'
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
export function requestIdOf (req: { headers: Record<string, string | string[] | undefined> }): string {
  const v = firstHeader(req.headers['x-request-id'])
  return isValidRequestId(v) ? v : randomUUID()
}

function isLogger (x: unknown): x is FastifyBaseLogger {
  return typeof x === 'object' && x !== null && typeof (x as { child?: unknown }).child === 'function' &&
    typeof (x as { info?: unknown }).info === 'function'
}

/** An unstarted fastify instance with the common set-up; the part adds its routes and hooks. */
export function createPartApp (opts: PartAppOptions): FastifyInstance {
  const logging = isLogger(opts.logger)
    ? { loggerInstance: opts.logger }
    : { logger: opts.logger ?? (opts.log === undefined ? false : loggerOptions(opts.log, opts.loggerOptions)) }
  const app = Fastify({
    ...opts.fastify,
    ...logging,
    ...(opts.childLoggerFactory !== undefined ? { childLoggerFactory: opts.childLoggerFactory } : {}),
    logController: new LogController({ disableRequestLogging: true, requestIdLogLabel: 'reqId' }),
    genReqId: requestIdOf
  } as never) as unknown as FastifyInstance
  if (opts.errorHandler !== undefined) app.setErrorHandler(opts.errorHandler)
  if (opts.notFoundHandler !== undefined) app.setNotFoundHandler(opts.notFoundHandler)
  const tracer = opts.tracer
  if (tracer !== undefined) {
    app.addHook('onRequest', (request, _reply, done) => { tracer.start(request.raw); done() })
    app.addHook('onResponse', (request, reply, done) => {
      tracer.end(request.raw, reply.statusCode, request.is404 ? undefined : request.routeOptions.url)
      done()
    })
  }
  return app
}

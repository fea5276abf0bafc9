// The per-request logger: fastify makes a pino child (`reqId` bound) for every request,
// which costs more than the rest of the gateway's bookkeeping on a proxied GET. This one
// becomes that child only when something logs through it (errors, refusals); the
// completion line is written by the root logger with reqId as a field, to the same effect.
import type { FastifyBaseLogger } from 'fastify'
import type { Bindings, ChildLoggerOptions } from 'pino'

type Level = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace'

function call(logger: FastifyBaseLogger, level: Level, args: unknown[]): void {
  ;(logger[level] as (...a: unknown[]) => void).apply(logger, args)
}

export class LazyRequestLogger implements FastifyBaseLogger {
  readonly #parent: FastifyBaseLogger
  readonly #bindings: Bindings
  readonly #options: ChildLoggerOptions | undefined
  #real: FastifyBaseLogger | null = null

  constructor(parent: FastifyBaseLogger, bindings: Bindings, options?: ChildLoggerOptions) {
    this.#parent = parent
    this.#bindings = bindings
    this.#options = options
  }

  // pino's child() takes options undefined as not given.
  #logger(): FastifyBaseLogger {
    this.#real ??= this.#parent.child(this.#bindings, this.#options)
    return this.#real
  }

  get level(): string {
    return this.#real !== null ? this.#real.level : this.#parent.level
  }
  set level(level: string) {
    this.#logger().level = level
  }

  fatal(...args: unknown[]): void {
    call(this.#logger(), 'fatal', args)
  }
  error(...args: unknown[]): void {
    call(this.#logger(), 'error', args)
  }
  warn(...args: unknown[]): void {
    call(this.#logger(), 'warn', args)
  }
  info(...args: unknown[]): void {
    call(this.#logger(), 'info', args)
  }
  debug(...args: unknown[]): void {
    call(this.#logger(), 'debug', args)
  }
  trace(...args: unknown[]): void {
    call(this.#logger(), 'trace', args)
  }
  silent(): void {}

  child(bindings: Bindings, options?: ChildLoggerOptions): FastifyBaseLogger {
    return this.#logger().child(bindings, options)
  }
}

/** fastify's childLoggerFactory option. */
export function lazyChildLoggerFactory(
  logger: FastifyBaseLogger,
  bindings: Bindings,
  options: ChildLoggerOptions,
): FastifyBaseLogger {
  return new LazyRequestLogger(logger, bindings, options)
}

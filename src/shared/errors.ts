// The one error base class of Gatehouse and the wire shape every part renders.
// Parts define their codes in their own errors.ts with defineError(); the status
// lives with the code, never at the throw site. Internal causes are logged, never sent.

/** The JSON error body of the gateway and the REST engine (postgrest-js reads it). */
export interface WireError {
  code: string
  message: string
  details: string | null
  hint: string | null
  [extra: string]: unknown
}

export interface ErrorOptions {
  details?: string | null
  hint?: string | null
  cause?: unknown
  /** Logged, never sent. */
  internal?: unknown
  /** Extra fields sent on the wire (e.g. `sqlstate`). */
  extra?: Record<string, unknown>
  /** Extra response headers (e.g. WWW-Authenticate). */
  headers?: Record<string, string>
}

export class GatehouseError extends Error {
  readonly code: string
  readonly status: number
  readonly details: string | null
  readonly hint: string | null
  readonly internal?: unknown
  readonly extra?: Record<string, unknown>
  readonly headers?: Record<string, string>

  constructor (code: string, status: number, message: string, opts: ErrorOptions = {}) {
    super(message, opts.cause === undefined ? undefined : { cause: opts.cause })
    this.name = 'GatehouseError'
    this.code = code
    this.status = status
    this.details = opts.details ?? null
    this.hint = opts.hint ?? null
    this.internal = opts.internal
    this.extra = opts.extra
    this.headers = opts.headers
  }

  toWire (): WireError {
    return { code: this.code, message: this.message, details: this.details, hint: this.hint, ...this.extra }
  }
}

export type ErrorClass<C extends string, S extends number, A extends unknown[]> =
  (new (...args: A) => GatehouseError & { readonly code: C, readonly status: S }) & { readonly code: C, readonly status: S }

/**
 * A typed error factory in the spirit of @fastify/error: the code and status are
 * literals, the message is built from the arguments. Pass ErrorOptions as the
 * last argument after the format arguments.
 */
export function defineError<C extends string, S extends number, A extends unknown[]> (
  code: C, status: S, format: (...args: A) => string
): ErrorClass<C, S, [...A, ErrorOptions?]> {
  const arity = format.length
  const cls = class extends GatehouseError {
    static readonly code = code
    static readonly status = status
    constructor (...args: [...A, ErrorOptions?]) {
      const opts = (args.length > arity ? args[arity] : undefined) as ErrorOptions | undefined
      super(code, status, format(...(args.slice(0, arity) as A)), opts ?? {})
    }
  }
  Object.defineProperty(cls, 'name', { value: `${code}Error` })
  return cls as unknown as ErrorClass<C, S, [...A, ErrorOptions?]>
}

export function isGatehouseError (err: unknown): err is GatehouseError {
  return err instanceof GatehouseError
}

/** Raised at boot for bad configuration; never becomes an HTTP response. */
export class ConfigError extends Error {
  readonly problems: string[]
  constructor (message: string, problems: string[] = []) {
    super(problems.length ? `${message}\n  - ${problems.join('\n  - ')}` : message)
    this.name = 'ConfigError'
    this.problems = problems
  }
}

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

  constructor(code: string, status: number, message: string, opts: ErrorOptions = {}) {
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

  toWire(): WireError {
    return { code: this.code, message: this.message, details: this.details, hint: this.hint, ...this.extra }
  }
}

export type ErrorClass<C extends string, S extends number, A extends unknown[]> = (new (
  ...args: A
) => GatehouseError & { readonly code: C; readonly status: S }) & {
  readonly code: C
  readonly status: S
  /** The message of one instance, for the error reference (docs/errors.md). */
  readonly template: (...args: never[]) => ErrorText
}

/** Any class made by defineError (or a part's variant of it). */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type AnyErrorClass = ErrorClass<string, number, any[]>

/**
 * A part's registry: every error class it can raise, by export name (fastify's
 * `lib/errors.js` object). The part's code list, code type and docs/errors.md are derived
 * from it, never kept by hand.
 */
export type ErrorRegistry = Readonly<Record<string, AnyErrorClass>>

/** The union of the codes of a registry. */
export type CodeOf<R extends ErrorRegistry> = R[keyof R]['code']

/** The codes of registries, sorted and without repeats. */
export function errorCodes<R extends ErrorRegistry>(...registries: R[]): Array<CodeOf<R>> {
  const codes = new Set<CodeOf<R>>()
  for (const r of registries) for (const cls of Object.values(r)) codes.add(cls.code as CodeOf<R>)
  return [...codes].sort()
}

const definedClasses = new WeakSet<object>()

/**
 * What a format returns: the message, or the message with the details, hint, headers or extra
 * fields that always go with it (PostgREST's fixed texts); options given where raised win.
 */
export type ErrorText = string | ({ message: string } & Pick<ErrorOptions, 'details' | 'hint' | 'headers' | 'extra'>)

function textAndOptions(text: ErrorText, opts: ErrorOptions | undefined): [string, ErrorOptions] {
  if (typeof text === 'string') return [text, opts ?? {}]
  const { message, ...defaults } = text
  return [message, { ...defaults, ...opts }]
}

/**
 * A typed error factory in the spirit of @fastify/error: the code and status are
 * literals, the message is fixed or built from the arguments. Pass ErrorOptions as the
 * last argument after the format arguments. `base` lets a part keep its own class
 * (the auth engine's AuthError) under the same mechanism.
 */
export function defineError<C extends string, S extends number, A extends unknown[] = []>(
  code: C,
  status: S,
  text: ErrorText | ((...args: A) => ErrorText),
  base: new (code: string, status: number, message: string, opts: ErrorOptions) => GatehouseError = GatehouseError,
): ErrorClass<C, S, [...A, ErrorOptions?]> {
  const format = typeof text === 'function' ? text : () => text
  const arity = format.length
  const cls = class extends base {
    static readonly code = code
    static readonly status = status
    static readonly template = format
    constructor(...args: [...A, ErrorOptions?]) {
      const opts = (args.length > arity ? args[arity] : undefined) as ErrorOptions | undefined
      super(code, status, ...textAndOptions(format(...(args.slice(0, arity) as A)), opts))
    }
  }
  Object.defineProperty(cls, 'name', { value: `${code}Error` })
  definedClasses.add(cls)
  return cls as unknown as ErrorClass<C, S, [...A, ErrorOptions?]>
}

/** One way a code is said: its status and its message, or how the message is built from arguments. */
export type ErrorCase = readonly [status: number, message: ErrorText | ((...args: never[]) => ErrorText)]

type CaseArgs<E> = E extends readonly [number, (...args: infer A) => ErrorText] ? A : []

/** A class made by defineErrorCases: the case's name comes first, then its arguments. */
export type CasedErrorClass<C extends string, T extends Readonly<Record<string, ErrorCase>>> = (new <
  K extends keyof T & string,
>(
  which: K,
  ...args: [...CaseArgs<T[K]>, ErrorOptions?]
) => GatehouseError & { readonly code: C }) & {
  readonly code: C
  readonly status: number
  readonly template: (...args: never[]) => ErrorText
  /** Every way the code is said, for the error reference (docs/errors.md). */
  readonly cases: T
}

/**
 * One class for a code the protocol says in several ways (GoTrue answers `user_not_found`
 * with 403 for a token's subject and 404 for an admin look-up): each case has its status and
 * message, and `new X('case', ...args, opts?)` picks one where the error is raised.
 */
export function defineErrorCases<C extends string, T extends Readonly<Record<string, ErrorCase>>>(
  code: C,
  cases: T,
  base: new (code: string, status: number, message: string, opts: ErrorOptions) => GatehouseError = GatehouseError,
): CasedErrorClass<C, T> {
  const [first] = Object.values(cases)
  if (first === undefined) throw new TypeError(`defineErrorCases(${code}): no cases`)
  const textOf = (c: ErrorCase, args: unknown[]): ErrorText =>
    typeof c[1] === 'function' ? (c[1] as (...a: unknown[]) => ErrorText)(...args) : c[1]
  const cls = class extends base {
    static readonly code = code
    static readonly status = first[0]
    static readonly template = (...args: never[]): ErrorText => textOf(first, args)
    static readonly cases = cases
    constructor(which: string, ...rest: unknown[]) {
      if (!Object.hasOwn(cases, which)) throw new TypeError(`${code}: no case ${which}`)
      const c = cases[which]!
      const arity = typeof c[1] === 'function' ? c[1].length : 0
      const opts = (rest.length > arity ? rest[arity] : undefined) as ErrorOptions | undefined
      super(code, c[0], ...textAndOptions(textOf(c, rest.slice(0, arity)), opts))
    }
  }
  Object.defineProperty(cls, 'name', { value: `${code}Error` })
  definedClasses.add(cls)
  return cls as unknown as CasedErrorClass<C, T>
}

/** The error classes among a module's exports. */
export type RegistryOf<T> = { readonly [K in keyof T as T[K] extends AnyErrorClass ? K : never]: T[K] }

/**
 * A registry from a part's errors module (`import * as errors`): every export made by
 * defineError, so an error added to the module is in the registry without a list to keep.
 */
export function registryOf<T extends object>(mod: T): RegistryOf<T> {
  const out: Record<string, unknown> = {}
  for (const [name, value] of Object.entries(mod)) {
    if (typeof value === 'function' && definedClasses.has(value)) out[name] = value
  }
  return Object.freeze(out) as RegistryOf<T>
}

/** True for an instance of a registry class (its message was written for clients). */
export function isDefinedError(err: unknown): err is GatehouseError {
  return err instanceof GatehouseError && definedClasses.has(err.constructor)
}

export function isGatehouseError(err: unknown): err is GatehouseError {
  return err instanceof GatehouseError
}

/** Raised at boot for bad configuration; never becomes an HTTP response. */
export class ConfigError extends Error {
  readonly problems: string[]
  constructor(message: string, problems: string[] = []) {
    super(problems.length ? `${message}\n  - ${problems.join('\n  - ')}` : message)
    this.name = 'ConfigError'
    this.problems = problems
  }
}

// ---- codes shared by the parts ------------------------------------------------------------
// One definition each; every part that can answer them imports them from here.

/** The first path segment names no database served here (gateway, REST and auth engines). */
export const TenantNotFoundError = defineError(
  'tenant_not_found',
  404,
  (database: string) => `No project database is named "${database}"`,
)

/** The tenant database cannot be reached (restarting, connections terminated or refused); retry. */
export const DatabaseUnavailableError = defineError(
  'database_unavailable',
  503,
  'The database is not reachable at the moment, please retry shortly',
)

/**
 * A request that reached a part after it began to shut down (on a kept-alive connection: the
 * listener is closed already); another instance answers the retry (REST, auth engine, panel).
 */
export const ShuttingDownError = defineError('shutting_down', 503, 'This server is shutting down; retry the request')

/** Nothing is routed at this path (gateway and panel). */
export const NotFoundError = defineError('not_found', 404, 'Nothing is served at this path')

/** A request the HTTP layer could not read (gateway and panel). */
export const BadRequestError = defineError('bad_request', 400, (why: string) => `The request is malformed: ${why}`)

/** A request body over the limit of the part that read it (gateway and REST engine). */
export const PayloadTooLargeError = defineError(
  'payload_too_large',
  413,
  (limit: number) => `The request body is larger than the limit of ${limit} bytes`,
)

/** The request line and headers are over Node's header size limit (every part's listener). */
export const HeaderFieldsTooLargeError = defineError(
  'header_fields_too_large',
  431,
  (limit: number) => `The request line and headers are larger than the limit of ${limit} bytes`,
)

/** The request line and headers did not arrive in time (every part's listener). */
export const HeadersTimeoutError = defineError('headers_timeout', 408, 'The request headers did not arrive in time')

/** A failure with no known cause: 5xx bodies say only "unexpected failure"; the cause is logged. */
export const InternalError = defineError('internal_error', 500, 'unexpected failure')

/** The codes every part shares. */
export const SHARED_ERRORS = {
  TenantNotFoundError,
  DatabaseUnavailableError,
  ShuttingDownError,
  NotFoundError,
  BadRequestError,
  PayloadTooLargeError,
  HeaderFieldsTooLargeError,
  HeadersTimeoutError,
  InternalError,
} as const satisfies ErrorRegistry

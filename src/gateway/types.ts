// Types the gateway's modules share: its dependencies, the authenticated caller, the
// per-request context, and the hook the refusal rewriter plugs into.
// Importing a type from here never drags in logic.
import type { PartTracer, TraceLogFields } from '../shared/index.js'
import type { FastifyBaseLogger } from 'fastify'
import type { LoggerOptions } from 'pino'
import type { JWTPayload } from 'jose'
import type { Config } from '../config/index.js'
import type { Tenant, RoleKind, TenantLookup } from '../tenants/index.js'

/** Which upstream a request goes to. */
export type Service = 'auth' | 'rest'

/** What a proxied request is: whose, to which service, by whom, and its method, path and query. */
export interface ProxiedRequest {
  tenant: Tenant
  service: Service
  caller: Caller
  method: string
  /** Path below /<database>/<service>/v1, e.g. `/todos`. */
  path: string
  /** Query string as forwarded (without `?`). */
  query: string
}

/** Context given to the refusal rewriter for an upstream error response. */
export interface UpstreamErrorContext extends ProxiedRequest {
  status: number
  headers: Record<string, string | string[] | undefined>
  /** The parsed JSON body, or undefined when it did not parse. */
  body: unknown
  /** The raw body bytes (at most gateway.max_error_body_bytes). */
  raw: Buffer
  requestId: string
  log: FastifyBaseLogger
}

/** What the rewriter answers: null keeps the upstream response as it was. */
export interface RewrittenError {
  status?: number
  /** Replaces the JSON body (serialised by the gateway). */
  body: unknown
  /** Extra or replaced response headers. */
  headers?: Record<string, string>
}

export type RewriteError = (ctx: UpstreamErrorContext) => Promise<RewrittenError | null> | RewrittenError | null

export interface GatewayDeps {
  config: Config
  tenants: TenantLookup
  /** A ready logger (pino or fastify's); wins over loggerOptions. */
  logger?: FastifyBaseLogger
  /** Traces each request and (gateway) carries `traceparent` upstream; none when absent. */
  tracer?: PartTracer
  /** Extra pino options (level, stream ...); our redaction and serializers always apply. */
  loggerOptions?: LoggerOptions
  /**
   * Hook for the refusal rewriter: called only for upstream responses with status >= 400
   * and a JSON content type whose body fits gateway.max_error_body_bytes. Success bodies
   * are streamed untouched and never reach it.
   */
  rewriteError?: RewriteError
  /** Extra readiness check for /readyz (e.g. the tenant store answers). */
  ready?: () => Promise<boolean> | boolean
  /** Clock in milliseconds (tests); default Date.now. */
  now?: () => number
  /**
   * false: every request goes through fastify's routing (the plain node:http fast path is
   * off). For tests that compare the two entries; default on.
   */
  fastPath?: boolean
}

/** The authenticated caller of one request. */
export interface Caller {
  /**
   * The request role kind: anon, auth (signed-in user) or svc (secret key / service_role); on /auth/v1
   * only, no role of ours: an OAuth client's credentials at the token endpoint, or an unverified JWT.
   */
  kind: RoleKind | 'oauth_client' | 'unverified'
  /** Verified claims of a bearer JWT, or null when the caller used a key only. */
  claims: JWTPayload | null
  /** The bearer JWT as received (forwarded unchanged to the auth upstream), or null. */
  token: string | null
  /** `exp` of the bearer JWT (seconds), or null. */
  exp: number | null
  /** Kind of the API key presented, or null on open routes called without one. */
  keyKind: 'anon' | 'svc' | null
  /** Cache key of this caller (a hash, never the token itself). */
  cacheKey: string
  /** An OAuth client's Basic credentials at the OAuth 2.1 token endpoint, forwarded as they came. */
  clientAuthorization?: string
  /** The REST upstream token last signed for this caller (upstream-token.ts), re-used until renewAt. */
  upstream?: { token: string; renewAt: number; authorization: string }
}

/** Per-request facts for the completion log line and the metrics. */
export interface RequestInfo {
  reqId: string
  method: string
  /** The URL as received (the proxy rewrites raw.url). */
  url: string
  /** performance.now() when the gateway took the request. */
  start: number
  tenant: string
  service: Service | 'none'
  errorCode: string | null
  /** Set once the completion line and metrics are written. */
  done: boolean
  /** The request's trace (its span's ids) when the part traces: on its completion line. */
  trace?: TraceLogFields
}

/** The role kind of a REST caller: the callers with no role of ours exist on /auth/v1 only. */
export function roleKindOf(caller: Caller): RoleKind {
  if (caller.kind !== 'oauth_client' && caller.kind !== 'unverified') return caller.kind
  throw new TypeError(`${caller.kind} caller on REST`)
}

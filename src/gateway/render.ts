// Turns any error into the gateway's wire shape: {code, message, details, hint} plus the
// `x-gatehouse-error-code` header. 5xx bodies say "unexpected failure" and carry the request
// id; the cause is logged by the caller, never sent. Used by fastify's error handler and by
// the proxy's raw error path (after reply.hijack()).
import {
  type PartErrorMapping,
  toPartError,
  type GatehouseError,
  type WireError,
  gotrueErrorBody,
} from '../shared/index.js'
import { BadRequestError, InternalError, MalformedPathError } from './errors.js'

export interface RenderedError {
  status: number
  headers: Record<string, string>
  body: string
  error: GatehouseError
}

const HINTS_5XX: Record<string, string> = {
  upstream_unavailable:
    'The service behind the gateway could not be reached. Retry later; quote the request id when reporting it.',
  upstream_refused:
    'The service behind the gateway is not accepting connections (restarting?). Retry after the Retry-After seconds.',
  upstream_timeout:
    'The service behind the gateway did not answer in time. Retry later; quote the request id when reporting it.',
  not_ready: 'The gateway is shutting down or not ready. Retry on another instance.',
  upstream_busy: 'Every connection to the service behind the gateway stayed busy. Retry after the Retry-After seconds.',
  tenant_store_unavailable:
    'The gateway cannot reach its tenant store to look this database up. Retry after the Retry-After seconds.',
}

/**
 * Codes the gateway sends in GoTrue's shape under /auth/v1 (the limits it enforces in front
 * of the auth engine, where a GoTrue client expects GoTrue's body). Key, token and routing
 * refusals keep the gateway's shape everywhere, as Supabase's edge does.
 */
const AUTH_SHAPED = new Set(['payload_too_large', 'request_timeout', 'too_many_concurrent_requests', 'upstream_busy'])

export interface RenderOptions {
  /** The request went to /auth/v1: errors in AUTH_SHAPED take GoTrue's shape. */
  auth?: boolean
  /** The request's X-Supabase-Api-Version header (GoTrue's shape selector). */
  apiVersion?: string | string[]
}

/** Seconds a client should wait before retrying a 503 (every 503 says; default 1). */
const RETRY_AFTER_503: Record<string, string> = {
  tenant_store_unavailable: '5',
}

/** Our error for anything thrown (fastify's client errors keep their 4xx meaning). */
const GATEWAY_ERRORS: PartErrorMapping = {
  fromFastify: (fe, err) =>
    fe.kind === 'bad_url'
      ? new MalformedPathError('the URL cannot be decoded', { cause: err })
      : new BadRequestError(fe.message, { cause: err }),
  unknown: (err) => new InternalError({ cause: err, internal: err }),
}

export function renderError(err: unknown, requestId: string, opts?: RenderOptions): RenderedError {
  const error = toPartError(err, GATEWAY_ERRORS)
  const headers: Record<string, string> = {
    'content-type': 'application/json; charset=utf-8',
    'x-gatehouse-error-code': error.code,
    ...(error.headers ?? {}),
  }
  if (error.status === 503 && headers['retry-after'] === undefined)
    headers['retry-after'] = RETRY_AFTER_503[error.code] ?? '1'
  let wire: WireError | Record<string, unknown>
  if (opts?.auth === true && AUTH_SHAPED.has(error.code)) {
    const message = error.status >= 500 ? 'unexpected failure' : error.message
    const g = gotrueErrorBody({
      status: error.status,
      code: error.code,
      message,
      requestId,
      apiVersion: opts.apiVersion,
    })
    wire = g.body
    Object.assign(headers, g.headers)
  } else if (error.status >= 500) {
    wire = {
      code: error.code,
      message: 'unexpected failure',
      details: `request id ${requestId}`,
      hint: HINTS_5XX[error.code] ?? 'Quote the request id when reporting this failure.',
      request_id: requestId,
    }
  } else {
    wire = error.toWire()
  }
  return { status: error.status, headers, body: JSON.stringify(wire), error }
}

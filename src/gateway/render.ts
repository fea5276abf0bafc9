// Turns any error into the gateway's wire shape: {code, message, details, hint} plus the
// `x-gatehouse-error-code` header. 5xx bodies say "unexpected failure" and carry the request
// id; the cause is logged by the caller, never sent. Used by fastify's error handler and by
// the proxy's raw error path (after reply.hijack()).
import { isGatehouseError, type GatehouseError, type WireError } from '../shared/errors.js'
import { BadRequestError, InternalError, InvalidPathError } from './errors.js'

export interface RenderedError {
  status: number
  headers: Record<string, string>
  body: string
  error: GatehouseError
}

const HINTS_5XX: Record<string, string> = {
  upstream_unavailable: 'The service behind the gateway could not be reached. Retry later; quote the request id when reporting it.',
  upstream_timeout: 'The service behind the gateway did not answer in time. Retry later; quote the request id when reporting it.',
  not_ready: 'The gateway is shutting down or not ready. Retry on another instance.'
}

/** Seconds a client should wait before retrying a 503 (every 503 says; default 1). */
const RETRY_AFTER_503: Record<string, string> = {
  tenant_store_unavailable: '5'
}

/** Our error for anything thrown (fastify framework errors keep their 4xx meaning). */
export function toGatehouseError (err: unknown): GatehouseError {
  if (isGatehouseError(err)) return err
  const e = err as { statusCode?: number, code?: string, message?: string }
  if (typeof e?.statusCode === 'number' && e.statusCode >= 400 && e.statusCode < 500) {
    if (e.code === 'FST_ERR_BAD_URL' || e.code === 'FST_ERR_ASYNC_CONSTRAINT') {
      return new InvalidPathError('the URL cannot be decoded', { cause: err })
    }
    const g = new BadRequestError(String(e.message ?? 'bad request'), { cause: err })
    return Object.assign(g, { status: e.statusCode }) as GatehouseError
  }
  return new InternalError({ cause: err, internal: err })
}

export function renderError (err: unknown, requestId: string): RenderedError {
  const error = toGatehouseError(err)
  let wire: WireError
  if (error.status >= 500) {
    wire = {
      code: error.code,
      message: 'unexpected failure',
      details: `request id ${requestId}`,
      hint: HINTS_5XX[error.code] ?? 'Quote the request id when reporting this failure.',
      request_id: requestId
    }
  } else {
    wire = error.toWire()
  }
  const headers: Record<string, string> = {
    'content-type': 'application/json; charset=utf-8',
    'x-gatehouse-error-code': error.code,
    ...(error.headers ?? {})
  }
  if (error.status === 503 && headers['retry-after'] === undefined) headers['retry-after'] = RETRY_AFTER_503[error.code] ?? '1'
  return { status: error.status, headers, body: JSON.stringify(wire), error }
}

// fastify's own errors, read once for every part: a client error fastify raised before a
// handler ran (an undecodable URL, a body over the limit, a content type no parser takes, a
// body that does not parse, a route it does not know) keeps its 4xx meaning; each part then
// answers it with its own registry's error (GoTrue's codes on auth, PostgREST's on REST).
// Anything else thrown is an unexpected failure, which the parts render as their 500.
import { isGatehouseError, type GatehouseError } from './errors.js'

/** What went wrong, as far as a client needs to know. */
type FastifyClientErrorKind =
  'bad_url' | 'body_too_large' | 'unsupported_media_type' | 'bad_body' | 'not_found' | 'client'

interface FastifyClientError {
  kind: FastifyClientErrorKind
  /** fastify's message. */
  message: string
  /** True when fastify raised it (its `FST_` codes), not a library that set a 4xx statusCode. */
  fastify: boolean
}

/** fastify's (or an http-errors style) 4xx error, classified; null for anything else. */
function fastifyClientError(err: unknown): FastifyClientError | null {
  if (typeof err !== 'object' || err === null) return null
  const e = err as { statusCode?: unknown; code?: unknown; message?: unknown }
  const status = e.statusCode
  if (typeof status !== 'number' || status < 400 || status >= 500) return null
  const code = typeof e.code === 'string' ? e.code : ''
  return {
    kind: kindOf(status, code),
    message: String(e.message ?? 'bad request'),
    fastify: code.startsWith('FST_'),
  }
}

function kindOf(status: number, code: string): FastifyClientErrorKind {
  if (code === 'FST_ERR_BAD_URL' || code === 'FST_ERR_ASYNC_CONSTRAINT') return 'bad_url'
  if (status === 413 || code === 'FST_ERR_CTP_BODY_TOO_LARGE') return 'body_too_large'
  if (status === 415 || code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE') return 'unsupported_media_type'
  if (status === 400 || code.startsWith('FST_ERR_CTP_')) return 'bad_body'
  if (status === 404) return 'not_found'
  return 'client'
}

/** How a part names what it did not throw itself: a fastify 4xx, and anything else (a 5xx). */
export interface PartErrorMapping {
  fromFastify(fe: FastifyClientError, err: unknown): GatehouseError
  unknown(err: unknown): GatehouseError
}

/**
 * The one way every part turns a thrown value into its error: ours as it is, a fastify client
 * error (a body too large, a bad content type, a bad URL) through the part's mapping, which keeps
 * its 4xx meaning in the part's own codes, and anything else the part's 5xx.
 */
export function toPartError(err: unknown, mapping: PartErrorMapping): GatehouseError {
  if (isGatehouseError(err)) return err
  const fe = fastifyClientError(err)
  return fe === null ? mapping.unknown(err) : mapping.fromFastify(fe, err)
}

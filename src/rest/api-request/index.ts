// HTTP -> ApiRequest (PostgREST's ApiRequest.hs): routes path + method to an action,
// selects the schema (profiles), parses the query string, Prefer, Range and Accept.
// Pure: knows HTTP but not the database; throws RestErrors (PGRST1xx) on bad input.
import {
  InvalidPathError,
  InvalidSchemaError,
  OpenApiDisabledError,
  RpcMethodError,
  UnsupportedMethodError,
} from '../errors.js'
import type { GatehouseError } from '../../shared/index.js'
import { parseAccept, parseMediaType } from './media-type.js'
import { parsePreferences } from './preferences.js'
import { decodeComponent, parseQueryParams } from './query-params.js'
import { intersectRanges, parseRangeHeader, rangeOf } from './range.js'
import type { Action, ApiRequest, HttpMethod, Resource } from './types.js'

export type * from './types.js'
export {
  parseQueryParams,
  parseSelect,
  parseOrder,
  parseFilterValue,
  parseLogicTree,
  parseColumns,
} from './query-params.js'
export { parsePreferences } from './preferences.js'
export { parseAccept } from './media-type.js'
export { parseRangeHeader, intersectRanges } from './range.js'
export { parseWritePayload, parseCallPayload, parseCsv } from './payload.js'

/** What the HTTP layer hands over: everything below the tenant's base URL. */
export interface RawRequest {
  method: string
  /** Path below `/<database>`, still percent-encoded: `/films`, `/rpc/fn`, `/` or ``. */
  path: string
  /** Query string without `?`. */
  query: string
  headers: Readonly<Record<string, string | string[] | undefined>>
  /** `request.headers` as PostgREST sets it (see headerViews); absent: from `headers`. */
  gucHeaders?: Readonly<Record<string, string>>
  body: Buffer | null
}

export interface ParseContext {
  /** The tenant's exposed schemas; the first is the default. */
  schemas: readonly string[]
  /** The database's time zone names (pg_timezone_names); absent: any `timezone=` is taken. */
  timezones?: ReadonlySet<string>
  /** PostgREST's db-root-spec: the function the root path calls in place of the OpenAPI document. */
  rootSpec?: string | null
  /** PostgREST's openapi-mode disabled: the root path answers PGRST126, whatever the method. */
  openapiDisabled?: boolean
}

const METHODS: ReadonlySet<string> = new Set(['GET', 'HEAD', 'POST', 'PATCH', 'PUT', 'DELETE', 'OPTIONS'])

/** Headers never copied into `request.headers` (credentials). */
const HIDDEN_HEADERS: ReadonlySet<string> = new Set(['authorization', 'cookie', 'apikey'])

/** A request header's first value (Node joins most repeated headers; a few arrive as arrays). */
export function requestHeader(h: RawRequest['headers'], name: string): string | undefined {
  const v = h[name]
  return Array.isArray(v) ? v[0] : v
}

/** Path segments after percent-decoding (`+` stays a plus in paths). */
export function pathSegments(path: string): string[] {
  const trimmed = path.startsWith('/') ? path.slice(1) : path
  if (trimmed === '') return []
  return trimmed.split('/').map((s) => decodeComponent(s, false))
}

/** What a path names: the root (`schema`), `/T`, `/rpc/fn`; null for anything else (PGRST125). */
function resourceOf(segments: readonly string[]): Resource | null {
  if (segments.length === 0) return { kind: 'schema' }
  if (segments.length === 1 && segments[0] !== '') return { kind: 'relation', name: segments[0] }
  if (segments.length === 2 && segments[0] === 'rpc' && segments[1] !== '')
    return { kind: 'routine', name: segments[1] }
  return null
}

/**
 * The error PostgREST answers for a method it does not route (ApiRequest.hs: the path is
 * resolved first): PGRST125 for a path that names no resource, PGRST101 on a function,
 * PGRST117 otherwise.
 */
export function unsupportedMethod(method: string, segments: readonly string[]): GatehouseError {
  const resource = resourceOf(segments)
  if (resource === null) return new InvalidPathError()
  const m = method.toUpperCase()
  return resource.kind === 'routine' ? new RpcMethodError(m) : new UnsupportedMethodError(m)
}

const MUTATIONS = { POST: 'insert', PATCH: 'update', PUT: 'single-upsert', DELETE: 'delete' } as const
const INVOKES = { GET: 'get', HEAD: 'head', POST: 'post' } as const

/** PostgREST's routing table (docs/rest-protocol.md §1.1). */
function routeAction(method: HttpMethod, segments: readonly string[]): Action {
  const resource = resourceOf(segments)
  if (resource === null) throw new InvalidPathError()
  if (method === 'OPTIONS') return { kind: 'info', resource }
  const headersOnly = method === 'HEAD'
  switch (resource.kind) {
    case 'schema':
      if (method === 'GET' || method === 'HEAD') return { kind: 'openapi', headersOnly }
      throw new UnsupportedMethodError(method)
    case 'relation':
      if (method === 'GET' || method === 'HEAD') return { kind: 'read', relation: resource.name, headersOnly }
      return { kind: 'mutate', relation: resource.name, mutation: MUTATIONS[method] }
    case 'routine':
      if (method === 'GET' || method === 'HEAD' || method === 'POST')
        return { kind: 'call', routine: resource.name, invoke: INVOKES[method] }
      throw new RpcMethodError(method)
  }
}

/** Headers PostgREST reads with Wai's `lookup`: a repeated one counts with its first line. */
const FIRST_LINE: ReadonlySet<string> = new Set([
  'accept',
  'accept-profile',
  'content-profile',
  'range',
  'cookie',
  'content-type',
  'authorization',
])

/**
 * A request's headers as PostgREST sees them, from every line of each (Node's
 * `headersDistinct`; Node itself joins most repeated headers with ", "): `headers` to read
 * from (the first line of Accept, Accept-Profile, Content-Profile, Range, Cookie; every
 * Prefer line, joined, as PostgREST collects them all), and `guc`, the visible headers of
 * `request.headers`, where a repeated header keeps its last line (PostgREST builds it with
 * HashMap.fromList).
 */
export function headerViews(
  joined: RawRequest['headers'],
  lines: Readonly<Record<string, readonly string[] | undefined>> | undefined,
): {
  headers: Record<string, string | string[] | undefined>
  gucHeaders: Record<string, string>
} {
  const headers: Record<string, string | string[] | undefined> = { ...joined }
  const last: Record<string, string | string[] | undefined> = { ...joined }
  for (const [name, values] of Object.entries(lines ?? {})) {
    if (values === undefined || values.length < 2) continue
    if (FIRST_LINE.has(name)) headers[name] = values[0]
    last[name] = values[values.length - 1]
  }
  return { headers, gucHeaders: visibleHeaders(last) }
}

/** `request.headers`: lower-case names, one value each, no credentials. */
export function visibleHeaders(h: RawRequest['headers']): Record<string, string> {
  const out: Record<string, string> = {}
  for (const [k, v] of Object.entries(h)) {
    if (v === undefined) continue
    const name = k.toLowerCase()
    if (HIDDEN_HEADERS.has(name)) continue
    out[name] = Array.isArray(v) ? v[0] : v
  }
  return out
}

/** Parses a request into an ApiRequest, or throws the PGRST error PostgREST would send. */
export function parseApiRequest(raw: RawRequest, ctx: ParseContext): ApiRequest {
  const method = raw.method.toUpperCase()
  const segments = pathSegments(raw.path)
  if (!METHODS.has(method)) throw unsupportedMethod(method, segments)
  const m = method as HttpMethod
  // As PostgREST's getResource: a disabled root is refused before the method is looked at;
  // db-root-spec makes the root that function of the request's schema, as `/rpc/<function>`.
  if (segments.length === 0 && ctx.openapiDisabled === true) throw new OpenApiDisabledError()
  const action = routeAction(m, segments.length === 0 && ctx.rootSpec ? ['rpc', ctx.rootSpec] : segments)

  // Profiles (§5.3): GET/HEAD (and OPTIONS) read Accept-Profile, writes Content-Profile.
  const readLike = m === 'GET' || m === 'HEAD' || m === 'OPTIONS'
  const profile = requestHeader(raw.headers, readLike ? 'accept-profile' : 'content-profile')
  if (profile !== undefined && !ctx.schemas.includes(profile)) throw new InvalidSchemaError(profile, ctx.schemas)

  const rpcRead = action.kind === 'call' && action.invoke !== 'post'
  const query = parseQueryParams(raw.query, { rpcRead })
  const preferences = parsePreferences(raw.headers.prefer, ctx.timezones)

  // Top-level range: limit/offset, intersected with Range on GET (RFC 9110: others ignore it).
  const limitOffset = rangeOf(query.ranges.find((r) => r.path.length === 0))
  const rangeHeader = m === 'GET' ? parseRangeHeader(requestHeader(raw.headers, 'range')) : null
  const ct = requestHeader(raw.headers, 'content-type')
  return {
    action,
    method: m,
    path: raw.path === '' ? '/' : raw.path,
    schema: profile ?? ctx.schemas[0],
    echoProfile: profile !== undefined || ctx.schemas.length > 1,
    query,
    preferences,
    range: rangeHeader ? intersectRanges(limitOffset, rangeHeader) : limitOffset,
    rangeHeader,
    accept: parseAccept(requestHeader(raw.headers, 'accept')),
    contentType: ct ? parseMediaType(ct) : null,
    body: raw.body && raw.body.length > 0 ? raw.body : null,
    headers: visibleHeaders(raw.headers),
  }
}

// Reads the raw request target once: rejects encoded tricks (%2F, %5C, dot segments,
// double slashes, `;` outside a REST relation name), checks the database segment against DATABASE_NAME before any
// look-up, and splits `/<database>/<service>/v1/<rest>?<query>`.
// Works on the raw URL, never on router-decoded params, so routing, keys and logs agree.
import { DATABASE_NAME } from '../../tenants/index.js'
import { MalformedPathError, NotFoundError, ServiceNotOfferedError, TenantNotFoundError } from '../errors.js'
import type { Service } from '../types.js'

export interface GatewayPath {
  database: string
  /** `auth` or `rest` when the path is `/<database>/<service>/v1[/...]`, else null. */
  service: Service | null
  /** The path below `/<database>/<service>/v1`, always starting with `/`. */
  path: string
  /** The raw query string without `?` ('' when none). */
  query: string
}

// %2F and %5C are encoded slashes, %2E an encoded dot, %00 NUL (Envoy CVE-2019-9901 /
// CVE-2021-29492 family): refused rather than normalised, as Supabase's Envoy does.
const ENCODED_TRICK = /%(?:2f|5c|2e|00)/i

function rejectTricks(path: string): void {
  if (path.charCodeAt(0) !== 47 /* / */) throw new MalformedPathError('it must start with "/"')
  if (path.includes('//')) throw new MalformedPathError('empty path segment (double slash)')
  if (path.includes('\\')) throw new MalformedPathError('backslash in path')
  if (path.includes('#')) throw new MalformedPathError('"#" in path')
  if (path.includes('%') && ENCODED_TRICK.test(path)) {
    throw new MalformedPathError('encoded slash, backslash, dot or NUL in path')
  }
  if (path.includes('/.')) {
    for (const seg of path.split('/')) {
      if (seg === '.' || seg === '..') throw new MalformedPathError('dot segment in path')
    }
  }
}

/**
 * `/rest/v1/...`, `/auth/v1/...` (or another Supabase service) with no database before it: a
 * client given the gateway's base URL alone, e.g. supabase-js's createClient('http://host:8000', key).
 */
const SERVICE_FIRST = /^\/(?:rest|auth|storage|functions|graphql|realtime)\/v1(?:\/|$)/
const NO_DATABASE_HINT =
  'The URL names no database: each is served at <base URL>/<database>/rest/v1 and /auth/v1, so a client is ' +
  "created with the database's URL, e.g. createClient('<base URL>/<database>', key)."
/** The hint of tenant_not_found: where the name came from. */
export const DATABASE_HINT =
  "The first segment of the path names the database (<base URL>/<database>/rest/v1): check it against the database's URL."

/** Splits and checks a raw request target. Throws InvalidPath, NotFound or TenantNotFound. */
export function parseGatewayPath(url: string): GatewayPath {
  const q = url.indexOf('?')
  const path = q === -1 ? url : url.slice(0, q)
  const query = q === -1 ? '' : url.slice(q + 1)
  rejectTricks(path)
  const s1 = path.indexOf('/', 1)
  const semi = path.indexOf(';')
  if (semi !== -1 && (s1 === -1 || semi < s1)) throw new MalformedPathError('";" in path')
  const database = s1 === -1 ? path.slice(1) : path.slice(1, s1)
  if (database === '') throw new NotFoundError()
  if (SERVICE_FIRST.test(path)) throw new NotFoundError({ hint: NO_DATABASE_HINT })
  if (!DATABASE_NAME.test(database)) {
    throw new TenantNotFoundError(database.length > 63 ? database.slice(0, 63) + '...' : database, {
      details: 'database names are 1-63 lower-case letters, digits, "_" or "-", starting with a letter',
      hint: DATABASE_HINT,
    })
  }
  if (s1 === -1) return { database, service: null, path: '/', query }
  // `/<db>/auth/v1` or `/<db>/rest/v1`, then `/...` or nothing.
  const rest = path.slice(s1)
  let service: Service | null = null
  if (rest.startsWith('/auth/v1')) service = 'auth'
  else if (rest.startsWith('/rest/v1')) service = 'rest'
  // `;` only in what the REST engine reads as a relation or function name (PostgREST serves a
  // table named `Escap3e;`); never in the database or service segments, nor on auth paths.
  if (semi !== -1 && !(service === 'rest' && semi > s1 + 8)) throw new MalformedPathError('";" in path')
  if (service !== null) {
    const below = rest.slice(8)
    if (below === '') return { database, service, path: '/', query }
    if (below.charCodeAt(0) === 47) return { database, service, path: below, query }
  }
  return { database, service: null, path: rest, query }
}

/** Auth routes reachable without an API key (browser redirects, as Supabase's Kong, and the
 * discovery documents OIDC libraries fetch without one), and the OAuth 2.1 server's routes a
 * third-party app calls, which holds no key of the database (docs/auth-protocol.md §3.22; the
 * auth engine answers 404 feature_disabled where the server is off). */
export function isOpenAuthRoute(method: string, path: string): boolean {
  if (method === 'GET')
    return (
      path === '/verify' ||
      path === '/callback' ||
      path === '/authorize' ||
      path === '/.well-known/jwks.json' ||
      path === '/.well-known/openid-configuration' ||
      path === '/.well-known/oauth-authorization-server' ||
      path === '/oauth/authorize' ||
      path === '/oauth/userinfo'
    )
  if (method === 'POST') return path === '/callback' || path === '/oauth/token' || path === '/oauth/clients/register'
  return false
}

/** `/<table>`: one non-empty segment that is not `rpc` (reads get the default limit). */
export function isTablePath(path: string): boolean {
  if (path.length < 2) return false
  const end = path.indexOf('/', 1)
  if (end !== -1 && end !== path.length - 1) return false
  const seg = end === -1 ? path.slice(1) : path.slice(1, end)
  return seg !== '' && seg !== 'rpc'
}

/** Supabase's other services, by path segment: answered as not offered, never as a bare 404. */
const UNOFFERED: ReadonlyMap<string, string> = new Map([
  ['storage', 'Storage'],
  ['functions', 'Edge Functions'],
  ['graphql', 'GraphQL'],
  ['realtime', 'Realtime'],
])
const SERVICE_PREFIX = /^\/([a-z]+)\/v1(?:\/|$)/

/**
 * The error for a path below `/<database>` that names no service we serve: service_not_offered
 * for Supabase's Storage, Edge Functions, GraphQL and Realtime paths, not_found otherwise.
 */
export function notServedError(
  below: string,
): InstanceType<typeof ServiceNotOfferedError> | InstanceType<typeof NotFoundError> {
  const m = SERVICE_PREFIX.exec(below)
  const name = m === null ? undefined : UNOFFERED.get(m[1]!)
  if (name === undefined) return new NotFoundError()
  return new ServiceNotOfferedError(name, `/${m![1]}/v1`, {
    hint: 'The services Gatehouse offers and the Supabase features it leaves out are listed in its docs/supabase.md.',
  })
}

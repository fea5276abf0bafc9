// Content negotiation (PostgREST's Plan/Negotiate.hs, docs/rest-protocol.md §5.1): the first acceptable
// media type, in the client's order of preference, that this action can produce.
// PGRST107 when none is available.
import { InvalidPreferencesError, MediaTypeError } from '../errors.js'
import { mimeName, planFor, planOptions, showAccept } from '../api-request/media-type.js'
import type { ApiRequest, MediaType } from '../api-request/types.js'
import { mediaHandlerKey, type MediaHandlerDef, type QualifiedName } from '../schema-cache/types.js'
import type { ExplainSpec, MediaHandler } from './types.js'

const JSON_CT = 'application/json; charset=utf-8'

/** Where a read's media type handlers are looked up (PostgREST's negotiateContent). */
interface HandlerScope {
  readonly handlers: ReadonlyMap<string, MediaHandlerDef> | undefined
  /** The relation (or scalar function) whose rows the body is made of. */
  readonly target: QualifiedName
  /** The select is the default `*`: handlers of the target itself apply. */
  readonly defaultSelect: boolean
}

/** The select is the default `*` alone (PostgREST's hasDefaultSelect): handlers of the target apply. */
export function isDefaultSelect(req: ApiRequest): boolean {
  const s = req.query.select
  if (s.length !== 1) return false
  const f = s[0]
  return f.kind === 'field' && f.field.name === '*' && f.field.jsonPath.length === 0 && f.aggregate === null
}

/** Media types PostgREST sends with `; charset=utf-8` (MediaType.hs toContentType). */
const CHARSET_TYPES: ReadonlySet<string> = new Set([
  'application/json',
  'application/geo+json',
  'text/csv',
  'text/plain',
  'text/xml',
  'application/openapi+json',
  'application/x-www-form-urlencoded',
])

function customHandler(def: MediaHandlerDef): MediaHandler {
  const ct = CHARSET_TYPES.has(def.mediaType) ? `${def.mediaType}; charset=utf-8` : def.mediaType
  return { kind: 'custom', contentType: ct, function: def.function, target: def.target, bytes: def.bytes }
}

/**
 * A handler of the database for `type`, as PostgREST's lookupHandler: the target's `*\/*`
 * handler or its handler of that type (default select only), then an anyelement handler.
 */
function lookupCustom(scope: HandlerScope | undefined, type: string): MediaHandler | null {
  const h = scope?.handlers
  if (h === undefined) return null
  const own = scope!.defaultSelect
    ? (h.get(mediaHandlerKey(scope!.target, '*/*')) ?? h.get(mediaHandlerKey(scope!.target, type)))
    : undefined
  const def = own ?? h.get(mediaHandlerKey(null, type))
  return def === undefined ? null : customHandler(def)
}

/** The media handler of a read (tables, views, RPC results). */
export function negotiateRead(accept: readonly MediaType[], scope?: HandlerScope): MediaHandler {
  for (const m of accept) {
    const stripped = m.params.nulls === 'stripped'
    const vendored = m.type.startsWith('application/vnd.pgrst.')
    const custom = vendored ? null : lookupCustom(scope, m.type)
    if (custom !== null) return custom
    switch (m.type) {
      case '*/*':
      case 'application/json':
        return { kind: 'json', stripNulls: false, contentType: JSON_CT }
      case 'application/vnd.pgrst.object+json':
      case 'application/vnd.pgrst.object':
        return {
          kind: 'singular',
          stripNulls: stripped,
          contentType: stripped
            ? 'application/vnd.pgrst.object+json;nulls=stripped; charset=utf-8'
            : 'application/vnd.pgrst.object+json; charset=utf-8',
        }
      case 'application/vnd.pgrst.array+json':
      case 'application/vnd.pgrst.array':
        return {
          kind: 'json',
          stripNulls: stripped,
          contentType: stripped ? 'application/vnd.pgrst.array+json;nulls=stripped; charset=utf-8' : JSON_CT,
        }
      case 'text/csv':
        return { kind: 'csv', contentType: 'text/csv; charset=utf-8' }
      case 'application/geo+json':
        // As PostgREST: always offered; without PostGIS, Postgres answers 42883 for ST_AsGeoJSON.
        return { kind: 'geojson', contentType: 'application/geo+json; charset=utf-8' }
    }
  }
  throw new MediaTypeError(showAccept(accept))
}

const PLAN_TYPES: ReadonlyMap<string, 'json' | 'text'> = new Map([
  ['application/vnd.pgrst.plan', 'text'],
  ['application/vnd.pgrst.plan+text', 'text'],
  ['application/vnd.pgrst.plan+json', 'json'],
])

/** The media types negotiateRead answers itself (an earlier one wins over a plan type). */
const PRODUCED: ReadonlySet<string> = new Set([
  '*/*',
  'application/json',
  'application/vnd.pgrst.object+json',
  'application/vnd.pgrst.object',
  'application/vnd.pgrst.array+json',
  'application/vnd.pgrst.array',
  'text/csv',
  'application/geo+json',
])

/**
 * PostgREST's plan media type (db-plan-enabled): when the first acceptable type is
 * `application/vnd.pgrst.plan[+json|+text]` for a media type the action produces, the
 * request is planned for its `for=` type (default application/json) and answered with the
 * EXPLAIN output; a plan type for a type not produced is passed over like any unavailable
 * type. Disabled, the plan types are not offered (a request that accepts nothing else
 * gets PGRST107).
 */
export function negotiatePlan(
  accept: readonly MediaType[],
  enabled: boolean,
  handlers?: ReadonlyMap<string, MediaHandlerDef>,
): { explain: ExplainSpec; accept: MediaType[] } | null {
  if (!enabled) return null
  // The types the database's media handlers produce count as produced (PostgREST's
  // lookupHandler of the plan's `for` type); whether one applies is decided by the plan.
  const custom =
    handlers === undefined ? null : new Set([...handlers.keys()].map((k) => k.slice(k.indexOf('\u0001') + 1)))
  const produced = (type: string): boolean =>
    PRODUCED.has(type) || custom?.has(type) === true || custom?.has('*/*') === true
  for (const m of accept) {
    const format = PLAN_TYPES.get(m.type)
    if (format === undefined) {
      if (produced(m.type)) return null
      continue
    }
    const inner = planFor(m)
    if (!produced(inner.type) || PLAN_TYPES.has(inner.type)) continue
    return {
      explain: { format, options: planOptions(m), forMediaType: mimeName(inner) },
      accept: [inner],
    }
  }
  return null
}

/**
 * Matches PostgREST: with handling=strict, any preference it does not know is an error
 * (PGRST122), checked once the table and the select are planned and Accept negotiated
 * (reads, calls, OPTIONS on a function; writes check it in planMutate). OPTIONS on a table
 * or the root and the OpenAPI document do not check it.
 */
export function checkPreferences(req: ApiRequest): void {
  const p = req.preferences
  if (p.handling === 'strict' && p.invalid.length > 0) {
    throw new InvalidPreferencesError(p.invalid)
  }
}

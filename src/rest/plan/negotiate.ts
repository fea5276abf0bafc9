// Content negotiation (PostgREST's Plan/Negotiate.hs, spec §5.1): the first acceptable
// media type, in the client's order of preference, that this action can produce.
// PGRST107 when none is available.
import { MediaTypeError } from '../errors.js'
import { parseMediaType, showMediaType } from '../api-request/media-type.js'
import type { MediaType } from '../api-request/types.js'
import type { ExplainSpec, MediaHandler, PlanOption } from './types.js'

const JSON_CT = 'application/json; charset=utf-8'

/** The media handler of a read (tables, views, RPC results). */
export function negotiateRead (accept: readonly MediaType[]): MediaHandler {
  for (const m of accept) {
    const stripped = m.params.nulls === 'stripped'
    switch (m.type) {
      case '*/*':
      case 'application/*':
      case 'application/json':
        return { kind: 'json', stripNulls: false, contentType: JSON_CT }
      case 'application/vnd.pgrst.object+json':
      case 'application/vnd.pgrst.object':
        return {
          kind: 'singular',
          stripNulls: stripped,
          contentType: stripped ? 'application/vnd.pgrst.object+json; nulls=stripped; charset=utf-8' : 'application/vnd.pgrst.object+json; charset=utf-8'
        }
      case 'application/vnd.pgrst.array+json':
      case 'application/vnd.pgrst.array':
        return stripped
          ? { kind: 'json', stripNulls: true, contentType: 'application/vnd.pgrst.array+json; nulls=stripped; charset=utf-8' }
          : { kind: 'json', stripNulls: false, contentType: JSON_CT }
      case 'text/csv':
      case 'text/*':
        return { kind: 'csv', contentType: 'text/csv; charset=utf-8' }
      case 'application/geo+json':
        // As PostgREST: always offered; without PostGIS, Postgres answers 42883 for ST_AsGeoJSON.
        return { kind: 'geojson', contentType: 'application/geo+json; charset=utf-8' }
    }
  }
  throw new MediaTypeError(accept.map(showMediaType).join(', '))
}

const PLAN_TYPES: ReadonlyMap<string, 'json' | 'text'> = new Map([
  ['application/vnd.pgrst.plan', 'text'],
  ['application/vnd.pgrst.plan+text', 'text'],
  ['application/vnd.pgrst.plan+json', 'json']
])

/** The media types negotiateRead answers itself (an earlier one wins over a plan type). */
const PRODUCED: ReadonlySet<string> = new Set([
  '*/*', 'application/*', 'application/json', 'application/vnd.pgrst.object+json', 'application/vnd.pgrst.object',
  'application/vnd.pgrst.array+json', 'application/vnd.pgrst.array', 'text/csv', 'text/*'
])

const PLAN_OPTIONS: readonly PlanOption[] = ['analyze', 'verbose', 'settings', 'buffers', 'wal']

/** PostgREST's name of a `for=` media type (its toMime of the decoded type). */
function forName (m: MediaType, raw: string): string {
  const stripped = m.params.nulls === 'stripped'
  switch (m.type) {
    case 'application/vnd.pgrst.object+json':
    case 'application/vnd.pgrst.object':
      return stripped ? 'application/vnd.pgrst.object+json;nulls=stripped' : 'application/vnd.pgrst.object+json'
    case 'application/vnd.pgrst.array+json':
    case 'application/vnd.pgrst.array':
      return stripped ? 'application/vnd.pgrst.array+json;nulls=stripped' : 'application/json'
    case 'application/json': case 'application/geo+json': case 'text/csv': case 'text/plain': case 'text/xml':
    case 'application/openapi+json': case 'application/x-www-form-urlencoded': case 'application/octet-stream': case '*/*':
      return m.type
    default:
      return raw
  }
}

/**
 * PostgREST's plan media type (db-plan-enabled): when the first acceptable type is
 * `application/vnd.pgrst.plan[+json|+text]`, the request is planned for its `for=` type
 * (default application/json) and answered with the EXPLAIN output. Disabled, the plan
 * types are not offered (a request that accepts nothing else gets PGRST107).
 */
export function negotiatePlan (accept: readonly MediaType[], enabled: boolean): { explain: ExplainSpec, accept: MediaType[] } | null {
  if (!enabled) return null
  for (const m of accept) {
    const format = PLAN_TYPES.get(m.type)
    if (format === undefined) {
      if (PRODUCED.has(m.type)) return null
      continue
    }
    const raw = Object.prototype.hasOwnProperty.call(m.params, 'for') ? m.params.for : 'application/json'
    const inner = parseMediaType(raw) ?? parseMediaType('application/json')!
    const given = new Set((Object.prototype.hasOwnProperty.call(m.params, 'options') ? m.params.options : '').split('|'))
    return {
      explain: { format, options: PLAN_OPTIONS.filter((o) => given.has(o)), forMediaType: forName(inner, raw) },
      accept: [inner]
    }
  }
  return null
}

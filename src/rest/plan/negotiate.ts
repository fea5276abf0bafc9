// Content negotiation (PostgREST's Plan/Negotiate.hs, spec §5.1): the first acceptable
// media type, in the client's order of preference, that this action can produce.
// PGRST107 when none is available.
import { MediaTypeError } from '../errors.js'
import { showMediaType } from '../api-request/media-type.js'
import type { MediaType } from '../api-request/types.js'
import type { MediaHandler } from './types.js'

const JSON_CT = 'application/json; charset=utf-8'

/** The media handler of a read (tables, views; RPC results in issue 5). */
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

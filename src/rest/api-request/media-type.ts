// Accept and Content-Type parsing (docs/rest-protocol.md §5.1): media types with parameters and
// q-values, sorted by preference (stable). Choosing among them is plan/negotiate.ts.
import type { MediaType } from './types.js'
import { bareRecord, ownValue } from '../../shared/index.js'

const ANY: MediaType = Object.freeze({ type: '*/*', params: Object.freeze({}), q: 1 })

/** One media type: `application/json; charset=utf-8` -> {type, params}. */
export function parseMediaType(value: string): MediaType | null {
  const parts = value.split(';')
  const type = parts[0].trim().toLowerCase()
  if (!type) return null
  const params = bareRecord<string>()
  let q = 1
  for (const p of parts.slice(1)) {
    const eq = p.indexOf('=')
    if (eq < 0) continue
    const k = p.slice(0, eq).trim().toLowerCase()
    let v = p.slice(eq + 1).trim()
    if (v.startsWith('"') && v.endsWith('"') && v.length >= 2) v = v.slice(1, -1)
    if (k === 'q') {
      const n = Number(v)
      q = Number.isFinite(n) ? Math.min(1, Math.max(0, n)) : 1
    } else {
      params[k] = v.toLowerCase()
    }
  }
  return { type, params, q }
}

/**
 * PostgREST's reading of a media type (MediaType.hs decodeMediaType): `main/sub` of letters,
 * digits and `.*` (`+-` also in sub), then `;key=value` parameters (key: letters, digits,
 * `-`, lower-cased; value: a "quoted" string or letters, digits, `|-`, kept as written).
 * Whatever follows what parses is ignored. null when not even `main/sub` parses.
 */
function decodeMediaType(text: string): { type: string; params: Record<string, string> } | null {
  const m = /^([A-Za-z0-9.*]+)\/([A-Za-z0-9.*+-]+)/.exec(text)
  if (!m) return null
  const params = bareRecord<string>()
  const param = /^\s*;\s*([A-Za-z0-9-]+)\s*=\s*(?:"([^"]*)"|([A-Za-z0-9|-]+))/
  let rest = text.slice(m[0].length)
  for (let p = param.exec(rest); p !== null; p = param.exec(rest)) {
    params[p[1]!.toLowerCase()] = p[2] ?? p[3]!
    rest = rest.slice(p[0].length)
  }
  return { type: `${m[1]!.toLowerCase()}/${m[2]!.toLowerCase()}`, params }
}

/** PostgREST's q-value of an Accept entry (Haskell `reads` of a Double; 1 when it does not read). */
function qValue(text: string): number {
  const m = /^-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?/.exec(text)
  return m ? Number(m[0]) : 1
}

/**
 * The Accept header as a preference-ordered list, read as PostgREST reads it (wai-extra's
 * parseHttpAccept): entries split on commas with all blanks removed, `;q=` cuts the entry,
 * sorted by q then by specificity (semicolons minus stars), both descending, stable. q=0
 * entries are kept, so are empty ones (nothing is acceptable for an empty header). `*\/*`
 * when the header is absent.
 */
export function parseAccept(header: string | undefined): MediaType[] {
  if (header === undefined) return [ANY]
  if (header === '') return []
  const list: Array<{ m: MediaType; specificity: number; i: number }> = []
  for (const item of header.replace(/ /g, '').split(',')) {
    const cut = item.indexOf(';q=')
    const raw = cut < 0 ? item : item.slice(0, cut)
    const q = cut < 0 ? 1 : qValue(item.slice(cut + 3).split(';')[0]!)
    const decoded = decodeMediaType(raw)
    const m: MediaType = {
      type: decoded?.type ?? raw.toLowerCase(),
      params: decoded?.params ?? bareRecord<string>(),
      q,
      raw,
    }
    const count = (c: string): number => raw.split(c).length - 1
    list.push({ m, specificity: count(';') - count('*'), i: list.length })
  }
  return list.sort((a, b) => b.m.q - a.m.q || b.specificity - a.specificity || a.i - b.i).map((e) => e.m)
}

const PLAN_OPTIONS = ['analyze', 'verbose', 'settings', 'buffers', 'wal'] as const

/** The EXPLAIN options a plan type names (`options=analyze|verbose`) that PostgREST knows, in its order. */
export function planOptions(m: Pick<MediaType, 'params'>): Array<(typeof PLAN_OPTIONS)[number]> {
  const given = (ownValue(m.params, 'options') ?? '').split('|')
  return PLAN_OPTIONS.filter((o) => given.includes(o))
}

/**
 * A media type as PostgREST names it in PGRST107 and plan Content-Types (MediaType.hs
 * toMime of the decoded type): known types by their canonical name, the plan type with its
 * `for` and options, anything else as the client wrote it.
 */
export function mimeName(m: Pick<MediaType, 'type' | 'params' | 'raw'>): string {
  const stripped = m.params.nulls === 'stripped'
  switch (m.type) {
    case 'application/json':
    case 'application/geo+json':
    case 'text/csv':
    case 'text/plain':
    case 'text/xml':
    case 'application/openapi+json':
    case 'application/x-www-form-urlencoded':
    case 'application/octet-stream':
    case '*/*':
      return m.type
    case 'application/vnd.pgrst.object+json':
    case 'application/vnd.pgrst.object':
      return stripped ? 'application/vnd.pgrst.object+json;nulls=stripped' : 'application/vnd.pgrst.object+json'
    case 'application/vnd.pgrst.array+json':
    case 'application/vnd.pgrst.array':
      return stripped ? 'application/vnd.pgrst.array+json;nulls=stripped' : 'application/json'
    case 'application/vnd.pgrst.plan':
    case 'application/vnd.pgrst.plan+text':
    case 'application/vnd.pgrst.plan+json': {
      const format = m.type.endsWith('+json') ? 'json' : 'text'
      const options = planOptions(m)
      return (
        `application/vnd.pgrst.plan+${format}; for="${mimeName(planFor(m))}"` +
        (options.length > 0 ? `; options=${options.join('|')}` : '')
      )
    }
    default:
      return m.raw ?? m.type
  }
}

/** The media type a plan type is for (its `for` parameter, application/json by default). */
export function planFor(m: Pick<MediaType, 'params'>): MediaType {
  const text = ownValue(m.params, 'for') ?? 'application/json'
  const decoded = decodeMediaType(text)
  return { type: decoded?.type ?? text.toLowerCase(), params: decoded?.params ?? bareRecord<string>(), q: 1, raw: text }
}

/** PGRST107's list: every accepted type, in preference order, as PostgREST names it. */
export function showAccept(accept: readonly MediaType[]): string {
  return accept.map(mimeName).join(', ')
}

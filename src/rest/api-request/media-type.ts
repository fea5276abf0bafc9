// Accept and Content-Type parsing (spec/rest.md §5.1): media types with parameters and
// q-values, sorted by preference (stable). Choosing among them is plan/negotiate.ts.
import type { MediaType } from './types.js'
import { bareRecord } from '../../shared/own.js'

const ANY: MediaType = Object.freeze({ type: '*/*', params: Object.freeze({}), q: 1 })

/** One media type: `application/json; charset=utf-8` -> {type, params}. */
export function parseMediaType (value: string): MediaType | null {
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

/** The Accept header as a preference-ordered list; `*\/*` when absent or empty. */
export function parseAccept (header: string | undefined): MediaType[] {
  if (!header || !header.trim()) return [ANY]
  const list: MediaType[] = []
  for (const item of splitOutsideQuotes(header)) {
    const mt = parseMediaType(item)
    if (mt && mt.q > 0) list.push(mt)
  }
  if (list.length === 0) return [ANY]
  return list.map((m, i) => [m, i] as const).sort((a, b) => b[0].q - a[0].q || a[1] - b[1]).map(([m]) => m)
}

function splitOutsideQuotes (s: string): string[] {
  const out: string[] = []
  let cur = ''
  let quoted = false
  for (const ch of s) {
    if (ch === '"') quoted = !quoted
    if (ch === ',' && !quoted) { out.push(cur); cur = '' } else cur += ch
  }
  out.push(cur)
  return out
}

/** `type/subtype[;k=v]` as written in PGRST107 messages. */
export function showMediaType (m: MediaType): string {
  const params = Object.entries(m.params).map(([k, v]) => `;${k}=${v}`).join('')
  return m.type + params
}

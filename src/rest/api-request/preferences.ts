// The Prefer header (RFC 7240) as PostgREST reads it (spec/rest.md §3.7): all Prefer
// headers merged, values split on commas, the first recognized value of each family
// wins, unrecognized tokens collected as `invalid` (PGRST122 only with handling=strict).
import type { Preferences } from './types.js'
import { bareRecord, ownValue } from '../../shared/own.js'

const FAMILIES: Record<string, ReadonlySet<string> | 'any' | 'int'> = {
  return: new Set(['minimal', 'headers-only', 'representation']),
  count: new Set(['exact', 'planned', 'estimated']),
  resolution: new Set(['merge-duplicates', 'ignore-duplicates']),
  missing: new Set(['default', 'null']),
  handling: new Set(['strict', 'lenient']),
  tx: new Set(['commit', 'rollback']),
  timezone: 'any',
  'max-affected': 'int'
}

export const NO_PREFERENCES: Preferences = Object.freeze({
  return: null, count: null, resolution: null, missing: null, handling: null, tx: null, timezone: null, maxAffected: null, invalid: []
})

export function parsePreferences (header: string | readonly string[] | undefined): Preferences {
  if (header === undefined || header.length === 0) return NO_PREFERENCES
  const values = typeof header === 'string' ? [header] : header
  const found = bareRecord<string>()
  const invalid: string[] = []
  for (const v of values) {
    for (const raw of v.split(',')) {
      const token = raw.trim()
      if (!token) continue
      const eq = token.indexOf('=')
      const name = eq < 0 ? token : token.slice(0, eq).trim()
      const value = eq < 0 ? '' : token.slice(eq + 1).trim()
      const family = ownValue(FAMILIES, name)
      const ok = family === undefined
        ? false
        : family === 'any' ? value !== '' : family === 'int' ? /^[0-9]+$/.test(value) : family.has(value)
      if (!ok) { invalid.push(token); continue }
      if (!(name in found)) found[name] = value
    }
  }
  return {
    return: (found.return ?? null) as Preferences['return'],
    count: (found.count ?? null) as Preferences['count'],
    resolution: (found.resolution ?? null) as Preferences['resolution'],
    missing: (found.missing ?? null) as Preferences['missing'],
    handling: (found.handling ?? null) as Preferences['handling'],
    tx: (found.tx ?? null) as Preferences['tx'],
    timezone: found.timezone ?? null,
    maxAffected: found['max-affected'] === undefined ? null : Number(found['max-affected']),
    invalid
  }
}

// The Prefer header (RFC 7240) as PostgREST 14 reads it (docs/rest-protocol.md §3.7): all Prefer
// headers merged, values split on commas and trimmed, the first recognized token of each
// family wins; tokens it does not know are collected as `invalid` (PGRST122 only with
// handling=strict). A `timezone=` is recognized when the database knows the zone (the
// first one decides), a `max-affected=` always (applied when it reads as an integer).
import type { Preferences } from './types.js'

const FAMILIES: ReadonlyArray<readonly [keyof Preferences, readonly string[]]> = [
  ['resolution', ['merge-duplicates', 'ignore-duplicates']],
  ['return', ['representation', 'minimal', 'headers-only']],
  ['count', ['exact', 'planned', 'estimated']],
  ['tx', ['commit', 'rollback']],
  ['missing', ['default', 'null']],
  ['handling', ['strict', 'lenient']],
]

/** Every whole token PostgREST recognizes (`count=exact` ...), with its family and value. */
const TOKENS: ReadonlyMap<string, readonly [keyof Preferences, string]> = new Map(
  FAMILIES.flatMap(([family, values]) => values.map((v) => [`${family}=${v}`, [family, v]] as const)),
)

/** An Int64 as Haskell's readMaybe reads it (digits with an optional minus). */
function int64(text: string): number | null {
  if (!/^-?[0-9]+$/.test(text)) return null
  const n = BigInt(text)
  return n >= -(2n ** 63n) && n < 2n ** 63n ? Number(n) : null
}

const NO_PREFERENCES: Preferences = Object.freeze({
  return: null,
  count: null,
  resolution: null,
  missing: null,
  handling: null,
  tx: null,
  timezone: null,
  maxAffected: null,
  invalid: [],
})

/**
 * Parses the Prefer headers. `timezones` are the database's zone names; without them any
 * non-empty `timezone=` is taken.
 */
export function parsePreferences(
  header: string | readonly string[] | undefined,
  timezones?: ReadonlySet<string>,
): Preferences {
  if (header === undefined || header.length === 0) return NO_PREFERENCES
  const values = typeof header === 'string' ? [header] : header
  const tokens = values.flatMap((v) => (v === '' ? [] : v.split(',').map((t) => t.trim())))
  const found = new Map<keyof Preferences, string>()
  for (const token of tokens) {
    const known = TOKENS.get(token)
    if (known !== undefined && !found.has(known[0])) found.set(known[0], known[1])
  }
  const tz = tokens.find((t) => t.startsWith('timezone='))?.slice('timezone='.length)
  const tzAccepted = tz !== undefined && (timezones === undefined ? tz !== '' : timezones.has(tz))
  const ma = tokens.find((t) => t.startsWith('max-affected='))?.slice('max-affected='.length)
  const invalid = tokens.filter(
    (t) => !TOKENS.has(t) && !(t.startsWith('timezone=') && tzAccepted) && !t.startsWith('max-affected='),
  )
  return {
    ...NO_PREFERENCES,
    // The families' values, as FAMILIES lists them.
    ...(Object.fromEntries(found) as Partial<Preferences>),
    timezone: tzAccepted ? tz! : null,
    maxAffected: ma === undefined ? null : int64(ma),
    invalid,
  }
}

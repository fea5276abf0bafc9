// Row ranges (docs/rest-protocol.md §2.6): the Range request header (RFC 9110 style `from-to`,
// items), limit/offset, and their intersection. Pure arithmetic; errors are PGRST103.
import { RangeNotSatisfiableError } from '../errors.js'
import type { RowRange, ScopedRange } from './types.js'

export const ALL_ROWS: RowRange = Object.freeze({ offset: 0, limit: null })

/** `Range: 0-9` or `Range: 5-`; a malformed value is ignored (null). */
export function parseRangeHeader(value: string | undefined): RowRange | null {
  if (!value) return null
  const m = /^\s*(?:items=)?([0-9]+)-([0-9]*)\s*$/.exec(value)
  if (!m) return null
  const from = Number(m[1])
  if (m[2] === '') return { offset: from, limit: null }
  const to = Number(m[2])
  if (from > to) {
    throw new RangeNotSatisfiableError('lowerAboveUpper')
  }
  return { offset: from, limit: to - from + 1 }
}

/** The range of a `limit`/`offset` pair. */
export function rangeOf(scoped: Pick<ScopedRange, 'limit' | 'offset'> | undefined): RowRange {
  if (!scoped) return ALL_ROWS
  return { offset: scoped.offset ?? 0, limit: scoped.limit }
}

/** The intersection of two ranges; an empty intersection is `limit 0`. */
export function intersectRanges(a: RowRange, b: RowRange): RowRange {
  const lower = Math.max(a.offset, b.offset)
  const upperA = a.limit === null ? Infinity : a.offset + a.limit
  const upperB = b.limit === null ? Infinity : b.offset + b.limit
  const upper = Math.min(upperA, upperB)
  if (upper === Infinity) return { offset: lower, limit: null }
  return { offset: lower, limit: Math.max(0, upper - lower) }
}

/** Caps a range's row count at `max` (db-max-rows), keeping its offset. */
export function capRange(r: RowRange, max: number | null): RowRange {
  if (max === null) return r
  return { offset: r.offset, limit: r.limit === null ? max : Math.min(r.limit, max) }
}

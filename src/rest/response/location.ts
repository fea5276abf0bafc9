// The Location header of `POST` with `Prefer: return=headers-only` (docs/rest-protocol.md §3.7):
// `/T?pk1=eq.v1&pk2=eq.v2` for exactly one inserted row of a table with a primary key; a
// null key value becomes `is.null`. Relative to the tenant's REST base, as PostgREST's is
// to its root. Pure.

/** A JSON value as `json_each_text` would print it. */
function textOf(v: unknown): string | null {
  if (v === null || v === undefined) return null
  if (typeof v === 'string') return v
  if (typeof v === 'number' || typeof v === 'boolean') return String(v)
  return JSON.stringify(v)
}

/**
 * `rowsJson` is the JSON array of the written rows' key columns. Null when there is no
 * single row or the table has no primary key.
 */
export function locationOf(table: string, pk: readonly string[], rowsJson: string): string | null {
  if (pk.length === 0) return null
  let rows: unknown
  try {
    rows = JSON.parse(rowsJson)
  } catch {
    return null
  }
  if (!Array.isArray(rows) || rows.length !== 1 || typeof rows[0] !== 'object' || rows[0] === null) return null
  const row = rows[0] as Record<string, unknown>
  const query = pk
    .map((c) => {
      const v = textOf(row[c])
      return `${encodeURIComponent(c)}=${v === null ? 'is.null' : 'eq.' + encodeURIComponent(v)}`
    })
    .join('&')
  return `/${encodeURIComponent(table)}?${query}`
}

// The nesting depth of a JSON body, checked on the raw bytes before anything parses it: a
// document nested thousands deep costs recursion in every parser after ours (V8's, then
// Postgres's json/jsonb input), so it is refused up front. One pass, no allocation.

const QUOTE = 0x22
const BACKSLASH = 0x5c
const OPEN_ARRAY = 0x5b
const CLOSE_ARRAY = 0x5d
const OPEN_OBJECT = 0x7b
const CLOSE_OBJECT = 0x7d

/**
 * Whether the text nests arrays and objects deeper than `max` (brackets inside strings do
 * not count). Malformed text is left to the JSON parser: only depth is judged here.
 */
export function jsonDepthExceeds(body: Uint8Array, max: number): boolean {
  let depth = 0
  let inString = false
  for (let i = 0; i < body.length; i++) {
    const b = body[i]!
    if (inString) {
      if (b === BACKSLASH) i++
      else if (b === QUOTE) inString = false
    } else if (b === QUOTE) {
      inString = true
    } else if (b === OPEN_ARRAY || b === OPEN_OBJECT) {
      if (++depth > max) return true
    } else if (b === CLOSE_ARRAY || b === CLOSE_OBJECT) {
      depth--
    }
  }
  return false
}

/** Bodies read as JSON: a JSON media type (`+json` suffixes included), or none (PostgREST's default). */
export function isJsonBody(contentType: string | undefined): boolean {
  if (contentType === undefined || contentType === '') return true
  const semi = contentType.indexOf(';')
  const type = (semi < 0 ? contentType : contentType.slice(0, semi)).trim().toLowerCase()
  return type === 'application/json' || type.endsWith('+json') || type === '*/*'
}

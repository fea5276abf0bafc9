// The auth engine's JSON body parser: GoTrue reads every body as JSON (an empty body is
// `{}`); nesting deeper than the configured depth is refused before JSON.parse runs, so a
// body like `{"a":{"a":...}}` fifty thousand levels deep is a 400 naming the limit, not a
// stack overflow further down (JSON.stringify for Postgres, the user JSON we send back).
// Also: definedOnly and isoString, for the JSON objects the engine answers with.
import { BadJsonError } from './errors.js'

/**
 * The object's own properties without those whose value is undefined, in their order, as a
 * new object (GoTrue's JSON omits such fields). Deleting them from the object instead turns
 * it into a slow dictionary-mode object for everything after, JSON.stringify included.
 */
export function definedOnly(o: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {}
  for (const k of Object.keys(o)) {
    const v = o[k]
    if (v !== undefined) out[k] = v
  }
  return out
}

const isoByTime = new Map<number, string>()

/**
 * `d.toISOString()`, remembered per millisecond: V8's costs about a microsecond, and a user's
 * timestamps (created, confirmed, last sign-in, its identities') come back in every token
 * response. A pure function of the time, so the memory is shared (at most 10,000 entries); an
 * invalid date throws RangeError as toISOString does.
 */
export function isoString(d: Date): string {
  const time = d.getTime()
  let s = isoByTime.get(time)
  if (s === undefined) {
    s = d.toISOString()
    if (isoByTime.size >= 10_000) isoByTime.clear()
    isoByTime.set(time, s)
  }
  return s
}

/**
 * The deepest nesting of objects and arrays in a JSON text, counting only brackets outside
 * strings; stops counting as soon as `limit` is passed. Linear, no recursion.
 */
function jsonDepthExceeds(text: string, limit: number): boolean {
  let depth = 0
  let inString = false
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (inString) {
      if (c === 92 /* \ */) i++
      else if (c === 34 /* " */) inString = false
    } else if (c === 34) inString = true
    else if (c === 123 /* { */ || c === 91 /* [ */) {
      if (++depth > limit) return true
    } else if (c === 125 /* } */ || c === 93 /* ] */) depth--
  }
  return false
}

/** A fastify content-type parser for JSON bodies with a nesting limit. */
export function jsonParser(maxDepth: number) {
  return function parseJson(_req: unknown, body: string, done: (err: Error | null, value?: unknown) => void): void {
    if (body.trim() === '') {
      done(null, {})
      return
    }
    if (jsonDepthExceeds(body, maxDepth)) {
      done(
        new BadJsonError(
          `Could not parse request body as JSON: nesting deeper than ${maxDepth} levels is not accepted (auth.max_json_depth)`,
        ),
      )
      return
    }
    try {
      done(null, JSON.parse(body))
    } catch (err) {
      done(new BadJsonError(`Could not parse request body as JSON: ${(err as Error).message}`))
    }
  }
}

// A small cursor for the hand-written recursive-descent parsers of the query grammar.
// Failures carry the position and the expected alternatives; the grammar entry points
// turn them into PGRST100 with PostgREST's "unexpected X expecting Y" details.
import { ParseError } from '../errors.js'

/** A grammar failure inside one parameter value (not yet the wire error). */
export class ParseFailure {
  constructor (readonly pos: number, readonly expected: readonly string[]) {}
}

const LETTER = /\p{L}/u

/** Parsec's `letter` (Unicode letters) or `digit` (ASCII digits). */
export function isAlphaNum (ch: string): boolean {
  return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch > '\u007f' && LETTER.test(ch))
}

/** Characters of a bare name: letters, digits, `_`, space, `$`. */
export function isIdentChar (ch: string): boolean {
  return ch === '_' || ch === ' ' || ch === '$' || isAlphaNum(ch)
}

export class Cursor {
  pos = 0
  constructor (readonly input: string) {}

  get eof (): boolean { return this.pos >= this.input.length }
  peek (offset = 0): string { return this.input[this.pos + offset] ?? '' }
  startsWith (s: string): boolean { return this.input.startsWith(s, this.pos) }

  /** Skips blanks and tabs (PostgREST's `ws`). */
  ws (): void {
    while (this.peek() === ' ' || this.peek() === '\t') this.pos++
  }

  /** Consumes `s` or fails expecting it. */
  expect (s: string, expected: string = JSON.stringify(s)): void {
    if (!this.startsWith(s)) this.fail([expected])
    this.pos += s.length
  }

  fail (expected: readonly string[], at: number = this.pos): never {
    throw new ParseFailure(at, expected)
  }

  /** Runs `fn`; on failure restores the position and returns the failure. */
  attempt<T> (fn: () => T): T | ParseFailure {
    const save = this.pos
    try {
      return fn()
    } catch (err) {
      if (err instanceof ParseFailure) { this.pos = save; return err }
      throw err
    }
  }
}

/** The farther of two failures (Parsec merges alternatives' errors by position). */
export function farther (a: ParseFailure, b: ParseFailure): ParseFailure {
  if (a.pos === b.pos) return new ParseFailure(a.pos, [...new Set([...a.expected, ...b.expected])])
  return a.pos > b.pos ? a : b
}

function orList (items: readonly string[]): string {
  if (items.length <= 1) return items[0] ?? ''
  return items.slice(0, -1).join(', ') + ' or ' + items[items.length - 1]
}

/** `unexpected "x" expecting a, b or c` */
export function describeFailure (input: string, failure: ParseFailure): string {
  const ch = input[failure.pos]
  const unexpected = ch === undefined ? 'end of input' : JSON.stringify(ch)
  return failure.expected.length ? `unexpected ${unexpected} expecting ${orList(failure.expected)}` : `unexpected ${unexpected}`
}

/**
 * Runs a grammar rule over a whole parameter value and turns a failure into PGRST100
 * (`what` is PostgREST's name: filter, select parameter, order, logic tree, ...).
 */
export function runParser<T> (what: string, input: string, rule: (c: Cursor) => T, shownInput: string = input): T {
  const c = new Cursor(input)
  try {
    return rule(c)
  } catch (err) {
    if (err instanceof ParseFailure) {
      throw new ParseError(what, shownInput, err.pos + 1, { details: describeFailure(input, err) })
    }
    throw err
  }
}

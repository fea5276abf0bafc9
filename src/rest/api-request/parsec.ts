// A small parser-combinator library with Parsec's semantics (consumed/empty replies,
// `try`, `<|>`, `<?>`, `lookAhead`, `notFollowedBy`, error merging), so that the query
// grammar written with it fails where PostgREST's Parsec grammar fails, with the same
// "unexpected X expecting Y" text. Input is a list of code points (Parsec reads a Haskell
// String); errors carry an index that becomes Parsec's line and column. Pure.

/** Parsec's message kinds, in its display order (its `Message`, which no rule here raises, left out). */
const SYS_UNEXPECT = 0
const UNEXPECT = 1
const EXPECT = 2
type MsgKind = typeof SYS_UNEXPECT | typeof UNEXPECT | typeof EXPECT

interface Msg {
  readonly kind: MsgKind
  readonly text: string
}

/** Parsec's ParseError: a position (index in the input) and its messages. */
interface PError {
  readonly pos: number
  readonly msgs: readonly Msg[]
}

type Reply<T> =
  | { readonly ok: true; readonly consumed: boolean; readonly value: T; readonly pos: number; readonly err: PError }
  | { readonly ok: false; readonly consumed: boolean; readonly err: PError }

/** A parser over code points, from an index. */
export type Parser<T> = (input: readonly string[], pos: number) => Reply<T>

const unknown = (pos: number): PError => ({ pos, msgs: [] })

/** Parsec's mergeError: the one with messages, else the farther, else both. */
function merge(a: PError, b: PError): PError {
  if (b.msgs.length === 0 && a.msgs.length > 0) return a
  if (a.msgs.length === 0 && b.msgs.length > 0) return b
  if (a.pos === b.pos) return { pos: a.pos, msgs: [...a.msgs, ...b.msgs] }
  return a.pos > b.pos ? a : b
}

// -- Haskell's `show` of a character and of a string ---------------------------------------

const CONTROL_NAMES = [
  'NUL',
  'SOH',
  'STX',
  'ETX',
  'EOT',
  'ENQ',
  'ACK',
  'a',
  'b',
  't',
  'n',
  'v',
  'f',
  'r',
  'SO',
  'SI',
  'DLE',
  'DC1',
  'DC2',
  'DC3',
  'DC4',
  'NAK',
  'SYN',
  'ETB',
  'CAN',
  'EM',
  'SUB',
  'ESC',
  'FS',
  'GS',
  'RS',
  'US',
]

/** One character escaped as Haskell's showLitChar does (`next` decides the `\&` separator). */
function showLitChar(ch: string, next: string | undefined, quote: '"' | "'"): string {
  const cp = ch.codePointAt(0) ?? 0
  if (ch === quote || ch === '\\') return '\\' + ch
  if (cp >= 0x20 && cp < 0x7f) return ch
  if (cp === 0x7f) return '\\DEL'
  if (cp < 0x20) {
    const name = CONTROL_NAMES[cp]
    return '\\' + name + (name === 'SO' && next === 'H' ? '\\&' : '')
  }
  return '\\' + String(cp) + (next !== undefined && next >= '0' && next <= '9' ? '\\&' : '')
}

/**
 * Haskell's `show` of a String: `"..."` with escapes. Also what cassava shows of the CSV input
 * it could not read, whose characters are the body's bytes (one per character).
 */
export function showString(s: string): string {
  const cps = [...s]
  return '"' + cps.map((c, i) => showLitChar(c, cps[i + 1], '"')).join('') + '"'
}

/** Haskell's `show` of a Char: `'x'`. */
function showChar(c: string): string {
  return "'" + showLitChar(c, undefined, "'") + "'"
}

// -- primitives ----------------------------------------------------------------------------

/** One code point matching `pred`; fails (empty) with the character it saw. */
function satisfy(pred: (c: string) => boolean): Parser<string> {
  return (input, pos) => {
    if (pos >= input.length)
      return { ok: false, consumed: false, err: { pos, msgs: [{ kind: SYS_UNEXPECT, text: '' }] } }
    const c = input[pos]
    if (pred(c)) return { ok: true, consumed: true, value: c, pos: pos + 1, err: unknown(pos + 1) }
    return { ok: false, consumed: false, err: { pos, msgs: [{ kind: SYS_UNEXPECT, text: showString(c) }] } }
  }
}

export const char = (c: string): Parser<string> =>
  label(
    satisfy((x) => x === c),
    showString(c),
  )
export const oneOf = (cs: string): Parser<string> => satisfy((x) => cs.includes(x))
export const noneOf = (cs: string): Parser<string> => satisfy((x) => !cs.includes(x))
export const anyChar: Parser<string> = satisfy(() => true)

const LETTER = /^\p{L}$/u
/** Parsec's `letter` (Haskell's isAlpha: any Unicode letter). */
export const letter: Parser<string> = label(
  satisfy((c) => LETTER.test(c)),
  'letter',
)
/** Parsec's `digit` (ASCII digits). */
export const digit: Parser<string> = label(
  satisfy((c) => c >= '0' && c <= '9'),
  'digit',
)

/**
 * Parsec's `string`: on a mismatch the error stays at the start, names the mismatching
 * character, and counts as consumed when the first character matched.
 */
export function string(s: string): Parser<string> {
  const want = [...s]
  const expect: Msg = { kind: EXPECT, text: showString(s) }
  return (input, pos) => {
    for (let i = 0; i < want.length; i++) {
      const c = input[pos + i]
      if (c !== want[i]) {
        const sys: Msg = { kind: SYS_UNEXPECT, text: c === undefined ? '' : showString(c) }
        return { ok: false, consumed: i > 0, err: { pos, msgs: [expect, sys] } }
      }
    }
    return { ok: true, consumed: want.length > 0, value: s, pos: pos + want.length, err: unknown(pos + want.length) }
  }
}

/** Parsec's `eof`. */
export const eof: Parser<null> = (input, pos) => {
  const expect: Msg = { kind: EXPECT, text: 'end of input' }
  if (pos >= input.length)
    return {
      ok: true,
      consumed: false,
      value: null,
      pos,
      err: { pos, msgs: [expect, { kind: SYS_UNEXPECT, text: '' }] },
    }
  return { ok: false, consumed: false, err: { pos, msgs: [expect, { kind: UNEXPECT, text: showChar(input[pos]) }] } }
}

export function pure<T>(value: T): Parser<T> {
  return (_input, pos) => ({ ok: true, consumed: false, value, pos, err: unknown(pos) })
}

/** Parsec's `parserZero` (`guard False`, `mzero`): an empty failure with no message. */
const zero: Parser<never> = (_input, pos) => ({ ok: false, consumed: false, err: unknown(pos) })

/**
 * A failure that counts as consumed (no alternative is tried, nothing after it is
 * ignored): for input no PostgREST rule refuses but the engine must (a NUL in a name).
 */
export function refuse(expected: string): Parser<never> {
  return (input, pos) => ({
    ok: false,
    consumed: true,
    err: {
      pos,
      msgs: [
        { kind: SYS_UNEXPECT, text: pos < input.length ? showString(input[pos]) : '' },
        { kind: EXPECT, text: expected },
      ],
    },
  })
}

// -- combinators -------------------------------------------------------------------------

/** Parsec's `>>=`. */
export function bind<A, B>(p: Parser<A>, k: (a: A) => Parser<B>): Parser<B> {
  return (input, pos) => {
    const r = p(input, pos)
    if (!r.ok) return r
    const q = k(r.value)(input, r.pos)
    const known = r.err.msgs.length > 0
    if (q.consumed) return q
    const err = known ? merge(r.err, q.err) : q.err
    return q.ok
      ? { ok: true, consumed: r.consumed, value: q.value, pos: q.pos, err }
      : { ok: false, consumed: r.consumed, err }
  }
}

export const map = <A, B>(p: Parser<A>, f: (a: A) => B): Parser<B> => bind(p, (a) => pure(f(a)))
/** `p *> q` */
export const then = <A, B>(p: Parser<A>, q: Parser<B>): Parser<B> => bind(p, () => q)
/** `p <* q` */
export const skip = <A, B>(p: Parser<A>, q: Parser<B>): Parser<A> => bind(p, (a) => map(q, () => a))

/** Parsec's `<|>`: the second alternative runs only when the first failed without consuming. */
export function alt<T>(...ps: Array<Parser<T>>): Parser<T> {
  return ps.reduce((m, n) => (input, pos) => {
    const r = m(input, pos)
    if (r.ok || r.consumed) return r
    const s = n(input, pos)
    if (s.consumed) return s
    return s.ok ? { ...s, err: merge(r.err, s.err) } : { ok: false, consumed: false, err: merge(r.err, s.err) }
  })
}

/** Parsec's `try`: a consumed failure becomes an empty one. */
export function attempt<T>(p: Parser<T>): Parser<T> {
  return (input, pos) => {
    const r = p(input, pos)
    return r.ok || !r.consumed ? r : { ok: false, consumed: false, err: r.err }
  }
}

/** Parsec's `<?>` (label): an empty reply's expected items become `name`. */
export function label<T>(p: Parser<T>, name: string): Parser<T> {
  const relabel = (err: PError): PError => ({
    pos: err.pos,
    msgs: [{ kind: EXPECT, text: name }, ...err.msgs.filter((m) => m.kind !== EXPECT)],
  })
  return (input, pos) => {
    const r = p(input, pos)
    if (r.consumed) return r
    if (r.ok) return r.err.msgs.length === 0 ? r : { ...r, err: relabel(r.err) }
    return { ok: false, consumed: false, err: relabel(r.err) }
  }
}

/** Parsec's `lookAhead`: succeeds without consuming; failures pass through. */
export function lookAhead<T>(p: Parser<T>): Parser<T> {
  return (input, pos) => {
    const r = p(input, pos)
    return r.ok ? { ok: true, consumed: false, value: r.value, pos, err: unknown(pos) } : r
  }
}

/** Parsec's `notFollowedBy` for a character parser. */
export function notFollowedBy(p: Parser<string>): Parser<null> {
  return (input, pos) => {
    const r = attempt(p)(input, pos)
    if (r.ok)
      return { ok: false, consumed: false, err: { pos: r.pos, msgs: [{ kind: UNEXPECT, text: showChar(r.value) }] } }
    return { ok: true, consumed: false, value: null, pos, err: r.err }
  }
}

/** Parsec's `many` (p must consume when it succeeds). */
export function many<T>(p: Parser<T>): Parser<T[]> {
  return (input, pos) => {
    const out: T[] = []
    let at = pos
    let consumed = false
    for (;;) {
      const r = p(input, at)
      if (!r.ok) {
        if (r.consumed) return { ok: false, consumed: true, err: r.err }
        return { ok: true, consumed, value: out, pos: at, err: r.err }
      }
      if (!r.consumed) throw new Error('many: a parser that accepts an empty string')
      out.push(r.value)
      at = r.pos
      consumed = true
    }
  }
}

export const many1 = <T>(p: Parser<T>): Parser<T[]> => bind(p, (x) => map(many(p), (xs) => [x, ...xs]))
export const option = <T>(x: T, p: Parser<T>): Parser<T> => alt(p, pure(x))
export const optionMaybe = <T>(p: Parser<T>): Parser<T | null> => option<T | null>(null, p)
export const sepBy1 = <T, S>(p: Parser<T>, sep: Parser<S>): Parser<T[]> =>
  bind(p, (x) => map(many(then(sep, p)), (xs) => [x, ...xs]))
export const sepBy = <T, S>(p: Parser<T>, sep: Parser<S>): Parser<T[]> => alt(sepBy1(p, sep), pure<T[]>([]))
export const between = <O, C, T>(open: Parser<O>, close: Parser<C>, p: Parser<T>): Parser<T> =>
  then(open, skip(p, close))
/** `guard cond` in the Parser monad. */
export const guard = (cond: boolean): Parser<null> => (cond ? pure(null) : zero)

/** A parser defined later (recursive rules). */
export function lazy<T>(f: () => Parser<T>): Parser<T> {
  let p: Parser<T> | null = null
  return (input, pos) => (p ??= f())(input, pos)
}

// -- running and reporting ------------------------------------------------------------------

/** Parsec's source position of an index: tabs move to the next multiple of 8, newlines start a line. */
function lineColumn(input: readonly string[], pos: number): { line: number; column: number } {
  let line = 1
  let column = 1
  for (let i = 0; i < pos && i < input.length; i++) {
    const c = input[i]
    if (c === '\n') {
      line++
      column = 1
    } else if (c === '\t') column = column + 8 - ((column - 1) % 8)
    else column++
  }
  return { line, column }
}

/** Parsec's showErrorMessages "or" "unknown parse error" "expecting" "unexpected" "end of input". */
function showErrorMessages(msgs: readonly Msg[]): string {
  if (msgs.length === 0) return 'unknown parse error'
  const of = (k: MsgKind): string[] => msgs.filter((m) => m.kind === k).map((m) => m.text)
  const sys = of(SYS_UNEXPECT)
  const unexp = of(UNEXPECT)
  const clean = (xs: string[]): string[] => [...new Set(xs.filter((x) => x !== ''))]
  const commasOr = (xs: string[]): string =>
    xs.length <= 1 ? (xs[0] ?? '') : clean(xs.slice(0, -1)).join(', ') + ' or ' + xs[xs.length - 1]
  const showMany = (pre: string, xs: string[]): string => {
    const ms = clean(xs)
    return ms.length === 0 ? '' : pre + ' ' + commasOr(ms)
  }
  const showSys =
    unexp.length > 0 || sys.length === 0 ? '' : sys[0] === '' ? 'unexpected end of input' : 'unexpected ' + sys[0]
  const parts = clean([showSys, showMany('unexpected', unexp), showMany('expecting', of(EXPECT))])
  return parts.map((p) => '\n' + p).join('')
}

interface ParseResult<T> {
  ok: true
  value: T
}
interface ParseFailed {
  ok: false
  line: number
  column: number
  details: string
}

/** Parsec's `parse`: runs `p` from the start; what follows a success is not looked at. */
export function parse<T>(p: Parser<T>, text: string): ParseResult<T> | ParseFailed {
  const input = [...text]
  const r = p(input, 0)
  if (r.ok) return { ok: true, value: r.value }
  const { line, column } = lineColumn(input, r.err.pos)
  // As PostgREST reports it: newlines as spaces, trimmed.
  return { ok: false, line, column, details: showErrorMessages(r.err.msgs).replace(/\n/g, ' ').trim() }
}

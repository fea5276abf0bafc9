// The query-string grammar of the PostgREST protocol (spec/rest.md §1.2, §1.3, §2): one
// function per rule (select, field names, JSON paths, operator expressions, logic trees,
// order, columns), and parseQueryParams, which classifies every parameter and parses it.
// Pure: knows neither the database nor HTTP. Errors are PGRST100 (or PGRST103 for limits).
import { ParseError, negativeLimit } from '../errors.js'
import { Cursor, ParseFailure, farther, isIdentChar, isAlphaNum, runParser } from './parser.js'
import type {
  AggregateFunction, EmbedPath, Field, Filter, FtsOperator, IsValue, JoinType, JsonOperation, LogicTree,
  OpExpr, Operation, OrderTerm, QuantOperator, QueryParams, ScopedRange, SelectItem, SimpleOperator
} from './types.js'

// ---------------------------------------------------------------------------------------
// Query-string decoding

/** Decodes `+` as a space and `%XX` escapes; an invalid escape is kept as written. */
export function decodeComponent (s: string, plusAsSpace = true): string {
  const t = plusAsSpace ? s.replace(/\+/g, ' ') : s
  if (!t.includes('%')) return t
  try {
    return decodeURIComponent(t)
  } catch {
    // Decode the valid escapes byte-wise, keep the rest (as Haskell's urlDecode does).
    const bytes: number[] = []
    for (let i = 0; i < t.length; i++) {
      const ch = t[i]
      if (ch === '%' && /^[0-9a-fA-F]{2}$/.test(t.slice(i + 1, i + 3))) {
        bytes.push(parseInt(t.slice(i + 1, i + 3), 16))
        i += 2
      } else {
        for (const b of Buffer.from(ch, 'utf8')) bytes.push(b)
      }
    }
    return Buffer.from(bytes).toString('utf8')
  }
}

/** `[key, value | null]` pairs in order; a parameter without `=` has a null value. */
export function parseQueryString (qs: string): Array<[string, string | null]> {
  const out: Array<[string, string | null]> = []
  if (!qs) return out
  for (const piece of qs.split('&')) {
    if (piece === '') continue
    const eq = piece.indexOf('=')
    if (eq < 0) out.push([decodeComponent(piece), null])
    else out.push([decodeComponent(piece.slice(0, eq)), decodeComponent(piece.slice(eq + 1))])
  }
  return out
}

function encodeCanonical (s: string): string {
  return encodeURIComponent(s).replace(/[!'()*]/g, (c) => '%' + c.charCodeAt(0).toString(16).toUpperCase())
}

/** Parameters sorted by key (stable), re-encoded; `?a` becomes `a=` (PostgREST's canonical form). */
export function canonicalQuery (pairs: ReadonlyArray<readonly [string, string | null]>): string {
  return pairs
    .map((p, i) => [p, i] as const)
    .sort((a, b) => (a[0][0] < b[0][0] ? -1 : a[0][0] > b[0][0] ? 1 : a[1] - b[1]))
    .map(([[k, v]]) => `${encodeCanonical(k)}=${encodeCanonical(v ?? '')}`)
    .join('&')
}

// ---------------------------------------------------------------------------------------
// Names and JSON paths (§1.3)

const FIELD_NAME = 'field name (* or [a..z0..9_$])'

/** `"..."` with backslash escapes; the quotes are removed. */
export function pQuotedValue (c: Cursor): string {
  c.expect('"')
  let out = ''
  for (;;) {
    const ch = c.peek()
    if (ch === '') c.fail(['"\\""'])
    c.pos++
    if (ch === '"') return out
    if (ch === '\\') {
      const next = c.peek()
      if (next === '') c.fail(['any character'])
      out += next
      c.pos++
    } else {
      out += ch
    }
  }
}

/** Runs of a character class joined by single dashes (a dash before `>` ends the name). */
function sepByDash (c: Cursor, isChar: (ch: string) => boolean, expected: string): string {
  const parts: string[] = []
  for (;;) {
    const start = c.pos
    while (!c.eof && isChar(c.peek())) c.pos++
    if (c.pos === start) c.fail(parts.length ? ['letter', 'digit'] : [expected])
    parts.push(c.input.slice(start, c.pos).trim())
    if (c.peek() === '-' && c.peek(1) !== '>') { c.pos++; continue }
    return parts.join('-')
  }
}

/** A column, relation, alias or hint name: quoted, or bare words joined by dashes. */
export function pFieldName (c: Cursor): string {
  const start = c.pos
  const name = c.peek() === '"' ? pQuotedValue(c) : sepByDash(c, isIdentChar, FIELD_NAME)
  // Postgres identifiers cannot hold NUL (and it could never name anything).
  if (name === '' || name.includes('\u0000')) c.fail([FIELD_NAME], start)
  return name
}

const isJsonKeyChar = (ch: string): boolean => !'(-:.,>)'.includes(ch)
const IDX_END = ['->', '::', '.', ',', ')']

/** `->key`, `->>key`, `->0`, `->-1`, repeated. */
export function pJsonPath (c: Cursor): JsonOperation[] {
  const ops: JsonOperation[] = []
  while (c.startsWith('->')) {
    const arrow = c.startsWith('->>') ? '->>' : '->'
    c.pos += arrow.length
    const m = /^-?[0-9]+/.exec(c.input.slice(c.pos))
    if (m) {
      const after = c.pos + m[0].length
      if (after >= c.input.length || IDX_END.some((e) => c.input.startsWith(e, after))) {
        c.pos = after
        ops.push({ arrow, operand: { kind: 'idx', idx: m[0] } })
        continue
      }
      if (m[0].startsWith('-')) c.fail(['digit'], c.pos + 1 + (m[0].length - 1))
    } else if (c.peek() === '-') {
      c.fail(['digit'], c.pos + 1)
    }
    const key = c.peek() === '"' ? pQuotedValue(c) : sepByDash(c, isJsonKeyChar, 'any non reserved character different from: .,>()')
    ops.push({ arrow, operand: { kind: 'key', key } })
  }
  return ops
}

/** A name with an optional JSON path, blanks allowed around it. */
export function pField (c: Cursor): Field {
  c.ws()
  const name = pFieldName(c)
  const jsonPath = pJsonPath(c)
  c.ws()
  return { name, jsonPath }
}

/** A cast type or FTS language: `[letter digit _ space $]+`, trimmed. */
function pIdentifier (c: Cursor): string {
  const start = c.pos
  while (!c.eof && isIdentChar(c.peek())) c.pos++
  const s = c.input.slice(start, c.pos).trim()
  if (s === '') c.fail(['letter or digit'], start)
  return s
}

// ---------------------------------------------------------------------------------------
// select= (§2.1)

const AGGREGATES: readonly AggregateFunction[] = ['sum', 'avg', 'count', 'max', 'min']

function atItemEnd (c: Cursor): boolean {
  c.ws()
  return c.eof || c.peek() === ',' || c.peek() === ')'
}

function pEmbedParams (c: Cursor): { hint: string | null, joinType: JoinType | null, any: boolean } {
  let hint: string | null = null
  let joinType: JoinType | null = null
  let n = 0
  while (n < 2 && c.peek() === '!') {
    c.pos++
    const name = pFieldName(c)
    if (name === 'inner' || name === 'left') joinType ??= name
    else hint ??= name
    n++
  }
  return { hint, joinType, any: n > 0 }
}

function pSelectItem (c: Cursor): SelectItem {
  c.ws()
  // ...rel(...)
  if (c.startsWith('...')) {
    c.pos += 3
    const name = pFieldName(c)
    const { hint, joinType } = pEmbedParams(c)
    c.expect('(')
    const children = pFieldForest(c)
    c.expect(')')
    c.ws()
    return { kind: 'spread', name, hint, joinType, children }
  }
  if (c.peek() === '*') {
    c.pos++
    if (!atItemEnd(c)) c.fail(['")"', '","', 'end of input'])
    return { kind: 'field', field: { name: '*', jsonPath: [] }, alias: null, cast: null, aggregate: null, aggregateCast: null }
  }
  // alias:   (a ':' not followed by another ':')
  let alias: string | null = null
  const save = c.pos
  const maybeAlias = c.attempt(() => pFieldName(c))
  if (typeof maybeAlias === 'string' && c.peek() === ':' && c.peek(1) !== ':') {
    alias = maybeAlias
    c.pos++
    c.ws()
  } else {
    c.pos = save
  }
  if (c.startsWith('count()')) {
    c.pos += 7
    const aggregateCast = c.startsWith('::') ? (c.pos += 2, pIdentifier(c)) : null
    if (!atItemEnd(c)) c.fail(['"::"', '")"', '","', 'end of input'])
    return { kind: 'field', field: { name: '*', jsonPath: [] }, alias, cast: null, aggregate: 'count', aggregateCast }
  }
  const name = pFieldName(c)
  // rel(...), rel!hint(...), rel!inner!hint(...)
  if (name !== 'count') {
    const bang = c.pos
    const params = pEmbedParams(c)
    if (c.peek() === '(') {
      c.pos++
      const children = pFieldForest(c)
      c.expect(')')
      c.ws()
      return { kind: 'relation', name, alias, hint: params.hint, joinType: params.joinType, children }
    }
    c.pos = bang
    if (params.any) {
      // `name!x` without `(`: a field cannot continue with `!` (PostgREST reports the `!`).
      c.fail(['letter', 'digit', '"-"', '"->>"', '"->"', '"::"', '"."', '")"', '","', 'end of input'])
    }
  }
  const jsonPath = pJsonPath(c)
  const cast = c.startsWith('::') ? (c.pos += 2, pIdentifier(c)) : null
  let aggregate: AggregateFunction | null = null
  let aggregateCast: string | null = null
  if (c.peek() === '.') {
    const agg = AGGREGATES.find((a) => c.input.startsWith(`.${a}()`, c.pos))
    if (!agg) c.fail(['aggregate function (sum, avg, count, max, min)'], c.pos + 1)
    c.pos += agg.length + 3
    aggregate = agg
    if (c.startsWith('::')) { c.pos += 2; aggregateCast = pIdentifier(c) }
  }
  if (!atItemEnd(c)) {
    const expected = ['letter', 'digit', '"-"', '"->>"', '"->"', '"::"', '"."', '")"', '","', 'end of input']
    c.fail(expected)
  }
  return { kind: 'field', field: { name, jsonPath }, alias, cast, aggregate, aggregateCast }
}

/** Comma-separated select items; may be empty (`select=`, `rel()`). */
export function pFieldForest (c: Cursor): SelectItem[] {
  const items: SelectItem[] = []
  c.ws()
  if (c.eof || c.peek() === ')') return items
  for (;;) {
    items.push(pSelectItem(c))
    c.ws()
    if (c.peek() !== ',') return items
    c.pos++
  }
}

/** Postgres's limit on the entries of one target list (MaxTupleAttributeNumber). */
export const MAX_SELECT_ITEMS = 1664

/** Entries one select list puts in its SELECT: a spread's columns join its parent's list. */
function listWidth (items: readonly SelectItem[]): number {
  let n = 0
  for (const it of items) n += it.kind === 'spread' ? listWidth(it.children) : 1
  return n
}

/** A list wider than Postgres takes is the client's mistake (400), not a database failure. */
function checkWidth (input: string, items: readonly SelectItem[]): void {
  const width = listWidth(items)
  if (width > MAX_SELECT_ITEMS) {
    const shown = input.length > 120 ? `${input.slice(0, 120)}...` : input
    throw new ParseError('select parameter', shown, 1, {
      details: `one select list names ${width} columns; Postgres allows at most ${MAX_SELECT_ITEMS}`,
      hint: 'Select fewer columns, or split the request.'
    })
  }
  for (const it of items) if (it.kind !== 'field') checkWidth(input, it.children)
}

export function parseSelect (input: string): SelectItem[] {
  const items = runParser('select parameter', input, (c) => {
    const items = pFieldForest(c)
    if (!c.eof) c.fail(['","', 'end of input'])
    return items
  })
  checkWidth(input, items)
  return items
}

// ---------------------------------------------------------------------------------------
// Operator expressions (§2.3)

const SIMPLE_OPS: ReadonlySet<string> = new Set<SimpleOperator>(['neq', 'cs', 'cd', 'ov', 'sl', 'sr', 'nxr', 'nxl', 'adj'])
const QUANT_OPS: ReadonlySet<string> = new Set<QuantOperator>(['eq', 'gt', 'gte', 'lt', 'lte', 'like', 'ilike', 'match', 'imatch'])
const FTS_OPS: ReadonlySet<string> = new Set<FtsOperator>(['fts', 'plfts', 'phfts', 'wfts'])
/** Longest first: `not_null` before `null`. */
const IS_VALUES: readonly IsValue[] = ['not_null', 'unknown', 'false', 'true', 'null']
const OPERATOR = 'operator (eq, gt, ...)'

/** Value at the top level: the rest of the input, taken literally. */
function pSingleVal (c: Cursor): string {
  const v = c.input.slice(c.pos)
  c.pos = c.input.length
  return v
}

/** Value inside a logic tree: `"quoted"`, a `{...}` array literal, or up to `,` / `)`. */
function pLogicSingleVal (c: Cursor): string {
  if (c.peek() === '"') {
    const save = c.pos
    const q = c.attempt(() => pQuotedValue(c))
    if (typeof q === 'string' && (c.eof || c.peek() === ',' || c.peek() === ')')) return q
    c.pos = save
  }
  if (c.peek() === '{') {
    const close = c.input.indexOf('}', c.pos)
    const inner = close < 0 ? '' : c.input.slice(c.pos + 1, close)
    if (close >= 0 && !inner.includes('{')) {
      const v = c.input.slice(c.pos, close + 1)
      c.pos = close + 1
      return v
    }
  }
  const start = c.pos
  while (!c.eof && c.peek() !== ',' && c.peek() !== ')') c.pos++
  return c.input.slice(start, c.pos)
}

/** `(a,"b,c",d)`: quoted elements keep commas; `()` is one empty element. */
function pListVal (c: Cursor): string[] {
  c.ws()
  c.expect('(')
  c.ws()
  const out: string[] = []
  for (;;) {
    let el: string | null = null
    if (c.peek() === '"') {
      const save = c.pos
      const q = c.attempt(() => pQuotedValue(c))
      if (typeof q === 'string' && (c.peek() === ',' || c.peek() === ')')) el = q
      else c.pos = save
    }
    if (el === null) {
      const start = c.pos
      while (!c.eof && c.peek() !== ',' && c.peek() !== ')') c.pos++
      el = c.input.slice(start, c.pos)
    }
    out.push(el)
    if (c.peek() === ',') { c.pos++; continue }
    break
  }
  c.ws()
  c.expect(')')
  c.ws()
  return out
}

function readWord (c: Cursor): string {
  const start = c.pos
  while (!c.eof && /[a-z_]/i.test(c.peek())) c.pos++
  return c.input.slice(start, c.pos)
}

/**
 * `[not.]op.value` and the special forms (in, is, isdistinct, fts(lang), op(any|all)).
 * `inLogic` selects the value rule of logic trees, where values end at `,` or `)`.
 */
export function pOpExpr (c: Cursor, inLogic: boolean): OpExpr {
  let negated = false
  if (c.startsWith('not.')) { negated = true; c.pos += 4 }
  const opStart = c.pos
  const word = readWord(c)
  const failOp = (): never => c.fail(negated ? [OPERATOR] : ['"not"', OPERATOR], opStart)
  const value = (): string => {
    c.expect('.', 'delimiter (.)')
    return inLogic ? pLogicSingleVal(c) : pSingleVal(c)
  }
  const end = (): void => {
    if (inLogic ? !(c.eof || c.peek() === ',' || c.peek() === ')') : !c.eof) c.fail(inLogic ? ['","', '")"'] : ['end of input'])
  }
  let operation: Operation
  if (word === 'in') {
    c.expect('.', 'delimiter (.)')
    operation = { kind: 'in', values: pListVal(c) }
    end()
  } else if (word === 'is') {
    c.expect('.', 'delimiter (.)')
    const v = IS_VALUES.find((x) => c.input.slice(c.pos, c.pos + x.length).toLowerCase() === x)
    if (v === undefined) return c.fail(['isVal: (null, not_null, true, false, unknown)'])
    c.pos += v.length
    operation = { kind: 'is', value: v }
    end()
  } else if (word === 'isdistinct') {
    operation = { kind: 'isdistinct', value: value() }
  } else if (FTS_OPS.has(word)) {
    let language: string | null = null
    if (c.peek() === '(') {
      c.pos++
      language = pIdentifier(c)
      c.expect(')')
    }
    operation = { kind: 'fts', op: word as FtsOperator, language, value: value() }
  } else if (SIMPLE_OPS.has(word)) {
    operation = { kind: 'simple', op: word as SimpleOperator, value: value() }
  } else if (QUANT_OPS.has(word)) {
    let quantifier: 'any' | 'all' | null = null
    if (c.startsWith('(any)')) { quantifier = 'any'; c.pos += 5 } else if (c.startsWith('(all)')) { quantifier = 'all'; c.pos += 5 } else if (c.peek() === '(') {
      c.fail(['"(any)"', '"(all)"'])
    }
    operation = { kind: 'quant', op: word as QuantOperator, quantifier, value: value() }
  } else {
    return failOp()
  }
  return { negated, operation }
}

/** A filter value at the top level; null when `rpc` and it is not an operator expression. */
export function parseFilterValue (input: string, rpc: boolean): OpExpr | null {
  if (rpc) {
    const c = new Cursor(input)
    const r = c.attempt(() => pOpExpr(c, false))
    return r instanceof ParseFailure ? null : r
  }
  return runParser('filter', input, (c) => pOpExpr(c, false))
}

// ---------------------------------------------------------------------------------------
// Keys: tree paths (§2.3)

/** `a.b.col->x` -> path `[a, b]`, field `col->x`. */
export function pTreePath (c: Cursor): { path: string[], field: Field } {
  const names = [pFieldName(c)]
  while (c.peek() === '.') {
    c.pos++
    names.push(pFieldName(c))
  }
  const jsonPath = pJsonPath(c)
  if (!c.eof) c.fail(['delimiter (.)', '"->"', 'end of input'])
  const name = names.pop() as string
  return { path: names, field: { name, jsonPath } }
}

export function parseTreePath (key: string): { path: string[], field: Field } {
  return runParser('tree path', key, pTreePath)
}

// ---------------------------------------------------------------------------------------
// Logic trees (§2.4)

function pLogicFilter (c: Cursor): LogicTree {
  const field = pField(c)
  c.expect('.', 'delimiter (.)')
  const opExpr = pOpExpr(c, true)
  return { kind: 'expr', filter: { field, opExpr } }
}

function pLogicExpr (c: Cursor): LogicTree {
  c.ws()
  let negated = false
  if (c.startsWith('not.')) { negated = true; c.pos += 4 }
  let op: 'and' | 'or'
  if (c.startsWith('and')) { op = 'and'; c.pos += 3 } else if (c.startsWith('or')) { op = 'or'; c.pos += 2 } else {
    return c.fail(negated ? ['logic operator (and, or)'] : ['negation operator (not)', 'logic operator (and, or)'])
  }
  c.ws()
  c.expect('(')
  const children: LogicTree[] = []
  for (;;) {
    c.ws()
    if (c.peek() === ')' && children.length === 0) {
      c.fail([FIELD_NAME, 'negation operator (not)', 'logic operator (and, or)'])
    }
    children.push(pLogicTree(c))
    c.ws()
    if (c.peek() === ',') { c.pos++; continue }
    break
  }
  c.expect(')')
  c.ws()
  return { kind: 'logic', op, negated, children }
}

/** A condition (`field.op.value`) or a nested `[not.]and(...)` / `[not.]or(...)`. */
export function pLogicTree (c: Cursor): LogicTree {
  const asFilter = c.attempt(() => pLogicFilter(c))
  if (!(asFilter instanceof ParseFailure)) return asFilter
  const asExpr = c.attempt(() => pLogicExpr(c))
  if (!(asExpr instanceof ParseFailure)) return asExpr
  throw farther(asFilter, asExpr)
}

/** The key of a logic parameter: `[path.][not.](or|and)` ("not" may appear anywhere). */
export function parseLogicKey (key: string): { path: string[], op: string } {
  return runParser('logic path', key, (c) => {
    const names = [pFieldName(c)]
    while (c.peek() === '.') { c.pos++; names.push(pFieldName(c)) }
    if (!c.eof) c.fail(['delimiter (.)', 'end of input'])
    const last = names[names.length - 1]
    const negated = names.slice(0, -1).includes('not')
    return { path: names.slice(0, -1).filter((n) => n !== 'not'), op: negated ? `not.${last}` : last }
  })
}

export function parseLogicTree (op: string, value: string): LogicTree {
  return runParser('logic tree', op + value, (c) => {
    const tree = pLogicExpr(c)
    if (!c.eof) c.fail(['end of input'])
    return tree
  }, value)
}

// ---------------------------------------------------------------------------------------
// order= (§2.5)

function pOrderTerm (c: Cursor): OrderTerm {
  c.ws()
  let term: OrderTerm
  const save = c.pos
  const rel = c.attempt(() => {
    const relation = pFieldName(c)
    c.expect('(')
    const field = pField(c)
    c.expect(')')
    return { relation, field }
  })
  let related: { relation: string, field: Field } | null = null
  if (rel instanceof ParseFailure) c.pos = save
  else related = rel
  const field = related ? related.field : { name: pFieldName(c), jsonPath: pJsonPath(c) }
  let direction: 'asc' | 'desc' | null = null
  let nulls: 'first' | 'last' | null = null
  if (c.peek() === '.') {
    const at = c.pos + 1
    c.pos++
    const w = readWord(c)
    if (w === 'asc' || w === 'desc') direction = w
    else if (w === 'nullsfirst' || w === 'nullslast') nulls = w === 'nullsfirst' ? 'first' : 'last'
    else c.fail(['"asc"', '"desc"', '"nullsfirst"', '"nullslast"'], at)
    if (direction && c.peek() === '.') {
      const at2 = c.pos + 1
      c.pos++
      const w2 = readWord(c)
      if (w2 === 'nullsfirst' || w2 === 'nullslast') nulls = w2 === 'nullsfirst' ? 'first' : 'last'
      else c.fail(['"nullsfirst"', '"nullslast"'], at2)
    }
  }
  c.ws()
  if (!(c.eof || c.peek() === ',')) c.fail(nulls ? ['","', 'end of input'] : ['delimiter (.)', '","', 'end of input'])
  if (related) term = { kind: 'related', relation: related.relation, field, direction, nulls }
  else term = { kind: 'field', field, direction, nulls }
  return term
}

export function parseOrder (input: string): OrderTerm[] {
  return runParser('order', input, (c) => {
    const terms = [pOrderTerm(c)]
    while (c.peek() === ',') { c.pos++; terms.push(pOrderTerm(c)) }
    return terms
  })
}

// ---------------------------------------------------------------------------------------
// columns= and on_conflict= (used by writes)

export function parseColumns (what: 'columns parameter' | 'on_conflict parameter', input: string): string[] {
  return runParser(what, input, (c) => {
    const out: string[] = []
    for (;;) {
      c.ws()
      out.push(pFieldName(c))
      c.ws()
      if (c.peek() === ',') { c.pos++; continue }
      if (!c.eof) c.fail(['","', 'end of input'])
      return out
    }
  })
}

// ---------------------------------------------------------------------------------------
// The whole query string (§1.2)

const RESERVED = new Set(['select', 'columns', 'on_conflict'])
const RESERVED_EMBEDDABLE = new Set(['order', 'limit', 'offset', 'and', 'or'])

function lastSegment (key: string): string {
  const i = key.lastIndexOf('.')
  return i < 0 ? key : key.slice(i + 1)
}

/** Integer as PostgREST's `readMaybe`: optional sign and digits only; otherwise null. */
function readInteger (v: string): number | null {
  const t = v.trim()
  if (!/^[+-]?[0-9]+$/.test(t)) return null
  const n = Number(t)
  return Number.isSafeInteger(n) ? n : null
}

export interface ParseQueryOptions {
  /** GET/HEAD on `/rpc/fn`: parameters that are not operator expressions become arguments. */
  rpcRead?: boolean
}

/** Parses and classifies every parameter of a query string. */
export function parseQueryParams (qs: string, opts: ParseQueryOptions = {}): QueryParams {
  const pairs = parseQueryString(qs)
  const canonical = canonicalQuery(pairs)
  let selectRaw: string | null = null
  let columnsRaw: string | null = null
  let onConflictRaw: string | null = null
  const filters: Array<{ path: EmbedPath, filter: Filter }> = []
  const rpcArgs: Array<readonly [string, string]> = []
  const logic: Array<{ path: EmbedPath, tree: LogicTree }> = []
  const order: Array<{ path: EmbedPath, terms: OrderTerm[] }> = []
  const ranges = new Map<string, { path: EmbedPath, limit: number | null, offset: number | null }>()

  for (const [key, value] of pairs) {
    if (value === null) continue
    if (RESERVED.has(key)) {
      if (key === 'select') selectRaw ??= value
      else if (key === 'columns') columnsRaw ??= value
      else onConflictRaw ??= value
      continue
    }
    const last = lastSegment(key)
    if (RESERVED_EMBEDDABLE.has(last)) {
      if (last === 'and' || last === 'or') {
        const { path, op } = parseLogicKey(key)
        logic.push({ path, tree: parseLogicTree(op, value) })
      } else if (last === 'order') {
        const { path } = parseTreePath(key)
        order.push({ path, terms: parseOrder(value) })
      } else {
        const { path } = parseTreePath(key)
        const id = JSON.stringify(path)
        const entry = ranges.get(id) ?? { path, limit: null, offset: null }
        const n = readInteger(value)
        if (last === 'limit') {
          if (n !== null && n < 0) throw negativeLimit()
          if (n !== null) entry.limit = n
        } else if (n !== null && n >= 0) {
          entry.offset = n
        }
        ranges.set(id, entry)
      }
      continue
    }
    const { path, field } = parseTreePath(key)
    const opExpr = parseFilterValue(value, opts.rpcRead === true)
    if (opExpr === null) rpcArgs.push([key, value])
    else filters.push({ path, filter: { field, opExpr } })
  }

  const ranged: ScopedRange[] = [...ranges.values()]
  return {
    canonical,
    select: parseSelect(selectRaw ?? '*'),
    filters,
    rpcArgs,
    logic,
    order,
    ranges: ranged,
    columns: columnsRaw === null ? null : parseColumns('columns parameter', columnsRaw),
    onConflict: onConflictRaw === null ? null : parseColumns('on_conflict parameter', onConflictRaw)
  }
}

// Exported for tests of single rules.
export const rules = { pFieldName, pJsonPath, pField, pOpExpr, pLogicTree, pTreePath, isAlphaNum }

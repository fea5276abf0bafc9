// The query-string grammar of the PostgREST protocol (docs/rest-protocol.md §1.2, §1.3, §2): one
// function per rule (select, field names, JSON paths, operator expressions, logic trees,
// order, columns), and parseQueryParams, which classifies every parameter and parses it.
// Pure: knows neither the database nor HTTP. Errors are PGRST100 (or PGRST103 for limits).
import { ParseError, RangeNotSatisfiableError } from '../errors.js'
import {
  alt,
  anyChar,
  attempt,
  between,
  bind,
  char,
  digit,
  eof,
  guard,
  label,
  lazy,
  letter,
  lookAhead,
  many,
  many1,
  map,
  noneOf,
  notFollowedBy,
  oneOf,
  option,
  optionMaybe,
  parse,
  pure,
  refuse,
  sepBy,
  sepBy1,
  skip,
  string,
  then,
  type Parser,
} from './parsec.js'
import type {
  AggregateFunction,
  EmbedPath,
  Field,
  Filter,
  FtsOperator,
  IsValue,
  JoinType,
  JsonOperand,
  JsonOperation,
  LogicTree,
  OpExpr,
  Operation,
  OrderDirection,
  OrderNulls,
  OrderTerm,
  QuantOperator,
  QueryParams,
  SelectField,
  SelectItem,
  SelectRelation,
  SelectSpread,
  SimpleOperator,
} from './types.js'

// ---------------------------------------------------------------------------------------
// Query-string decoding

/** Decodes `+` as a space and `%XX` escapes; an invalid escape is kept as written. */
export function decodeComponent(s: string, plusAsSpace = true): string {
  const t = plusAsSpace ? s.replace(/\+/g, ' ') : s
  if (!t.includes('%')) return t
  try {
    return decodeURIComponent(t)
  } catch {
    return decodeValidEscapes(t)
  }
}

/** Decodes the valid escapes byte-wise and keeps the rest (as Haskell's urlDecode does). */
function decodeValidEscapes(t: string): string {
  const bytes: number[] = []
  for (let i = 0; i < t.length; i++) {
    const ch = t[i]
    if (ch === '%' && /^[0-9a-fA-F]{2}$/.test(t.slice(i + 1, i + 3))) {
      bytes.push(parseInt(t.slice(i + 1, i + 3), 16))
      i += 2
    } else {
      bytes.push(...Buffer.from(ch, 'utf8'))
    }
  }
  return Buffer.from(bytes).toString('utf8')
}

/**
 * `[key, value | null]` pairs in order, split as PostgREST's HTTP library splits them: at
 * `&` and `;`, an empty piece kept (as an empty key without a value) except after the
 * last separator; a parameter without `=` has a null value.
 */
function parseQueryString(qs: string): Array<[string, string | null]> {
  const out: Array<[string, string | null]> = []
  const body = qs.startsWith('?') ? qs.slice(1) : qs
  if (!body) return out
  const pieces = body.split(/[&;]/)
  if (pieces[pieces.length - 1] === '') pieces.pop()
  for (const piece of pieces) {
    const eq = piece.indexOf('=')
    if (eq < 0) out.push([decodeComponent(piece), null])
    else out.push([decodeComponent(piece.slice(0, eq)), decodeComponent(piece.slice(eq + 1))])
  }
  return out
}

/**
 * PostgREST's urlEncode (the HTTP package) of a parameter's bytes read one character per
 * byte: letters, digits and `-_.~` stay, other ASCII is %XX, and each byte of a non-ASCII
 * character is encoded as the UTF-8 of that byte's code point (`é` -> `%C3%83%C2%A9`).
 */
function encodeCanonical(s: string): string {
  return encodeURIComponent(Buffer.from(s, 'utf8').toString('latin1')).replace(
    /[!'()*]/g,
    (c) => '%' + c.charCodeAt(0).toString(16).toUpperCase(),
  )
}

/** Parameters sorted by key (stable), re-encoded; `?a` becomes `a=` (PostgREST's canonical form). */
function canonicalQuery(pairs: ReadonlyArray<readonly [string, string | null]>): string {
  return [...pairs]
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([k, v]) => `${encodeCanonical(k)}=${encodeCanonical(v ?? '')}`)
    .join('&')
}

// ---------------------------------------------------------------------------------------
// The grammar, rule for rule as PostgREST's (ApiRequest/QueryParams.hs), on Parsec's
// semantics (parsec.ts): the same inputs fail at the same place with the same text, and
// what follows a complete value is ignored where PostgREST ignores it.

const ws: Parser<string[]> = many(oneOf(' \t'))
const lexeme = <T>(p: Parser<T>): Parser<T> => then(ws, skip(p, ws))
const pDelimiter: Parser<string> = label(char('.'), 'delimiter (.)')

const FIELD_NAME = 'field name (* or [a..z0..9_$])'

/** `"..."` with backslash escapes; the quotes are removed. */
const pQuotedValue: Parser<string> = map(
  then(char('"'), skip(many(alt(noneOf('\\"'), then(char('\\'), anyChar))), char('"'))),
  (cs) => cs.join(''),
)

/** Parts joined by single dashes (a dash before `>` is an arrow, not part of the name). */
function sepByDash(ident: Parser<string>): Parser<string> {
  const dash = map(attempt(then(char('-'), notFollowedBy(char('>')))), () => '-')
  return map(sepBy1(ident, dash), (parts) => parts.join('-'))
}

const pIdentifierChar: Parser<string> = alt(letter, digit, oneOf('_ $'))
/** A cast type or FTS language: `[letter digit _ space $]+`, trimmed. */
const pIdentifier: Parser<string> = map(many1(pIdentifierChar), (cs) => cs.join('').trim())

/** Postgres identifiers cannot hold NUL (and it could never name anything): refused where the name starts. */
const noNul =
  (p: Parser<string>): Parser<string> =>
  (input, pos) => {
    const r = p(input, pos)
    if (r.ok && r.value.includes('\u0000')) return refuse(FIELD_NAME)(input, pos)
    return r
  }

/** A column, relation, alias or hint name: quoted, or bare words joined by dashes. */
const pFieldName: Parser<string> = noNul(label(alt(pQuotedValue, sepByDash(pIdentifier)), FIELD_NAME))

const pJsonKeyIdentifier: Parser<string> = map(many1(noneOf('(-:.,>)')), (cs) => cs.join('').trim())
const pJsonKeyName: Parser<string> = label(
  alt(pQuotedValue, sepByDash(pJsonKeyIdentifier)),
  'any non reserved character different from: .,>()',
)

const pIdxEnd: Parser<unknown> = alt<unknown>(
  attempt(lookAhead(string('->'))),
  attempt(lookAhead(string('::'))),
  attempt(lookAhead(string('.'))),
  attempt(lookAhead(string(','))),
  attempt(eof),
)
const pJIdx: Parser<JsonOperand> = skip(
  bind(option('+', char('-')), (sign) =>
    map(many1(digit), (ds): JsonOperand => ({ kind: 'idx', idx: sign + ds.join('') })),
  ),
  pIdxEnd,
)
const pJKey: Parser<JsonOperand> = map(pJsonKeyName, (key): JsonOperand => ({ kind: 'key', key }))
const pJsonArrow: Parser<'->' | '->>'> = alt(
  map(attempt(string('->>')), () => '->>' as const),
  map(attempt(string('->')), () => '->' as const),
)

/** `->key`, `->>key`, `->0`, `->-1`, repeated. */
const pJsonPath: Parser<JsonOperation[]> = many(
  bind(pJsonArrow, (arrow) =>
    map(alt(attempt(pJIdx), attempt(pJKey)), (operand): JsonOperation => ({ arrow, operand })),
  ),
)

/** A name with an optional JSON path, blanks allowed around it. */
const pField: Parser<Field> = lexeme(
  bind(pFieldName, (name) => map(option<JsonOperation[]>([], pJsonPath), (jsonPath): Field => ({ name, jsonPath }))),
)

// ---------------------------------------------------------------------------------------
// select= (§2.1)

const aliasSeparator: Parser<null> = then(char(':'), notFollowedBy(char(':')))
const pAlias: Parser<string | null> = optionMaybe(attempt(skip(pFieldName, aliasSeparator)))
const pEnd: Parser<unknown> = alt<unknown>(
  attempt(lookAhead(string(')'))),
  attempt(lookAhead(string(','))),
  attempt(eof),
)
const pCast: Parser<string | null> = optionMaybe(then(string('::'), pIdentifier))

type EmbedParam = { kind: 'join'; joinType: JoinType } | { kind: 'hint'; hint: string }
const pEmbedParam: Parser<EmbedParam> = then(
  char('!'),
  alt<EmbedParam>(
    attempt(map(string('left'), () => ({ kind: 'join', joinType: 'left' }))),
    attempt(map(string('inner'), () => ({ kind: 'join', joinType: 'inner' }))),
    attempt(map(pFieldName, (hint) => ({ kind: 'hint', hint }))),
  ),
)
const pEmbedParams: Parser<{ hint: string | null; joinType: JoinType | null }> = bind(optionMaybe(pEmbedParam), (p1) =>
  map(optionMaybe(pEmbedParam), (p2) => {
    const hintOf = (p: EmbedParam | null): string | null => (p?.kind === 'hint' ? p.hint : null)
    const joinOf = (p: EmbedParam | null): JoinType | null => (p?.kind === 'join' ? p.joinType : null)
    return { hint: hintOf(p1) ?? hintOf(p2), joinType: joinOf(p1) ?? joinOf(p2) }
  }),
)
const pOpenParen: Parser<unknown> = attempt(lookAhead(string('(')))

type Head<T extends SelectItem> = Omit<T, 'children'>

const pRelationSelect: Parser<Head<SelectRelation>> = lexeme(
  bind(pAlias, (alias) =>
    bind(pFieldName, (name) =>
      then(
        guard(name !== 'count'),
        bind(pEmbedParams, ({ hint, joinType }) =>
          map(pOpenParen, (): Head<SelectRelation> => ({ kind: 'relation', name, alias, hint, joinType })),
        ),
      ),
    ),
  ),
)

const pSpreadRelationSelect: Parser<Head<SelectSpread>> = lexeme(
  bind(then(string('...'), pFieldName), (name) =>
    bind(pEmbedParams, ({ hint, joinType }) =>
      map(pOpenParen, (): Head<SelectSpread> => ({ kind: 'spread', name, hint, joinType })),
    ),
  ),
)

const pAggregation: Parser<AggregateFunction> = alt<AggregateFunction>(
  map(string('sum'), () => 'sum'),
  map(string('avg'), () => 'avg'),
  map(string('count'), () => 'count'),
  map(attempt(string('max')), () => 'max'),
  map(attempt(string('min')), () => 'min'),
)

const selectField = (
  field: Field,
  alias: string | null,
  cast: string | null,
  aggregate: AggregateFunction | null,
  aggregateCast: string | null,
): SelectField => ({ kind: 'field', field, alias, cast, aggregate, aggregateCast })

const pFieldSelect: Parser<SelectItem> = lexeme(
  alt<SelectItem>(
    attempt(map(skip(string('*'), pEnd), () => selectField({ name: '*', jsonPath: [] }, null, null, null, null))),
    attempt(
      bind(pAlias, (alias) =>
        then(
          string('count()'),
          bind(pCast, (aggCast) =>
            map(pEnd, () => selectField({ name: '*', jsonPath: [] }, alias, null, 'count', aggCast)),
          ),
        ),
      ),
    ),
    bind(pAlias, (alias) =>
      bind(pField, (field) =>
        bind(pCast, (cast) =>
          bind(optionMaybe(attempt(then(char('.'), skip(pAggregation, string('()'))))), (agg) =>
            bind(pCast, (aggCast) => map(pEnd, () => selectField(field, alias, cast, agg, aggCast))),
          ),
        ),
      ),
    ),
  ),
)

const withChildren = <T extends SelectRelation | SelectSpread>(head: Parser<Head<T>>): Parser<SelectItem> =>
  bind(attempt(head), (h) =>
    map(between(char('('), char(')'), pFieldForest), (children) => ({ ...h, children }) as SelectItem),
  )

/** Comma-separated select items; may be empty (`select=`, `rel()`). */
const pFieldForest: Parser<SelectItem[]> = lazy(() =>
  sepBy(alt(withChildren(pSpreadRelationSelect), withChildren(pRelationSelect), pFieldSelect), lexeme(char(','))),
)

/** Postgres's limit on the entries of one target list (MaxTupleAttributeNumber). */
const MAX_SELECT_ITEMS = 1664

/** Entries one select list puts in its SELECT: a spread's columns join its parent's list. */
function listWidth(items: readonly SelectItem[]): number {
  let n = 0
  for (const it of items) n += it.kind === 'spread' ? listWidth(it.children) : 1
  return n
}

/** A list wider than Postgres takes is the client's mistake (400), not a database failure. */
function checkWidth(input: string, items: readonly SelectItem[]): void {
  const width = listWidth(items)
  if (width > MAX_SELECT_ITEMS) {
    const shown = input.length > 120 ? `${input.slice(0, 120)}...` : input
    throw new ParseError('select parameter', shown, 1, {
      details: `one select list names ${width} columns; Postgres allows at most ${MAX_SELECT_ITEMS}`,
      hint: 'Select fewer columns, or split the request.',
    })
  }
  for (const it of items) if (it.kind !== 'field') checkWidth(input, it.children)
}

/** Runs a rule as PostgREST's `P.parse`, failing with PGRST100 `"failed to parse <what> (<input>)"`. */
function runRule<T>(what: string, shown: string, p: Parser<T>, text: string = shown): T {
  let r: ReturnType<typeof parse<T>>
  try {
    r = parse(p, text)
  } catch (err) {
    // Nesting deeper than the call stack allows is the client's mistake, not a failure of ours.
    if (err instanceof RangeError) throw new ParseError(what, shown, 1, { details: 'the value nests too deeply' })
    throw err
  }
  if (r.ok) return r.value
  throw new ParseError(what, shown, r.column, { details: r.details })
}

export function parseSelect(input: string): SelectItem[] {
  const items = runRule('select parameter', input, pFieldForest)
  checkWidth(input, items)
  return items
}

// ---------------------------------------------------------------------------------------
// Operator expressions (§2.3)

const word = <T extends string>(w: T): Parser<T> => attempt(map(string(w), () => w))
const simpleOperator: Parser<SimpleOperator> = label(
  alt<SimpleOperator>(
    word('neq'),
    word('cs'),
    word('cd'),
    word('ov'),
    word('sl'),
    word('sr'),
    word('nxr'),
    word('nxl'),
    word('adj'),
  ),
  'unknown single value operator',
)
const quantOperator: Parser<QuantOperator> = label(
  alt<QuantOperator>(
    word('eq'),
    word('gte'),
    word('gt'),
    word('lte'),
    word('lt'),
    word('like'),
    word('ilike'),
    word('match'),
    word('imatch'),
  ),
  'unknown single value operator',
)

/** Value at the top level: the rest of the input, taken literally. */
const pSingleVal: Parser<string> = map(many(anyChar), (cs) => cs.join(''))

const pPgArray: Parser<string> = bind(string('{'), (a) =>
  bind(many(noneOf('{}')), (b) => map(string('}'), (c) => a + b.join('') + c)),
)
/** Value inside a logic tree: `"quoted"`, a `{...}` array literal, or up to `,` / `)`. */
const pLogicSingleVal: Parser<string> = alt(
  attempt(skip(pQuotedValue, notFollowedBy(noneOf(',)')))),
  attempt(pPgArray),
  map(many(noneOf(',)')), (cs) => cs.join('')),
)

const pListElement: Parser<string> = alt(
  attempt(skip(pQuotedValue, notFollowedBy(noneOf(',)')))),
  map(many(noneOf(',)')), (cs) => cs.join('')),
)
/** `(a,"b,c",d)`: quoted elements keep commas; `()` is one empty element. */
const pListVal: Parser<string[]> = then(lexeme(char('(')), skip(sepBy1(pListElement, char(',')), lexeme(char(')'))))

const ciString = (s: string): Parser<string> =>
  [...s].reduce<Parser<string>>(
    (acc, ch) => bind(acc, (got) => map(alt(char(ch), char(ch.toUpperCase())), (c) => got + c)),
    pure(''),
  )
const pIsVal: Parser<IsValue> = label(
  alt<IsValue>(
    attempt(map(ciString('null'), () => 'null')),
    attempt(map(ciString('not_null'), () => 'not_null')),
    attempt(map(ciString('true'), () => 'true')),
    attempt(map(ciString('false'), () => 'false')),
    attempt(map(ciString('unknown'), () => 'unknown')),
  ),
  'isVal: (null, not_null, true, false, unknown)',
)

const ANY_ALL: Parser<'any' | 'all'> = alt(
  attempt(map(string('any'), () => 'any' as const)),
  map(string('all'), () => 'all' as const),
)

function pOperation(pSVal: Parser<string>): Parser<Operation> {
  /** `<name>.` (taken back whole when the delimiter does not follow), then its value. */
  const special = <V>(name: string, pValue: Parser<V>, f: (v: V) => Operation): Parser<Operation> =>
    then(attempt(then(string(name), pDelimiter)), map(pValue, f))
  /** `.value` after an operator. */
  const valued = (f: (value: string) => Operation): Parser<Operation> => then(pDelimiter, map(pSVal, f))
  const pIn = special('in', pListVal, (values) => ({ kind: 'in', values }))
  const pIs = special('is', pIsVal, (value) => ({ kind: 'is', value }))
  const pIsDist = special('isdistinct', pSVal, (value) => ({ kind: 'isdistinct', value }))
  const pFts = bind(alt<FtsOperator>(word('fts'), word('plfts'), word('phfts'), word('wfts')), (op) =>
    bind(optionMaybe(attempt(between(char('('), char(')'), pIdentifier))), (language) =>
      valued((value) => ({ kind: 'fts', op, language, value })),
    ),
  )
  const pSimpleOp = bind(simpleOperator, (op) => valued((value) => ({ kind: 'simple', op, value })))
  const pQuantOp = bind(quantOperator, (op) =>
    bind(optionMaybe(attempt(between(char('('), char(')'), ANY_ALL))), (quantifier) =>
      valued((value) => ({ kind: 'quant', op, quantifier, value })),
    ),
  )
  return label(alt(pIn, pIs, pIsDist, attempt(pFts), attempt(pSimpleOp), attempt(pQuantOp)), 'operator (eq, gt, ...)')
}

/** `not.` or nothing. */
const pNot: Parser<boolean> = alt(attempt(map(then(string('not'), pDelimiter), () => true)), pure(false))

/** `[not.]op.value` and the special forms (in, is, isdistinct, fts(lang), op(any|all)). */
function pOpExprOf(pSVal: Parser<string>): Parser<OpExpr> {
  const op = pOperation(pSVal)
  return bind(pNot, (negated) => map(op, (operation): OpExpr => ({ negated, operation })))
}
const pOpExprTop = pOpExprOf(pSingleVal)
const pOpExprLogic = pOpExprOf(pLogicSingleVal)

/** A filter value at the top level; null when `rpc` and it is not an operator expression. */
export function parseFilterValue(input: string, rpc: boolean): OpExpr | null {
  if (rpc) return runRule<OpExpr | null>('filter', input, alt<OpExpr | null>(pOpExprTop, pure(null)))
  return runRule('filter', input, pOpExprTop)
}

// ---------------------------------------------------------------------------------------
// Keys: tree paths (§2.3)

/** `a.b.col->x` -> path `[a, b]`, field `col->x`; what follows is ignored, as PostgREST does. */
const pTreePath: Parser<{ path: string[]; field: Field }> = bind(sepBy1(pFieldName, pDelimiter), (names) =>
  map(option<JsonOperation[]>([], pJsonPath), (jsonPath) => ({
    path: names.slice(0, -1),
    field: { name: names[names.length - 1], jsonPath },
  })),
)

function parseTreePath(key: string): { path: string[]; field: Field } {
  return runRule('tree path', key, pTreePath)
}

// ---------------------------------------------------------------------------------------
// Logic trees (§2.4)

const pLogicFilter: Parser<LogicTree> = bind(skip(pField, pDelimiter), (field) =>
  map(pOpExprLogic, (opExpr): LogicTree => ({ kind: 'expr', filter: { field, opExpr } })),
)
const pLogicNot: Parser<boolean> = label(pNot, 'negation operator (not)')
const pLogicOp: Parser<'and' | 'or'> = label(
  alt(
    attempt(map(string('and'), () => 'and' as const)),
    map(string('or'), () => 'or' as const),
  ),
  'logic operator (and, or)',
)

/** A condition (`field.op.value`) or a nested `[not.]and(...)` / `[not.]or(...)`. */
const pLogicTree: Parser<LogicTree> = lazy(() =>
  alt(
    attempt(pLogicFilter),
    bind(pLogicNot, (negated) =>
      bind(pLogicOp, (op) =>
        map(
          then(lexeme(char('(')), skip(sepBy1(pLogicTree, lexeme(char(','))), lexeme(char(')')))),
          (children): LogicTree => ({ kind: 'logic', op, negated, children }),
        ),
      ),
    ),
  ),
)

/** The key of a logic parameter: `[path.][not.](or|and)` ("not" may appear anywhere). */
function parseLogicKey(key: string): { path: string[]; op: string } {
  return runRule(
    'logic path',
    key,
    map(sepBy1(pFieldName, pDelimiter), (names) => {
      const last = names[names.length - 1]
      const negated = names.includes('not')
      return { path: names.slice(0, -1).filter((n) => n !== 'not'), op: negated ? `not.${last}` : last }
    }),
  )
}

/** `op` is the key's operator (`or`, `not.and`); the value is parsed after it, as PostgREST does. */
export function parseLogicTree(op: string, value: string): LogicTree {
  return runRule('logic tree', value, pLogicTree, op + value)
}

// ---------------------------------------------------------------------------------------
// order= (§2.5)

/** `.word` as one token: nothing is consumed when it does not follow. */
const delimited = <T>(p: Parser<T>): Parser<T> => attempt(then(pDelimiter, p))
const pOrdDir: Parser<OrderDirection> = alt(delimited(word('asc')), delimited(word('desc')))
const pNulls: Parser<OrderNulls> = alt(
  delimited(map(string('nullsfirst'), (): OrderNulls => 'first')),
  delimited(map(string('nullslast'), (): OrderNulls => 'last')),
)
const pOrderEnd: Parser<unknown> = alt<unknown>(attempt(lookAhead(char(','))), attempt(eof))
const pDirNulls: Parser<{ direction: OrderDirection | null; nulls: OrderNulls | null }> = bind(
  optionMaybe(pOrdDir),
  (direction) =>
    map(
      alt(
        skip(optionMaybe(pNulls), pOrderEnd),
        map(pOrderEnd, () => null),
      ),
      (nulls) => ({ direction, nulls }),
    ),
)
const pOrderTerm: Parser<OrderTerm> = bind(pField, (field) =>
  map(pDirNulls, (d): OrderTerm => ({ kind: 'field', field, ...d })),
)
const pOrderRelationTerm: Parser<OrderTerm> = bind(pFieldName, (relation) =>
  bind(between(char('('), char(')'), pField), (field) =>
    map(pDirNulls, (d): OrderTerm => ({ kind: 'related', relation, field, ...d })),
  ),
)
const pOrder: Parser<OrderTerm[]> = sepBy1(lexeme(alt(attempt(pOrderRelationTerm), pOrderTerm)), char(','))

export function parseOrder(input: string): OrderTerm[] {
  return runRule('order', input, pOrder)
}

// ---------------------------------------------------------------------------------------
// columns= and on_conflict= (used by writes)

export function parseColumns(what: 'columns parameter' | 'on_conflict parameter', input: string): string[] {
  return runRule(what, input, sepBy1(pFieldName, lexeme(char(','))))
}

// ---------------------------------------------------------------------------------------
// The whole query string (§1.2)

const RESERVED = new Set(['select', 'columns', 'on_conflict'])
const RESERVED_EMBEDDABLE = new Set(['order', 'limit', 'offset', 'and', 'or'])

function lastSegment(key: string): string {
  const i = key.lastIndexOf('.')
  return i < 0 ? key : key.slice(i + 1)
}

/**
 * An integer as Haskell's `readMaybe` reads one (PostgREST's limit and offset): blanks
 * around it, balanced parentheses, a `-` (no `+`), decimal, `0x` hex or `0o` octal digits;
 * otherwise null.
 */
function readInteger(v: string): number | null {
  const m = /^\s*((?:\(\s*)*)(-?)\s*(0[xX][0-9a-fA-F]+|0[oO][0-7]+|[0-9]+)\s*((?:\)\s*)*)$/.exec(v)
  if (!m || m[1].replace(/\s/g, '').length !== m[4].replace(/\s/g, '').length) return null
  const digits = m[3]
  const abs = /^0[oO]/.test(digits) ? parseInt(digits.slice(2), 8) : Number(digits)
  const n = m[2] === '-' ? -abs : abs
  return Number.isSafeInteger(n) ? n : null
}

interface ParseQueryOptions {
  /** GET/HEAD on `/rpc/fn`: parameters that are not operator expressions become arguments. */
  rpcRead?: boolean
}

/** Parses and classifies every parameter of a query string. */
export function parseQueryParams(qs: string, opts: ParseQueryOptions = {}): QueryParams {
  const pairs = parseQueryString(qs)
  const params = new QueryParamsCollector(opts.rpcRead === true)
  for (const [key, value] of pairs) {
    if (value !== null) params.add(key, value)
  }
  return params.result(canonicalQuery(pairs))
}

/** The parameters of one query string, classified as they are read. */
class QueryParamsCollector {
  readonly #rpcRead: boolean
  /** The first value of each of `select`, `columns` and `on_conflict`. */
  readonly #reserved = new Map<string, string>()
  readonly #filters: Array<{ path: EmbedPath; filter: Filter }> = []
  readonly #rpcArgs: Array<readonly [string, string]> = []
  readonly #logic: Array<{ path: EmbedPath; tree: LogicTree }> = []
  readonly #order: Array<{ path: EmbedPath; terms: OrderTerm[] }> = []
  readonly #ranges = new Map<string, { path: EmbedPath; limit: number | null; offset: number | null }>()

  constructor(rpcRead: boolean) {
    this.#rpcRead = rpcRead
  }

  add(key: string, value: string): void {
    if (RESERVED.has(key)) {
      if (!this.#reserved.has(key)) this.#reserved.set(key, value)
      return
    }
    const last = lastSegment(key)
    if (last === 'and' || last === 'or') {
      const { path, op } = parseLogicKey(key)
      this.#logic.push({ path, tree: parseLogicTree(op, value) })
    } else if (last === 'order') {
      this.#order.push({ path: parseTreePath(key).path, terms: parseOrder(value) })
    } else if (RESERVED_EMBEDDABLE.has(last)) {
      this.#addRange(key, last, value)
    } else {
      const { path, field } = parseTreePath(key)
      const opExpr = parseFilterValue(value, this.#rpcRead)
      if (opExpr === null) this.#rpcArgs.push([key, value])
      else this.#filters.push({ path, filter: { field, opExpr } })
    }
  }

  /** `limit` and `offset`, of the root or of an embed. */
  #addRange(key: string, last: string, value: string): void {
    const { path } = parseTreePath(key)
    const id = JSON.stringify(path)
    const entry = this.#ranges.get(id) ?? { path, limit: null, offset: null }
    const n = readInteger(value)
    if (last === 'limit') {
      if (n !== null && n < 0) throw new RangeNotSatisfiableError('negativeLimit')
      if (n !== null) entry.limit = n
    } else if (n !== null && n >= 0) {
      // As PostgREST (RangeSpec "succeeds if offset is negative as a no-op"): a negative offset is ignored.
      entry.offset = n
    }
    this.#ranges.set(id, entry)
  }

  result(canonical: string): QueryParams {
    const columns = this.#reserved.get('columns')
    const onConflict = this.#reserved.get('on_conflict')
    return {
      canonical,
      select: parseSelect(this.#reserved.get('select') ?? '*'),
      filters: this.#filters,
      rpcArgs: this.#rpcArgs,
      logic: this.#logic,
      order: this.#order,
      ranges: [...this.#ranges.values()],
      columns: columns === undefined ? null : parseColumns('columns parameter', columns),
      onConflict: onConflict === undefined ? null : parseColumns('on_conflict parameter', onConflict),
    }
  }
}

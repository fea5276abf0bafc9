// SQL text as Postgres' lexer splits it, as far as our tools need: words, quoted identifiers,
// strings (standard, E'' with backslashes, dollar-quoted), comments (nested /* */) and the rest,
// each with where it starts. `gatehouse db push` splits migration files with it and the panel's
// test query finds a statement's first keyword.

/** One token: words (keywords and bare identifiers, lower-cased in `word`), quoted identifiers, or other text. */
export interface SqlToken {
  kind: 'word' | 'ident' | 'string' | 'comment' | 'space' | 'punct'
  text: string
  /** Lower-case word, or the unquoted identifier. */
  word?: string
  start: number
}

const WORD = /[A-Za-z_\u0080-\uffff][A-Za-z0-9_$\u0080-\uffff]*/y
const DOLLAR_TAG = /\$([A-Za-z_\u0080-\uffff][A-Za-z0-9_\u0080-\uffff]*)?\$/y

function quoted(sql: string, at: number, quote: string, backslash: boolean): number {
  let i = at + 1
  while (i < sql.length) {
    const c = sql[i]
    if (backslash && c === '\\') i += 2
    else if (c === quote && sql[i + 1] === quote) i += 2
    else if (c === quote) return i + 1
    else i++
  }
  return sql.length
}

function blockComment(sql: string, at: number): number {
  let depth = 0
  let i = at
  while (i < sql.length) {
    if (sql.startsWith('/*', i)) {
      depth++
      i += 2
    } else if (sql.startsWith('*/', i)) {
      depth--
      i += 2
      if (depth === 0) return i
    } else i++
  }
  return sql.length
}

/** The end of the token at `i` and its kind. */
function scan(sql: string, i: number): { end: number; kind: SqlToken['kind'] } {
  const c = sql[i]!
  if (/\s/.test(c)) {
    let j = i + 1
    while (j < sql.length && /\s/.test(sql[j]!)) j++
    return { end: j, kind: 'space' }
  }
  if (sql.startsWith('--', i)) {
    const nl = sql.indexOf('\n', i)
    return { end: nl < 0 ? sql.length : nl, kind: 'comment' }
  }
  if (sql.startsWith('/*', i)) return { end: blockComment(sql, i), kind: 'comment' }
  if (c === "'") return { end: quoted(sql, i, "'", false), kind: 'string' }
  if ((c === 'E' || c === 'e') && sql[i + 1] === "'") return { end: quoted(sql, i + 1, "'", true), kind: 'string' }
  if (c === '"') return { end: quoted(sql, i, '"', false), kind: 'ident' }
  if (c === '$') {
    DOLLAR_TAG.lastIndex = i
    const m = DOLLAR_TAG.exec(sql)
    if (m) {
      const close = sql.indexOf(m[0], i + m[0].length)
      return { end: close < 0 ? sql.length : close + m[0].length, kind: 'string' }
    }
  }
  WORD.lastIndex = i
  const w = WORD.exec(sql)
  if (w) return { end: i + w[0].length, kind: 'word' }
  return { end: i + 1, kind: 'punct' }
}

export function tokenize(sql: string): SqlToken[] {
  const out: SqlToken[] = []
  for (let i = 0; i < sql.length;) {
    const { end, kind } = scan(sql, i)
    const text = sql.slice(i, end)
    const token: SqlToken = { kind, text, start: i }
    if (kind === 'word') token.word = text.toLowerCase()
    if (kind === 'ident') token.word = text.slice(1, -1).replaceAll('""', '"')
    out.push(token)
    i = end
  }
  return out
}

/** The first word of a statement after comments and white space (upper case), or ''. */
export function leadingKeyword(sql: string): string {
  const first = tokenize(sql).find((t) => t.kind !== 'space' && t.kind !== 'comment')
  return first?.kind === 'word' ? first.text.toUpperCase() : ''
}

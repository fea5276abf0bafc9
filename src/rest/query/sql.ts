// The only way SQL text is made in the REST engine: a fragment type built from static
// source text (the `sql` template tag), quoted identifiers (ident), bind parameters
// (param), allow-listed keywords (raw), validated cast types (typeName) and join().
// A request value can never become SQL text: strings are refused as interpolations.
import { quoteIdent } from '../../shared/index.js'

const TOKEN = Symbol('sql')

/** A piece of SQL: text chunks around bind parameters (`chunks.length === values.length + 1`). */
export class Sql {
  readonly chunks: readonly string[]
  readonly values: readonly unknown[]
  constructor(token: symbol, chunks: readonly string[], values: readonly unknown[]) {
    if (token !== TOKEN)
      throw new TypeError('Sql fragments are built with sql``, ident(), param(), raw(), typeName() or join()')
    this.chunks = chunks
    this.values = values
  }
}

/** A rendered statement: `$n` placeholders and their values. */
export interface Statement {
  readonly text: string
  readonly values: readonly unknown[]
  /** Column values come back as Postgres prints them (no json/number parsing): EXPLAIN output. */
  readonly textResult?: boolean
}

function assertFragment(x: unknown): asserts x is Sql {
  if (!(x instanceof Sql)) throw new TypeError('only Sql fragments can be interpolated into sql``')
}

/** Appends fragment pieces to chunk/value accumulators. */
function append(chunks: string[], values: unknown[], frag: Sql): void {
  chunks[chunks.length - 1] += frag.chunks[0]
  for (let i = 0; i < frag.values.length; i++) {
    values.push(frag.values[i])
    chunks.push(frag.chunks[i + 1])
  }
}

/**
 * Static SQL from source code. Interpolations must themselves be fragments; a string or
 * number interpolation throws, so request values cannot reach the text by accident.
 */
export function sql(strings: TemplateStringsArray, ...parts: Sql[]): Sql {
  if (!Array.isArray((strings as { raw?: unknown }).raw)) throw new TypeError('sql must be used as a template tag')
  const chunks: string[] = [strings[0]]
  const values: unknown[] = []
  for (let i = 0; i < parts.length; i++) {
    const p = parts[i]
    assertFragment(p)
    append(chunks, values, p)
    chunks[chunks.length - 1] += strings[i + 1]
  }
  return new Sql(TOKEN, chunks, values)
}

/** A quoted identifier: wrapped in double quotes, any quote inside doubled. */
export function ident(name: string): Sql {
  return new Sql(TOKEN, [quoteIdent(name)], [])
}

/** `"schema"."name"` */
export function qualified(schema: string, name: string): Sql {
  return new Sql(TOKEN, [quoteIdent(schema) + '.' + quoteIdent(name)], [])
}

/** A bind parameter (`$n` once rendered). The value travels separately from the text. */
export function param(value: unknown): Sql {
  return new Sql(TOKEN, ['', ''], [value])
}

/** Keywords and operators the renderer may choose from at run time. Nothing else is raw. */
const KEYWORDS = [
  'ASC',
  'DESC',
  'NULLS FIRST',
  'NULLS LAST',
  'AND',
  'OR',
  'IS NULL',
  'IS NOT NULL',
  'IS TRUE',
  'IS FALSE',
  'IS UNKNOWN',
  'IS DISTINCT FROM NULL',
  'IS NOT DISTINCT FROM NULL',
  '=',
  '<>',
  '>',
  '>=',
  '<',
  '<=',
  'LIKE',
  'ILIKE',
  '~',
  '~*',
  '@>',
  '<@',
  '&&',
  '<<',
  '>>',
  '&<',
  '&>',
  '-|-',
  '->',
  '->>',
  'ANY',
  'ALL',
  'to_tsquery',
  'plainto_tsquery',
  'phraseto_tsquery',
  'websearch_to_tsquery',
  'INNER',
  'LEFT',
] as const
export type Keyword = (typeof KEYWORDS)[number]
const KEYWORD_SET: ReadonlySet<string> = new Set(KEYWORDS)

/** An allow-listed keyword or operator. Anything else throws. */
export function raw(keyword: Keyword): Sql {
  if (!KEYWORD_SET.has(keyword)) throw new TypeError('raw() only takes allow-listed keywords')
  return new Sql(TOKEN, [keyword], [])
}

/**
 * A type name for `CAST(x AS <type>)`. Types cannot be bound and quoting breaks common
 * spellings (`"bigint"` is not a type), so, as PostgREST does, the name is inserted
 * unquoted, but only when it is words of `[A-Za-z0-9_$]` separated by single spaces,
 * optionally followed by `[]`: nothing that can end the CAST or start another clause.
 */
export function typeName(name: string): Sql {
  const t = name.trim()
  if (!/^[A-Za-z_][A-Za-z0-9_$]*( [A-Za-z0-9_$]+)*(\[\])*$/.test(t) || t.length > 63 * 4) {
    throw new TypeError('invalid type name')
  }
  return new Sql(TOKEN, [t], [])
}

/**
 * A column's DEFAULT expression as the tenant's catalog holds it (pg_get_expr of
 * pg_attrdef, a domain's default): SQL the database owner wrote in DDL, read from the
 * schema cache, never from a request. Inlined where the default must be evaluated per JSON
 * row (`Prefer: missing=default`), as PostgREST inlines it.
 */
export function catalogExpression(text: string): Sql {
  return new Sql(TOKEN, [`(${text})`], [])
}

export const empty: Sql = new Sql(TOKEN, [''], [])

/** Joins fragments with a separator fragment (default `, `). */
export function join(parts: readonly Sql[], separator: Sql = sql`, `): Sql {
  assertFragment(separator)
  const chunks: string[] = ['']
  const values: unknown[] = []
  for (let i = 0; i < parts.length; i++) {
    assertFragment(parts[i])
    if (i > 0) append(chunks, values, separator)
    append(chunks, values, parts[i])
  }
  return new Sql(TOKEN, chunks, values)
}

/** Renders a fragment into a statement with `$1..$n` placeholders. */
export function render(frag: Sql): Statement {
  assertFragment(frag)
  let text = frag.chunks[0]
  for (let i = 1; i < frag.chunks.length; i++) text += '$' + i + frag.chunks[i]
  return { text, values: frag.values.slice() }
}

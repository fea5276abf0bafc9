// A small printer for the generated TypeScript: a type is a Doc, the lines it prints as,
// the first continuing the line of its key and the others relative to that key's indent.
// Layout follows prettier's defaults with `semi: false` (what postgres-meta formats with):
// 2-space indent, double quotes, keys quoted only where they must be, a group on one line
// when it fits in 80 columns. Pure.

export type Doc = readonly string[]

export interface Member {
  readonly key: string
  readonly optional?: boolean
  readonly type: Doc
}

const WIDTH = 80
const IDENT = /^[A-Za-z_$][\w$]*$/

export const str = (s: string): string => JSON.stringify(s)
export const text = (s: string): Doc => [s]

/** A property key as prettier writes it (`quoteProps: "as-needed"`). */
export function key(name: string): string {
  return IDENT.test(name) ? name : str(name)
}

function indent(lines: Doc, by = '  '): string[] {
  return lines.map((line) => (line === '' ? line : by + line))
}

function memberLines(m: Member): string[] {
  const [first = '', ...rest] = m.type
  return [`${key(m.key)}${m.optional === true ? '?' : ''}:${first === '' ? '' : ' ' + first}`, ...rest]
}

/** An object type, one member a line; `{ [_ in never]: never }` when it has none. */
export function object(members: readonly Member[]): Doc {
  if (members.length === 0) return ['{', '  [_ in never]: never', '}']
  return ['{', ...indent(members.flatMap(memberLines)), '}']
}

/** An object type on one line when it fits from `column` on, else one member a line. */
export function inlineObject(members: readonly Member[], column: number): Doc {
  if (members.length > 0 && members.every((m) => m.type.length === 1)) {
    const line = `{ ${members.map((m) => memberLines(m)[0]).join('; ')} }`
    if (column + line.length <= WIDTH) return [line]
  }
  return object(members)
}

/** A union: on one line when it fits, else one alternative a line, each behind `| `. */
export function union(alternatives: readonly Doc[], column: number): Doc {
  if (alternatives.length === 1) return alternatives[0]
  if (alternatives.every((a) => a.length === 1)) {
    const line = alternatives.map((a) => a[0]).join(' | ')
    if (column + line.length <= WIDTH) return [line]
  }
  return [
    '',
    ...alternatives.flatMap((alt) => {
      const [first = '', ...rest] = alt
      return ['  | ' + first, ...indent(rest, '    ')]
    }),
  ]
}

/** A tuple of object types (Relationships), one element a line group, trailing commas. */
export function tuple(elements: readonly Doc[]): Doc {
  if (elements.length === 0) return ['[]']
  return ['[', ...indent(elements.flatMap((el) => [...el.slice(0, -1), `${el[el.length - 1] ?? ''},`])), ']']
}

/** The lines of a document joined, each behind `indentBy`. */
export function print(doc: Doc, indentBy = ''): string {
  return doc.map((line) => (line === '' ? '' : indentBy + line)).join('\n')
}

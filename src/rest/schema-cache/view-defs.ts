// Reads a view's stored rule (pg_rewrite.ev_action as node-tree text) to learn, for each
// view column, the base relation and column it comes from (TARGETENTRY :resorigtbl /
// :resorigcol), so foreign keys of base tables also relate views (docs/rest-protocol.md §2.2). Pure.

export interface ViewColumnSource {
  /** Output column name of the view. */
  readonly name: string
  /** OID of the relation the column comes from (0 when it is an expression). */
  readonly relOid: number
  /** attnum of the source column (0 when none). */
  readonly attnum: number
}

/**
 * Splits node-tree text into tokens: `(`, `)`, `{`, `}` and words between blanks, in which a
 * backslash escapes the next character (a bracket or a blank too).
 */
function tokenize(text: string): string[] {
  const tokens = text.match(/[(){}]|(?:\\[^]|[^ \n\t\r(){}\\])+/g) ?? []
  return tokens.map((t) => t.replace(/\\([^])/g, '$1'))
}

/**
 * The non-junk target entries of the first (top-level) Query of a view rule. Returns []
 * when the text does not have the expected shape (the view then relates to nothing).
 */
export function parseViewColumns(evAction: string): ViewColumnSource[] {
  const t = tokenize(evAction)
  // Expect `( { QUERY ...`: the query's own fields are at depth 2.
  if (t[0] !== '(' || t[1] !== '{' || t[2] !== 'QUERY') return []
  let depth = 2
  let i = 3
  for (; i < t.length; i++) {
    const tok = t[i]
    if (tok === '(' || tok === '{') depth++
    else if (tok === ')' || tok === '}') {
      depth--
      if (depth < 2) return []
    } else if (depth === 2 && tok === ':targetList') {
      i++
      break
    }
  }
  if (t[i] !== '(') return []
  const out: ViewColumnSource[] = []
  const listDepth = depth + 1
  depth = listDepth
  i++
  let entry: Record<string, string> | null = null
  for (; i < t.length; i++) {
    const tok = t[i]
    if (tok === '{') {
      depth++
      if (depth === listDepth + 1 && t[i + 1] === 'TARGETENTRY') {
        entry = {}
        i++
      }
    } else if (tok === '(') {
      depth++
    } else if (tok === '}' || tok === ')') {
      if (tok === '}' && depth === listDepth + 1 && entry) {
        if (entry[':resjunk'] !== 'true' && entry[':resname'] !== undefined && entry[':resname'] !== '<>') {
          out.push({
            name: entry[':resname'],
            relOid: Number(entry[':resorigtbl'] ?? 0) || 0,
            attnum: Number(entry[':resorigcol'] ?? 0) || 0,
          })
        }
        entry = null
      }
      depth--
      if (depth < listDepth) break
    } else if (entry && depth === listDepth + 1 && tok.startsWith(':')) {
      const next = t[i + 1]
      if (next !== undefined && next !== '{' && next !== '(' && next !== '}' && next !== ')') {
        entry[tok] = next
        i++
      }
    }
  }
  return out
}

// A migration file as the Supabase CLI reads it: statements split at top-level semicolons
// (never inside quotes, dollar quotes, comments or a BEGIN ATOMIC body), each with the line it
// starts on. What `gatehouse db push` does to a statement before it runs is decided here too
// (docs/supabase.md, "Moving a Supabase project"):
// - the role `postgres` named where a role goes (OWNER TO, FOR ROLE, TO/FROM of GRANT, REVOKE
//   and policies, AUTHORIZATION) means the database's owner, who runs the file;
// - statements on Storage and Realtime objects are skipped: Gatehouse offers neither;
// - CREATE EXTENSION of an extension every Supabase project has preinstalled is skipped when the
//   database has it already or the cluster does not offer it.
import { tokenize, type SqlToken as Token } from '../shared/index.js'

/** One statement of a file: its text (no trailing semicolon), the 1-based line it starts on and the line of its first word. */
export interface Statement {
  text: string
  line: number
  /** The line of its first token that is no comment (where a reader finds the statement). */
  at: number
}

/** Tracks BEGIN ATOMIC ... END bodies (SQL-standard function bodies), where `;` does not end the statement. */
class AtomicBody {
  private depth = 0
  private previous = ''

  /** Whether the statement goes on past a `;` here. */
  inside(): boolean {
    return this.depth > 0
  }

  see(word: string): void {
    if (this.depth === 0) {
      if (this.previous === 'begin' && word === 'atomic') this.depth = 1
    } else if (word === 'case') this.depth++
    else if (word === 'end') this.depth--
    this.previous = word
  }
}

/** The statements of a file, split at top-level semicolons; empty statements are dropped. */
export function splitStatements(sql: string): Statement[] {
  const out: Statement[] = []
  const atomic = new AtomicBody()
  let from = 0
  const flush = (to: number): void => {
    const raw = sql.slice(from, to)
    const lead = raw.length - raw.trimStart().length
    const text = raw.trim()
    const first = tokenize(text).find((t) => t.kind !== 'comment' && t.kind !== 'space')
    if (first !== undefined) {
      const line = sql.slice(0, from + lead).split('\n').length
      out.push({ text, line, at: line + text.slice(0, first.start).split('\n').length - 1 })
    }
  }
  for (const t of tokenize(sql)) {
    if (t.kind === 'word') atomic.see(t.word!)
    if (t.kind === 'punct' && t.text === ';' && !atomic.inside()) {
      flush(t.start)
      from = t.start + 1
    }
  }
  flush(sql.length)
  return out
}

const meaningful = (tokens: Token[]): Token[] => tokens.filter((t) => t.kind !== 'space' && t.kind !== 'comment')

/** Words after which a role name follows (a list of them after TO / FROM). */
const ROLE_BEFORE = new Set(['to', 'from', 'role', 'user', 'authorization'])
const ROLE_LIST_STATEMENTS = new Set(['grant', 'revoke', 'create', 'alter'])

/**
 * The statement with the role `postgres` (bare or quoted), where it names a role, replaced by
 * `owner` (quoted). Names in other places (a column or table named postgres) are left alone.
 */
export function rewritePostgresRole(text: string, owner: string): string {
  const tokens = tokenize(text)
  const first = meaningful(tokens)[0]?.word
  if (first === undefined || !ROLE_LIST_STATEMENTS.has(first)) return text
  const replaced = `"${owner.replaceAll('"', '""')}"`
  // roleNext: the next name is a role (after TO, FROM, ROLE, ...; after a comma in such a list).
  let roleNext = false
  let afterRole = false
  let changed = false
  for (const t of tokens) {
    if (t.kind === 'space' || t.kind === 'comment') continue
    const isName = t.kind === 'word' || t.kind === 'ident'
    if (roleNext && isName && t.word === 'postgres') {
      t.text = replaced
      changed = true
    }
    const wasRole: boolean = roleNext && isName
    roleNext = (t.kind === 'word' && ROLE_BEFORE.has(t.word!)) || (afterRole && t.text === ',')
    afterRole = wasRole
  }
  return changed ? tokens.map((t) => t.text).join('') : text
}

/** Schemas of services Gatehouse does not offer: a statement naming one of their objects is skipped. */
const UNOFFERED_SCHEMAS = new Map([
  ['storage', 'Storage'],
  ['realtime', 'Realtime'],
])

/** Why a statement is skipped as one of a service Gatehouse does not offer, or null. */
export function unofferedService(text: string): string | null {
  const tokens = meaningful(tokenize(text))
  for (let i = 0; i < tokens.length; i++) {
    const t = tokens[i]!
    const next = tokens[i + 1]
    if ((t.kind === 'word' || t.kind === 'ident') && next?.text === '.') {
      const service = UNOFFERED_SCHEMAS.get(t.word!)
      if (service !== undefined) return `${service} is not offered by Gatehouse`
    }
    if ((t.kind === 'word' || t.kind === 'ident') && t.word === 'supabase_realtime')
      return 'Realtime is not offered by Gatehouse (the supabase_realtime publication)'
  }
  return null
}

/** Extensions every Supabase project has installed before its first migration (a `db dump` names them). */
export const SUPABASE_PREINSTALLED = new Set([
  'pg_graphql',
  'pg_stat_statements',
  'pgcrypto',
  'pgjwt',
  'pgsodium',
  'supabase_vault',
  'uuid-ossp',
])

/** The extension a `CREATE EXTENSION` or `COMMENT ON EXTENSION` statement names, or null. */
export function extensionOf(text: string): string | null {
  const words = meaningful(tokenize(text))
  const w = (i: number): string | undefined => words[i]?.word
  if (w(0) === 'create' && w(1) === 'extension') return (w(2) === 'if' ? words[5] : words[2])?.word ?? null
  if (w(0) === 'comment' && w(1) === 'on' && w(2) === 'extension') return w(3) ?? null
  return null
}

/** Whether the statement only opens or ends a transaction (the file already runs in one). */
export function isTransactionControl(text: string): boolean {
  const words = meaningful(tokenize(text)).map((t) => t.word ?? t.text)
  const first = words[0]
  if (first === 'begin' || first === 'commit' || first === 'end') return words.length <= 2
  return first === 'start' && words[1] === 'transaction'
}

// `/readyz` on the admin listener (docs/operating.md "Operating"): the part's readiness as our
// JSON, or with `?verbose` one line per check as kube-apiserver writes it (`[+]redis ok`,
// `[-]redis failed: ...`, `[+]redis excluded: ok`, then `readyz check passed|failed`; see
// https://kubernetes.io/docs/reference/using-api/health-checks/). `?exclude=<check>` (repeatable)
// leaves a check out; as in kube-apiserver, a name that matches no check is no error: the
// answer says so (`warn: some health checks cannot be excluded: no matches for "x"`) and
// readiness is what it would be without it. A part that drains is never ready, whatever is
// excluded.
import type { FastifyReply } from 'fastify'

/** One check's outcome. */
export interface CheckResult {
  name: string
  ok: boolean
  error?: string
}

export interface Readiness {
  ready: boolean
  /** Set when the part is shutting down (checks are not run then). */
  stopping?: boolean
  checks: CheckResult[]
  /** The names asked to be left out that name a check of the part (not run, not counted). */
  excluded?: string[]
}

export interface ReadyzQuery {
  /** The checks to leave out, each once, in the order asked. */
  exclude: string[]
  verbose: boolean
}

/** Names echoed in the warning at most (the query is the caller's; the answer stays short). */
const MAX_ECHOED = 10
const MAX_NAME = 64
const RETRY_AFTER_S = '5'

/** `exclude` (a string, or a list when repeated) and `verbose` (its presence, as kube) of a query. */
export function readyzQuery(query: unknown): ReadyzQuery {
  const q = (typeof query === 'object' && query !== null ? query : {}) as Record<string, unknown>
  const raw = Object.hasOwn(q, 'exclude') ? q.exclude : undefined
  const list = Array.isArray(raw) ? raw : raw === undefined ? [] : [raw]
  const exclude = [...new Set(list.filter((x): x is string => typeof x === 'string'))]
  return { exclude, verbose: Object.hasOwn(q, 'verbose') }
}

/** The kube-style warning for names of `exclude` that no check has, or undefined. */
function unmatchedWarning(query: ReadyzQuery, r: Readiness): string | undefined {
  const matched = new Set(r.excluded ?? [])
  const unmatched = query.exclude.filter((n) => !matched.has(n))
  if (unmatched.length === 0) return undefined
  const shown = unmatched.slice(0, MAX_ECHOED).map((n) => JSON.stringify(n.slice(0, MAX_NAME)))
  const more = unmatched.length > MAX_ECHOED ? ` and ${unmatched.length - MAX_ECHOED} more` : ''
  return `some health checks cannot be excluded: no matches for ${shown.join(',')}${more}`
}

/** One line of text (a check's error may hold line breaks). */
function oneLine(s: string): string {
  return s.replace(/\s+/g, ' ').trim()
}

/** kube-apiserver's verbose text: a line per check, excluded ones, the warning, the verdict. */
function verboseText(part: string, r: Readiness, warning: string | undefined): string {
  const lines: string[] = []
  if (r.stopping === true) lines.push(`[-]shutdown failed: ${part} is shutting down`)
  for (const c of r.checks)
    lines.push(c.ok ? `[+]${c.name} ok` : `[-]${c.name} failed: ${oneLine(c.error ?? 'failed')}`)
  for (const name of r.excluded ?? []) lines.push(`[+]${name} excluded: ok`)
  if (warning !== undefined) lines.push(`warn: ${warning}`)
  lines.push(`readyz check ${r.ready ? 'passed' : 'failed'}`)
  return lines.join('\n') + '\n'
}

/** Our JSON answer: 200 `ready`, or 503 `not_ready` naming what fails (or that the part drains). */
function jsonBody(part: string, r: Readiness, warning: string | undefined): Record<string, unknown> {
  const extra = { excluded: r.excluded ?? [], ...(warning !== undefined ? { warning } : {}) }
  if (r.ready) return { status: 'ready', part, checks: r.checks, ...extra }
  const failing = r.checks.filter((c) => !c.ok)
  const message =
    r.stopping === true
      ? `${part} is shutting down`
      : `${part} is not ready: ${failing.map((c) => `${c.name} (${c.error ?? 'failed'})`).join(', ')}`
  return {
    status: 'not_ready',
    part,
    code: 'not_ready',
    message,
    failing: failing.map((c) => c.name),
    checks: r.checks,
    ...extra,
  }
}

/** Answers /readyz: 200 when ready, else 503 with Retry-After; JSON, or text with `?verbose`. */
export function sendReadyz(reply: FastifyReply, part: string, query: ReadyzQuery, r: Readiness): FastifyReply {
  const warning = unmatchedWarning(query, r)
  void reply.code(r.ready ? 200 : 503)
  if (!r.ready) void reply.header('retry-after', RETRY_AFTER_S)
  if (!query.verbose) return reply.send(jsonBody(part, r, warning))
  return reply
    .header('content-type', 'text/plain; charset=utf-8')
    .header('x-content-type-options', 'nosniff')
    .send(verboseText(part, r, warning))
}

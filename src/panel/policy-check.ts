// The policy check: lists the permissive row-level security policies of a tenant database
// whose condition is always true (`USING (true)`, `WITH CHECK (true)`, or only a test of
// the caller's role) for the signed-in role, anon or PUBLIC, with the warning of docs/service.md §6.
// Read-only, over the tenant's owner connection; shared by the panel route and
// `gatehouse tenants check <database>`.
import { displayQualified, type Queryable } from '../shared/index.js'
import type { Tenant } from '../tenants/index.js'

/** Who a policy lets in. */
type PolicyAudience = 'authenticated' | 'anon' | 'public'

export interface PolicyFinding {
  schema: string
  table: string
  policy: string
  /** ALL, SELECT, INSERT, UPDATE or DELETE. */
  command: string
  /** Roles as the policy names them (this tenant's roles shown with their kind). */
  roles: string[]
  audience: PolicyAudience
  /** Which clause is always true. */
  clause: 'USING' | 'WITH CHECK' | 'USING and WITH CHECK'
  using: string | null
  with_check: string | null
  /** Whether row-level security is enabled on the table (without it, grants alone decide). */
  rls_enabled: boolean
  /** Whether the audience's request role holds a privilege the command needs (the policy is live). */
  granted: boolean
  warning: string
}

const POLICIES_SQL = `
SELECT p.schemaname::text AS schema,
       p.tablename::text AS "table",
       p.policyname::text AS policy,
       p.permissive::text AS permissive,
       p.roles::text[] AS roles,
       p.cmd::text AS command,
       p.qual AS using,
       p.with_check AS with_check,
       c.relrowsecurity AS rls_enabled,
       CASE WHEN EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = $1)
            THEN has_table_privilege($1, c.oid, CASE p.cmd WHEN 'ALL' THEN 'SELECT, INSERT, UPDATE, DELETE' ELSE p.cmd END)
            ELSE false END AS anon_granted,
       CASE WHEN EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = $2)
            THEN has_table_privilege($2, c.oid, CASE p.cmd WHEN 'ALL' THEN 'SELECT, INSERT, UPDATE, DELETE' ELSE p.cmd END)
            ELSE false END AS auth_granted
  FROM pg_catalog.pg_policies p
  JOIN pg_catalog.pg_namespace n ON n.nspname = p.schemaname
  JOIN pg_catalog.pg_class c ON c.relnamespace = n.oid AND c.relname = p.tablename
 WHERE p.schemaname NOT IN ('pg_catalog', 'information_schema', 'auth', 'platform')
   AND p.schemaname NOT LIKE 'pg\\_%'
 ORDER BY 1, 2, 3`

interface PolicyRow {
  schema: string
  table: string
  policy: string
  permissive: string
  roles: string[]
  command: string
  using: string | null
  with_check: string | null
  rls_enabled: boolean
  anon_granted: boolean
  auth_granted: boolean
}

/** Strips whitespace, case and redundant outer parentheses of a deparsed expression. */
function normalise(expr: string): string {
  let s = expr.replace(/\s+/g, '').toLowerCase()
  for (;;) {
    if (!s.startsWith('(') || !s.endsWith(')')) return s
    // Only strip when the first parenthesis closes at the very end.
    let depth = 0
    let closesAtEnd = true
    for (let i = 0; i < s.length; i++) {
      if (s[i] === '(') depth++
      else if (s[i] === ')') {
        depth--
        if (depth === 0 && i < s.length - 1) {
          closesAtEnd = false
          break
        }
      }
    }
    if (!closesAtEnd) return s
    s = s.slice(1, -1)
  }
}

const ALWAYS_TRUE = new Set(['true', "'t'::boolean", "'true'::boolean", '1=1', 'true=true'])

/** What an expression lets through: everybody, a role kind only, or something narrower (null). */
function openness(expr: string | null): 'all' | 'authenticated' | 'anon' | null {
  if (expr === null) return null
  const s = normalise(expr)
  if (ALWAYS_TRUE.has(s)) return 'all'
  const m = /^auth\.role\(\)='(authenticated|anon)'(?:::text)?$/.exec(s)
  if (m !== null) return m[1] as 'authenticated' | 'anon'
  return null
}

function audienceOf(roles: string[], tenant: Tenant): PolicyAudience | null {
  if (roles.includes('public')) return 'public'
  if (roles.includes('anon') || roles.includes(tenant.roles.anon)) return 'anon'
  if (roles.includes('authenticated') || roles.includes(tenant.roles.auth)) return 'authenticated'
  return null
}

function displayRoles(roles: string[], tenant: Tenant): string[] {
  return roles.map((r) =>
    r === tenant.roles.anon
      ? `${r} (anon)`
      : r === tenant.roles.auth
        ? `${r} (authenticated)`
        : r === tenant.roles.svc
          ? `${r} (svc)`
          : r,
  )
}

function warningOf(f: Omit<PolicyFinding, 'warning'>): string {
  const where = `Policy ${JSON.stringify(f.policy)} on ${displayQualified(f.schema, f.table)} (${f.command})`
  const says = `TO ${f.audience === 'public' ? 'PUBLIC' : f.audience} ${f.clause} (true)`
  const writes = f.clause !== 'USING' && f.command !== 'SELECT'
  if (f.audience === 'authenticated') {
    return (
      `${where} says ${says}: it means "anyone signed in"${writes ? ' may write any row' : ''}. ` +
      'Before a dedicated signed-in role existed, such a policy exposed the table to anyone holding the public key; ' +
      'check that this meaning is intended.'
    )
  }
  return (
    `${where} says ${says}: it means "anyone holding the public key", signed in or not${writes ? ', may write any row' : ''}; ` +
    'check that this meaning is intended.'
  )
}

/** The always-true policies of the tenant database `q` is connected to. */
export async function checkPolicies(q: Queryable, tenant: Tenant): Promise<PolicyFinding[]> {
  const { rows } = await q.query<PolicyRow>(POLICIES_SQL, [tenant.roles.anon, tenant.roles.auth])
  const out: PolicyFinding[] = []
  for (const r of rows) {
    if (r.permissive.toUpperCase() !== 'PERMISSIVE') continue
    let audience = audienceOf(r.roles, tenant)
    if (audience === null) continue
    const u = openness(r.using)
    const w = openness(r.with_check)
    if (u === null && w === null) continue
    // A role test narrows PUBLIC/anon to that role ("anyone signed in").
    const narrowed = u !== null && u !== 'all' ? u : w !== null && w !== 'all' ? w : null
    if (narrowed === 'anon' && audience === 'authenticated') continue
    if (narrowed !== null) audience = narrowed
    const clause = u !== null && w !== null ? 'USING and WITH CHECK' : u !== null ? 'USING' : 'WITH CHECK'
    const base = {
      schema: r.schema,
      table: r.table,
      policy: r.policy,
      command: r.command,
      roles: displayRoles(r.roles, tenant),
      audience,
      clause,
      using: r.using,
      with_check: r.with_check,
      rls_enabled: r.rls_enabled,
      granted: audience === 'authenticated' ? r.auth_granted : r.anon_granted || r.auth_granted,
    } as const
    out.push({ ...base, warning: warningOf(base) })
  }
  return out
}

/** The text `gatehouse tenants check` prints. */
export function formatPolicyReport(database: string, findings: PolicyFinding[]): string {
  if (findings.length === 0) return `${database}: no always-true policies for authenticated, anon or PUBLIC.\n`
  const lines = [`${database}: ${findings.length} polic${findings.length === 1 ? 'y' : 'ies'} to review`]
  for (const f of findings) {
    lines.push('', `- ${f.warning}`)
    lines.push(`  roles: ${f.roles.join(', ')}; using: ${f.using ?? '-'}; with check: ${f.with_check ?? '-'}`)
    if (!f.rls_enabled)
      lines.push(
        '  row-level security is not enabled on this table: the policy has no effect yet, grants alone decide.',
      )
    else if (!f.granted)
      lines.push(
        `  the ${f.audience} role holds no privilege for ${f.command} on this table yet: the policy is not live.`,
      )
  }
  return lines.join('\n') + '\n'
}

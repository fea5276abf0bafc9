// Turns a database refusal (PostgREST's PGRST205, Postgres' 42P01 and 42501) into the
// platform's refusals of docs/service.md §7: unknown_table, no_table_grant, permission_denied,
// rls_refusal, each naming the role the request ran as and the fix. Used by the gateway's
// rewriter and by the panel's test query. Never puts SQL text, stacks or another tenant's
// role names into what it returns.
import type { RoleKind, Tenant } from '../../tenants/index.js'
import {
  displayIdent,
  displayQualified,
  ROLE_KINDS,
  roleClaim,
  roleLabel,
  withTimeout,
  type GatehouseError,
} from '../../shared/index.js'
import type { Catalog, Privilege, RolePrivileges, TableFacts } from './catalog.js'
import {
  NoTableGrantError,
  PermissionDeniedError,
  RlsRefusalError,
  UnknownTableError,
  REFUSAL_CODES,
  type RefusalCode,
} from '../errors.js'

export { REFUSAL_CODES, type RefusalCode }

/** An error as PostgREST (or our engine, or Postgres itself) reported it. */
export interface SourceError {
  /** PGRST205, 42P01, 42501 ... */
  code: string
  message: string
  details?: string | null
  hint?: string | null
}

export interface RefusalInput {
  tenant: Tenant
  /** The request role kind the statement ran as. */
  kind: RoleKind
  error: SourceError
  /**
   * Privileges the action needs, in the order Postgres would miss them (e.g. POST:
   * INSERT, SELECT, UPDATE). Empty when unknown (RPC, arbitrary SQL).
   */
  needs: readonly Privilege[]
  /** What the caller did, for messages: `POST`, `an INSERT statement` ... */
  action: string
  /** The table the request addressed (first path segment), when there is one. */
  table?: string | null
  /** Schemas searched for an unqualified table name (default tenant.rest.schemas). */
  schemas?: readonly string[]
  /**
   * The upstream said the row of this table write WAS written and only the SELECT policy
   * hides it (our REST engine's `row_written: true`): answer rls_refusal.
   */
  rowWritten?: boolean
}

/** A refusal ready to send. */
export interface Refusal {
  status: number
  body: {
    code: RefusalCode
    message: string
    details: string | null
    hint: string | null
    [extra: string]: unknown
  }
  headers: Record<string, string>
}

/**
 * The refusal as sent: the registry error's status and wire body, its code also in a header.
 * The answer is now the gateway's, not the engine's: its Proxy-Status names Gatehouse and the
 * refusal's code instead of the engine's `PostgREST; error=PGRST205`.
 */
function toRefusal(e: GatehouseError): Refusal {
  return {
    status: e.status,
    headers: { 'x-gatehouse-error-code': e.code, 'proxy-status': `gatehouse; error=${e.code}`, ...e.headers },
    body: e.toWire() as Refusal['body'],
  }
}

/** Needed privileges of each HTTP method, in the order Postgres would miss them. */
export function privilegesForMethod(method: string): Privilege[] {
  switch (method.toUpperCase()) {
    case 'GET':
    case 'HEAD':
      return ['SELECT']
    case 'POST':
      return ['INSERT', 'SELECT', 'UPDATE']
    case 'PUT':
      return ['INSERT', 'UPDATE', 'SELECT']
    case 'PATCH':
      return ['UPDATE', 'SELECT']
    case 'DELETE':
      return ['DELETE', 'SELECT']
    default:
      return []
  }
}

// Role names made by provisioning. Any of them that is not this tenant's is scrubbed.
const TENANT_ROLE_IN_TEXT = /\bt_[0-9a-f]{10}_(?:anon|auth|svc|rest|authn|owner)\b/g

/** Removes other tenants' role names and control characters from upstream text; bounds it. */
function scrub(text: string | null | undefined, tenant: Tenant): string | null {
  if (typeof text !== 'string' || text === '') return null
  const own = new Set(Object.values(tenant.roles))
  let out = text.replace(TENANT_ROLE_IN_TEXT, (m) =>
    own.has(m) || m.startsWith(ownPrefix(tenant)) ? m : '(another role)',
  )
  // eslint-disable-next-line no-control-regex
  out = out.replace(/[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f]/g, ' ')
  return out.length > 1000 ? out.slice(0, 1000) + '…' : out
}

function ownPrefix(tenant: Tenant): string {
  const m = /^(t_[0-9a-f]{10})_/.exec(tenant.roles.anon)
  return m === null ? '\u0000' : m[1] + '_'
}

/**
 * The ready statement the owner runs: `GRANT INSERT ON public.todos TO authenticated;`. A plain
 * GRANT to the cluster role of the caller's kind (anon, authenticated, service_role): this
 * database's request role is a member of it (docs/roles.md), as in Supabase.
 */
export function grantStatement(privilege: Privilege, schema: string, name: string, kind: RoleKind): string {
  return `GRANT ${privilege} ON ${displayQualified(schema, name)} TO ${roleClaim(kind)};`
}

// ---- reading upstream messages ------------------------------------------------------------

const PGRST205 = /^Could not find the table '(.+)' in the schema cache$/s
const PERMISSION_ON_RELATION = /^permission denied for (?:table|view|materialized view|foreign table|relation) (.+)$/s
const UNDEFINED_RELATION = /^relation "(.+)" does not exist$/s
const PERMISSION_ON_SEQUENCE = /^permission denied for sequence (.+)$/s
const RLS_VIOLATION = /new row violates row-level security policy(?: \(USING expression\))?(?: for table "([^"]+)")?/

interface TableRef {
  schema: string | null
  name: string
}

/** Splits `schema.name` against the exposed schemas (names may contain dots). */
function splitQualified(text: string, schemas: readonly string[]): TableRef {
  for (const s of schemas) if (text.startsWith(s + '.')) return { schema: s, name: text.slice(s.length + 1) }
  const dot = text.indexOf('.')
  return dot > 0 ? { schema: text.slice(0, dot), name: text.slice(dot + 1) } : { schema: null, name: text }
}

function unquote(name: string): string {
  return /^".*"$/s.test(name) ? name.slice(1, -1).replace(/""/g, '"') : name
}

function refOf(error: SourceError, schemas: readonly string[], pathTable: string | null): TableRef | null {
  let m = PGRST205.exec(error.message)
  if (m !== null) return splitQualified(m[1]!, schemas)
  m = UNDEFINED_RELATION.exec(error.message)
  if (m !== null) return splitQualified(m[1]!, schemas)
  m = PERMISSION_ON_RELATION.exec(error.message)
  if (m !== null) return { schema: null, name: unquote(m[1]!) }
  return pathTable ? { schema: null, name: pathTable } : null
}

const NAME_OK = (s: string): boolean => s.length > 0 && s.length <= 200 && !s.includes('\u0000')

// ---- the explainer ------------------------------------------------------------------------

/** Look-ups slower than this are given up (the refusal is then made without them). */
const LOOKUP_TIMEOUT_MS = 3000

export interface ExplainerOptions {
  catalog: Catalog
  /** Told when a look-up fails (the refusal is still made, with less detail). */
  onLookupError?: (err: unknown, tenant: Tenant) => void
}

export interface RefusalExplainer {
  /** The platform refusal for `input`, or null when the error is not one of them. */
  explain(input: RefusalInput): Promise<Refusal | null>
}

/** Whether an error is one the explainer may rewrite (cheap; no I/O). */
export function isRefusalCandidate(error: SourceError): boolean {
  return error.code === 'PGRST205' || error.code === '42P01' || error.code === '42501'
}

export function createRefusalExplainer(opts: ExplainerOptions): RefusalExplainer {
  async function facts(tenant: Tenant, schemas: readonly string[], name: string): Promise<TableFacts | null> {
    try {
      return await withTimeout(
        opts.catalog.table(tenant, schemas, name),
        LOOKUP_TIMEOUT_MS,
        'catalog look-up timed out',
      )
    } catch (err) {
      opts.onLookupError?.(err, tenant)
      return null
    }
  }

  async function explain(input: RefusalInput): Promise<Refusal | null> {
    if (!isRefusalCandidate(input.error)) return null
    const schemas = input.schemas ?? input.tenant.rest.schemas
    const ref = refOf(input.error, schemas, input.table ?? null)
    return input.error.code === '42501'
      ? explainPermissionDenied(input, schemas, ref, facts)
      : explainUnknownTable(input, schemas, ref, facts)
  }

  return { explain }
}

type FactsLookup = (tenant: Tenant, schemas: readonly string[], name: string) => Promise<TableFacts | null>

/** 42501: a row policy, a sequence, a relation the role lacks (and what it holds instead). */
async function explainPermissionDenied(
  input: RefusalInput,
  schemas: readonly string[],
  ref: TableRef | null,
  facts: FactsLookup,
): Promise<Refusal | null> {
  const { error } = input
  if (input.rowWritten === true) return rlsRefusal(input, ref)
  if (RLS_VIOLATION.test(error.message)) return permissionDenied(input, rlsViolationHint(input))
  const sequence = PERMISSION_ON_SEQUENCE.exec(error.message)
  if (sequence !== null && NAME_OK(sequence[1]!))
    return permissionDenied(input, sequenceHint(input, schemas, unquote(sequence[1]!)))
  const m = PERMISSION_ON_RELATION.exec(error.message)
  if (m === null || ref === null || !NAME_OK(ref.name)) return permissionDenied(input, null)
  const f = await facts(input.tenant, ref.schema !== null ? [ref.schema] : schemas, ref.name)
  if (f === null || !f.exists) return permissionDenied(input, null)
  const mine = f.roles[input.kind]
  if (mine === undefined) return permissionDenied(input, null)
  // RPC, arbitrary SQL, or a table other than the one addressed (a policy's subquery, a
  // view's base table): what the role holds there, not a refusal of the addressed table.
  const other = input.table !== undefined && input.table !== null && input.table !== f.name
  if (input.needs.length === 0 || other) return permissionDenied(input, touchedHint(input, f, mine))
  if (!mine.usage || !mine.any) return unknownTable(input, f, mine)
  const missing = input.needs.find((p) => !mine.table[p])
  if (missing === undefined) return permissionDenied(input, null)
  if (missing !== 'DELETE' && mine.columns[missing])
    return permissionDenied(input, columnHint(input, f.schema, f.name, missing))
  return noTableGrant(input, f.schema, f.name, mine, missing)
}

/** PGRST205 / 42P01: not in the catalog of the role (missing, or no privilege at all). */
async function explainUnknownTable(
  input: RefusalInput,
  schemas: readonly string[],
  ref: TableRef | null,
  facts: FactsLookup,
): Promise<Refusal | null> {
  if (ref === null || !NAME_OK(ref.name)) return unknownTableBare(input, null)
  const f = await facts(input.tenant, ref.schema !== null ? [ref.schema] : schemas, ref.name)
  if (f === null) return unknownTableBare(input, ref)
  if (!f.exists) return unknownTableMissing(input, f.schemas, f.name)
  const mine = f.roles[input.kind]
  // The role can see it: the upstream's schema cache is stale (e.g. the table was just
  // created and the reload is in flight). Not one of our refusals.
  if (mine !== undefined && mine.usage && mine.any) return null
  return unknownTable(input, f, mine)
}

// ---- the refusals -------------------------------------------------------------------------

function sqlstateOf(input: RefusalInput): Record<string, string> {
  return /^[0-9A-Z]{5}$/.test(input.error.code) ? { sqlstate: input.error.code } : {}
}

function heldBy(tenant: Tenant, f: Extract<TableFacts, { exists: true }>, except: RoleKind): string {
  const parts: string[] = []
  for (const k of ROLE_KINDS) {
    if (k === except) continue
    const r = f.roles[k]
    if (r === undefined || !r.any) continue
    const privs = (['SELECT', 'INSERT', 'UPDATE', 'DELETE'] as const).filter((p) => r.table[p])
    parts.push(`${roleLabel(tenant.roles, k)}${privs.length > 0 ? ': ' + privs.join(', ') : ''}`)
  }
  return parts.length > 0
    ? `Privileges on it are held by ${parts.join('; ')}.`
    : "None of this database's request roles holds a privilege on it."
}

function firstNeed(input: RefusalInput): Privilege {
  return input.needs[0] ?? 'SELECT'
}

function unknownTableError(
  input: RefusalInput,
  table: string,
  opts: ConstructorParameters<typeof UnknownTableError>[2],
): Refusal {
  return toRefusal(new UnknownTableError(table, roleLabel(input.tenant.roles, input.kind), opts))
}

function unknownTable(
  input: RefusalInput,
  f: Extract<TableFacts, { exists: true }>,
  mine: RolePrivileges | undefined,
): Refusal {
  const { tenant, kind } = input
  const table = displayQualified(f.schema, f.name)
  const why =
    mine !== undefined && !mine.usage
      ? `Role ${roleLabel(tenant.roles, kind)} has no USAGE on schema ${displayIdent(f.schema)}.`
      : `${table} exists, but role ${roleLabel(tenant.roles, kind)} holds no privilege on it.`
  return unknownTableError(input, table, {
    details: `${why} ${heldBy(tenant, f, kind)}`,
    hint:
      `The usual cause is a grant to the wrong role. Grant to ${roleClaim(kind)} (this database's ${roleClaim(kind)} ` +
      `role is a member of it), e.g. ${grantStatement(firstNeed(input), f.schema, f.name, kind)}${rlsAdvice(f)}`,
    extra: { role: roleClaim(kind), table },
  })
}

/** What the hint of an existing table adds after the GRANT: only the row-level security steps still missing. */
function rlsAdvice(f: Extract<TableFacts, { exists: true }>): string {
  if (f.relkind !== 'r' && f.relkind !== 'p') return ''
  if (!f.rls) return ' then enable row-level security on the table and add a policy.'
  return f.policies
    ? ' (row-level security is on and the table has policies).'
    : ' then add a policy (row-level security is on).'
}

function unknownTableMissing(input: RefusalInput, schemas: readonly string[], name: string): Refusal {
  const { kind } = input
  const schema = schemas[0] ?? 'public'
  const table = displayQualified(schema, name)
  const suggestion =
    typeof input.error.hint === 'string' && /^Perhaps you meant/.test(input.error.hint)
      ? ' ' + scrub(input.error.hint, input.tenant) + '.'
      : ''
  return unknownTableError(input, table, {
    details: `No table or view named ${JSON.stringify(name)} exists in schema${schemas.length > 1 ? 's' : ''} ${schemas.join(', ')}.${suggestion}`,
    hint:
      `Check the table name. Once the table exists, make it visible to role ${roleClaim(kind)}: ` +
      `${grantStatement(firstNeed(input), schema, name, kind)} then enable row-level security on it and add a policy.`,
    extra: { role: roleClaim(kind), table },
  })
}

/** When the catalog could not be read: the refusal without the facts. */
function unknownTableBare(input: RefusalInput, ref: TableRef | null): Refusal {
  const { kind } = input
  const schema = ref?.schema ?? input.tenant.rest.schemas[0] ?? 'public'
  const table = ref !== null && NAME_OK(ref.name) ? displayQualified(schema, ref.name) : 'the requested table'
  return unknownTableError(input, table, {
    details: 'The table is missing, or the role holds no privilege on it.',
    hint:
      `The usual cause is a grant to the wrong role: grant to ${roleClaim(kind)}, ` +
      `e.g. GRANT SELECT ON <schema>.<table> TO ${roleClaim(kind)};`,
    extra: { role: roleClaim(kind), ...(ref !== null && NAME_OK(ref.name) ? { table } : {}) },
  })
}

function noTableGrant(
  input: RefusalInput,
  schema: string,
  name: string,
  mine: RolePrivileges,
  missing: Privilege,
): Refusal {
  const { tenant, kind } = input
  const table = displayQualified(schema, name)
  const held = (['SELECT', 'INSERT', 'UPDATE', 'DELETE'] as const).filter((p) => mine.table[p])
  return toRefusal(
    new NoTableGrantError(roleLabel(tenant.roles, kind), missing, table, input.action, {
      details:
        `${table} is visible to role ${roleClaim(kind)}${held.length > 0 ? ` (it holds ${held.join(', ')})` : ''}, ` +
        `but ${missing} is not granted. The statement in hint grants it; run it as the database owner.`,
      hint: grantStatement(missing, schema, name, kind),
      extra: { role: roleClaim(kind), table, privilege: missing, ...sqlstateOf(input) },
    }),
  )
}

function columnHint(input: RefusalInput, schema: string, name: string, privilege: Privilege): string {
  return (
    `Role ${roleClaim(input.kind)} holds ${privilege} on some columns of ${displayQualified(schema, name)} only: ` +
    `use only those columns, or grant it on the whole table with ${grantStatement(privilege, schema, name, input.kind)}`
  )
}

/** RPC or SQL: the table the statement touched, and what the role holds on it. */
function touchedHint(input: RefusalInput, f: Extract<TableFacts, { exists: true }>, mine: RolePrivileges): string {
  const held = (['SELECT', 'INSERT', 'UPDATE', 'DELETE'] as const).filter((p) => mine.table[p])
  return (
    `The statement touched ${displayQualified(f.schema, f.name)}, on which role ${roleClaim(input.kind)} holds ` +
    `${held.length > 0 ? held.join(', ') : 'no privilege'}. Grant what it needs as the owner, e.g. ` +
    grantStatement(held.includes('SELECT') ? 'INSERT' : 'SELECT', f.schema, f.name, input.kind)
  )
}

/**
 * A write that draws a number from a sequence (serial/bigserial) without USAGE on it: the
 * statement that grants it, ready to run as the owner. Postgres names the sequence without
 * its schema: the schema of the addressed table (the first exposed one) is assumed.
 */
function sequenceHint(input: RefusalInput, schemas: readonly string[], name: string): string {
  return `GRANT USAGE ON SEQUENCE ${displayQualified(schemas[0] ?? 'public', name)} TO ${roleClaim(input.kind)};`
}

function rlsViolationHint(input: RefusalInput): string {
  return (
    'Nothing was written. A row-level security policy refused the row: the WITH CHECK of an INSERT or UPDATE ' +
    'policy, or (with Prefer: return=representation) the SELECT policy that must let the author see the new row. ' +
    `Check the table's policies for role ${roleClaim(input.kind)}, or send Prefer: return=minimal if the row need not come back.`
  )
}

function permissionDenied(input: RefusalInput, hint: string | null): Refusal {
  const { tenant, kind, error } = input
  const upstreamDetails = scrub(error.details, tenant)
  return toRefusal(
    new PermissionDeniedError(
      kind === 'anon' ? 'anon' : 'signedIn',
      scrub(error.message, tenant) ?? 'permission denied',
      {
        details: `The request ran as role ${roleLabel(tenant.roles, kind)}.${upstreamDetails !== null ? ' ' + upstreamDetails : ''}`,
        hint: hint ?? scrub(error.hint, tenant),
        extra: { sqlstate: '42501', role: roleClaim(kind) },
        headers: kind === 'anon' ? { 'www-authenticate': 'Bearer' } : {},
      },
    ),
  )
}

function rlsRefusal(input: RefusalInput, ref: TableRef | null): Refusal {
  const { tenant, kind } = input
  const m = RLS_VIOLATION.exec(input.error.message)
  const name = m?.[1] ?? ref?.name ?? null
  const table =
    name !== null && NAME_OK(name)
      ? displayQualified(ref?.schema ?? tenant.rest.schemas[0] ?? 'public', name)
      : 'the table'
  return toRefusal(
    new RlsRefusalError(kind === 'anon' ? 'anon' : 'signedIn', table, roleLabel(tenant.roles, kind), {
      details:
        scrub(input.error.details, tenant) ??
        `${input.action} asked for the written row back (Prefer: return=representation); returning it is subject to the SELECT policy, not only the ${input.action === 'PATCH' ? 'UPDATE' : 'INSERT'} policy.`,
      hint: 'Do not retry: the write is done. Send Prefer: return=minimal, or add a SELECT policy that lets the author see the row (e.g. USING (owner_id = auth.uid())).',
      extra: {
        sqlstate: '42501',
        role: roleClaim(kind),
        ...(name !== null && NAME_OK(name) ? { table } : {}),
        row_written: true,
      },
      headers: kind === 'anon' ? { 'www-authenticate': 'Bearer' } : {},
    }),
  )
}

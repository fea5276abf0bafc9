// Catalog look-ups of the refusal rewriter: which of a tenant's request roles hold which
// privilege on a table, read over the tenant's owner connection (tenant.postgres) with a
// few connections per tenant from side pools (shared/side-pools.ts) and the answers kept briefly
// in an LRU. Read-only; every value is a parameter; nothing here decides what a client is
// told (refusals.ts does).
import { LRUCache } from 'lru-cache'
import { createSidePools, type PoolLike, type TenantPoolsSnapshot } from '../../shared/index.js'
import type { RoleKind, Tenant } from '../../tenants/index.js'

/** Table-level privileges the rewriter reasons about. */
export type Privilege = 'SELECT' | 'INSERT' | 'UPDATE' | 'DELETE'

export const PRIVILEGES: readonly Privilege[] = ['SELECT', 'INSERT', 'UPDATE', 'DELETE']

/** What one request role may do with one table. */
export interface RolePrivileges {
  /** USAGE on the table's schema. */
  usage: boolean
  /** Table-level privileges (inherited ones included, as Postgres checks them). */
  table: Record<Privilege, boolean>
  /** Column-level privileges on at least one column (table-level ones count too). */
  columns: Record<'SELECT' | 'INSERT' | 'UPDATE', boolean>
  /** Any privilege at all on the table (TRUNCATE, REFERENCES, TRIGGER included). */
  any: boolean
}

/** The facts about one table name in a tenant database. */
export type TableFacts =
  | { exists: false; schemas: string[]; name: string }
  | {
      exists: true
      schema: string
      name: string
      relkind: string
      /** Row-level security is enabled, and some policy is defined on the table. */
      rls: boolean
      policies: boolean
      roles: Partial<Record<RoleKind, RolePrivileges>>
    }

export interface Catalog {
  /**
   * The table `name` in the first of `schemas` that has it (schemas in search order),
   * with the privileges of the tenant's three request roles.
   */
  table(tenant: Tenant, schemas: readonly string[], name: string): Promise<TableFacts>
  /** The look-up pools' numbers (metrics); keys are JSON [database, url]. */
  poolSnapshot(): TenantPoolsSnapshot
  /** Closes every pool. */
  close(): Promise<void>
}

const TABLE_FACTS_SQL = `
SELECT n.nspname::text AS schema,
       c.relname::text AS name,
       c.relkind::text AS relkind,
       c.relrowsecurity AS rls,
       EXISTS (SELECT 1 FROM pg_catalog.pg_policy p WHERE p.polrelid = c.oid) AS policies,
       r.kind AS role_kind,
       has_schema_privilege(ro.oid, n.oid, 'USAGE') AS usage,
       has_table_privilege(ro.oid, c.oid, 'SELECT') AS t_select,
       has_table_privilege(ro.oid, c.oid, 'INSERT') AS t_insert,
       has_table_privilege(ro.oid, c.oid, 'UPDATE') AS t_update,
       has_table_privilege(ro.oid, c.oid, 'DELETE') AS t_delete,
       has_table_privilege(ro.oid, c.oid, 'TRUNCATE, REFERENCES, TRIGGER') AS t_other,
       has_any_column_privilege(ro.oid, c.oid, 'SELECT') AS c_select,
       has_any_column_privilege(ro.oid, c.oid, 'INSERT') AS c_insert,
       has_any_column_privilege(ro.oid, c.oid, 'UPDATE') AS c_update,
       array_position($1::text[], n.nspname::text) AS rank
  FROM pg_catalog.pg_class c
  JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
 CROSS JOIN (VALUES ('anon', $3::text), ('auth', $4::text), ('svc', $5::text)) AS r(kind, role)
  JOIN pg_catalog.pg_roles ro ON ro.rolname = r.role
 WHERE n.nspname = ANY ($1::text[])
   AND c.relname = $2
   AND c.relkind IN ('r', 'p', 'v', 'm', 'f')
 ORDER BY rank, r.kind`

interface FactsRow {
  schema: string
  name: string
  relkind: string
  rls: boolean
  policies: boolean
  role_kind: RoleKind
  usage: boolean
  t_select: boolean
  t_insert: boolean
  t_update: boolean
  t_delete: boolean
  t_other: boolean
  c_select: boolean
  c_insert: boolean
  c_update: boolean
}

function toFacts(rows: FactsRow[], schemas: string[], name: string): TableFacts {
  const first = rows[0]
  if (first === undefined) return { exists: false, schemas, name }
  const roles: Partial<Record<RoleKind, RolePrivileges>> = {}
  for (const r of rows) {
    if (r.schema !== first.schema) continue
    const table = { SELECT: r.t_select, INSERT: r.t_insert, UPDATE: r.t_update, DELETE: r.t_delete }
    const columns = { SELECT: r.c_select, INSERT: r.c_insert, UPDATE: r.c_update }
    roles[r.role_kind] = {
      usage: r.usage,
      table,
      columns,
      any: r.t_other || Object.values(table).some(Boolean) || Object.values(columns).some(Boolean),
    }
  }
  const { schema, name: relname, relkind, rls, policies } = first
  return { exists: true, schema, name: relname, relkind, rls, policies, roles }
}

/** Cache keys are JSON tuples (never concatenated strings). */
const key = (...parts: unknown[]): string => JSON.stringify(parts)

/**
 * The catalog: answers reused for 2 s (kept short: grants change), 5000 at most; look-ups on
 * two connections per tenant, 100 tenant pools at most (the least recently used is closed),
 * each statement at most 2 s.
 */
export function createCatalog(): Catalog {
  const statementTimeout = 2000
  const pools = createSidePools({
    maxPools: 100,
    poolSize: 2,
    timeoutMs: statementTimeout,
    clientConfig: { statement_timeout: statementTimeout, query_timeout: statementTimeout + 1000 },
    applicationName: 'gatehouse-gateway-catalog',
  })

  const poolOf = (tenant: Tenant): PoolLike => pools.get(tenant.database, tenant.postgres)

  interface FetchContext {
    tenant: Tenant
    schemas: string[]
    name: string
  }
  const answers = new LRUCache<string, TableFacts, FetchContext>({
    max: 5000,
    ttl: 2000,
    fetchMethod: async (_k, _stale, { context }) => {
      const { tenant, schemas, name } = context
      const r = await poolOf(tenant).query<FactsRow>(TABLE_FACTS_SQL, [
        schemas,
        name,
        tenant.roles.anon,
        tenant.roles.auth,
        tenant.roles.svc,
      ])
      return toFacts(r.rows, schemas, name)
    },
  })

  return {
    async table(tenant, schemas, name) {
      const list = [...schemas]
      const k = key(tenant.database, tenant.postgres, tenant.roles, list, name)
      const facts = await answers.fetch(k, { context: { tenant, schemas: list, name } })
      if (facts === undefined) throw new Error('catalog look-up gave no answer')
      return facts
    },
    poolSnapshot: () => pools.snapshot(),
    async close() {
      answers.clear()
      await pools.close()
    },
  }
}

// Supabase's default privileges, opted in per database (`rest.supabase_default_privileges`,
// docs/supabase.md "Default privileges"): a Supabase project grants everything the
// `postgres` role creates in `public` to anon, authenticated and service_role, so a new
// table is readable and writable with the public key until RLS is enabled on it. Gatehouse
// grants nothing by default; this opt-in makes the database's owner do as Supabase's
// `postgres` does. Run on the owner's connection: the defaults are the owner's.
import { inTransaction, quoteIdent, ROLE_CLAIMS, type Queryable } from '../shared/index.js'

/** The cluster groups Supabase's SQL names (a database's request roles are their members). */
const GROUPS = [ROLE_CLAIMS.anon, ROLE_CLAIMS.auth, ROLE_CLAIMS.svc]
/** ALTER DEFAULT PRIVILEGES object kinds and their pg_default_acl.defaclobjtype. */
const KINDS = [
  ['TABLES', 'r'],
  ['SEQUENCES', 'S'],
  ['FUNCTIONS', 'f'],
] as const

/** The owner's defaults in `public` as the setting has them: on, off, or partly granted. */
export type DefaultPrivilegesState = 'on' | 'off' | 'partial'

/** Grants (on) or revokes (off) the defaults and the groups' USAGE on `public`, in one transaction. */
export async function setSupabaseDefaultPrivileges(client: Queryable, on: boolean): Promise<void> {
  const groups = GROUPS.map(quoteIdent).join(', ')
  await inTransaction(client, async () => {
    const owner = (await client.query<{ u: string }>('SELECT current_user AS u')).rows[0]!.u
    for (const [kind] of KINDS) {
      await client.query(
        `ALTER DEFAULT PRIVILEGES FOR ROLE ${quoteIdent(owner)} IN SCHEMA public ` +
          (on ? `GRANT ALL ON ${kind} TO ${groups}` : `REVOKE ALL ON ${kind} FROM ${groups}`),
      )
    }
    await client.query(
      on ? `GRANT USAGE ON SCHEMA public TO ${groups}` : `REVOKE USAGE ON SCHEMA public FROM ${groups}`,
    )
  })
}

/** What the owner's defaults in `public` give the groups now (run as the owner). */
export async function supabaseDefaultPrivileges(client: Queryable): Promise<DefaultPrivilegesState> {
  const r = await client.query<{ n: number }>(
    `SELECT pg_catalog.count(DISTINCT (d.defaclobjtype, a.grantee))::int AS n
       FROM pg_catalog.pg_default_acl d
       CROSS JOIN LATERAL pg_catalog.aclexplode(d.defaclacl) a
       JOIN pg_catalog.pg_roles g ON g.oid = a.grantee
      WHERE d.defaclrole = (SELECT oid FROM pg_catalog.pg_roles WHERE rolname = current_user)
        AND d.defaclnamespace = 'public'::regnamespace
        AND d.defaclobjtype = ANY ($1::"char"[]) AND g.rolname = ANY ($2::text[])`,
    [KINDS.map(([, t]) => t), GROUPS],
  )
  const n = r.rows[0]!.n
  return n === 0 ? 'off' : n === KINDS.length * GROUPS.length ? 'on' : 'partial'
}

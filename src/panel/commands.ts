// `gatehouse tenants check <database>`: the panel's policy check from the command line.
// Reads the tenant from the configured store, connects with its owner connection, prints
// the always-true policies with the warning of docs/service.md §6, and whether the owner's
// default privileges in `public` are what `rest.supabase_default_privileges` says (a warning
// when that opt-in is on: docs/supabase.md "Default privileges"), or JSON with --json. Exit
// code 1 when there is something to review (a policy, privileges that differ), 0 when not.
import type { Command } from 'commander'
import pg from 'pg'
import type { Config } from '../config/index.js'
import { DATABASE_NAME, out, withTenantStore } from '../tenants/index.js'
import { CheckFailedError } from './errors.js'
import { checkPolicies, formatPolicyReport } from './policy-check.js'
import { supabaseDefaultPrivileges, type DefaultPrivilegesState } from '../platform/index.js'

interface DefaultPrivilegesReport {
  /** rest.supabase_default_privileges */
  setting: boolean
  /** What the owner's defaults in `public` give anon, authenticated and service_role. */
  database: DefaultPrivilegesState
  /** Set when the database differs from the setting. */
  problem?: string
  warning?: string
}

function defaultPrivilegesReport(setting: boolean, database: DefaultPrivilegesState): DefaultPrivilegesReport {
  const report: DefaultPrivilegesReport = { setting, database }
  if (database !== (setting ? 'on' : 'off'))
    report.problem = `the owner's default privileges in public are ${database === 'partial' ? 'partly granted' : database} to anon, authenticated and service_role, but rest.supabase_default_privileges is ${setting ? 'on' : 'off'}: set it again from the panel (PATCH rest-settings) to apply it`
  if (setting)
    report.warning =
      'rest.supabase_default_privileges is on: every table, sequence and function the owner creates in public is granted to anon, authenticated and service_role, so a new table is readable and writable with the public key until RLS is enabled on it'
  return report
}

export function registerPanelCommands(tenants: Command, config: () => Config): void {
  tenants
    .command('check')
    .description(
      'list row-level security policies that let anyone signed in (TO authenticated USING (true)), anon or PUBLIC through; exit code 1 when there are any',
    )
    .argument('<database>', 'the database name')
    .option('--json', 'print the findings as JSON')
    .action(async (database: string, opts: { json?: boolean }) => {
      if (!DATABASE_NAME.test(database))
        throw new CheckFailedError(`"${database}" is not a database name (${DATABASE_NAME.source})`)
      const tenant = await withTenantStore(config(), (store) => store.get(database))
      if (tenant === null) throw new CheckFailedError(`no tenant named "${database}" in the tenant store`)
      const client = new pg.Client({
        connectionString: tenant.postgres,
        connectionTimeoutMillis: 10_000,
        application_name: 'gatehouse-check',
      })
      client.on('error', () => {})
      try {
        await client.connect()
      } catch (err) {
        throw new CheckFailedError(
          `cannot connect to database "${database}" with its owner connection: ${(err as Error).message}`,
        )
      }
      try {
        const findings = await checkPolicies(client, tenant)
        const privileges = defaultPrivilegesReport(
          tenant.rest.supabase_default_privileges === true,
          await supabaseDefaultPrivileges(client),
        )
        if (opts.json === true)
          out(
            JSON.stringify(
              { database, count: findings.length, policies: findings, default_privileges: privileges },
              null,
              2,
            ),
          )
        else {
          out(formatPolicyReport(database, findings))
          for (const line of [privileges.problem, privileges.warning]) if (line !== undefined) out(`warning: ${line}`)
        }
        if (findings.length > 0 || privileges.problem !== undefined) process.exitCode = 1
      } finally {
        await client.end().catch(() => {})
      }
    })
}

// `gatehouse tenants check <database>`: the panel's policy check from the command line.
// Reads the tenant from the configured store, connects with its owner connection, prints
// the always-true policies with the warning of docs/service.md §6 (or JSON with --json). Exit
// code 1 when there is something to review, 0 when there is not.
import type { Command } from 'commander'
import pg from 'pg'
import type { Config } from '../config/index.js'
import { createTenantStore, DATABASE_NAME } from '../tenants/index.js'
import { CheckFailedError } from './errors.js'
import { checkPolicies, formatPolicyReport } from './policy-check.js'

const out = (text: string): void => {
  process.stdout.write(text.endsWith('\n') ? text : text + '\n')
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
      const cfg = config()
      const store = createTenantStore(cfg)
      let tenant
      try {
        tenant = await store.get(database)
      } finally {
        await store.close()
      }
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
        if (opts.json === true) out(JSON.stringify({ database, count: findings.length, policies: findings }, null, 2))
        else out(formatPolicyReport(database, findings))
        if (findings.length > 0) process.exitCode = 1
      } finally {
        await client.end().catch(() => {})
      }
    })
}

// Generated types for app developers: `gatehouse gen types typescript <database>` and the
// panel's `GET .../api/types/typescript` print the `Database` type that
// `supabase gen types typescript` (postgres-meta) prints, so `createClient<Database>()`
// type-checks queries. Reads the catalog in one read-only transaction; writes nothing.
import type { Command } from 'commander'
import pg from 'pg'
import type { Config } from '../config/index.js'
import { createTenantStore, DATABASE_NAME } from '../tenants/index.js'
import { readCatalog } from './catalog.js'
import { GenTypesError } from './errors.js'
import { renderTypescript } from './typescript.js'

export type { Catalog } from './catalog.js'
export { TYPEGEN_ERRORS, type TypegenErrorCode } from './errors.js'

/** The PostgREST version the REST engine answers as (postgrest-js picks its features by it). */
export const POSTGREST_VERSION = '14.1'

/** A connection to read the catalog on: a client, or a pool's checked-out client. */
export type CatalogClient = Pick<pg.ClientBase, 'query'>

export interface GenerateTypesOptions {
  /** The schemas to describe (default: `public`). */
  readonly schemas?: readonly string[]
}

/** One query that, failing, leaves the transaction usable (the schema cache reader retries without the schema version). */
async function queryInSavepoint(
  client: CatalogClient,
  text: string,
  values: unknown[],
): Promise<Array<Record<string, unknown>>> {
  await client.query('SAVEPOINT gatehouse_gen')
  try {
    const { rows } = await client.query(text, values)
    await client.query('RELEASE SAVEPOINT gatehouse_gen')
    return rows as Array<Record<string, unknown>>
  } catch (err) {
    await client.query('ROLLBACK TO SAVEPOINT gatehouse_gen')
    throw err
  }
}

/**
 * The TypeScript types of a database's schemas. Runs in a read-only transaction whose
 * search path is Postgres' default (`"$user", public`), as postgres-meta's connection has
 * it: function argument lists name types as that search path sees them.
 */
export async function generateTypescriptTypes(client: CatalogClient, opts: GenerateTypesOptions = {}): Promise<string> {
  const schemas = opts.schemas !== undefined && opts.schemas.length > 0 ? opts.schemas : ['public']
  await client.query('BEGIN READ ONLY')
  try {
    await client.query(`SELECT pg_catalog.set_config('search_path', '"$user", public', true)`)
    const catalog = await readCatalog((text, values) => queryInSavepoint(client, text, values), schemas)
    return renderTypescript(catalog, { postgrestVersion: POSTGREST_VERSION })
  } finally {
    await client.query('ROLLBACK').catch(() => {})
  }
}

/** Parses `--schema a,b` (also repeated). */
export function parseSchemaList(values: readonly string[]): string[] {
  return values
    .flatMap((v) => v.split(','))
    .map((s) => s.trim())
    .filter((s) => s !== '')
}

interface GenOptions {
  schema: string[]
  dbUrl?: string
}

async function resolveTarget(
  database: string | undefined,
  opts: GenOptions,
  config: () => Config,
): Promise<{ url: string; schemas: string[] }> {
  const schemas = parseSchemaList(opts.schema)
  if (opts.dbUrl !== undefined) return { url: opts.dbUrl, schemas }
  if (database === undefined)
    throw new GenTypesError('name a database (as in config/tenants/) or pass --db-url <postgres url>')
  if (!DATABASE_NAME.test(database))
    throw new GenTypesError(`"${database}" is not a database name (${DATABASE_NAME.source})`)
  const store = createTenantStore(config())
  let tenant
  try {
    tenant = await store.get(database)
  } finally {
    await store.close()
  }
  if (tenant === null)
    throw new GenTypesError(
      `no tenant named "${database}" in the tenant store (is npm start running, or is the tenant applied?)`,
    )
  return { url: tenant.postgres, schemas: schemas.length > 0 ? schemas : [...tenant.rest.schemas] }
}

/** `gatehouse gen types typescript [database] [--schema a,b] [--db-url url]`. */
export function registerGenCommands(program: Command, config: () => Config): void {
  program
    .command('gen')
    .description('generate code from a database')
    .command('types')
    .description("generate types from a database's schema")
    .command('typescript')
    .description('print the TypeScript Database type of a database, as `supabase gen types typescript` does')
    .argument('[database]', 'the database name (its owner connection from the tenant store)')
    .option(
      '--schema <schemas>',
      "schemas to include, comma-separated (default: the database's exposed schemas)",
      (v: string, prev: string[]) => [...prev, v],
      [] as string[],
    )
    .option('--db-url <url>', "a Postgres connection URL to read instead of a tenant's")
    .action(async (database: string | undefined, opts: GenOptions) => {
      const { url, schemas } = await resolveTarget(database, opts, config)
      const client = new pg.Client({
        connectionString: url,
        connectionTimeoutMillis: 10_000,
        application_name: 'gatehouse-gen-types',
      })
      client.on('error', () => {})
      try {
        await client.connect()
      } catch (err) {
        throw new GenTypesError(
          `cannot connect to ${database === undefined ? 'the database' : `database "${database}"`}: ${(err as Error).message}`,
        )
      }
      try {
        process.stdout.write(await generateTypescriptTypes(client, { schemas }))
      } finally {
        await client.end().catch(() => {})
      }
    })
}

// Loads a tenant's schema cache: sends the catalog queries in one transaction (one round
// trip: the executor pipelines them) through a function it is given (the executor owns
// connections) and builds the SchemaCache from the rows with buildSchemaCache (build.ts).
import {
  ATTNAMES_SQL,
  COLUMNS_SQL,
  COMPUTED_RELS_SQL,
  CONSTRAINTS_SQL,
  MEDIA_HANDLERS_SQL,
  RELATIONS_SQL,
  REPRESENTATIONS_SQL,
  ROLE_SETTINGS_SQL,
  ROUTINES_SQL,
  SCHEMA_VERSION_SQL,
  TIMEZONES_SQL,
  VIEWS_SQL,
} from './queries.js'
import { buildSchemaCache } from './build.js'
import type { SchemaCache } from './types.js'
import { parseViewColumns, type ViewColumnSource } from './view-defs.js'

/** One catalog statement. */
export interface CatalogStatement {
  readonly text: string
  readonly values: readonly unknown[]
}

type CatalogRow = Record<string, unknown>

/**
 * Runs catalog statements in one read-only transaction that sees one snapshot of the
 * catalog (the executor sends them in one round trip); resolves with each one's rows, in order.
 */
export type CatalogBatch = (statements: readonly CatalogStatement[]) => Promise<CatalogRow[][]>

/** Runs one catalog query; rows are plain objects. */
export type CatalogQuery = (text: string, values: unknown[]) => Promise<CatalogRow[]>

/** Postgres' answer when the schema version's table or sequence is missing or not readable. */
function versionUnavailable(err: unknown): boolean {
  const code = (err as { code?: unknown })?.code
  return code === '42P01' || code === '42501' || code === '3F000'
}

/**
 * Loads a schema cache one query after the other (a connection of one's own: tests,
 * benches). `timezones`: as for loadSchemaCacheBatch.
 */
export function loadSchemaCache(
  query: CatalogQuery,
  schemas: readonly string[],
  version: number,
  timezones?: ReadonlySet<string>,
): Promise<SchemaCache> {
  return loadSchemaCacheBatch(
    async (statements) => {
      const out: CatalogRow[][] = []
      for (const st of statements) out.push(await query(st.text, [...st.values]))
      return out
    },
    schemas,
    version,
    timezones,
  )
}

/** The catalog statements' rows and the database's schema version (null when it has none). */
async function queryWithVersion(
  query: CatalogBatch,
  statements: CatalogStatement[],
): Promise<{ dbVersion: string | null; rows: CatalogRow[][] }> {
  try {
    const all = await query([{ text: SCHEMA_VERSION_SQL, values: [] }, ...statements])
    return { dbVersion: String(all[0]?.[0]?.version ?? ''), rows: all.slice(1) }
  } catch (err) {
    if (!versionUnavailable(err)) throw err
    return { dbVersion: null, rows: await query(statements) }
  }
}

/**
 * Loads a tenant's schema cache with its schema version (null when the database has none:
 * not migrated to it yet; then the catalog is read again without it). `timezones`: the zone
 * names of pg_timezone_names when already known: they are the server's (the same for every
 * database of a cluster) and the view is slow (it reads the zone files).
 */
export async function loadSchemaCacheBatch(
  query: CatalogBatch,
  schemas: readonly string[],
  version: number,
  timezones?: ReadonlySet<string>,
): Promise<SchemaCache> {
  const list = [...schemas]
  const statements: CatalogStatement[] = [
    { text: RELATIONS_SQL, values: [list] },
    { text: COLUMNS_SQL, values: [list] },
    { text: CONSTRAINTS_SQL, values: [] },
    { text: VIEWS_SQL, values: [] },
    { text: ATTNAMES_SQL, values: [] },
    { text: ROUTINES_SQL, values: [list] },
    { text: COMPUTED_RELS_SQL, values: [list] },
    { text: REPRESENTATIONS_SQL, values: [] },
    { text: MEDIA_HANDLERS_SQL, values: [list] },
    { text: ROLE_SETTINGS_SQL, values: [] },
  ]
  if (timezones === undefined) statements.push({ text: TIMEZONES_SQL, values: [] })
  const { dbVersion, rows } = await queryWithVersion(query, statements)
  const [
    relations = [],
    columns = [],
    constraints = [],
    viewRows = [],
    attnames = [],
    routines = [],
    computed = [],
    representations = [],
    mediaHandlers = [],
    roleSettings = [],
    zoneRows,
  ] = rows
  const views = new Map<number, ViewColumnSource[]>()
  for (const r of viewRows) views.set(Number(r.rel), parseViewColumns(String(r.action)))
  const zones = timezones === undefined ? (zoneRows ?? []) : [...timezones].map((name) => ({ name }))
  return {
    ...buildSchemaCache(
      {
        relations,
        columns,
        constraints,
        views,
        attnames,
        routines,
        computed,
        timezones: zones,
        representations,
        mediaHandlers,
        roleSettings,
      },
      schemas,
      version,
    ),
    dbVersion,
  }
}

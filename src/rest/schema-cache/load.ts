// Loads a tenant's schema cache: sends the catalog queries in one transaction (one round
// trip: the executor pipelines them) through a function it is given (the executor owns
// connections) and builds the SchemaCache from the rows with buildSchemaCache, a pure
// function testable without Postgres.
import {
  ATTNAMES_SQL, COLUMNS_SQL, COMPUTED_RELS_SQL, CONSTRAINTS_SQL, MEDIA_HANDLERS_SQL, RELATIONS_SQL, REPRESENTATIONS_SQL, ROUTINES_SQL,
  SCHEMA_VERSION_SQL, TIMEZONES_SQL, VIEWS_SQL
} from './queries.js'
import { inferRelationships, type ForeignKey, type Stand } from './relationships.js'
import {
  mediaHandlerKey, qnKey, type Column, type MediaHandlerDef, type QualifiedName, type RelationKind, type Relationship, type Representations, type Routine,
  type RoutineParam, type SchemaCache, type Table
} from './types.js'
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

export interface CatalogRows {
  relations: CatalogRow[]
  columns: CatalogRow[]
  constraints: CatalogRow[]
  /** View OID -> its target list (parsed from pg_rewrite). */
  views: ReadonlyMap<number, readonly ViewColumnSource[]>
  /** Column names of the relations views refer to (those outside the exposed schemas too). */
  attnames: CatalogRow[]
  routines: CatalogRow[]
  /** Functions from a row of a relation to rows of a relation (computed relationships). */
  computed?: CatalogRow[]
  /** pg_timezone_names (the zones `Prefer: timezone=` may name). */
  timezones?: CatalogRow[]
  /** Casts of domains to and from json and text (data representations). */
  representations?: CatalogRow[]
  /** Aggregates and functions returning a media type domain. */
  mediaHandlers?: CatalogRow[]
}

export interface LoadOptions {
  /**
   * The zone names of pg_timezone_names when already known: they are the server's (the
   * same for every database of a cluster) and the view is slow (it reads the zone files).
   */
  timezones?: ReadonlySet<string>
}

/** Postgres' answer when the schema version's table or sequence is missing or not readable. */
function versionUnavailable (err: unknown): boolean {
  const code = (err as { code?: unknown })?.code
  return code === '42P01' || code === '42501' || code === '3F000'
}

/**
 * Loads a schema cache one query after the other (a connection of one's own: tests,
 * benches). `timezones`: as LoadOptions.timezones.
 */
export function loadSchemaCache (query: CatalogQuery, schemas: readonly string[], version: number,
  timezones?: ReadonlySet<string>): Promise<SchemaCache> {
  return loadSchemaCacheBatch(async (statements) => {
    const out: CatalogRow[][] = []
    for (const st of statements) out.push(await query(st.text, [...st.values]))
    return out
  }, schemas, version, { timezones })
}

/**
 * Loads a tenant's schema cache with its schema version (null when the database has none:
 * not migrated to it yet; then the catalog is read again without it).
 */
export async function loadSchemaCacheBatch (query: CatalogBatch, schemas: readonly string[], version: number,
  opts: LoadOptions = {}): Promise<SchemaCache> {
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
    { text: MEDIA_HANDLERS_SQL, values: [list] }
  ]
  if (opts.timezones === undefined) statements.push({ text: TIMEZONES_SQL, values: [] })
  let dbVersion: string | null
  let rows: CatalogRow[][]
  try {
    const all = await query([{ text: SCHEMA_VERSION_SQL, values: [] }, ...statements])
    dbVersion = String(all[0]?.[0]?.version ?? '')
    rows = all.slice(1)
  } catch (err) {
    if (!versionUnavailable(err)) throw err
    dbVersion = null
    rows = await query(statements)
  }
  const [relations = [], columns = [], constraints = [], viewRows = [], attnames = [], routines = [], computed = [], representations = [], mediaHandlers = [], zoneRows] = rows
  const views = new Map<number, ViewColumnSource[]>()
  for (const r of viewRows) views.set(Number(r.rel), parseViewColumns(String(r.action)))
  const timezones = opts.timezones === undefined ? zoneRows ?? [] : [...opts.timezones].map((name) => ({ name }))
  return { ...buildSchemaCache({ relations, columns, constraints, views, attnames, routines, computed, timezones, representations, mediaHandlers }, schemas, version), dbVersion }
}

/** Types a function's one unnamed parameter may have for PostgREST to call it with the whole body. */
const UNNAMED_TYPES = new Set(['bytea', 'json', 'jsonb', 'text', 'xml'])

/**
 * PostgREST's schema cache keeps only the functions it can call (its funcsSqlQuery `callable`):
 * when no parameter has a name, there must be exactly one, of type bytea, json, jsonb, text or xml.
 */
function callableParams (names: readonly string[], inputs: ReadonlyArray<{ typeRef?: QualifiedName }>): boolean {
  if (names.length > 0 || inputs.length === 0) return true
  const only = inputs.length === 1 ? inputs[0]?.typeRef : undefined
  return only !== undefined && only.schema === 'pg_catalog' && UNNAMED_TYPES.has(only.name)
}

const KINDS: Record<string, RelationKind> = {
  r: 'table', v: 'view', m: 'materialized-view', f: 'foreign-table', p: 'partitioned-table'
}

const str = (v: unknown): string => String(v)
const strOrNull = (v: unknown): string | null => (v === null || v === undefined ? null : String(v))
const strList = (v: unknown): string[] => (Array.isArray(v) ? v.map(String) : [])

/** Builds the cache from catalog rows. Pure. */
export function buildSchemaCache (rows: CatalogRows, schemas: readonly string[], version: number, now = Date.now()): SchemaCache {
  // Column names of every relation we know, by attnum.
  const attname = new Map<number, Map<number, string>>()
  const putAtt = (rel: number, num: number, name: string): void => {
    let m = attname.get(rel)
    if (!m) { m = new Map(); attname.set(rel, m) }
    m.set(num, name)
  }
  for (const a of rows.attnames) putAtt(Number(a.rel), Number(a.num), str(a.name))

  const columnsByRel = new Map<number, Column[]>()
  for (const c of rows.columns) {
    const rel = Number(c.rel)
    putAtt(rel, Number(c.num), str(c.name))
    const col: Column = {
      name: str(c.name),
      type: str(c.type),
      ...(c.type_oid === undefined || c.type_oid === null ? {} : { typeOid: Number(c.type_oid) }),
      baseType: str(c.base_type),
      nullable: c.nullable === true,
      default: strOrNull(c.default_expr),
      insertDefault: strOrNull(c.insert_default),
      generated: c.generated === true,
      identity: c.identity === true,
      description: strOrNull(c.description)
    }
    const list = columnsByRel.get(rel)
    if (list) list.push(col)
    else columnsByRel.set(rel, [col])
  }

  // Keys.
  const pkByRel = new Map<number, string[]>()
  const uniquesByRel = new Map<number, string[][]>()
  const foreignKeys: ForeignKey[] = []
  for (const k of rows.constraints) {
    const rel = Number(k.rel)
    const cols = strList(k.cols)
    if (k.type === 'p') pkByRel.set(rel, cols)
    else if (k.type === 'u') uniquesByRel.set(rel, [...(uniquesByRel.get(rel) ?? []), cols])
    else if (k.type === 'f') {
      foreignKeys.push({ name: str(k.name), table: rel, foreignTable: Number(k.frel), columns: cols, foreignColumns: strList(k.fcols) })
    }
  }

  // View columns resolved down to base relations (through chains of views).
  const resolveCache = new Map<string, { oid: number, col: string } | null>()
  const resolve = (relOid: number, attnum: number, depth: number): { oid: number, col: string } | null => {
    const key = `${relOid}:${attnum}`
    if (resolveCache.has(key)) return resolveCache.get(key) ?? null
    let out: { oid: number, col: string } | null = null
    const name = attname.get(relOid)?.get(attnum)
    if (name !== undefined) {
      const inner = rows.views.get(relOid)
      if (!inner) out = { oid: relOid, col: name }
      else if (depth < 16) {
        const src = inner.find((s) => s.name === name)
        out = src && src.relOid ? resolve(src.relOid, src.attnum, depth + 1) : null
      }
    }
    resolveCache.set(key, out)
    return out
  }
  /** view OID -> view column -> base (oid, column) */
  const viewBase = new Map<number, Map<string, { oid: number, col: string }>>()
  for (const [oid, cols] of rows.views) {
    const m = new Map<string, { oid: number, col: string }>()
    for (const c of cols) {
      if (!c.relOid) continue
      const base = resolve(c.relOid, c.attnum, 0)
      if (base) m.set(c.name, base)
    }
    viewBase.set(oid, m)
  }

  // Relations.
  const tables = new Map<string, Table>()
  const tableByOid = new Map<number, Table>()
  const exposedViews: Table[] = []
  for (const r of rows.relations) {
    const oid = Number(r.oid)
    const kind = KINDS[str(r.kind)] ?? 'table'
    const isView = kind === 'view' || kind === 'materialized-view'
    const columns = columnsByRel.get(oid) ?? []
    const mask = Number(r.mask ?? 0)
    let pk = pkByRel.get(oid) ?? []
    if (isView) {
      const base = viewBase.get(oid)
      pk = []
      if (base) {
        // A view's PK, as PostgREST's addViewPrimaryKeys: the PKs of its base tables whose every
        // PK column it exposes, one after the other (a view over a join has the PKs of both).
        const byBase = new Map<number, Map<string, string>>()
        for (const [vcol, b] of base) {
          let m = byBase.get(b.oid)
          if (!m) { m = new Map(); byBase.set(b.oid, m) }
          if (!m.has(b.col)) m.set(b.col, vcol)
        }
        for (const [boid, m] of byBase) {
          const bpk = pkByRel.get(boid)
          if (bpk && bpk.length && bpk.every((c) => m.has(c))) pk = [...pk, ...bpk.map((c) => m.get(c) as string)]
        }
      }
    }
    const t: Table = {
      oid,
      schema: str(r.schema),
      name: str(r.name),
      kind,
      isView,
      columns,
      columnsByName: new Map(columns.map((c) => [c.name, c])),
      pk,
      // pg_relation_is_updatable bits: 1<<CMD_UPDATE(2)=4, 1<<CMD_INSERT(3)=8, 1<<CMD_DELETE(4)=16
      insertable: (mask & 8) !== 0,
      updatable: (mask & 4) !== 0,
      deletable: (mask & 16) !== 0,
      description: strOrNull(r.description)
    }
    tables.set(qnKey(t.schema, t.name), t)
    tableByOid.set(oid, t)
    if (isView) exposedViews.push(t)
  }

  const standsFor = (baseOid: number, cols: readonly string[]): Stand[] => {
    const out: Stand[] = []
    const base = tableByOid.get(baseOid)
    if (base && !base.isView) out.push({ qn: { schema: base.schema, name: base.name }, isView: false, map: new Map(cols.map((c) => [c, c])) })
    for (const v of exposedViews) {
      const vb = viewBase.get(v.oid)
      if (!vb) continue
      // Every view column exposing each key column: one stand per combination (as PostgREST).
      const choices = cols.map((c) => [...vb].filter(([, b]) => b.oid === baseOid && b.col === c).map(([vcol]) => vcol))
      if (choices.some((x) => x.length === 0)) continue
      let maps: Array<Map<string, string>> = [new Map()]
      cols.forEach((c, i) => { maps = maps.flatMap((m) => choices[i].map((vcol) => new Map([...m, [c, vcol]]))) })
      for (const map of maps) out.push({ qn: { schema: v.schema, name: v.name }, isView: true, map })
    }
    return out
  }
  const sameSet = (a: readonly string[], b: readonly string[]): boolean =>
    a.length === b.length && a.every((x) => b.includes(x))
  const isUniqueKey = (oid: number, cols: readonly string[]): boolean => {
    const pk = pkByRel.get(oid)
    if (pk && sameSet(pk, cols)) return true
    return (uniquesByRel.get(oid) ?? []).some((u) => sameSet(u, cols))
  }
  const pkOf = (qn: QualifiedName): readonly string[] => tables.get(qnKey(qn.schema, qn.name))?.pk ?? []

  const relationships = new Map<string, Relationship[]>()
  const add = (rel: Relationship): void => {
    const k = qnKey(rel.table.schema, rel.table.name)
    const list = relationships.get(k)
    if (list) list.push(rel)
    else relationships.set(k, [rel])
  }
  for (const rel of inferRelationships({ foreignKeys, standsFor, isUniqueKey, pkOf })) add(rel)
  // Computed relationships override the detected ones whose target is named like the function.
  for (const c of rows.computed ?? []) {
    const fn = { schema: str(c.schema), name: str(c.name) }
    const table = { schema: str(c.table_schema), name: str(c.table_name) }
    const foreignTable = { schema: str(c.ftable_schema), name: str(c.ftable_name) }
    const k = qnKey(table.schema, table.name)
    const kept = (relationships.get(k) ?? []).filter((r) =>
      !(r.cardinality.kind !== 'computed' && r.foreignTable.schema === fn.schema && r.foreignTable.name === fn.name))
    relationships.set(k, kept)
    add({
      table,
      foreignTable,
      isSelf: table.schema === foreignTable.schema && table.name === foreignTable.name,
      cardinality: { kind: 'computed', function: fn, toOne: c.single_row === true },
      tableIsView: tables.get(k)?.isView ?? false,
      foreignTableIsView: tables.get(qnKey(foreignTable.schema, foreignTable.name))?.isView ?? false
    })
  }

  const routines = new Map<string, Routine[]>()
  for (const p of rows.routines) {
    const r = buildRoutine(p, tableByOid)
    if (r === null) continue
    const k = qnKey(r.schema, r.name)
    const list = routines.get(k)
    if (list) list.push(r)
    else routines.set(k, [r])
  }

  const timezones = new Set((rows.timezones ?? []).map((r) => str(r.name)))
  const representations = buildRepresentations(rows.representations ?? [])
  const mediaHandlers = buildMediaHandlers(rows.mediaHandlers ?? [])
  return {
    version, loadedAt: now, schemas: [...schemas], tables, relationships, routines, timezones,
    ...(representations ? { representations } : {}),
    ...(mediaHandlers ? { mediaHandlers } : {})
  }
}

/** Media type handlers by target and media type; undefined when there are none. */
function buildMediaHandlers (rows: readonly CatalogRow[]): Map<string, MediaHandlerDef> | undefined {
  if (rows.length === 0) return undefined
  const out = new Map<string, MediaHandlerDef>()
  for (const r of rows) {
    const target = r.any_target === true ? null : { schema: str(r.target_schema), name: str(r.target_name) }
    const def: MediaHandlerDef = {
      function: { schema: str(r.handler_schema), name: str(r.handler_name) },
      target,
      mediaType: str(r.resolved).toLowerCase(),
      bytes: r.bytes === true
    }
    out.set(mediaHandlerKey(target, str(r.media_type).toLowerCase()), def)
  }
  return out
}

/** The builtin OIDs of json and text (fixed in pg_type.dat). */
const JSON_OID = 114
const TEXT_OID = 25

/** Data representations by domain OID; undefined when there are none (the common case costs nothing). */
function buildRepresentations (rows: readonly CatalogRow[]): Representations | undefined {
  if (rows.length === 0) return undefined
  const toJson = new Map<number, QualifiedName>()
  const fromText = new Map<number, QualifiedName>()
  const fromJson = new Map<number, QualifiedName>()
  for (const r of rows) {
    const fn = { schema: str(r.fn_schema), name: str(r.fn_name) }
    const source = Number(r.source)
    const target = Number(r.target)
    if (r.from_domain === true) {
      if (target === JSON_OID) toJson.set(source, fn)
    } else if (source === TEXT_OID) fromText.set(target, fn)
    else if (source === JSON_OID) fromJson.set(target, fn)
  }
  return { toJson, fromText, fromJson }
}

/** A routine of the cache, or null for one PostgREST cannot call (see callableParams). */
function buildRoutine (p: Record<string, unknown>, tableByOid: ReadonlyMap<number, Table>): Routine | null {
  const names = strList(p.arg_names)
  const types = strList(p.arg_types)
  const modes = strList(p.arg_modes)
  const typeSchemas = strList(p.arg_type_schemas)
  const typeNames = strList(p.arg_type_names)
  const inputs: Array<{ name: string, type: string, typeRef?: QualifiedName, variadic: boolean }> = []
  types.forEach((type, i) => {
    const mode = modes[i] ?? 'i'
    const typeRef = typeSchemas[i] !== undefined && typeNames[i] !== undefined ? { schema: typeSchemas[i], name: typeNames[i] } : undefined
    if (mode === 'i' || mode === 'b' || mode === 'v') inputs.push({ name: names[i] ?? '', type, ...(typeRef ? { typeRef } : {}), variadic: mode === 'v' })
  })
  const ndefaults = Number(p.nargdefaults ?? 0)
  const params: RoutineParam[] = inputs.map((x, i) => ({ ...x, hasDefault: i >= inputs.length - ndefaults }))
  if (!callableParams(names, inputs)) return null
  const typtype = str(p.return_typtype)
  const returnType = str(p.return_type)
  const rel = tableByOid.get(Number(p.return_relid ?? 0))
  // As PostgREST: any OUT, INOUT or TABLE parameter makes the result a row (one OUT int is {"name": n});
  // a bare `record` (or `SETOF record`) is a scalar whose JSON is the row it holds.
  const outParams = modes.some((m) => m === 'o' || m === 'b' || m === 't')
  const returnKind: Routine['returnKind'] = returnType === 'void'
    ? 'void'
    : typtype === 'c' ? 'composite' : outParams ? 'record' : 'scalar'
  const vol = str(p.volatility)
  return {
    oid: Number(p.oid),
    schema: str(p.schema),
    name: str(p.name),
    description: strOrNull(p.description),
    params,
    returnType,
    returnKind,
    returnRelation: rel ? { schema: rel.schema, name: rel.name } : null,
    returnsSet: p.returns_set === true,
    volatility: vol === 'i' ? 'immutable' : vol === 's' ? 'stable' : 'volatile',
    settings: strList(p.config).map((s) => {
      const eq = s.indexOf('=')
      return [s.slice(0, eq), s.slice(eq + 1)] as const
    })
  }
}

// Builds a SchemaCache from catalog rows (the rows load.ts reads). Pure: testable without
// Postgres. One SchemaCacheBuilder per build holds the indexes the steps share: column names
// by attnum, keys, view columns resolved to their base tables, relations by OID.
import { inferRelationships, type ForeignKey, type Stand } from './relationships.js'
import {
  mediaHandlerKey,
  qnKey,
  type Column,
  type MediaHandlerDef,
  type QualifiedName,
  type RelationKind,
  type Relationship,
  type Representations,
  type RoleSettings,
  type Routine,
  type RoutineParam,
  type SchemaCache,
  type Table,
} from './types.js'
import type { ViewColumnSource } from './view-defs.js'

type CatalogRow = Record<string, unknown>

interface CatalogRows {
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
  /** The request roles' own settings: role, name, value. */
  roleSettings?: CatalogRow[]
}

/** Builds the cache from catalog rows. Pure. */
export function buildSchemaCache(
  rows: CatalogRows,
  schemas: readonly string[],
  version: number,
  now = Date.now(),
): SchemaCache {
  const b = new SchemaCacheBuilder(rows)
  const timezones = new Set((rows.timezones ?? []).map((r) => str(r.name)))
  const representations = buildRepresentations(rows.representations ?? [])
  const mediaHandlers = buildMediaHandlers(rows.mediaHandlers ?? [])
  const hiddenJunctionOrigins = b.hiddenJunctionOrigins()
  const roleSettings = buildRoleSettings(rows.roleSettings ?? [])
  return {
    version,
    loadedAt: now,
    schemas: [...schemas],
    tables: b.tables,
    relationships: b.relationships(),
    routines: b.routines(),
    timezones,
    ...(representations ? { representations } : {}),
    ...(mediaHandlers ? { mediaHandlers } : {}),
    ...(hiddenJunctionOrigins.length > 0 ? { hiddenJunctionOrigins } : {}),
    ...(roleSettings ? { roleSettings } : {}),
  }
}

/** Types a function's one unnamed parameter may have for PostgREST to call it with the whole body. */
const UNNAMED_TYPES = new Set(['bytea', 'json', 'jsonb', 'text', 'xml'])

/**
 * PostgREST's schema cache keeps only the functions it can call (its funcsSqlQuery `callable`):
 * when no parameter has a name, there must be exactly one, of type bytea, json, jsonb, text or xml.
 */
function callableParams(names: readonly string[], inputs: ReadonlyArray<{ typeRef?: QualifiedName }>): boolean {
  if (names.length > 0 || inputs.length === 0) return true
  const only = inputs.length === 1 ? inputs[0]?.typeRef : undefined
  return only !== undefined && only.schema === 'pg_catalog' && UNNAMED_TYPES.has(only.name)
}

const KINDS: Record<string, RelationKind> = {
  r: 'table',
  v: 'view',
  m: 'materialized-view',
  f: 'foreign-table',
  p: 'partitioned-table',
}

const str = (v: unknown): string => String(v)
const strOrNull = (v: unknown): string | null => (v === null || v === undefined ? null : String(v))
const strList = (v: unknown): string[] => (Array.isArray(v) ? v.map(String) : [])

/** The value of `key`, made (and kept) first when there is none. */
function entry<K, V>(m: Map<K, V>, key: K, make: () => V): V {
  let v = m.get(key)
  if (v === undefined) m.set(key, (v = make()))
  return v
}

/** Appends `value` to the list of `key`. */
function push<K, V>(m: Map<K, V[]>, key: K, value: V): void {
  entry(m, key, () => []).push(value)
}

const sameSet = (a: readonly string[], b: readonly string[]): boolean =>
  a.length === b.length && a.every((x) => b.includes(x))

/** A column of a base relation. */
interface BaseColumn {
  oid: number
  col: string
}

/** The indexes one build shares between its steps; relations are built in the constructor. */
class SchemaCacheBuilder {
  readonly #rows: CatalogRows
  /** Column names of every relation we know, by attnum. */
  readonly #attname = new Map<number, Map<number, string>>()
  readonly #columnsByRel = new Map<number, Column[]>()
  readonly #pkByRel = new Map<number, string[]>()
  readonly #uniquesByRel = new Map<number, string[][]>()
  readonly #foreignKeys: ForeignKey[] = []
  readonly #resolved = new Map<string, BaseColumn | null>()
  /** View OID -> view column -> base (oid, column). */
  readonly #viewBase = new Map<number, Map<string, BaseColumn>>()
  readonly tables = new Map<string, Table>()
  readonly #tableByOid = new Map<number, Table>()
  readonly #exposedViews: Table[] = []

  constructor(rows: CatalogRows) {
    this.#rows = rows
    for (const a of rows.attnames) entry(this.#attname, Number(a.rel), () => new Map()).set(Number(a.num), str(a.name))
    for (const c of rows.columns) this.#addColumn(c)
    for (const k of rows.constraints) this.#addConstraint(k)
    for (const [oid, cols] of rows.views) this.#addViewBase(oid, cols)
    for (const r of rows.relations) this.#addRelation(r)
  }

  #addColumn(c: CatalogRow): void {
    const rel = Number(c.rel)
    entry(this.#attname, rel, () => new Map()).set(Number(c.num), str(c.name))
    push(this.#columnsByRel, rel, {
      name: str(c.name),
      type: str(c.type),
      ...(c.type_oid === undefined || c.type_oid === null ? {} : { typeOid: Number(c.type_oid) }),
      baseType: str(c.base_type),
      ...(Array.isArray(c.enum_values) ? { enumValues: strList(c.enum_values) } : {}),
      nullable: c.nullable === true,
      default: strOrNull(c.default_expr),
      insertDefault: strOrNull(c.insert_default),
      generated: c.generated === true,
      identity: c.identity === true,
      description: strOrNull(c.description),
    })
  }

  #addConstraint(k: CatalogRow): void {
    const rel = Number(k.rel)
    const cols = strList(k.cols)
    if (k.type === 'p') this.#pkByRel.set(rel, cols)
    else if (k.type === 'u') push(this.#uniquesByRel, rel, cols)
    else if (k.type === 'f') {
      this.#foreignKeys.push({
        name: str(k.name),
        table: rel,
        foreignTable: Number(k.frel),
        columns: cols,
        foreignColumns: strList(k.fcols),
      })
    }
  }

  /** A view's columns resolved down to base relations (through chains of views). */
  #addViewBase(oid: number, cols: readonly ViewColumnSource[]): void {
    const m = new Map<string, BaseColumn>()
    for (const c of cols) {
      const base = c.relOid ? this.#resolve(c.relOid, c.attnum, 0) : null
      if (base) m.set(c.name, base)
    }
    this.#viewBase.set(oid, m)
  }

  #resolve(relOid: number, attnum: number, depth: number): BaseColumn | null {
    const key = `${relOid}:${attnum}`
    if (this.#resolved.has(key)) return this.#resolved.get(key) ?? null
    let out: BaseColumn | null = null
    const name = this.#attname.get(relOid)?.get(attnum)
    const inner = this.#rows.views.get(relOid)
    if (name !== undefined && !inner) out = { oid: relOid, col: name }
    else if (name !== undefined && inner && depth < 16) {
      const src = inner.find((s) => s.name === name)
      out = src && src.relOid ? this.#resolve(src.relOid, src.attnum, depth + 1) : null
    }
    this.#resolved.set(key, out)
    return out
  }

  #addRelation(r: CatalogRow): void {
    const oid = Number(r.oid)
    const kind = KINDS[str(r.kind)] ?? 'table'
    const isView = kind === 'view' || kind === 'materialized-view'
    const columns = this.#columnsByRel.get(oid) ?? []
    const mask = Number(r.mask ?? 0)
    const t: Table = {
      oid,
      schema: str(r.schema),
      name: str(r.name),
      kind,
      isView,
      columns,
      columnsByName: new Map(columns.map((c) => [c.name, c])),
      pk: isView ? this.#viewPrimaryKey(oid) : (this.#pkByRel.get(oid) ?? []),
      // pg_relation_is_updatable bits: 1<<CMD_UPDATE(2)=4, 1<<CMD_INSERT(3)=8, 1<<CMD_DELETE(4)=16
      insertable: (mask & 8) !== 0,
      updatable: (mask & 4) !== 0,
      deletable: (mask & 16) !== 0,
      description: strOrNull(r.description),
    }
    this.tables.set(qnKey(t.schema, t.name), t)
    this.#tableByOid.set(oid, t)
    if (isView) this.#exposedViews.push(t)
  }

  /**
   * A view's PK, as PostgREST's addViewPrimaryKeys: the PKs of its base tables whose every
   * PK column it exposes, one after the other (a view over a join has the PKs of both).
   */
  #viewPrimaryKey(oid: number): string[] {
    const base = this.#viewBase.get(oid)
    if (!base) return []
    const byBase = new Map<number, Map<string, string>>()
    for (const [vcol, b] of base) {
      const m = entry(byBase, b.oid, () => new Map<string, string>())
      if (!m.has(b.col)) m.set(b.col, vcol)
    }
    let pk: string[] = []
    for (const [boid, m] of byBase) {
      const bpk = this.#pkByRel.get(boid)
      if (bpk && bpk.length && bpk.every((c) => m.has(c))) pk = [...pk, ...bpk.map((c) => m.get(c) as string)]
    }
    return pk
  }

  /** The exposed relations standing for a base table's given columns: the table, and each view exposing them. */
  #standsFor(baseOid: number, cols: readonly string[]): Stand[] {
    const out: Stand[] = []
    const base = this.#tableByOid.get(baseOid)
    if (base && !base.isView)
      out.push({ qn: { schema: base.schema, name: base.name }, isView: false, map: new Map(cols.map((c) => [c, c])) })
    for (const v of this.#exposedViews) {
      const vb = this.#viewBase.get(v.oid)
      if (!vb) continue
      // Every view column exposing each key column: one stand per combination (as PostgREST).
      const choices = cols.map((c) => [...vb].filter(([, b]) => b.oid === baseOid && b.col === c).map(([vcol]) => vcol))
      if (choices.some((x) => x.length === 0)) continue
      let maps: Array<Map<string, string>> = [new Map()]
      cols.forEach((c, i) => {
        maps = maps.flatMap((m) => choices[i].map((vcol) => new Map([...m, [c, vcol]])))
      })
      for (const map of maps) out.push({ qn: { schema: v.schema, name: v.name }, isView: true, map })
    }
    return out
  }

  #isUniqueKey(oid: number, cols: readonly string[]): boolean {
    const pk = this.#pkByRel.get(oid)
    if (pk && sameSet(pk, cols)) return true
    return (this.#uniquesByRel.get(oid) ?? []).some((u) => sameSet(u, cols))
  }

  /** Relationships by relation: inferred from the keys, then the computed ones. */
  relationships(): Map<string, Relationship[]> {
    const relationships = new Map<string, Relationship[]>()
    const inferred = inferRelationships({
      foreignKeys: this.#foreignKeys,
      standsFor: (oid, cols) => this.#standsFor(oid, cols),
      isUniqueKey: (oid, cols) => this.#isUniqueKey(oid, cols),
      pkOf: (qn) => this.tables.get(qnKey(qn.schema, qn.name))?.pk ?? [],
    })
    for (const rel of inferred) push(relationships, qnKey(rel.table.schema, rel.table.name), rel)
    for (const c of this.#rows.computed ?? []) this.#addComputed(relationships, c)
    return relationships
  }

  /** A computed relationship overrides the detected ones whose target is named like the function. */
  #addComputed(relationships: Map<string, Relationship[]>, c: CatalogRow): void {
    const fn = { schema: str(c.schema), name: str(c.name) }
    const table = { schema: str(c.table_schema), name: str(c.table_name) }
    const foreignTable = { schema: str(c.ftable_schema), name: str(c.ftable_name) }
    const k = qnKey(table.schema, table.name)
    const kept = (relationships.get(k) ?? []).filter(
      (r) =>
        !(r.cardinality.kind !== 'computed' && r.foreignTable.schema === fn.schema && r.foreignTable.name === fn.name),
    )
    relationships.set(k, kept)
    kept.push({
      table,
      foreignTable,
      isSelf: table.schema === foreignTable.schema && table.name === foreignTable.name,
      cardinality: { kind: 'computed', function: fn, toOne: c.single_row === true },
      tableIsView: this.tables.get(k)?.isView ?? false,
      foreignTableIsView: this.tables.get(qnKey(foreignTable.schema, foreignTable.name))?.isView ?? false,
    })
  }

  /**
   * The exposed tables joined to an exposed table by a junction outside the exposed schemas
   * (two foreign keys inside its primary key, as for a many-to-many relationship), with the
   * other table's schema.
   */
  hiddenJunctionOrigins(): Array<readonly [QualifiedName, string]> {
    const byJunction = new Map<number, ForeignKey[]>()
    for (const fk of this.#foreignKeys) if (!this.#tableByOid.has(fk.table)) push(byJunction, fk.table, fk)
    const out: Array<readonly [QualifiedName, string]> = []
    for (const [junction, fks] of byJunction) {
      const pk = new Set(this.#pkByRel.get(junction) ?? [])
      const inPk = fks.filter((fk) => fk.columns.every((c) => pk.has(c)))
      for (const fk1 of inPk) {
        const a = this.#tableByOid.get(fk1.foreignTable)
        const others = inPk.filter((fk2) => fk2.name !== fk1.name && this.#tableByOid.has(fk2.foreignTable))
        if (a !== undefined)
          for (const fk2 of others)
            out.push([{ schema: a.schema, name: a.name }, (this.#tableByOid.get(fk2.foreignTable) as Table).schema])
      }
    }
    return out
  }

  /** The callable routines by qualified name (overloads in catalog order). */
  routines(): Map<string, Routine[]> {
    const routines = new Map<string, Routine[]>()
    for (const p of this.#rows.routines) {
      const r = buildRoutine(p, this.#tableByOid)
      if (r !== null) push(routines, qnKey(r.schema, r.name), r)
    }
    return routines
  }
}

/** Media type handlers by target and media type; undefined when there are none. */
function buildMediaHandlers(rows: readonly CatalogRow[]): Map<string, MediaHandlerDef> | undefined {
  if (rows.length === 0) return undefined
  const out = new Map<string, MediaHandlerDef>()
  for (const r of rows) {
    const target = r.any_target === true ? null : { schema: str(r.target_schema), name: str(r.target_name) }
    const def: MediaHandlerDef = {
      function: { schema: str(r.handler_schema), name: str(r.handler_name) },
      target,
      mediaType: str(r.resolved).toLowerCase(),
      bytes: r.bytes === true,
    }
    out.set(mediaHandlerKey(target, str(r.media_type).toLowerCase()), def)
  }
  return out
}

/** The builtin OIDs of json and text (fixed in pg_type.dat). */
const JSON_OID = 114
const TEXT_OID = 25

/**
 * The request roles' settings by role. As PostgREST's queryRoleSettings, a role's
 * default_transaction_isolation is its transactions' isolation level rather than a setting.
 * Left out: the transaction_* settings, which only SET TRANSACTION may change before a
 * transaction's first query (set after it, every request of the role would fail).
 */
function buildRoleSettings(rows: readonly CatalogRow[]): ReadonlyMap<string, RoleSettings> | undefined {
  if (rows.length === 0) return undefined
  const out = new Map<string, { settings: Array<readonly [string, string]>; isolation: string | null }>()
  for (const r of rows) {
    const role = str(r.role)
    const name = str(r.name)
    const e = entry(out, role, () => ({ settings: [], isolation: null }))
    if (name === 'default_transaction_isolation') e.isolation = str(r.value)
    else if (!TRANSACTION_ONLY.has(name)) e.settings.push([name, str(r.value)])
  }
  return out
}

const TRANSACTION_ONLY: ReadonlySet<string> = new Set([
  'transaction_isolation',
  'transaction_read_only',
  'transaction_deferrable',
])

/** Data representations by domain OID; undefined when there are none (the common case costs nothing). */
function buildRepresentations(rows: readonly CatalogRow[]): Representations | undefined {
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
function buildRoutine(p: Record<string, unknown>, tableByOid: ReadonlyMap<number, Table>): Routine | null {
  const names = strList(p.arg_names)
  const types = strList(p.arg_types)
  const modes = strList(p.arg_modes)
  const typeSchemas = strList(p.arg_type_schemas)
  const typeNames = strList(p.arg_type_names)
  const inputs: Array<{ name: string; type: string; typeRef?: QualifiedName; variadic: boolean }> = []
  types.forEach((type, i) => {
    const mode = modes[i] ?? 'i'
    const typeRef =
      typeSchemas[i] !== undefined && typeNames[i] !== undefined
        ? { schema: typeSchemas[i], name: typeNames[i] }
        : undefined
    if (mode === 'i' || mode === 'b' || mode === 'v')
      inputs.push({ name: names[i] ?? '', type, ...(typeRef ? { typeRef } : {}), variadic: mode === 'v' })
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
  const returnKind: Routine['returnKind'] =
    returnType === 'void' ? 'void' : typtype === 'c' ? 'composite' : outParams ? 'record' : 'scalar'
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
    }),
  }
}

// Types of the per-tenant schema cache (PostgREST's SchemaCache/*.hs): relations with
// their columns and keys, relationships (FK-derived, through views, many-to-many through
// junctions) and routines. Types only.

/** `schema` + `name` of a relation or routine. */
export interface QualifiedName {
  readonly schema: string
  readonly name: string
}

export interface Column {
  readonly name: string
  /** Declared type as `format_type` writes it (`integer`, `character varying(20)`, `text[]`). */
  readonly type: string
  /** pg_type OID of the declared type (the key of data representations). */
  readonly typeOid?: number
  /** `typname` of the type, or of a domain's base type (`int4`, `jsonb`, `tsvector`, `_text`). */
  readonly baseType: string
  /** The labels of an enum type (or of a domain over one), in their order; absent otherwise. */
  readonly enumValues?: readonly string[]
  readonly nullable: boolean
  /** The default expression as text, null when none. */
  readonly default: string | null
  /**
   * The value a missing column gets under `Prefer: missing=default`, as PostgREST computes
   * it: the column's DEFAULT, a domain's default, `nextval(...)` of a BY DEFAULT identity;
   * null for generated columns and when there is none.
   */
  readonly insertDefault?: string | null
  readonly generated: boolean
  /** An identity column (its value comes from a sequence; OpenAPI treats it as defaulted). */
  readonly identity?: boolean
  readonly description: string | null
}

export type RelationKind = 'table' | 'view' | 'materialized-view' | 'foreign-table' | 'partitioned-table'

export interface Table extends QualifiedName {
  readonly oid: number
  readonly kind: RelationKind
  readonly isView: boolean
  /** Columns in attnum order. */
  readonly columns: readonly Column[]
  readonly columnsByName: ReadonlyMap<string, Column>
  /** Primary key columns (for views: the base table's, when every one is exposed). */
  readonly pk: readonly string[]
  readonly insertable: boolean
  readonly updatable: boolean
  readonly deletable: boolean
  readonly description: string | null
}

/** Column pairs of a relationship: `[origin column, foreign column]`. */
export type ColumnPairs = ReadonlyArray<readonly [string, string]>

interface Junction {
  readonly table: QualifiedName
  /** FK from the junction to the origin. */
  readonly constraint1: string
  /** FK from the junction to the target. */
  readonly constraint2: string
  /** `[origin column, junction column]` pairs. */
  readonly columns1: ColumnPairs
  /** `[target column, junction column]` pairs. */
  readonly columns2: ColumnPairs
}

type Cardinality =
  | { readonly kind: 'm2o'; readonly constraint: string; readonly columns: ColumnPairs }
  | { readonly kind: 'o2m'; readonly constraint: string; readonly columns: ColumnPairs }
  /** One-to-one: FK columns are the PK or unique; `isParent` on the referenced side. */
  | { readonly kind: 'o2o'; readonly constraint: string; readonly columns: ColumnPairs; readonly isParent: boolean }
  | { readonly kind: 'm2m'; readonly junction: Junction }
  /**
   * A computed relationship: a function taking a row of `table` and returning rows of
   * `foreignTable` (PostgREST's ComputedRelationship); to-one when it returns a single row
   * (not SETOF, or `ROWS 1`). Embedded by the function's name.
   */
  | { readonly kind: 'computed'; readonly function: QualifiedName; readonly toOne: boolean }

export interface Relationship {
  /** The origin (where the embed is written). */
  readonly table: QualifiedName
  /** The embedded relation. */
  readonly foreignTable: QualifiedName
  readonly isSelf: boolean
  readonly cardinality: Cardinality
  readonly tableIsView: boolean
  readonly foreignTableIsView: boolean
}

export interface RoutineParam {
  readonly name: string
  readonly type: string
  /** The type as `schema` + `typname` (`pg_catalog`, `_int4`): quotable, unlike `type` (used in the casts of RPC arguments). */
  readonly typeRef?: QualifiedName
  readonly hasDefault: boolean
  readonly variadic: boolean
}

/** A function in an exposed schema (RPC and OpenAPI). */
export interface Routine extends QualifiedName {
  readonly oid: number
  readonly description: string | null
  /** Input parameters (IN, INOUT, VARIADIC) in order. */
  readonly params: readonly RoutineParam[]
  readonly returnType: string
  /** `scalar`, a composite row type (`relation` when it is a table/view of the cache), `void`, or `record`. */
  readonly returnKind: 'scalar' | 'composite' | 'void' | 'record'
  /** The relation whose row type is returned, when it is a cached table or view. */
  readonly returnRelation: QualifiedName | null
  readonly returnsSet: boolean
  readonly volatility: 'immutable' | 'stable' | 'volatile'
  /** `SET name = value` of the function (hoisted settings, isolation level). */
  readonly settings: ReadonlyArray<readonly [string, string]>
}

/**
 * Data representations (PostgREST's RepresentationsMap): the cast functions of domains, by
 * the domain's OID. `toJson` formats a column for output, `fromText` parses a filter value,
 * `fromJson` parses a value of a write's body.
 */
export interface Representations {
  readonly toJson: ReadonlyMap<number, QualifiedName>
  readonly fromText: ReadonlyMap<number, QualifiedName>
  readonly fromJson: ReadonlyMap<number, QualifiedName>
}

/**
 * A media type handler (PostgREST's CustomFunc): `function` (an aggregate, or the media type
 * domain itself for a function returning it) builds the body of `target`'s rows (null:
 * anyelement, any relation); answered as `mediaType`.
 */
export interface MediaHandlerDef {
  readonly function: QualifiedName
  readonly target: QualifiedName | null
  /** The Content-Type's media type (`*\/*` resolved to application/octet-stream). */
  readonly mediaType: string
  /** The media type domain is over bytea (the body is bytes; else text). */
  readonly bytes: boolean
}

/** The key of a media handler: its target (or anyelement) and the media type it answers. */
export function mediaHandlerKey(target: QualifiedName | null, mediaType: string): string {
  return (target === null ? '' : qnKey(target.schema, target.name)) + '\u0001' + mediaType
}

/** A request role's own settings (`ALTER ROLE ... SET`), applied to the requests run as it. */
export interface RoleSettings {
  /** `[name, value]` set for the transaction (default_transaction_isolation is not among them). */
  readonly settings: ReadonlyArray<readonly [string, string]>
  /** The role's default_transaction_isolation: the isolation level its transactions begin with. */
  readonly isolation: string | null
}

export interface SchemaCache {
  /** Increases on every load; part of plan-cache keys. */
  readonly version: number
  readonly loadedAt: number
  readonly schemas: readonly string[]
  readonly tables: ReadonlyMap<string, Table>
  /** Relationships by origin key. */
  readonly relationships: ReadonlyMap<string, readonly Relationship[]>
  /**
   * Many-to-many relationships through a junction outside the exposed schemas, as
   * `[origin key, target schema]`: never embeddable, but PostgREST's relationship map keeps
   * their origin (with an empty list), which decides its PGRST200 hint. Absent when none.
   */
  readonly hiddenJunctionOrigins?: ReadonlyArray<readonly [origin: QualifiedName, targetSchema: string]>
  /** Routines by key (several when overloaded). */
  readonly routines: ReadonlyMap<string, readonly Routine[]>
  /** Media type handlers by mediaHandlerKey; absent when the database declares none. */
  readonly mediaHandlers?: ReadonlyMap<string, MediaHandlerDef>
  /** Data representations; absent when the database declares none. */
  readonly representations?: Representations
  /** pg_timezone_names: the zones `Prefer: timezone=` may name (absent: not checked). */
  readonly timezones?: ReadonlySet<string>
  /** The request roles' own settings by role name; absent when none has any. */
  readonly roleSettings?: ReadonlyMap<string, RoleSettings>
  /**
   * The database's schema version (platform.schema_version) the catalog was read at; null
   * or absent when the database has none (then only NOTIFY pgrst and misses reload it).
   */
  readonly dbVersion?: string | null
}

/** The map key of a qualified name (unambiguous: NUL cannot occur in identifiers). */
export function qnKey(schema: string, name: string): string {
  return schema + '\u0000' + name
}

export function isToOne(rel: Relationship): boolean {
  const c = rel.cardinality
  return c.kind === 'm2o' || c.kind === 'o2o' || (c.kind === 'computed' && c.toOne)
}

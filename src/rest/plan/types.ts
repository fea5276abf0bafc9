// Plan types (PostgREST's Plan/Types.hs and the types of its Plan/*.hs): an ApiRequest
// resolved against the schema cache, ready to be rendered as SQL. Types only: this module
// imports no plan code, so every stage (plan, query, response, handler) can depend on it.
import type { RowsPayload } from '../api-request/payload.js'
import type {
  AggregateFunction,
  JsonOperation,
  Mutation,
  OpExpr,
  OrderDirection,
  OrderNulls,
  RowRange,
} from '../api-request/types.js'
import type { QualifiedName, Relationship, Routine, RoutineParam, Table } from '../schema-cache/types.js'

/** How a column reference is qualified in SQL: a schema-qualified table or an alias. */
export type Qualifier =
  | { readonly kind: 'table'; readonly schema: string; readonly name: string }
  | { readonly kind: 'alias'; readonly name: string }

/** A field resolved against its table: knows whether arrows need `to_jsonb()` first. */
export interface CoercibleField {
  readonly name: string
  readonly jsonPath: readonly JsonOperation[]
  /** Not json/jsonb (or unknown): `to_jsonb(col)->...` when there is a JSON path. */
  readonly toJson: boolean
  /** FTS on a column that is not tsvector: `to_tsvector([lang,] col)`. */
  readonly toTsVector: { readonly language: string | null } | null
  /** `count()` in a to-one spread: the whole row of the relation (`"<alias>"`), not a column. */
  readonly fullRow?: boolean
  /**
   * A data representation's cast function (PostgREST's cfTransform): in a select, applied to
   * the column (domain -> json); in a filter, to the value (text -> domain).
   */
  readonly transform?: QualifiedName
}

export interface SelectColumn {
  readonly field: CoercibleField
  /** Output key when it differs from what Postgres would name the column. */
  readonly alias: string | null
  readonly cast: string | null
  /** `col.sum()`: the aggregate applied to the (cast) field; the node is grouped by its other columns. */
  readonly aggregate?: AggregateFunction | null
  /** `col.sum()::int`: cast of the aggregate's result. */
  readonly aggregateCast?: string | null
}

/**
 * A column a spread lifts into its parent: `"<aggAlias>"."<name>"`, with the aggregate
 * hoisted out of a to-one spread (applied in the parent, which groups by the rest).
 */
export interface SpreadSelect {
  readonly name: string
  readonly aggregate: AggregateFunction | null
  readonly aggregateCast: string | null
  readonly alias: string | null
}

export type Condition =
  | { readonly kind: 'filter'; readonly field: CoercibleField; readonly opExpr: OpExpr }
  /** `rel=is.null` / `rel=not.is.null` on an embed: tests its lateral row. `notNull` = not.is.null. */
  | { readonly kind: 'null-embed'; readonly notNull: boolean; readonly aggAlias: string; readonly child: ReadNode }
  | {
      readonly kind: 'logic'
      readonly op: 'and' | 'or'
      readonly negated: boolean
      readonly children: readonly Condition[]
    }

export type PlannedOrder = {
  readonly field: CoercibleField
  readonly direction: OrderDirection | null
  readonly nulls: OrderNulls | null
} & (
  | { readonly kind: 'field' }
  /** Order by a column of a to-one embed: `"<aggAlias>"."col"`. */
  | { readonly kind: 'related'; readonly aggAlias: string }
)

/** `left = right` between two qualified columns. */
export interface JoinCondition {
  readonly left: readonly [Qualifier, string]
  readonly right: readonly [Qualifier, string]
}

export type Spread =
  | { readonly kind: 'to-one'; readonly selects: readonly SpreadSelect[] }
  /** To-many spread: order columns are selected under generated aliases and ordered in json_agg. */
  | {
      readonly kind: 'to-many'
      readonly selects: readonly SpreadSelect[]
      readonly orderSelects: readonly SpreadOrderSelect[]
      readonly order: readonly PlannedOrder[]
    }

/** An order column of a to-many spread, selected under a generated alias: the node's, or a to-one child's (`from`). */
export interface SpreadOrderSelect {
  readonly from: Qualifier | null
  readonly column: SelectColumn
}

export interface ComputedSource {
  readonly function: QualifiedName
  /** The row type the function takes (the parent relation). */
  readonly table: QualifiedName
  /** How the parent's row is named: its alias, else its (unqualified) table name. */
  readonly parent: string
}

/** One node of the read tree: the root relation or an embed. */
export interface ReadNode {
  readonly from: QualifiedName
  /** The table's SQL alias (`<table>_<depth>`); null for the root and many-to-many targets. */
  readonly alias: string | null
  readonly depth: number
  /** Name as written in select (table, constraint or column). */
  readonly relName: string
  /** The user's alias of the embed. */
  readonly relAlias: string | null
  readonly hint: string | null
  readonly joinType: 'inner' | 'left' | null
  /** The lateral subquery's alias: `<parent table>_<alias or name>_<depth>`. */
  readonly aggAlias: string
  readonly relationship: Relationship | null
  readonly spread: Spread | null
  readonly select: readonly SelectColumn[]
  readonly where: readonly Condition[]
  readonly order: readonly PlannedOrder[]
  readonly range: RowRange
  readonly joinConditions: readonly JoinCondition[]
  /** For a many-to-many embed, the junction joined implicitly in FROM. */
  readonly junction: QualifiedName | null
  /**
   * A computed relationship: FROM is the function called on the parent's row,
   * `"s"."fn"("<parent>"::"s"."table") AS "<alias>"`; there are no join conditions.
   */
  readonly computed: ComputedSource | null
  readonly children: readonly ReadNode[]
}

/** How the body is built and which Content-Type is sent (plan/negotiate.ts). */
export type MediaHandler =
  | { readonly kind: 'json'; readonly stripNulls: boolean; readonly contentType: string }
  | { readonly kind: 'singular'; readonly stripNulls: boolean; readonly contentType: string }
  | { readonly kind: 'csv'; readonly contentType: string }
  /** `application/geo+json`: a FeatureCollection of `ST_AsGeoJSON(row)` (PostGIS must be installed). */
  | { readonly kind: 'geojson'; readonly contentType: string }
  /**
   * A media type handler of the database (PostgREST's CustomFunc): `function` over the rows
   * (cast to `target`'s row type; as they are when null), or over a scalar result; the body
   * is what it returns, as it is.
   */
  | {
      readonly kind: 'custom'
      readonly contentType: string
      readonly function: QualifiedName
      readonly target: QualifiedName | null
      readonly bytes: boolean
    }

/** An EXPLAIN option of `Accept: application/vnd.pgrst.plan; options=...`, in PostgREST's order. */
export type PlanOption = 'analyze' | 'verbose' | 'settings' | 'buffers' | 'wal'

/**
 * `Accept: application/vnd.pgrst.plan[+json|+text]` (PostgREST's MTVndPlan): answer the
 * EXPLAIN of the request's main statement instead of its result.
 */
export interface ExplainSpec {
  readonly format: 'json' | 'text'
  readonly options: readonly PlanOption[]
  /** The media type the plan is for (`for="..."`), as PostgREST names it in Content-Type. */
  readonly forMediaType: string
}

/** Plans whose statement can be explained (reads, writes, calls). */
interface Explainable {
  /** Set when the plan media type was negotiated: the response is the EXPLAIN output. */
  readonly explain?: ExplainSpec
}

export interface ReadPlan extends Explainable {
  readonly kind: 'read'
  readonly table: Table
  readonly tree: ReadNode
  readonly media: MediaHandler
  readonly count: 'exact' | 'planned' | 'estimated' | null
  /** HEAD: no body is built. */
  readonly headersOnly: boolean
  /** Tenant max_rows (count=estimated uses it). */
  readonly maxRows: number | null
  /** Whether a limit or offset applies to the root (the count query is needed then). */
  readonly ranged: boolean
}

// -- writes (mutate-plan.ts) --------------------------------------------------------------

export type ReturnPreference = 'minimal' | 'headers-only' | 'representation'

/** A column's default under `Prefer: missing=default` (the catalog's expression text). */
export interface ColumnDefault {
  readonly column: string
  readonly expression: string
}

/**
 * Body columns read through a data representation's json parser (PostgREST's withJsonParse):
 * column name -> the cast function from json to the column's domain.
 */
export type BodyParsers = ReadonlyArray<readonly [string, QualifiedName]>

/** The body of an insert or update. */
interface BodySpec {
  readonly payload: RowsPayload
  /** Body columns parsed from json by a data representation (empty: none). */
  readonly parsers: BodyParsers
  /** A row has keys `columns=` leaves out: only the written columns' keys are read (as PostgREST). */
  readonly extraKeys: boolean
}

export interface InsertSpec extends BodySpec {
  readonly kind: 'insert'
  /**
   * `Prefer: missing=default` on POST: the insert columns that have a default. As PostgREST,
   * every body row is merged over an object of these defaults, evaluated once per row in
   * body order (one nextval per row of a sequence column, whether the row has the key or not).
   */
  readonly defaults: readonly ColumnDefault[] | null
  /** ON CONFLICT: the conflict columns, DO UPDATE SET (merge) or DO NOTHING (ignore). */
  readonly onConflict: { readonly columns: readonly string[]; readonly action: 'merge' | 'ignore' } | null
  /** PUT: the primary key values of the URL, checked against the body's. */
  readonly putKey: ReadonlyArray<readonly [string, string]> | null
  /** Count real inserts (merge-duplicates, PUT): 201 when a row was inserted, 200 otherwise. */
  readonly countInserts: boolean
  /** `resolution=` took effect (echoed in Preference-Applied). */
  readonly resolutionApplied: boolean
}

export interface UpdateSpec extends BodySpec {
  readonly kind: 'update'
  /** SET list: from the body, or DEFAULT (`missing=default` for a listed column the body lacks). */
  readonly set: ReadonlyArray<{ readonly column: string; readonly value: 'body' | 'default' }>
  readonly where: readonly Condition[]
}

export interface DeleteSpec {
  readonly kind: 'delete'
  readonly where: readonly Condition[]
}

export interface MutatePlan extends Explainable {
  readonly kind: 'mutate'
  readonly mutation: Mutation
  readonly table: Table
  readonly spec: InsertSpec | UpdateSpec | DeleteSpec
  /** What comes back: PUT/PATCH/DELETE treat headers-only as minimal. */
  readonly returning: ReturnPreference
  /** RETURNING columns of the representation; null = every column. */
  readonly returnColumns: readonly string[] | null
  /** The representation: select + embeds over the written rows, root aliased `alias`. */
  readonly tree: ReadNode
  readonly alias: string
  readonly media: MediaHandler
  readonly count: 'exact' | 'planned' | 'estimated' | null
  /** Accept: vnd.pgrst.object: exactly one row must be affected (PGRST116, rollback). */
  readonly singular: boolean
  /** Prefer: max-affected with handling=strict (PATCH, DELETE). */
  readonly maxAffected: number | null
  /** Prefer: tx=rollback. */
  readonly rollback: boolean
}

// -- calls (call-plan.ts) -----------------------------------------------------------------

export type CallShape = 'scalar' | 'setof-scalar' | 'composite' | 'setof-composite' | 'void'

export type CallArgs =
  | { readonly kind: 'none' }
  /** A JSON object body: `json_to_record($1) AS _(<params>)`, passed by name. */
  | { readonly kind: 'json'; readonly json: string; readonly params: readonly RoutineParam[]; readonly array?: boolean }
  /** Query string or form fields: each value cast to its parameter's type (a variadic one's values as an array). */
  | {
      readonly kind: 'text'
      readonly values: ReadonlyArray<{ readonly param: RoutineParam; readonly value: string | readonly string[] }>
    }
  /** The whole body as the single unnamed parameter. */
  | { readonly kind: 'single'; readonly param: RoutineParam; readonly value: string | Buffer }

export interface CallPlan extends Explainable {
  readonly kind: 'call'
  readonly routine: Routine
  readonly args: CallArgs
  readonly shape: CallShape
  /** READ ONLY transaction: GET/HEAD, or a STABLE/IMMUTABLE function. */
  readonly readOnly: boolean
  /** The rows of the result as a read tree (filters, order, range, embeds), root aliased `alias`. */
  readonly tree: ReadNode
  /** The result's alias: the returned table's name, or the function's. */
  readonly alias: string
  /** Scalar results: the column holding the value (the function's name). */
  readonly scalarColumn: string
  readonly media: MediaHandler
  readonly count: 'exact' | 'planned' | 'estimated' | null
  /**
   * The call's rows are counted for Content-Range: count=exact and count=estimated (as
   * PostgREST, which runs no EXPLAIN for calls, so count=planned leaves the total unknown).
   */
  readonly countRows: boolean
  readonly singular: boolean
  /** HEAD: no body. */
  readonly headersOnly: boolean
  /** A limit or offset applies (the count needs its own query). */
  readonly ranged: boolean
  readonly maxAffected: number | null
  readonly rollback: boolean
}

// -- OPTIONS and the root (info-plan.ts) ----------------------------------------------------

export interface InfoPlan {
  readonly kind: 'info'
  /** The Allow header. */
  readonly allow: string
}

/** A foreign key column of a table, for the OpenAPI column notes. */
export interface ForeignKeyNote {
  readonly column: string
  readonly foreignTable: string
  readonly foreignColumn: string
}

export interface OpenApiPlan {
  readonly kind: 'openapi'
  readonly headersOnly: boolean
  readonly schema: string
  /** Tables and views of the schema (the caller's privileges filter them at run time). */
  readonly tables: readonly Table[]
  readonly routines: readonly Routine[]
  /** Table name -> its many-to-one foreign key columns. */
  readonly foreignKeys: ReadonlyMap<string, readonly ForeignKeyNote[]>
  /** openapi-mode ignore-privileges: every table and function of the schema is listed. */
  readonly ignorePrivileges: boolean
  /** openapi-security-active: the document names the JWT bearer scheme (security, securityDefinitions). */
  readonly securityActive: boolean
}

/** Every plan the handler runs (rendered in query/, answered in response/). */
export type ActionPlan = ReadPlan | MutatePlan | CallPlan | InfoPlan | OpenApiPlan

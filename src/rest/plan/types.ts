// Plan types (PostgREST's Plan/Types.hs, ReadPlan.hs): an ApiRequest resolved against the
// schema cache, ready to be rendered as SQL. Issue 4 defines the `read` plan; `mutate`,
// `call`, `info` and `openapi` plans are added beside it (issue 5). Types only.
import type { AggregateFunction, JsonOperation, OpExpr, OrderDirection, OrderNulls, RowRange } from '../api-request/types.js'
import type { QualifiedName, Relationship, Table } from '../schema-cache/types.js'
import type { MutatePlan } from './mutate-plan.js'
import type { CallPlan } from './call-plan.js'
import type { InfoPlan, OpenApiPlan } from './info-plan.js'

/** How a column reference is qualified in SQL: a schema-qualified table or an alias. */
export type Qualifier =
  | { readonly kind: 'table', readonly schema: string, readonly name: string }
  | { readonly kind: 'alias', readonly name: string }

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
  | { readonly kind: 'filter', readonly field: CoercibleField, readonly opExpr: OpExpr }
  /** `rel=is.null` / `rel=not.is.null` on an embed: tests its lateral row. `notNull` = not.is.null. */
  | { readonly kind: 'null-embed', readonly notNull: boolean, readonly aggAlias: string, readonly child: ReadNode }
  | { readonly kind: 'logic', readonly op: 'and' | 'or', readonly negated: boolean, readonly children: readonly Condition[] }

export type PlannedOrder =
  | { readonly kind: 'field', readonly field: CoercibleField, readonly direction: OrderDirection | null, readonly nulls: OrderNulls | null }
  /** Order by a column of a to-one embed: `"<aggAlias>"."col"`. */
  | { readonly kind: 'related', readonly aggAlias: string, readonly field: CoercibleField, readonly direction: OrderDirection | null, readonly nulls: OrderNulls | null }

/** `left = right` between two qualified columns. */
export interface JoinCondition {
  readonly left: readonly [Qualifier, string]
  readonly right: readonly [Qualifier, string]
}

export type Spread =
  | { readonly kind: 'to-one', readonly selects: readonly SpreadSelect[] }
  /** To-many spread: order columns are selected under generated aliases and ordered in json_agg. */
  | { readonly kind: 'to-many', readonly selects: readonly SpreadSelect[], readonly orderSelects: readonly SpreadOrderSelect[], readonly order: readonly PlannedOrder[] }

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
  | { readonly kind: 'json', readonly stripNulls: boolean, readonly contentType: string }
  | { readonly kind: 'singular', readonly stripNulls: boolean, readonly contentType: string }
  | { readonly kind: 'csv', readonly contentType: string }
  /** `application/geo+json`: a FeatureCollection of `ST_AsGeoJSON(row)` (PostGIS must be installed). */
  | { readonly kind: 'geojson', readonly contentType: string }

export interface ReadPlan {
  readonly kind: 'read'
  readonly table: Table
  readonly tree: ReadNode
  readonly media: MediaHandler
  readonly count: 'exact' | 'planned' | 'estimated' | null
  /** HEAD: no body is built. */
  readonly headersOnly: boolean
  /**
   * The top-level limit when the caller did not choose it (gateway default or max_rows):
   * one extra row is fetched to tell whether the result was cut.
   */
  readonly implicitLimit: number | null
  /** Tenant max_rows (count=estimated uses it). */
  readonly maxRows: number | null
  /** Whether a limit or offset applies to the root (the count query is needed then). */
  readonly ranged: boolean
}

/**
 * Every plan the handler can execute. Issue 5 adds `mutate`, `call`, `info`, `openapi`
 * members here (with their render functions in query/ and shapes in response/).
 */
export type ActionPlan = ReadPlan | MutatePlan | CallPlan | InfoPlan | OpenApiPlan

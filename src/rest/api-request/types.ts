// The request AST of the REST engine (PostgREST's ApiRequest/Types.hs): what a request
// asks for, as readonly discriminated unions tagged by `kind`. Types only: importing
// this module never drags in parsing logic.

export type HttpMethod = 'GET' | 'HEAD' | 'POST' | 'PATCH' | 'PUT' | 'DELETE' | 'OPTIONS'

// ---------------------------------------------------------------------------------------
// Routing: path + method -> action

/** What the path names: `/T`, `/rpc/fn` or the root `/`. */
export type Resource =
  | { readonly kind: 'relation'; readonly name: string }
  | { readonly kind: 'routine'; readonly name: string }
  | { readonly kind: 'schema' }

/** Writes on a relation: POST, PATCH, DELETE, PUT. */
export type Mutation = 'insert' | 'update' | 'delete' | 'single-upsert'

/**
 * The action of a request (PostgREST's Action): `read`, `mutate`, `call`, `info` (OPTIONS)
 * and `openapi` (GET /).
 */
export type Action =
  | { readonly kind: 'read'; readonly relation: string; readonly headersOnly: boolean }
  | { readonly kind: 'mutate'; readonly relation: string; readonly mutation: Mutation }
  | { readonly kind: 'call'; readonly routine: string; readonly invoke: 'get' | 'head' | 'post' }
  | { readonly kind: 'info'; readonly resource: Resource }
  | { readonly kind: 'openapi'; readonly headersOnly: boolean }

// ---------------------------------------------------------------------------------------
// Fields and JSON paths

export type JsonOperand =
  | { readonly kind: 'key'; readonly key: string }
  /** An array index, signed digits as written (`0`, `-1`). */
  | { readonly kind: 'idx'; readonly idx: string }

export interface JsonOperation {
  readonly arrow: '->' | '->>'
  readonly operand: JsonOperand
}

/** A column name with an optional JSON path: `data->a->>b`. `*` is a field named `*`. */
export interface Field {
  readonly name: string
  readonly jsonPath: readonly JsonOperation[]
}

// ---------------------------------------------------------------------------------------
// select=

export type AggregateFunction = 'sum' | 'avg' | 'count' | 'max' | 'min'
export type JoinType = 'inner' | 'left'

export interface SelectField {
  readonly kind: 'field'
  readonly field: Field
  readonly alias: string | null
  readonly cast: string | null
  readonly aggregate: AggregateFunction | null
  readonly aggregateCast: string | null
}

export interface SelectRelation {
  readonly kind: 'relation'
  readonly name: string
  readonly alias: string | null
  readonly hint: string | null
  readonly joinType: JoinType | null
  readonly children: readonly SelectItem[]
}

export interface SelectSpread {
  readonly kind: 'spread'
  readonly name: string
  readonly hint: string | null
  readonly joinType: JoinType | null
  readonly children: readonly SelectItem[]
}

export type SelectItem = SelectField | SelectRelation | SelectSpread

// ---------------------------------------------------------------------------------------
// Filters and logic trees

/** Operators with a single value and no quantifier. */
export type SimpleOperator = 'neq' | 'cs' | 'cd' | 'ov' | 'sl' | 'sr' | 'nxr' | 'nxl' | 'adj'
/** Operators that accept `(any)` / `(all)`. */
export type QuantOperator = 'eq' | 'gt' | 'gte' | 'lt' | 'lte' | 'like' | 'ilike' | 'match' | 'imatch'
export type FtsOperator = 'fts' | 'plfts' | 'phfts' | 'wfts'
export type IsValue = 'null' | 'not_null' | 'true' | 'false' | 'unknown'

export type Operation =
  | { readonly kind: 'simple'; readonly op: SimpleOperator; readonly value: string }
  | {
      readonly kind: 'quant'
      readonly op: QuantOperator
      readonly quantifier: 'any' | 'all' | null
      readonly value: string
    }
  | { readonly kind: 'in'; readonly values: readonly string[] }
  | { readonly kind: 'is'; readonly value: IsValue }
  | { readonly kind: 'isdistinct'; readonly value: string }
  | { readonly kind: 'fts'; readonly op: FtsOperator; readonly language: string | null; readonly value: string }

export interface OpExpr {
  readonly negated: boolean
  readonly operation: Operation
}

export interface Filter {
  readonly field: Field
  readonly opExpr: OpExpr
}

export type LogicTree =
  | { readonly kind: 'expr'; readonly filter: Filter }
  | {
      readonly kind: 'logic'
      readonly op: 'and' | 'or'
      readonly negated: boolean
      readonly children: readonly LogicTree[]
    }

/** Embed path of a scoped parameter: `actors.films.limit` -> `['actors', 'films']`; root = []. */
export type EmbedPath = readonly string[]

// ---------------------------------------------------------------------------------------
// order=

export type OrderDirection = 'asc' | 'desc'
export type OrderNulls = 'first' | 'last'

export type OrderTerm = {
  readonly field: Field
  readonly direction: OrderDirection | null
  readonly nulls: OrderNulls | null
} & (
  | { readonly kind: 'field' }
  /** `rel(col).desc`: orders parents by a column of a to-one embed. */
  | { readonly kind: 'related'; readonly relation: string }
)

// ---------------------------------------------------------------------------------------
// Ranges

/** A row range: `offset` rows skipped, at most `limit` rows (null = unbounded). */
export interface RowRange {
  readonly offset: number
  readonly limit: number | null
}

export interface ScopedRange {
  readonly path: EmbedPath
  /** Parsed `limit`, when given and numeric. */
  readonly limit: number | null
  /** Parsed `offset`, when given, numeric and not negative. */
  readonly offset: number | null
}

// ---------------------------------------------------------------------------------------
// The whole query string

export interface QueryParams {
  /** Parameters sorted by key and re-encoded (Content-Location, cache keys). */
  readonly canonical: string
  readonly select: readonly SelectItem[]
  readonly filters: ReadonlyArray<{ readonly path: EmbedPath; readonly filter: Filter }>
  /** GET/HEAD RPC only: parameters whose value is not an operator expression (function arguments). */
  readonly rpcArgs: ReadonlyArray<readonly [string, string]>
  readonly logic: ReadonlyArray<{ readonly path: EmbedPath; readonly tree: LogicTree }>
  readonly order: ReadonlyArray<{ readonly path: EmbedPath; readonly terms: readonly OrderTerm[] }>
  readonly ranges: readonly ScopedRange[]
  /** `columns=` (writes, RPC), null when absent. */
  readonly columns: readonly string[] | null
  /** `on_conflict=` (upsert), null when absent. */
  readonly onConflict: readonly string[] | null
}

// ---------------------------------------------------------------------------------------
// Headers

/** Prefer (RFC 7240), PostgREST's families; `invalid` collects what was not recognized. */
export interface Preferences {
  readonly return: 'minimal' | 'headers-only' | 'representation' | null
  readonly count: 'exact' | 'planned' | 'estimated' | null
  readonly resolution: 'merge-duplicates' | 'ignore-duplicates' | null
  readonly missing: 'default' | 'null' | null
  readonly handling: 'strict' | 'lenient' | null
  readonly tx: 'commit' | 'rollback' | null
  readonly timezone: string | null
  readonly maxAffected: number | null
  readonly invalid: readonly string[]
}

/** One entry of an Accept (or Content-Type) header. */
export interface MediaType {
  /** Lower-case `type/subtype`. */
  readonly type: string
  /** Lower-case parameter names; `q` is not kept here. */
  readonly params: Readonly<Record<string, string>>
  readonly q: number
  /** Accept entries: the entry as PostgREST keeps it (blanks removed, `;q=...` cut off). */
  readonly raw?: string
}

// ---------------------------------------------------------------------------------------
// The request

export interface ApiRequest {
  readonly action: Action
  readonly method: HttpMethod
  /** Path relative to the tenant's base URL, as received: `/films`, `/rpc/fn` (request.path). */
  readonly path: string
  /** The selected schema (Accept-Profile / Content-Profile, or the first exposed one). */
  readonly schema: string
  /** Content-Profile is echoed when a profile header was sent or several schemas are exposed. */
  readonly echoProfile: boolean
  readonly query: QueryParams
  readonly preferences: Preferences
  /** Top-level range: limit/offset intersected with the Range header (GET only). */
  readonly range: RowRange
  /** The Range header's range (GET only), null when absent or malformed. */
  readonly rangeHeader: RowRange | null
  /** The Accept header, sorted by q (stable); `*\/*` when absent. */
  readonly accept: readonly MediaType[]
  /** Content-Type of the body, null when absent. */
  readonly contentType: MediaType | null
  /** The body bytes; null for GET/HEAD or when empty. */
  readonly body: Buffer | null
  /** Request headers for `request.headers`: lower-case names, no authorization/cookie. */
  readonly headers: Readonly<Record<string, string>>
}

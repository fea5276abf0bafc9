// ApiRequest + SchemaCache -> MutatePlan (PostgREST's mutate plan, docs/rest-protocol.md §3): the
// payload checked against the table's columns (PGRST204), upsert resolution and
// on_conflict, PUT's primary-key rules (PGRST105/114/115), PATCH/DELETE filters,
// max-affected, and the read tree of the representation. As PostgREST 14, `limit` and
// `offset` do not narrow a write (nor the embeddings of its representation). Pure.
import { ColumnNotFoundError, NotImplementedError, PutLimitError, PutMatchingPkError } from '../errors.js'
import { ALL_ROWS } from '../api-request/range.js'
import { parseWritePayload, type RowsPayload } from '../api-request/payload.js'
import type { ApiRequest, Mutation } from '../api-request/types.js'
import type { SchemaCache, Table } from '../schema-cache/types.js'
import { checkPreferences, isDefaultSelect, negotiateRead } from './negotiate.js'
import { planReadTree } from './read-plan.js'
import { rebaseRoot, rootColumns } from './rebase.js'
import type {
  BodyParsers,
  Condition,
  DeleteSpec,
  InsertSpec,
  MutatePlan,
  ReadNode,
  ReturnPreference,
  UpdateSpec,
} from './types.js'

function checkColumns(table: Table, names: readonly string[]): void {
  for (const c of names) {
    if (!table.columnsByName.has(c)) throw new ColumnNotFoundError(c, table.name)
  }
}

/** Whether a row of the body has a key the written columns leave out (`columns=`). */
function hasExtraKeys(payload: RowsPayload, listed: readonly string[] | null): boolean {
  if (listed === null) return false
  const keys = new Set(listed)
  return payload.rows.some((r) => Object.keys(r).some((k) => !keys.has(k)))
}

/** The body columns a data representation parses from json (PostgREST's withJsonParse). */
function bodyParsers(cache: SchemaCache, table: Table, names: readonly string[]): BodyParsers {
  const reps = cache.representations?.fromJson
  if (reps === undefined) return []
  return names.flatMap((c) => {
    const oid = table.columnsByName.get(c)?.typeOid
    const fn = oid === undefined ? undefined : reps.get(oid)
    return fn === undefined ? [] : [[c, fn] as const]
  })
}

/** PUT: filters must be exactly the primary key, each a plain `eq` (docs/rest-protocol.md §3.4). */
function putKey(req: ApiRequest, table: Table): Array<readonly [string, string]> {
  const q = req.query
  if (q.ranges.some((r) => r.path.length === 0 && (r.limit !== null || (r.offset ?? 0) > 0))) throw new PutLimitError()
  const root = q.filters.filter((f) => f.path.length === 0)
  const bad = (): Error => new PutMatchingPkError()
  if (table.pk.length === 0 || q.logic.some((l) => l.path.length === 0) || root.length !== table.pk.length) throw bad()
  const out: Array<readonly [string, string]> = []
  for (const col of table.pk) {
    const op = root.find((x) => x.filter.field.name === col && x.filter.field.jsonPath.length === 0)?.filter.opExpr
    if (
      !op ||
      op.negated ||
      op.operation.kind !== 'quant' ||
      op.operation.op !== 'eq' ||
      op.operation.quantifier !== null
    )
      throw bad()
    out.push([col, op.operation.value])
  }
  return out
}

function rootWhere(root: ReadNode): Condition[] {
  const walk = (c: Condition): void => {
    if (c.kind === 'null-embed') {
      throw new NotImplementedError({ details: 'Filters on embedded resources cannot select the rows of a write.' })
    }
    if (c.kind === 'logic') c.children.forEach(walk)
  }
  root.where.forEach(walk)
  return [...root.where]
}

/** Plans POST / PATCH / PUT / DELETE on `relation`; `aggregates`: the tenant's rest.aggregates_enabled. */
export function planMutate(
  req: ApiRequest,
  relation: string,
  mutation: Mutation,
  cache: SchemaCache,
  aggregates: boolean,
): MutatePlan {
  const prefs = req.preferences
  const { table, tree } = writeTree(req, relation, mutation, cache, aggregates)
  let returning: ReturnPreference = prefs.return ?? 'minimal'
  if (returning === 'headers-only' && mutation !== 'insert') returning = 'minimal'
  const spec: InsertSpec | UpdateSpec | DeleteSpec =
    mutation === 'delete'
      ? { kind: 'delete', where: rootWhere(tree) }
      : mutation === 'update'
        ? updateSpec(req, table, tree, cache)
        : insertSpec(req, mutation, table, cache)
  // Matches PostgREST 14: unknown preferences with handling=strict (PGRST122) after the
  // write is planned, then the Accept header (PGRST107).
  checkPreferences(req)
  // As PostgREST: the table's media handlers are negotiated for every write; only the
  // representation is built with one.
  const media = negotiateRead(req.accept, {
    handlers: cache.mediaHandlers,
    target: table,
    defaultSelect: isDefaultSelect(req),
  })
  const bare: ReadNode = { ...tree, where: [], range: ALL_ROWS }
  const returnColumns =
    returning === 'representation' ? rootColumns(bare) : returning === 'headers-only' ? [...table.pk] : []
  const strict = prefs.handling === 'strict'
  return {
    kind: 'mutate',
    mutation,
    table,
    spec,
    returning,
    returnColumns,
    tree: rebaseRoot(bare, table.name),
    alias: table.name,
    media,
    count: prefs.count,
    singular: media.kind === 'singular',
    maxAffected: strict && (mutation === 'update' || mutation === 'delete') ? prefs.maxAffected : null,
    rollback: prefs.tx === 'rollback',
  }
}

/**
 * The write's filters come from the root of the request's read tree; the representation is
 * the same tree without them (its order kept, embeds keep their filters). PostgREST 14
 * reads no limit/offset on writes: the tree is planned without ranges.
 */
function writeTree(
  req: ApiRequest,
  relation: string,
  mutation: Mutation,
  cache: SchemaCache,
  aggregates: boolean,
): { table: Table; tree: ReadNode } {
  const readReq: ApiRequest =
    mutation === 'insert' || mutation === 'single-upsert'
      ? {
          ...req,
          query: {
            ...req.query,
            filters: req.query.filters.filter((f) => f.path.length > 0),
            logic: req.query.logic.filter((l) => l.path.length > 0),
          },
        }
      : req
  return planReadTree(
    { ...readReq, query: { ...readReq.query, ranges: [] }, range: ALL_ROWS, rangeHeader: null },
    relation,
    cache,
    { maxRows: null, aggregates },
  )
}

/** POST (insert) and PUT (single-upsert). */
function insertSpec(
  req: ApiRequest,
  mutation: 'insert' | 'single-upsert',
  table: Table,
  cache: SchemaCache,
): InsertSpec {
  const columns = req.query.columns
  // PUT reads no `columns=` (as PostgREST): the body names the columns.
  const payload = parseWritePayload(req.body, req.contentType, mutation === 'insert' ? columns : null)
  checkColumns(table, payload.keys)
  // An array body is taken as PostgREST takes it: its rows matching the key are
  // upserted, and anything but exactly one row is PGRST115.
  const key = mutation === 'single-upsert' ? putKey(req, table) : null
  const { onConflict, resolutionApplied } = conflictOf(req, mutation, table)
  // Matches PostgREST: missing=default applies to POST (PUT sends the whole row).
  const defaults =
    mutation === 'insert' && req.preferences.missing === 'default'
      ? payload.keys.flatMap((c) => {
          const expression = table.columnsByName.get(c)?.insertDefault ?? null
          return expression === null ? [] : [{ column: c, expression }]
        })
      : null
  return {
    kind: 'insert',
    payload,
    parsers: bodyParsers(cache, table, payload.keys),
    extraKeys: hasExtraKeys(payload, mutation === 'insert' ? columns : null),
    defaults,
    onConflict,
    putKey: key,
    countInserts: mutation === 'single-upsert' || onConflict?.action === 'merge',
    resolutionApplied,
  }
}

/** The ON CONFLICT of an upsert: PUT merges on the PK; POST as Prefer: resolution says. */
function conflictOf(
  req: ApiRequest,
  mutation: 'insert' | 'single-upsert',
  table: Table,
): { onConflict: InsertSpec['onConflict']; resolutionApplied: boolean } {
  if (mutation === 'single-upsert')
    return { onConflict: { columns: table.pk, action: 'merge' }, resolutionApplied: false }
  const resolution = req.preferences.resolution
  const target = req.query.onConflict ?? (table.pk.length > 0 ? table.pk : null)
  // Matches PostgREST: no PK and no on_conflict = a plain insert, resolution not echoed.
  if (resolution === null || target === null) return { onConflict: null, resolutionApplied: false }
  return {
    onConflict: { columns: target, action: resolution === 'merge-duplicates' ? 'merge' : 'ignore' },
    resolutionApplied: true,
  }
}

/** PATCH: an array body updates as PostgREST's does, UPDATE ... FROM its rows (one per matched row). */
function updateSpec(req: ApiRequest, table: Table, tree: ReadNode, cache: SchemaCache): UpdateSpec {
  const columns = req.query.columns
  const payload = parseWritePayload(req.body, req.contentType, columns)
  checkColumns(table, payload.keys)
  const row = payload.rows[0] ?? {}
  const set: UpdateSpec['set'] = payload.keys.map((c) => ({
    column: c,
    value: req.preferences.missing === 'default' && columns !== null && !Object.hasOwn(row, c) ? 'default' : 'body',
  }))
  return {
    kind: 'update',
    payload,
    parsers: bodyParsers(cache, table, payload.keys),
    extraKeys: hasExtraKeys(payload, columns),
    set,
    where: rootWhere(tree),
  }
}

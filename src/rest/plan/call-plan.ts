// ApiRequest + SchemaCache -> CallPlan (PostgREST's call plan, docs/rest-protocol.md §4): overload
// resolution by argument names (PGRST202 / PGRST203), the single unnamed json/jsonb/text/
// xml/bytea parameter, arguments from the query string or the body, GET only on STABLE
// and IMMUTABLE functions, the result's shape, and the read tree over its rows (filters,
// order, limit, embeds of a returned table). Pure.
import { AmbiguousFunctionError, FunctionNotFoundError, MaxAffectedRpcError, MediaTypeError } from '../errors.js'
import { parseCallPayload, type CallPayload } from '../api-request/payload.js'
import { showAccept } from '../api-request/media-type.js'
import type { ApiRequest } from '../api-request/types.js'
import {
  qnKey,
  type Column,
  type Routine,
  type RoutineParam,
  type SchemaCache,
  type Table,
} from '../schema-cache/types.js'
import { FuzzySet } from './fuzzy.js'
import { checkPreferences, isDefaultSelect, negotiateRead } from './negotiate.js'
import { planReadTree } from './read-plan.js'
import { rebaseRoot } from './rebase.js'
import type { CallArgs, CallPlan, CallShape, ReadNode } from './types.js'
import { ownValue } from '../../shared/index.js'

const UNNAMED_FALLBACK: Record<string, readonly string[]> = {
  'application/json': ['json', 'jsonb'],
  'text/plain': ['text'],
  'text/xml': ['xml'],
  'application/octet-stream': ['bytea'],
}

function fallbackMime(payload: CallPayload | null): string | null {
  if (payload === null) return null
  if (payload.kind === 'raw') return payload.mime
  if (payload.kind === 'json-args' && payload.csv !== true) return 'application/json'
  return null
}

function baseTypeName(p: RoutineParam): string {
  return p.typeRef?.name ?? p.type
}

function signature(r: Routine): string {
  return `${r.schema}.${r.name}(${r.params.map((p) => `${p.name} => ${p.type}`).join(', ')})`
}

const cmp = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0)

/**
 * PostgREST's order of overloads (its `Ord Routine`, which its schema cache sorts by): fewer
 * parameters first, then the description (none first), then the parameters one by one by
 * name, type, required (optional first) and variadic. PGRST203 lists candidates in it.
 */
function overloadOrder(a: Routine, b: Routine): number {
  if (a.params.length !== b.params.length) return a.params.length - b.params.length
  if (a.description !== b.description)
    return a.description === null ? -1 : b.description === null ? 1 : cmp(a.description, b.description)
  for (let i = 0; i < a.params.length; i++) {
    const x = a.params[i]
    const y = b.params[i]
    const c =
      cmp(x.name, y.name) ||
      cmp(x.type, y.type) ||
      Number(!x.hasDefault) - Number(!y.hasDefault) ||
      Number(x.variadic) - Number(y.variadic)
    if (c !== 0) return c
  }
  return 0
}

/** Whether the named arguments `keys` fit `r` (docs/rest-protocol.md §4.2). */
function matches(r: Routine, keys: ReadonlySet<string>, rawPost: boolean): boolean {
  // A raw body (text, xml, bytes) never calls a function without parameters; one whose
  // parameters all have defaults is called without arguments, as PostgREST does.
  if (r.params.length === 0) return keys.size === 0 && !rawPost
  // Names compared as sets, as PostgREST's matchesParams: an unnamed parameter's name is '',
  // so a body `{"": value}` (postgrest-js's call of such a function) names it.
  for (const p of r.params) if (!p.hasDefault && !keys.has(p.name)) return false
  for (const k of keys) if (!r.params.some((p) => p.name === k)) return false
  return true
}

function isFallback(r: Routine, mime: string | null): boolean {
  if (mime === null || r.params.length !== 1 || r.params[0].name !== '') return false
  return (ownValue(UNNAMED_FALLBACK, mime) ?? []).includes(baseTypeName(r.params[0]))
}

/** PostgREST's overload resolution; throws PGRST202 / PGRST203. */
function findRoutine(
  cache: SchemaCache,
  schema: string,
  name: string,
  keys: readonly string[],
  payload: CallPayload | null,
): { routine: Routine; fallback: boolean } {
  const candidates = cache.routines.get(qnKey(schema, name)) ?? []
  const keySet = new Set(keys)
  const rawPost = payload?.kind === 'raw'
  const mime = fallbackMime(payload)
  const found = candidates.filter((r) => matches(r, keySet, rawPost))
  const fallbacks = candidates.filter((r) => isFallback(r, mime))
  if (found.length === 1) return { routine: found[0], fallback: false }
  if (found.length === 0 && fallbacks.length === 1) return { routine: fallbacks[0], fallback: true }
  const several = found.length > 1 ? found : fallbacks.length > 1 ? fallbacks : null
  if (several !== null) {
    throw new AmbiguousFunctionError([...several].sort(overloadOrder).map(signature).join(', '), {
      hint: 'Try renaming the parameters or the function itself in the database so function overloading can be resolved',
    })
  }
  throw noRoutine(cache, schema, name, [...keySet].sort(), payload, candidates)
}

/** `(a, b, c)`: a parameter list as the fuzzy hint compares and prints it (names sorted). */
function paramList(names: readonly string[]): string {
  return '(' + [...names].sort().join(', ') + ')'
}

/** PGRST202 with PostgREST's message, details and fuzzy "Perhaps you meant" hint. */
function noRoutine(
  cache: SchemaCache,
  schema: string,
  name: string,
  keys: readonly string[],
  payload: CallPayload | null,
  overloads: readonly Routine[],
): Error {
  const qn = `${schema}.${name}`
  // A raw body (text/plain, text/xml, application/octet-stream) looked only for a single unnamed parameter.
  const raw = payload?.kind === 'raw' ? payload.mime : null
  const jsonPost = fallbackMime(payload) === 'application/json' && raw === null
  const params =
    keys.length === 0 ? ' without parameters' : ` with parameter${keys.length > 1 ? 's' : ''} ${keys.join(', ')}`
  const searched =
    raw !== null
      ? ` with a single unnamed ${UNNAMED_FALLBACK[raw][0]} parameter`
      : params + (jsonPost ? ' or with a single unnamed json/jsonb parameter' : '')
  let hint: string | null = null
  if (raw === null) {
    if (overloads.length === 0) {
      const names = new FuzzySet(
        [...cache.routines.values()]
          .flat()
          .filter((r) => r.schema === schema)
          .map((r) => r.name),
      )
      const found = names.getOne(name, 0.75)
      if (found !== null) hint = `Perhaps you meant to call the function ${schema}.${found}`
    } else {
      const lists = new FuzzySet(overloads.map((r) => paramList(r.params.map((p) => p.name))))
      const found = lists.getOne(paramList(keys))
      if (found !== null) hint = `Perhaps you meant to call the function ${qn}${found}`
    }
  }
  return new FunctionNotFoundError(
    raw !== null ? qn : keys.length === 0 ? `${qn} without parameters` : `${qn}(${keys.join(', ')})`,
    {
      details: `Searched for the function ${qn}${searched}, but no matches were found in the schema cache.`,
      hint,
    },
  )
}

function shapeOf(r: Routine): CallShape {
  if (r.returnKind === 'void') return 'void'
  if (r.returnKind === 'scalar') return r.returnsSet ? 'setof-scalar' : 'scalar'
  return r.returnsSet ? 'setof-composite' : 'composite'
}

/** PostgREST's OnePosParam: a function whose one parameter has no name is called with it by position. */
function onePositional(routine: Routine): boolean {
  return routine.params.length === 1 && routine.params[0]?.name === ''
}

function args(
  routine: Routine,
  fallback: boolean,
  payload: CallPayload | null,
  getArgs: ReadonlyArray<readonly [string, string]>,
): CallArgs {
  if ((fallback || onePositional(routine)) && payload !== null) {
    const param = routine.params[0]
    if (payload.kind === 'raw')
      return {
        kind: 'single',
        param,
        value: payload.mime === 'application/octet-stream' ? payload.bytes : payload.bytes.toString('utf8'),
      }
    if (payload.kind === 'json-args') return { kind: 'single', param, value: payload.json }
  }
  const byName = (n: string): RoutineParam | undefined => routine.params.find((p) => p.name === n)
  const textArgs = (list: ReadonlyArray<readonly [string, readonly string[]]>): CallArgs => {
    const values: Array<{ param: RoutineParam; value: string | readonly string[] }> = []
    for (const [k, vs] of list) {
      const param = byName(k)
      if (!param) continue
      // A repeated name fills a variadic parameter (docs/rest-protocol.md §4.1); otherwise the last value counts (as PostgREST).
      values.push({ param, value: param.variadic ? vs : vs[vs.length - 1] })
    }
    return values.length === 0 ? { kind: 'none' } : { kind: 'text', values }
  }
  if (payload === null) {
    const grouped = new Map<string, string[]>()
    for (const [k, v] of getArgs) {
      const list = grouped.get(k)
      if (list) list.push(v)
      else grouped.set(k, [v])
    }
    return textArgs([...grouped])
  }
  if (payload.kind === 'text-args') return textArgs(payload.args)
  if (payload.kind === 'json-args') {
    const params = payload.keys.map(byName).filter((p): p is RoutineParam => p !== undefined)
    return params.length === 0
      ? { kind: 'none' }
      : { kind: 'json', json: payload.json, params, array: payload.array === true }
  }
  return { kind: 'none' }
}

/** A stand-in table for results that are not a cached relation (scalars, RETURNS TABLE, OUT params). */
function resultTable(routine: Routine, scalar: boolean): Table {
  const columns: Column[] = scalar
    ? [
        {
          name: routine.name,
          type: routine.returnType,
          baseType: routine.returnType,
          nullable: true,
          default: null,
          generated: false,
          description: null,
        },
      ]
    : []
  return {
    oid: 0,
    schema: routine.schema,
    name: routine.name,
    kind: 'table',
    isView: false,
    columns,
    columnsByName: new Map(columns.map((c) => [c.name, c])),
    pk: [],
    insertable: false,
    updatable: false,
    deletable: false,
    description: null,
  }
}

export interface CallPlanOptions {
  maxRows: number | null
  /** Tenant rest.aggregates_enabled. */
  aggregates?: boolean
}

/** The argument names a call names: the query's, the JSON body's keys or the form's. */
function argKeys(req: ApiRequest, payload: ReturnType<typeof parseCallPayload> | null): readonly string[] {
  if (payload === null) return [...new Set(req.query.rpcArgs.map(([k]) => k))]
  if (payload.kind === 'json-args') return payload.keys
  if (payload.kind === 'text-args') return payload.args.map(([k]) => k)
  return []
}

/** The rows of the result as a read tree: a cached table's (with its relationships), or a stand-in. */
function resultTree(
  req: ApiRequest,
  routine: Routine,
  scalar: boolean,
  cache: SchemaCache,
  opts: CallPlanOptions,
): { tree: ReadNode; alias: string } {
  const readOpts = { maxRows: opts.maxRows, aggregates: opts.aggregates }
  const readReq: ApiRequest = scalar ? { ...req, query: { ...req.query, select: [] } } : req
  const ret = routine.returnRelation
  const rel = !scalar && ret !== null ? cache.tables.get(qnKey(ret.schema, ret.name)) : undefined
  if (rel) {
    const tree = planReadTree({ ...readReq, schema: rel.schema }, rel.name, cache, readOpts).tree
    return { tree, alias: rel.name }
  }
  const table = resultTable(routine, scalar)
  const tables = new Map([[qnKey(table.schema, table.name), table]])
  const standIn: SchemaCache = { ...cache, tables, relationships: new Map() }
  const tree = planReadTree({ ...readReq, schema: routine.schema }, routine.name, standIn, readOpts).tree
  return { tree, alias: routine.name }
}

/** Plans `GET|HEAD|POST /rpc/<name>`. */
export function planCall(
  req: ApiRequest,
  name: string,
  invoke: 'get' | 'head' | 'post',
  cache: SchemaCache,
  opts: CallPlanOptions,
): CallPlan {
  // PostgREST's order: the body, the function, the read tree over its rows, the Accept
  // header (PGRST107), handling=strict (PGRST122), then max-affected (PGRST128).
  const payload = invoke === 'post' ? parseCallPayload(req.body, req.contentType, req.query.columns) : null
  const { routine, fallback } = findRoutine(cache, req.schema, name, argKeys(req, payload), payload)

  const shape = shapeOf(routine)
  const scalar = shape === 'scalar' || shape === 'setof-scalar' || shape === 'void'

  const { tree, alias } = resultTree(req, routine, scalar, cache, opts)

  // Handlers of the returned relation (or of the function itself), as PostgREST's relIdentifier.
  const target = { schema: routine.schema, name: routine.returnRelation?.name ?? routine.name }
  const media = negotiateRead(req.accept, {
    handlers: cache.mediaHandlers,
    target,
    defaultSelect: isDefaultSelect(req),
  })
  if (media.kind === 'csv' && scalar) throw new MediaTypeError(showAccept(req.accept))
  checkPreferences(req)
  const strict = req.preferences.handling === 'strict'
  const maxAffected = strict ? req.preferences.maxAffected : null
  if (maxAffected !== null && shape !== 'setof-scalar' && shape !== 'setof-composite') throw new MaxAffectedRpcError()
  const ranged = tree.range.limit !== null || tree.range.offset > 0
  return {
    kind: 'call',
    routine,
    args: args(routine, fallback, payload, req.query.rpcArgs),
    shape,
    readOnly: invoke !== 'post' || routine.volatility !== 'volatile',
    tree: rebaseRoot(tree, alias),
    alias,
    scalarColumn: routine.name,
    media,
    count: req.preferences.count,
    countRows: req.preferences.count === 'exact' || req.preferences.count === 'estimated',
    singular: media.kind === 'singular',
    headersOnly: invoke === 'head',
    ranged,
    maxAffected,
    rollback: req.preferences.tx === 'rollback',
  }
}

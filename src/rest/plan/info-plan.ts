// Plans of OPTIONS and of the root (docs/rest-protocol.md §1.1, §5.4): the Allow list of a table,
// function or the root, and the OpenAPI document's negotiation. Pure.
import { MediaTypeError } from '../errors.js'
import { planCall, type CallPlanOptions } from './call-plan.js'
import { showAccept } from '../api-request/media-type.js'
import type { ApiRequest, Resource } from '../api-request/types.js'
import { qnKey, type SchemaCache } from '../schema-cache/types.js'
import { findTable } from './read-plan.js'
import type { ForeignKeyNote, InfoPlan, OpenApiPlan } from './types.js'

/** OPTIONS: the methods a resource takes (from the table's flags, not from grants). */
export function planInfo(req: ApiRequest, resource: Resource, cache: SchemaCache, opts: CallPlanOptions): InfoPlan {
  switch (resource.kind) {
    case 'schema':
      return { kind: 'info', allow: 'OPTIONS,GET,HEAD' }
    case 'relation': {
      const t = findTable(cache, req.schema, resource.name)
      const methods = ['OPTIONS', 'GET', 'HEAD']
      if (t.insertable) methods.push('POST')
      if (t.insertable && t.updatable && t.pk.length > 0) methods.push('PUT')
      if (t.updatable) methods.push('PATCH')
      if (t.deletable) methods.push('DELETE')
      return { kind: 'info', allow: methods.join(',') }
    }
    case 'routine': {
      // As PostgREST: planned as a HEAD call without arguments (query parameters are filters
      // on OPTIONS), so one that needs arguments is PGRST202, and the select, Accept
      // (PGRST107) and Prefer (handling=strict: PGRST122, max-affected: PGRST128) are checked.
      const { routine } = planCall(req, resource.name, 'head', cache, opts)
      return { kind: 'info', allow: routine.volatility === 'volatile' ? 'OPTIONS,POST' : 'OPTIONS,GET,HEAD,POST' }
    }
  }
}

/** GET / : Accept must allow the OpenAPI document (PGRST107 otherwise). */
export function planOpenApi(
  req: ApiRequest,
  headersOnly: boolean,
  cache: SchemaCache,
  opts: Pick<OpenApiPlan, 'ignorePrivileges' | 'securityActive'>,
): OpenApiPlan {
  const ok = req.accept.some(
    (m) => m.type === '*/*' || m.type === 'application/json' || m.type === 'application/openapi+json',
  )
  if (!ok) throw new MediaTypeError(showAccept(req.accept))
  const tables = [...cache.tables.values()]
    .filter((t) => t.schema === req.schema)
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
  const routines = [...cache.routines.values()]
    .flat()
    .filter((r) => r.schema === req.schema)
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : a.oid - b.oid))
  const foreignKeys = new Map<string, ForeignKeyNote[]>()
  for (const t of tables) foreignKeys.set(t.name, foreignKeyNotes(cache, t))
  return {
    kind: 'openapi',
    headersOnly,
    schema: req.schema,
    tables,
    routines,
    foreignKeys,
    ...opts,
  }
}

/**
 * The foreign key each column notes in the document (PostgREST's makeProperty): the first
 * single-column many-to-one (or one-to-one child) relationship of that column, those to
 * tables before those to views; a column of a composite key notes none.
 */
function foreignKeyNotes(cache: SchemaCache, t: { schema: string; name: string }): ForeignKeyNote[] {
  const rels = [...(cache.relationships.get(qnKey(t.schema, t.name)) ?? [])].sort(
    (a, b) => Number(a.foreignTableIsView) - Number(b.foreignTableIsView),
  )
  const notes = new Map<string, ForeignKeyNote>()
  for (const rel of rels) {
    const c = rel.cardinality
    if (c.kind !== 'm2o' && !(c.kind === 'o2o' && !c.isParent)) continue
    if (c.columns.length !== 1) continue
    const [col, fcol] = c.columns[0]
    if (!notes.has(col)) notes.set(col, { column: col, foreignTable: rel.foreignTable.name, foreignColumn: fcol })
  }
  return [...notes.values()]
}

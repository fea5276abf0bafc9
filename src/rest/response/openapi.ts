// The OpenAPI root (`GET /`, docs/rest-protocol.md §5.4): a Swagger 2.0 document of the tables,
// views and functions of the request's schema that the caller's role can use (PostgREST's
// follow-privileges mode), shaped as PostgREST's Response/OpenAPI.hs shapes it: paths,
// definitions with PK/FK notes and COMMENT descriptions, and the shared parameters. Pure.
import { requestHeader, type RawRequest } from '../api-request/index.js'
import type { ApiRequest } from '../api-request/types.js'
import type { ForeignKeyNote, OpenApiPlan } from '../plan/types.js'
import type { Column, Routine, Table } from '../schema-cache/types.js'
import type { RestResponse } from './gucs.js'

type TablePrivileges = { select: boolean; insert: boolean; update: boolean; delete: boolean }

/** What the caller's role may do, by OID (from the privilege query). */
interface OpenApiPrivileges {
  usage: boolean
  tables: ReadonlyMap<number, TablePrivileges>
  routines: ReadonlyMap<number, boolean>
  /** COMMENT ON SCHEMA of the request's schema. */
  schemaDescription: string | null
}

/** Parses the row of renderOpenApiPrivileges. */
function parseOpenApiPrivileges(row: Record<string, unknown>): OpenApiPrivileges {
  const tables = new Map<number, TablePrivileges>()
  for (const [oid, s, i, u, d] of JSON.parse(String(row.tables ?? '[]')) as Array<
    [number, boolean | null, boolean | null, boolean | null, boolean | null]
  >) {
    tables.set(Number(oid), { select: s === true, insert: i === true, update: u === true, delete: d === true })
  }
  const routines = new Map<number, boolean>()
  for (const [oid, x] of JSON.parse(String(row.routines ?? '[]')) as Array<[number, boolean | null]>)
    routines.set(Number(oid), x === true)
  const schemaDescription = typeof row.schema_description === 'string' ? row.schema_description : null
  return { usage: row.usage === true, tables, routines, schemaDescription }
}

interface OpenApiServer {
  host: string
  basePath: string
  scheme: 'http' | 'https'
}

type Json = Record<string, unknown>

const MEDIA = [
  'application/json',
  'application/vnd.pgrst.object+json;nulls=stripped',
  'application/vnd.pgrst.object+json',
  'text/csv',
]

/** What a function's operations produce (PostgREST's makeProcPathItem). */
const ROUTINE_MEDIA = MEDIA.slice(0, 3)

const INTEGER = new Set(['smallint', 'integer', 'bigint', 'int2', 'int4', 'int8'])
const NUMBER = new Set(['numeric', 'real', 'double precision', 'float4', 'float8', 'decimal'])

/** `character varying(20)` -> `character varying`; `numeric(6,2)` -> `numeric`. */
function nominal(type: string): string {
  return type.replace(/\([^)]*\)/g, '').trim()
}

/** Swagger `type` of a Postgres type (PostgREST's toSwaggerType); undefined for json and jsonb. */
function swaggerTypeName(t: string): string | undefined {
  if (t.endsWith('[]')) return 'array'
  if (INTEGER.has(t)) return 'integer'
  if (NUMBER.has(t)) return 'number'
  if (t === 'boolean') return 'boolean'
  return t === 'json' || t === 'jsonb' ? undefined : 'string'
}

/** Swagger `format` (PostgREST's toSwaggerFormat): int32 and int64 for the integers, else the type. */
function swaggerFormat(t: string): string {
  return t === 'bigint' || t === 'int8' ? 'int64' : INTEGER.has(t) ? 'int32' : t
}

/** Swagger `type`/`format`/`items` of a Postgres type; an array's items carry the element's type only. */
function swaggerType(pgType: string): Json {
  const t = nominal(pgType)
  const out: Json = { format: swaggerFormat(t) }
  const type = swaggerTypeName(t)
  if (type !== undefined) out.type = type
  if (type === 'array') {
    const element = swaggerTypeName(t.slice(0, -2))
    out.items = element === undefined ? {} : { type: element }
  }
  const len = /^character(?: varying)?\((\d+)\)$/.exec(pgType.trim())
  if (len) out.maxLength = Number(len[1])
  return out
}

/**
 * A column default as the document shows it (PostgREST's parseDefault): a string type's
 * literal without its `::type` cast and quotes; any other default when it reads as JSON
 * (42, false); none otherwise (nextval(...), now()).
 */
function swaggerDefault(pgType: string, expression: string | null): unknown {
  if (expression === null) return undefined
  const t = nominal(pgType)
  let text = expression
  if (swaggerTypeName(t) === 'string') {
    const cast = '::' + t
    text = '"' + (text.endsWith(cast) ? text.slice(0, -cast.length).replace(/^'+|'+$/g, '') : text) + '"'
  }
  try {
    return JSON.parse(text) as unknown
  } catch {
    return undefined
  }
}

/** A comment's first line, and the rest with its leading blank lines dropped ('' for one line, as PostgREST's breakOn). */
function firstLineAndRest(text: string): [string, string] {
  const nl = text.indexOf('\n')
  return nl < 0 ? [text, ''] : [text.slice(0, nl), text.slice(nl).replace(/^\n+/, '')]
}

/** A description's first line as summary, the rest as description. */
function summaryAndDescription(text: string | null): Json {
  if (text === null) return {}
  const [summary, description] = firstLineAndRest(text)
  return description === '' ? { summary } : { summary, description }
}

function columnSchema(table: Table, c: Column, fks: readonly ForeignKeyNote[]): Json {
  const notes: string[] = []
  if (table.pk.includes(c.name)) notes.push('This is a Primary Key.<pk/>')
  for (const fk of fks.filter((f) => f.column === c.name)) {
    notes.push(
      `This is a Foreign Key to \`${fk.foreignTable}.${fk.foreignColumn}\`.<fk table='${fk.foreignTable}' column='${fk.foreignColumn}'/>`,
    )
  }
  const out: Json = swaggerType(c.type)
  const fallback = swaggerDefault(c.type, c.default)
  if (fallback !== undefined) out.default = fallback
  if (c.enumValues !== undefined && c.enumValues.length > 0) out.enum = c.enumValues
  const description = [c.description, notes.length > 0 ? 'Note:\n' + notes.join('\n') : null]
    .filter((x) => x !== null)
    .join('\n\n')
  if (description !== '') out.description = description
  return out
}

function definition(table: Table, fks: readonly ForeignKeyNote[]): Json {
  const properties: Json = {}
  for (const c of table.columns) properties[c.name] = columnSchema(table, c, fks)
  // Every NOT NULL column, defaults or not (PostgREST's makeTableDef).
  const required = table.columns.filter((c) => !c.nullable).map((c) => c.name)
  const out: Json = { type: 'object', properties }
  if (required.length > 0) out.required = required
  if (table.description !== null) out.description = table.description
  return out
}

const ref = (name: string): Json => ({ $ref: `#/parameters/${name}` })

function tablePath(table: Table, may: TablePrivileges): Json {
  const filters = table.columns.map((c) => ref(`rowFilter.${table.name}.${c.name}`))
  const tags = [table.name]
  const texts = summaryAndDescription(table.description)
  const common = (o: Json): Json => ({ ...o, ...texts, tags })
  const out: Json = {}
  if (may.select) {
    out.get = common({
      parameters: [
        ...filters,
        ref('select'),
        ref('order'),
        ref('range'),
        ref('rangeUnit'),
        ref('offset'),
        ref('limit'),
        ref('preferCount'),
      ],
      responses: {
        200: { description: 'OK', schema: { type: 'array', items: { $ref: `#/definitions/${table.name}` } } },
        206: { description: 'Partial Content' },
      },
    })
  }
  if (may.insert && table.insertable) {
    out.post = common({
      parameters: [ref(`body.${table.name}`), ref('select'), ref('preferPost')],
      responses: { 201: { description: 'Created' } },
    })
  }
  if (may.delete && table.deletable) {
    out.delete = common({
      parameters: [...filters, ref('preferReturn')],
      responses: { 204: { description: 'No Content' } },
    })
  }
  if (may.update && table.updatable) {
    out.patch = common({
      parameters: [...filters, ref(`body.${table.name}`), ref('preferReturn')],
      responses: { 204: { description: 'No Content' } },
    })
  }
  return out
}

/** A GET parameter of a function (PostgREST's makeProcGetParam); a VARIADIC one repeats (multi). */
function routineGetParam(p: Routine['params'][number]): Json {
  const t = nominal(p.type)
  const base: Json = { in: 'query', name: p.name, required: !p.hasDefault }
  if (!p.variadic) {
    const type = swaggerTypeName(t)
    return { ...base, format: swaggerFormat(t), type: type === undefined || type === 'array' ? 'string' : type }
  }
  const element = t.endsWith('[]') ? t.slice(0, -2) : t
  const items: Json = { format: swaggerFormat(element) }
  const elementType = swaggerTypeName(element)
  if (elementType !== undefined) items.type = elementType
  return { ...base, type: swaggerTypeName(t) ?? 'string', collectionFormat: 'multi', items }
}

function routinePath(r: Routine): Json {
  const tags = [`(rpc) ${r.name}`]
  const named = r.params.filter((p) => p.name !== '')
  const properties: Json = {}
  for (const p of named) properties[p.name] = swaggerType(p.type)
  const required = named.filter((p) => !p.hasDefault).map((p) => p.name)
  const body: Json = { type: 'object', properties }
  if (required.length > 0) body.required = required
  if (r.description !== null) body.description = r.description
  const texts = summaryAndDescription(r.description)
  const common = (o: Json): Json => ({ ...o, ...texts, tags, produces: ROUTINE_MEDIA })
  const out: Json = {
    post: common({
      parameters: [{ in: 'body', name: 'args', required: true, schema: body }, ref('preferParams')],
      responses: { 200: { description: 'OK' } },
    }),
  }
  if (r.volatility !== 'volatile') {
    out.get = common({ parameters: named.map(routineGetParam), responses: { 200: { description: 'OK' } } })
  }
  return out
}

function sharedParameters(tables: readonly Table[]): Json {
  const prefer = (values: string[]): Json => ({
    name: 'Prefer',
    description: 'Preference',
    required: false,
    in: 'header',
    type: 'string',
    ...(values.length > 0 ? { enum: values } : {}),
  })
  const out: Json = {
    // PostgREST's makePreferParam ["params"]: no values it lists.
    preferParams: prefer([]),
    preferReturn: prefer(['return=representation', 'return=minimal', 'return=none']),
    preferCount: prefer(['count=none']),
    preferPost: prefer([
      'return=representation',
      'return=minimal',
      'return=none',
      'resolution=ignore-duplicates',
      'resolution=merge-duplicates',
    ]),
    select: { name: 'select', description: 'Filtering Columns', required: false, in: 'query', type: 'string' },
    on_conflict: { name: 'on_conflict', description: 'On Conflict', required: false, in: 'query', type: 'string' },
    order: { name: 'order', description: 'Ordering', required: false, in: 'query', type: 'string' },
    range: { name: 'Range', description: 'Limiting and Pagination', required: false, in: 'header', type: 'string' },
    rangeUnit: {
      name: 'Range-Unit',
      description: 'Limiting and Pagination',
      required: false,
      default: 'items',
      in: 'header',
      type: 'string',
    },
    offset: { name: 'offset', description: 'Limiting and Pagination', required: false, in: 'query', type: 'string' },
    limit: { name: 'limit', description: 'Limiting and Pagination', required: false, in: 'query', type: 'string' },
  }
  for (const t of tables) {
    out[`body.${t.name}`] = {
      name: t.name,
      description: t.name,
      required: false,
      in: 'body',
      schema: { $ref: `#/definitions/${t.name}` },
    }
    for (const c of t.columns) {
      // PostgREST's makeRowFilter: a string of the query, with the column's comment.
      out[`rowFilter.${t.name}.${c.name}`] = {
        name: c.name,
        ...(c.description !== null ? { description: c.description } : {}),
        required: false,
        in: 'query',
        type: 'string',
      }
    }
  }
  return out
}

/** openapi-security-active: the Authorization header as PostgREST's document describes it. */
const JWT_SECURITY = {
  security: [{ JWT: [] }],
  securityDefinitions: {
    JWT: {
      type: 'apiKey',
      in: 'header',
      name: 'Authorization',
      description: 'Add the token prepending "Bearer " (without quotes) to it',
    },
  },
}

type PlanTable = OpenApiPlan['tables'][number]

/**
 * What the document lists: with openapi-mode ignore-privileges everything of the schema, each
 * table with what it takes; otherwise what the calling role may use.
 */
function visible(
  plan: OpenApiPlan,
  may: OpenApiPrivileges,
): {
  tables: readonly PlanTable[]
  routines: OpenApiPlan['routines']
  privilegesOf: (t: PlanTable) => TablePrivileges
} {
  if (plan.ignorePrivileges) {
    return {
      tables: plan.tables,
      routines: plan.routines,
      privilegesOf: (t) => ({ select: true, insert: t.insertable, update: t.updatable, delete: t.deletable }),
    }
  }
  const none = { select: false, insert: false, update: false, delete: false }
  const usable = (t: PlanTable): boolean => {
    const p = may.tables.get(t.oid)
    return p !== undefined && (p.select || p.insert || p.update || p.delete)
  }
  return {
    tables: may.usage ? plan.tables.filter(usable) : [],
    routines: may.usage ? plan.routines.filter((r) => may.routines.get(r.oid) === true) : [],
    privilegesOf: (t) => may.tables.get(t.oid) ?? none,
  }
}

/** The document's paths (the root, each table, each function) and definitions. */
function pathsOf(
  plan: OpenApiPlan,
  may: OpenApiPrivileges,
): { paths: Json; definitions: Json; tables: readonly PlanTable[] } {
  const { tables, routines, privilegesOf } = visible(plan, may)
  const paths: Json = {
    '/': {
      get: {
        tags: ['Introspection'],
        summary: 'OpenAPI description (this document)',
        produces: ['application/openapi+json', 'application/json'],
        responses: { 200: { description: 'OK' } },
      },
    },
  }
  const definitions: Json = {}
  for (const t of tables) {
    const p = tablePath(t, privilegesOf(t))
    if (Object.keys(p).length > 0) paths[`/${t.name}`] = p
    definitions[t.name] = definition(t, plan.foreignKeys.get(t.name) ?? [])
  }
  // Overloads share a path; the first (lowest OID) describes it, as PostgREST's output does.
  for (const r of routines) {
    const key = `/rpc/${r.name}`
    if (!(key in paths)) paths[key] = routinePath(r)
  }
  return { paths, definitions, tables }
}

/**
 * The document's title and description (PostgREST's postgrestSpec): the schema's comment, its
 * first line the title and the rest (leading blank lines dropped) the description.
 */
function documentTitle(comment: string | null): { title: string; description: string } {
  if (comment === null) return { title: 'PostgREST API', description: 'This is a dynamic API generated by PostgREST' }
  const [title, description] = firstLineAndRest(comment)
  return { title, description }
}

/** The Swagger 2.0 document as JSON text. */
function buildOpenApi(plan: OpenApiPlan, may: OpenApiPrivileges, server: OpenApiServer): string {
  const { paths, definitions, tables } = pathsOf(plan, may)
  const doc = {
    swagger: '2.0',
    info: { ...documentTitle(may.schemaDescription), version: '14' },
    host: server.host,
    basePath: server.basePath,
    schemes: [server.scheme],
    consumes: MEDIA,
    produces: MEDIA,
    paths,
    definitions,
    parameters: sharedParameters(tables),
    ...(plan.securityActive ? JWT_SECURITY : {}),
    externalDocs: { description: 'PostgREST Documentation', url: 'https://postgrest.org/en/v14/references/api.html' },
  }
  return JSON.stringify(doc)
}

/**
 * Where the document says the API lives: behind the gateway (X-Forwarded-Host set) at
 * `<proto>://<host>/<database>/rest/v1`, else this engine's `/<database>`.
 */
export function openApiServer(headers: RawRequest['headers'], database: string): OpenApiServer {
  const fwdHost = requestHeader(headers, 'x-forwarded-host')
  const proto = requestHeader(headers, 'x-forwarded-proto') === 'https' ? 'https' : 'http'
  const db = encodeURIComponent(database)
  if (fwdHost !== undefined && fwdHost !== '') return { host: fwdHost, basePath: `/${db}/rest/v1`, scheme: proto }
  return { host: requestHeader(headers, 'host') ?? 'localhost', basePath: `/${db}`, scheme: 'http' }
}

/** GET / HEAD /: the OpenAPI document for the caller's role (`privileges` is the row of renderOpenApiPrivileges). */
export function shapeOpenApiResponse(
  req: ApiRequest,
  plan: OpenApiPlan,
  privileges: Record<string, unknown>,
  server: OpenApiServer,
): RestResponse {
  const body = buildOpenApi(plan, parseOpenApiPrivileges(privileges), server)
  const headers: Record<string, string> = { 'content-type': 'application/openapi+json; charset=utf-8' }
  if (req.echoProfile) headers['content-profile'] = req.schema
  return { status: 200, headers, body: plan.headersOnly ? null : body }
}

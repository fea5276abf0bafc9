// The request pipeline in one function (PostgREST's App.hs): caller (JWT) -> schema cache
// -> parse -> plan (both cached per canonical request) -> render SQL -> execute in one
// transaction -> shape the response. Only this module sees every stage. Issue 5 adds its
// plan kinds to the `switch` in runPlan.
import { createHash } from 'node:crypto'
import { LRUCache } from 'lru-cache'
import type { Tenant } from '../tenants/index.js'
import { parseCookieHeader } from '../shared/http.js'
import { parseApiRequest, visibleHeaders, DEFAULT_LIMIT_HEADER, type RawRequest } from './api-request/index.js'
import type { ApiRequest } from './api-request/types.js'
import type { Caller, TokenVerifier } from './auth.js'
import {
  EngineNotConfiguredError, SingularityError, TableNotFoundError, fromPgError, isPgServerError
} from './errors.js'
import { executeCatalogQueries, executeTransaction, listen, type DbRow } from './execute.js'
import type { TenantPools } from '../shared/index.js'
import { planAction, type ActionPlan, type ReadPlan } from './plan/index.js'
import { renderPreRequest, renderRead, type ReadStatements } from './query/index.js'
import { plannedRows, shapeReadResponse, type ReadResult, type RestResponse } from './response/index.js'
import type { CacheSource, SchemaCache, SchemaCacheStore } from './schema-cache/index.js'
import { runCall, runMutate, runOpenApi, shapeInfo } from './handler-writes.js'

export interface EngineSettings {
  statementTimeoutMs: number
  connectTimeoutMs: number
}

export interface Engine {
  readonly settings: EngineSettings
  readonly pools: TenantPools
  readonly schemaCaches: SchemaCacheStore
  readonly tokens: TokenVerifier
  /** Parsed + planned + rendered reads by canonical request (and schema cache version). */
  readonly plans: LRUCache<string, CachedPlan>
}

export interface CachedPlan {
  req: ApiRequest
  plan: ActionPlan
  /** Reads only (other plans render at run time). */
  statements: ReadStatements | null
}

export function createPlanCache (max = 2_000): LRUCache<string, CachedPlan> {
  return new LRUCache({ max })
}

/** The pool / cache identity of a tenant. */
function tenantKey (tenant: Tenant): string {
  return tenant.database
}

function restUrl (tenant: Tenant): string {
  const url = tenant.engines?.rest
  if (!url) throw new EngineNotConfiguredError(tenant.database)
  return url
}

export function cacheSource (engine: Engine, key: string, url: string): CacheSource {
  return {
    withCatalog: (fn) => executeCatalogQueries(engine.pools, key, url, fn),
    listen: (onNotify, onLost) => listen(url, onNotify, onLost, engine.settings.connectTimeoutMs, engine.pools)
  }
}

function header (raw: RawRequest, name: string): string {
  const v = raw.headers[name]
  return Array.isArray(v) ? v.join('\n') : v ?? ''
}

/** Everything parseApiRequest reads, as an unambiguous key (JSON tuple). */
function planKey (tenant: Tenant, cache: SchemaCache, raw: RawRequest): string {
  return JSON.stringify([
    tenantKey(tenant), cache.version, tenant.rest.schemas, tenant.rest.max_rows, tenant.rest.aggregates_enabled === true, raw.method, raw.path, raw.query,
    header(raw, 'accept'), header(raw, 'accept-profile'), header(raw, 'content-profile'), header(raw, 'prefer'),
    header(raw, 'range'), header(raw, DEFAULT_LIMIT_HEADER)
  ])
}

/** A prepared statement's name from its text (values are parameters: one name per shape). */
function statementName (text: string): string {
  return 'gh_r_' + createHash('sha256').update(text).digest('base64url').slice(0, 24)
}

function isMiss (err: unknown): boolean {
  const code = (err as { code?: unknown })?.code
  return code === 'PGRST205' || code === 'PGRST200' || code === 'PGRST202'
}

/** Parse, plan and render, or take them from the plan cache. Retries once after a cache miss. */
async function prepare (engine: Engine, tenant: Tenant, raw: RawRequest): Promise<CachedPlan> {
  const key = tenantKey(tenant)
  const url = restUrl(tenant)
  const source = cacheSource(engine, key, url)
  let cache = await engine.schemaCaches.get(key, tenant.rest.schemas, source)
  const cacheable = raw.method === 'GET' || raw.method === 'HEAD'
  const pk = cacheable ? planKey(tenant, cache, raw) : null
  const hit = pk === null ? undefined : engine.plans.get(pk)
  if (hit) return hit
  const req = parseApiRequest(raw, { schemas: tenant.rest.schemas })
  const opts = { maxRows: tenant.rest.max_rows, aggregates: tenant.rest.aggregates_enabled === true }
  let plan: ActionPlan
  try {
    plan = planAction(req, cache, opts)
  } catch (err) {
    // Created since the last load and the notification not seen yet? Reload once, retry.
    if (!isMiss(err)) throw err
    const fresh = await engine.schemaCaches.reloadOnMiss(key, tenant.rest.schemas, source)
    if (!fresh || fresh.version === cache.version) throw err
    cache = fresh
    plan = planAction(req, cache, opts)
  }
  const statements = plan.kind === 'read' ? renderRead(plan) : null
  // A cached read is prepared once per connection (Postgres parses and plans it once).
  if (statements && cacheable) statements.main = { ...statements.main, name: statementName(statements.main.text) }
  const prepared: CachedPlan = { req, plan, statements }
  if (cacheable) engine.plans.set(planKey(tenant, cache, raw), prepared)
  return prepared
}

async function runRead (engine: Engine, tenant: Tenant, caller: Caller, raw: RawRequest, req: ApiRequest, plan: ReadPlan, st: ReadStatements): Promise<RestResponse> {
  const pre = renderPreRequest({
    searchPath: [req.schema, 'public'],
    role: caller.role,
    claims: { ...caller.claims, role: caller.role },
    method: req.method,
    path: req.path,
    headers: visibleHeaders(raw.headers),
    cookies: parseCookieHeader(raw.headers.cookie),
    statementTimeoutMs: engine.settings.statementTimeoutMs,
    timezone: req.preferences.timezone,
    relationOid: plan.table.oid
  })
  const singular = plan.media.kind === 'singular'
  const result = await executeTransaction(engine.pools, tenantKey(tenant), restUrl(tenant), {
    readOnly: true,
    pre,
    afterPre: (row: DbRow) => {
      // Visibility follows the caller's role: no privilege at all reads as "no such table".
      if (row.visible !== true) throw new TableNotFoundError(plan.table.schema, plan.table.name, { hint: null })
    },
    main: st.main,
    after: st.planned ? [st.planned] : [],
    check: (main) => {
      // Matches PostgREST: an object was requested and 0 or more than 1 rows came back (roll back).
      const n = Number(main.page_total)
      if (singular && n !== 1) throw new SingularityError({ details: `The result contains ${n} rows` })
    }
  })
  const m = result.main
  const r: ReadResult = {
    totalResultSet: m.total_result_set === null || m.total_result_set === undefined ? null : Number(m.total_result_set),
    pageTotal: Number(m.page_total ?? 0),
    body: typeof m.body === 'string' ? m.body : '',
    responseHeaders: (m.response_headers as string | null) ?? null,
    responseStatus: (m.response_status as string | null) ?? null,
    cut: m.cut === true,
    plannedTotal: st.planned ? plannedRows(result.after[0]?.[0]?.['QUERY PLAN']) : null
  }
  return shapeReadResponse(req, plan, r)
}

/** Executes a plan; Postgres errors become wire errors with the caller's 401/403 rule. */
async function runPlan (engine: Engine, tenant: Tenant, caller: Caller, raw: RawRequest, p: CachedPlan): Promise<RestResponse> {
  try {
    switch (p.plan.kind) {
      case 'read':
        return await runRead(engine, tenant, caller, raw, p.req, p.plan, p.statements ?? renderRead(p.plan))
      // Issue 5 (handler-writes.ts): writes, RPC, OPTIONS, the OpenAPI root.
      case 'mutate':
        return await runMutate({ engine, tenant, caller, raw, req: p.req }, p.plan)
      case 'call':
        return await runCall({ engine, tenant, caller, raw, req: p.req }, p.plan)
      case 'info':
        return shapeInfo(p.plan)
      case 'openapi':
        return await runOpenApi({ engine, tenant, caller, raw, req: p.req }, p.plan)
    }
  } catch (err) {
    if (isPgServerError(err)) throw fromPgError(err, caller.isAnon)
    throw err
  }
}

/** The whole pipeline for one request of one tenant. Throws GatehouseErrors. */
export async function handleRequest (engine: Engine, tenant: Tenant, raw: RawRequest): Promise<RestResponse> {
  const auth = raw.headers.authorization
  const caller = await engine.tokens.caller(tenant, Array.isArray(auth) ? auth[0] : auth)
  const prepared = await prepare(engine, tenant, raw)
  return runPlan(engine, tenant, caller, raw, prepared)
}

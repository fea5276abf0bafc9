// The request pipeline of every action in one place (PostgREST's App.hs), each stage timed
// (timing.ts): jwt (the caller's role) -> parse (schema cache, ApiRequest) -> plan (plan and
// SQL; parse and plan cached per canonical GET/HEAD) -> transaction -> response. Reads,
// writes, calls, OPTIONS and the OpenAPI root differ only in their plan: query/ renders each
// plan's transaction, response/ shapes each answer, and this module runs them the same way.
import { createHash } from 'node:crypto'
import type { LRUCache } from 'lru-cache'
import { DEFAULT_EXTRA_SEARCH_PATH, type Tenant } from '../tenants/index.js'
import { parseCookieHeader, roleClaim } from '../shared/index.js'
import {
  parseApiRequest,
  visibleHeaders,
  requestHeader,
  type ParseContext,
  type RawRequest,
} from './api-request/index.js'
import type { ApiRequest } from './api-request/types.js'
import type { RequestRole, TokenVerifier } from './auth.js'
import {
  EngineNotConfiguredError,
  TableNotFoundError,
  fromPgError,
  isNewRowRefusal,
  isPgServerError,
  rowWrittenError,
} from './errors.js'
import { clusterOf, SchemaChangedError, type DbRow, type EnginePools, type TransactionResult } from './pools.js'
import { planAction, type ActionPlan } from './plan/index.js'
import type { StageTimings } from './timing.js'
import type { RoleSettings, Table } from './schema-cache/types.js'
import {
  renderAction,
  renderPreRequest,
  renderPreRequestCall,
  transactionIsolation,
  type ActionStatements,
  type ExecutablePlan,
} from './query/index.js'
import { respond, resultCheck, type ExecutionResult, type RestResponse } from './response/index.js'
import type { CacheSource, SchemaCache, SchemaCacheStore } from './schema-cache/index.js'

export interface Engine {
  readonly settings: { statementTimeoutMs: number }
  readonly pools: EnginePools
  readonly schemaCaches: SchemaCacheStore
  readonly tokens: TokenVerifier
  /** Parsed + planned + rendered GET/HEAD requests by canonical request (and schema cache version). */
  readonly plans: LRUCache<string, CachedPlan>
}

interface CachedPlan {
  req: ApiRequest
  plan: ActionPlan
  /** The plan's transaction; null for plans that run no SQL (OPTIONS). */
  statements: ActionStatements | null
  /** The schema version of the cache it was planned with (null: the database has none). */
  schemaVersion: string | null
  /** The request roles' own settings of that cache (ALTER ROLE ... SET). */
  roleSettings: ReadonlyMap<string, RoleSettings> | undefined
}

function restUrl(tenant: Tenant): string {
  const url = tenant.engines?.rest
  if (!url) throw new EngineNotConfiguredError(tenant.database)
  return url
}

function cacheSource(engine: Engine, key: string, url: string): CacheSource {
  return {
    withCatalog: (statements) => engine.pools.catalogQueries(key, url, statements),
    cluster: () => clusterOf(url),
  }
}

/** Everything parseApiRequest reads, as an unambiguous key (JSON tuple; repeated headers stay arrays). */
function planKey(tenant: Tenant, cache: SchemaCache, raw: RawRequest): string {
  const h = (name: string): string | string[] | null => raw.headers[name] ?? null
  return JSON.stringify([
    tenant.database,
    cache.version,
    tenant.rest.schemas,
    tenant.rest.max_rows,
    tenant.rest.aggregates_enabled === true,
    tenant.rest.plan_enabled === true,
    tenant.rest.openapi_mode,
    rootSpecOf(tenant),
    tenant.rest.openapi_security_active === true,
    raw.method,
    raw.path,
    raw.query,
    h('accept'),
    h('accept-profile'),
    h('content-profile'),
    h('prefer'),
    h('range'),
  ])
}

/** The function the root path calls (db-root-spec); none while the OpenAPI root is disabled (PGRST126 first, as PostgREST). */
function rootSpecOf(tenant: Tenant): string | null {
  return tenant.rest.openapi_mode === 'disabled' ? null : (tenant.rest.root_spec ?? null)
}

/** What parsing reads of the tenant's settings and the schema cache. */
function parseContext(tenant: Tenant, cache: SchemaCache): ParseContext {
  return {
    schemas: tenant.rest.schemas,
    timezones: cache.timezones,
    rootSpec: rootSpecOf(tenant),
    openapiDisabled: tenant.rest.openapi_mode === 'disabled',
  }
}

/** A prepared statement's name from its text (values are parameters: one name per shape). */
function statementName(text: string): string {
  return 'gh_r_' + createHash('sha256').update(text).digest('base64url').slice(0, 24)
}

function isMiss(err: unknown): boolean {
  const code = (err as { code?: unknown })?.code
  return code === 'PGRST205' || code === 'PGRST200' || code === 'PGRST202'
}

/**
 * After a plan error: a newer cache when the schema changed since `cache` was loaded (its
 * version read now differs: one round trip), or, after a miss, when a reload (at most one
 * a second) finds something new; null otherwise.
 */
async function freshCache(
  engine: Engine,
  tenant: Tenant,
  source: CacheSource,
  cache: SchemaCache,
  err: unknown,
): Promise<SchemaCache | null> {
  const key = tenant.database
  let fresh: SchemaCache | null = null
  if (typeof cache.dbVersion === 'string') {
    const now = await engine.pools.readSchemaVersion(key, restUrl(tenant)).catch(() => cache.dbVersion)
    if (now !== cache.dbVersion) {
      engine.schemaCaches.observed(key, now ?? null)
      fresh = await engine.schemaCaches.get(key, tenant.rest.schemas, source)
    }
  }
  if ((fresh === null || fresh.version === cache.version) && isMiss(err))
    fresh = await engine.schemaCaches.reloadOnMiss(key, tenant.rest.schemas, source)
  return fresh === null || fresh.version === cache.version ? null : fresh
}

/**
 * The parse and plan stages: parse, plan and render, or take them from the plan cache.
 * Retries once with a fresh cache after a plan error.
 */
async function prepare(engine: Engine, tenant: Tenant, raw: RawRequest, timings: StageTimings): Promise<CachedPlan> {
  const key = tenant.database
  const source = cacheSource(engine, key, restUrl(tenant))
  const parsed = await timings.time('parse', async () => {
    const cache = await engine.schemaCaches.get(key, tenant.rest.schemas, source)
    const hit =
      raw.method === 'GET' || raw.method === 'HEAD' ? engine.plans.get(planKey(tenant, cache, raw)) : undefined
    return hit ?? { cache, req: parseApiRequest(raw, parseContext(tenant, cache)) }
  })
  if (!('cache' in parsed)) {
    timings.add('plan', 0)
    return parsed
  }
  const prepared = await timings.time('plan', () => plan(engine, tenant, raw, source, parsed))
  if (prepared.statements === null) timings.drop('plan')
  return prepared
}

/** Plans and renders a parsed request (kept in the plan cache when it is a GET or HEAD). */
async function plan(
  engine: Engine,
  tenant: Tenant,
  raw: RawRequest,
  source: CacheSource,
  parsed: { cache: SchemaCache; req: ApiRequest },
): Promise<CachedPlan> {
  const { req } = parsed
  let cache = parsed.cache
  const opts = {
    maxRows: tenant.rest.max_rows,
    aggregates: tenant.rest.aggregates_enabled === true,
    plans: tenant.rest.plan_enabled === true,
    openapiMode: tenant.rest.openapi_mode,
    openapiSecurity: tenant.rest.openapi_security_active === true,
  }
  let plan: ActionPlan
  try {
    plan = planAction(req, cache, opts)
  } catch (err) {
    // Planned against a cache the schema has moved past? Reload once, plan again.
    const fresh = await freshCache(engine, tenant, source, cache, err)
    if (fresh === null) throw err
    cache = fresh
    plan = planAction(req, cache, opts)
  }
  const cacheable = raw.method === 'GET' || raw.method === 'HEAD'
  let statements = plan.kind === 'info' ? null : renderAction(plan)
  // A cached read is prepared once per connection (Postgres parses and plans it once).
  if (statements && cacheable && plan.kind === 'read' && plan.explain === undefined)
    statements = { ...statements, main: { ...statements.main, name: statementName(statements.main.text) } }
  const prepared: CachedPlan = {
    req,
    plan,
    statements,
    schemaVersion: cache.dbVersion ?? null,
    roleSettings: cache.roleSettings,
  }
  if (cacheable) engine.plans.set(planKey(tenant, cache, raw), prepared)
  return prepared
}

/** What every run needs: the engine, the tenant, the verified caller and the request. */
interface RunContext {
  engine: Engine
  tenant: Tenant
  caller: RequestRole
  raw: RawRequest
  req: ApiRequest
  /** The version of the schema cache the plan was made with; `strict`: a changed one gives the transaction up. */
  schemaVersion?: { expected: string; strict: boolean }
  /** The caller role's own settings (from the schema cache the plan was made with). */
  roleSettings?: RoleSettings
}

/** The relation a plan acts on: its visibility to the caller's role gates the request. */
function targetOf(plan: ExecutablePlan): Table | null {
  return plan.kind === 'read' || plan.kind === 'mutate' ? plan.table : null
}

/** One transaction of a plan: the request settings, the visibility check, the statements, the result check. */
function transact(ctx: RunContext, plan: ExecutablePlan, st: ActionStatements): Promise<TransactionResult> {
  const { engine, tenant, caller, raw, req } = ctx
  const target = targetOf(plan)
  const functionSettings = plan.kind === 'call' ? plan.routine.settings : undefined
  return engine.pools.transaction(tenant.database, restUrl(tenant), {
    readOnly: st.readOnly,
    isolation: transactionIsolation(ctx.roleSettings?.isolation, functionSettings),
    pre: renderPreRequest({
      searchPath: [req.schema, ...(tenant.rest.extra_search_path ?? DEFAULT_EXTRA_SEARCH_PATH)],
      role: caller.role,
      claims: { ...caller.claims, role: caller.role },
      method: req.method,
      path: req.path,
      headers: raw.gucHeaders ?? visibleHeaders(raw.headers),
      cookies: parseCookieHeader(raw.headers.cookie),
      statementTimeoutMs: engine.settings.statementTimeoutMs,
      timezone: req.preferences.timezone,
      relationOid: target?.oid ?? null,
      appSettings: tenant.rest.app_settings,
      functionSettings,
      roleSettings: ctx.roleSettings?.settings,
    }),
    ...(tenant.rest.pre_request ? { preRequest: renderPreRequestCall(tenant.rest.pre_request) } : {}),
    afterPre:
      target === null
        ? undefined
        : (row: DbRow) => {
            // Visibility follows the caller's role: no privilege at all reads as "no such table".
            if (row.visible !== true) throw new TableNotFoundError(target.schema, target.name, null)
          },
    main: st.main,
    after: st.planned ? [st.planned, ...st.after] : st.after,
    check: resultCheck(plan),
    rollback: st.rollback,
    schemaVersion: ctx.schemaVersion,
  })
}

/** Runs the plan's transaction; a write whose representation the SELECT policy hides is kept and reported. */
async function execute(ctx: RunContext, plan: ExecutablePlan, st: ActionStatements): Promise<ExecutionResult> {
  let tx: TransactionResult
  try {
    tx = await transact(ctx, plan, st)
  } catch (err) {
    // RETURNING the new row applies the SELECT policy to it, and Postgres then refuses the
    // whole statement. Written without RETURNING columns (return=minimal), the same write
    // passes when only the SELECT policy objected: then it is kept and the refusal says so.
    // If it fails again, a WITH CHECK refused it and nothing was written (that error goes out).
    // PATCH: the kept write is the one return=minimal makes (with filters Postgres checks the
    // new row against the SELECT policy even then, so only a filterless PATCH gets here).
    if (
      plan.kind !== 'mutate' ||
      plan.returning === 'minimal' ||
      plan.spec.kind === 'delete' ||
      plan.rollback ||
      !isNewRowRefusal(err)
    )
      throw err
    const again = await transact(ctx, plan, renderAction(plan, 'minimal'))
    throw rowWrittenError({
      role: roleClaim(ctx.caller.kind),
      isAnon: ctx.caller.isAnon,
      schema: plan.table.schema,
      table: plan.table.name,
      returning: plan.returning,
      rows: Number(again.main.page_total ?? 0),
    })
  }
  return { main: tx.main, rows: tx.mainRows, countPlan: st.planned ? (tx.after[0] ?? []) : null }
}

/**
 * The whole pipeline for one request of one tenant, timed per stage into `timings`. Throws
 * GatehouseErrors. When its transaction finds the schema changed since the cache it was
 * planned with, nothing of it is kept and it is planned (the cache reloaded meanwhile) and
 * run once more; a second change only has the cache reloaded for the requests after it.
 */
export async function handleRequest(
  engine: Engine,
  tenant: Tenant,
  raw: RawRequest,
  timings: StageTimings,
): Promise<RestResponse> {
  const caller = await timings.time('jwt', () =>
    engine.tokens.caller(tenant, requestHeader(raw.headers, 'authorization')),
  )
  for (let attempt = 0; ; attempt++) {
    try {
      return await runStages(engine, tenant, raw, timings, caller, attempt)
    } catch (err) {
      if (err instanceof SchemaChangedError && attempt === 0) continue
      // Postgres errors become wire errors with the caller's 401/403 rule.
      if (isPgServerError(err)) throw fromPgError(err, caller.isAnon)
      throw err
    }
  }
}

/** One run of the parse, plan, transaction and response stages. */
async function runStages(
  engine: Engine,
  tenant: Tenant,
  raw: RawRequest,
  timings: StageTimings,
  caller: RequestRole,
  attempt: number,
): Promise<RestResponse> {
  const { req, plan, statements, schemaVersion, roleSettings } = await prepare(engine, tenant, raw, timings)
  const ctx: RunContext = { engine, tenant, caller, raw, req, roleSettings: roleSettings?.get(caller.role) }
  if (schemaVersion !== null) ctx.schemaVersion = { expected: schemaVersion, strict: attempt === 0 }
  const result =
    plan.kind === 'info' || statements === null
      ? null
      : await timings.time('transaction', () => execute(ctx, plan, statements))
  return timings.timeSync('response', () =>
    respond({ req, headers: raw.headers, database: tenant.database }, plan, result),
  )
}

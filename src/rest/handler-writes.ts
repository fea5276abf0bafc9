// The execute + respond stages of writes, RPC, OPTIONS and the OpenAPI root (issue 5),
// called from handler.ts's runPlan: one transaction each (READ WRITE for writes and
// volatile POST calls), the result checks that roll back (PGRST116, PGRST115, PGRST124),
// and the rule of service.md: a representation the SELECT policy hides is answered with
// a 42501 refusal that says the row WAS written (the write is kept).
import type { Tenant } from '../tenants/index.js'
import { parseCookieHeader } from '../shared/http.js'
import { GatehouseError } from '../shared/errors.js'
import { roleDisplayName } from '../shared/roles.js'
import { visibleHeaders, type RawRequest } from './api-request/index.js'
import type { ApiRequest } from './api-request/types.js'
import type { Caller } from './auth.js'
import {
  EngineNotConfiguredError, MaxAffectedError, PutPayloadMismatchError, SingularityError, TableNotFoundError, isPgServerError
} from './errors.js'
import { executeTransaction, type DbRow, type TransactionResult } from './execute.js'
import type { Engine } from './handler.js'
import { buildOpenApi, parseOpenApiPrivileges, type OpenApiServer } from './openapi.js'
import type { CallPlan, InfoPlan, MutatePlan, OpenApiPlan, ReturnPreference } from './plan/types.js'
import { renderCall } from './query/call.js'
import { renderMutate } from './query/mutate.js'
import { renderOpenApiPrivileges } from './query/openapi.js'
import { renderPreRequest } from './query/pre-request.js'
import type { Statement } from './query/sql.js'
import type { RestResponse } from './response/index.js'
import { shapeCallResponse, shapeMutateResponse, toWriteResult } from './response/mutate.js'

/** What every run needs: the engine, the tenant, the verified caller and the request. */
export interface RunContext {
  engine: Engine
  tenant: Tenant
  caller: Caller
  raw: RawRequest
  req: ApiRequest
}

function restUrl (tenant: Tenant): string {
  const url = tenant.engines?.rest
  if (!url) throw new EngineNotConfiguredError(tenant.database)
  return url
}

function preRequest (ctx: RunContext, relationOid: number | null): Statement & { name: string } {
  const { engine, caller, raw, req } = ctx
  return renderPreRequest({
    searchPath: [req.schema, 'public'],
    role: caller.role,
    claims: { ...caller.claims, role: caller.role },
    method: req.method,
    path: req.path,
    headers: visibleHeaders(raw.headers),
    cookies: parseCookieHeader(raw.headers.cookie),
    statementTimeoutMs: engine.settings.statementTimeoutMs,
    timezone: req.preferences.timezone,
    relationOid
  })
}

/** PostgREST runs this before a deliberate rollback, so deferred constraints still report. */
const CONSTRAINTS_IMMEDIATE: Statement = { text: 'SET CONSTRAINTS ALL IMMEDIATE', values: [] }

interface RunOptions {
  readOnly: boolean
  relationOid: number | null
  main: Statement
  rollback: boolean
  check?: (main: DbRow) => void
  /** The relation whose visibility gates the request (PGRST205 when the role has no privilege on it). */
  visibility?: { schema: string, name: string }
}

function run (ctx: RunContext, o: RunOptions): Promise<TransactionResult> {
  const { engine, tenant } = ctx
  return executeTransaction(engine.pools, tenant.database, restUrl(tenant), {
    readOnly: o.readOnly,
    pre: preRequest(ctx, o.relationOid),
    afterPre: o.visibility === undefined
      ? undefined
      : (row: DbRow) => {
          if (row.visible !== true) throw new TableNotFoundError(o.visibility!.schema, o.visibility!.name, { hint: null })
        },
    main: o.main,
    after: o.rollback ? [CONSTRAINTS_IMMEDIATE] : [],
    check: o.check === undefined ? undefined : (main) => o.check!(main),
    rollback: o.rollback
  })
}

function checkRows (n: number, o: { singular: boolean, put: boolean, maxAffected: number | null }): void {
  // Matches PostgREST: an object was requested and 0 or more than 1 rows came back (roll back).
  if (o.singular && n !== 1) throw new SingularityError({ details: `The result contains ${n} rows` })
  if (o.put && n !== 1) throw new PutPayloadMismatchError()
  if (o.maxAffected !== null && n > o.maxAffected) throw new MaxAffectedError({ details: `The query affects ${n} rows` })
}

/** Postgres' refusal of a new row by a policy (WITH CHECK, or SELECT policies on RETURNING). */
function isNewRowRefusal (err: unknown): boolean {
  return isPgServerError(err) && err.code === '42501' && /^new row violates row-level security policy/.test(err.message)
}

/**
 * service.md: the row was written, but the SELECT policy hides it from its author. The
 * message says so (the gateway's refusal rewriter turns it into `rls_refusal`), and the
 * body carries `row_written: true` and the header `x-gatehouse-row-written: true`.
 */
export function rowWrittenError (caller: Caller, plan: MutatePlan, rows: number): GatehouseError {
  const role = roleDisplayName(caller.kind)
  const what = rows === 1 ? '1 row was' : `${rows} rows were`
  return new GatehouseError('42501', caller.isAnon ? 401 : 403,
    `new row was written but the SELECT policy hides it from role ${role}`, {
      details: `${what} written to ${plan.table.schema}.${plan.table.name} and committed; only returning ${rows === 1 ? 'it' : 'them'} ` +
        `(Prefer: return=${plan.returning}) was refused, because the SELECT policy does not let role ${role} see the new row. ` +
        'Do not retry the request: it would write the row again.',
      hint: 'Send Prefer: return=minimal, or add a SELECT policy that lets the author see the row.',
      extra: { row_written: true },
      headers: { 'x-gatehouse-row-written': 'true', ...(caller.isAnon ? { 'www-authenticate': 'Bearer' } : {}) }
    })
}

/** POST / PUT / PATCH / DELETE on a table or view. */
export async function runMutate (ctx: RunContext, plan: MutatePlan): Promise<RestResponse> {
  const exec = (returning: ReturnPreference): Promise<TransactionResult> => run(ctx, {
    readOnly: false,
    relationOid: plan.table.oid,
    visibility: plan.table,
    main: renderMutate(plan, returning),
    rollback: plan.rollback,
    check: (main) => checkRows(Number(main.page_total ?? 0), {
      singular: plan.singular,
      put: plan.mutation === 'single-upsert',
      maxAffected: plan.maxAffected
    })
  })
  let result: TransactionResult
  try {
    result = await exec(plan.returning)
  } catch (err) {
    // RETURNING the new row applies the SELECT policy to it, and Postgres then refuses the
    // whole statement. Written without RETURNING columns (return=minimal), the same write
    // passes when only the SELECT policy objected: then it is kept and the refusal says so.
    // If it fails again, a WITH CHECK refused it and nothing was written (that error goes out).
    // PATCH: the kept write is the one return=minimal makes (with filters Postgres checks the
    // new row against the SELECT policy even then, so only a filterless PATCH gets here).
    if (plan.returning === 'minimal' || plan.spec.kind === 'delete' || plan.rollback || !isNewRowRefusal(err)) throw err
    const again = await exec('minimal')
    throw rowWrittenError(ctx.caller, plan, Number(again.main.page_total ?? 0))
  }
  return shapeMutateResponse(ctx.req, plan, toWriteResult(result.main))
}

/** GET / HEAD / POST /rpc/<fn>. */
export async function runCall (ctx: RunContext, plan: CallPlan): Promise<RestResponse> {
  const result = await run(ctx, {
    readOnly: plan.readOnly,
    relationOid: null,
    main: renderCall(plan),
    rollback: plan.rollback,
    check: (main) => checkRows(Number(main.page_total ?? 0), {
      singular: plan.singular && (plan.shape === 'setof-composite' || plan.shape === 'setof-scalar'),
      put: false,
      maxAffected: plan.maxAffected
    })
  })
  return shapeCallResponse(ctx.req, plan, toWriteResult(result.main))
}

/** OPTIONS: the Allow list, no database work. */
export function shapeInfo (plan: InfoPlan): RestResponse {
  return { status: 200, headers: { allow: plan.allow, 'access-control-allow-origin': '*' }, body: null }
}

function firstHeader (raw: RawRequest, name: string): string | undefined {
  const v = raw.headers[name]
  return Array.isArray(v) ? v[0] : v
}

/**
 * Where the document says the API lives: behind the gateway (X-Forwarded-Host set) at
 * `<proto>://<host>/<database>/rest/v1`, else this engine's `/<database>`.
 */
function serverOf (ctx: RunContext): OpenApiServer {
  const fwdHost = firstHeader(ctx.raw, 'x-forwarded-host')
  const proto = firstHeader(ctx.raw, 'x-forwarded-proto') === 'https' ? 'https' : 'http'
  const db = encodeURIComponent(ctx.tenant.database)
  if (fwdHost !== undefined && fwdHost !== '') return { host: fwdHost, basePath: `/${db}/rest/v1`, scheme: proto }
  return { host: firstHeader(ctx.raw, 'host') ?? 'localhost', basePath: `/${db}`, scheme: 'http' }
}

/** GET / HEAD /: the OpenAPI document for the caller's role. */
export async function runOpenApi (ctx: RunContext, plan: OpenApiPlan): Promise<RestResponse> {
  const result = await run(ctx, {
    readOnly: true,
    relationOid: null,
    main: renderOpenApiPrivileges(plan.tables.map((t) => t.oid), plan.routines.map((r) => r.oid), plan.schema),
    rollback: false
  })
  const body = buildOpenApi(plan, parseOpenApiPrivileges(result.main), serverOf(ctx))
  const headers: Record<string, string> = { 'content-type': 'application/openapi+json; charset=utf-8' }
  if (ctx.req.echoProfile) headers['content-profile'] = ctx.req.schema
  return { status: 200, headers, body: plan.headersOnly ? null : body }
}

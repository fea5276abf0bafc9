// POST test-query: one statement under a request role, always rolled back (test-query.ts
// runs it); a failure becomes the panel's error, or the gateway's refusal when the tested
// role was refused (docs/panel-api.md).
import type { FastifyReply, FastifyRequest } from 'fastify'
import type { Tenant } from '../tenants/index.js'
import { panelContext } from './context.js'
import {
  DatabaseUnavailableError,
  TenantEngineMissingError,
  QueryError,
  QueryTimeoutError,
  ResultTooLargeError,
  TestQueryLoginError,
} from './errors.js'
import type { PanelRouteDeps } from './route-deps.js'
import {
  kindOfAs,
  isServerError,
  ResultTooLarge,
  parseTestQuery,
  runTestQuery,
  statementNeeds,
  testQueryLogin,
  testQueryUrl,
  type TestQueryRequest,
} from './test-query.js'
import { leadingKeyword } from '../shared/index.js'

type ServerError = Error & { code: string; detail?: string; hint?: string; position?: string }

/** Errors of the connection itself (not of a statement) are a 503. */
function connectionFailure(err: unknown): boolean {
  if (isServerError(err))
    return (
      err.code.startsWith('08') ||
      err.code === '57P01' ||
      err.code === '53300' ||
      err.code === '28P01' ||
      err.code === '3D000'
    )
  const code = (err as { code?: unknown })?.code
  const msg = String((err as { message?: unknown })?.message ?? '')
  return typeof code === 'string' ? /^E[A-Z]+/.test(code) : /timeout|terminated|Connection/i.test(msg)
}

interface Attempt {
  deps: PanelRouteDeps
  tenant: Tenant
  database: string
  request: TestQueryRequest
  kind: ReturnType<typeof kindOfAs>
  timeoutMs: number
}

export async function postTestQuery(deps: PanelRouteDeps, req: FastifyRequest, reply: FastifyReply): Promise<unknown> {
  const { tenant, database } = panelContext(req)
  const request = parseTestQuery(req.body)
  const url = tenant.engines?.rest
  if (!url) throw new TenantEngineMissingError(database, 'REST engine')
  const a: Attempt = {
    deps,
    tenant,
    database,
    request,
    kind: kindOfAs(request.as),
    timeoutMs: deps.config.panel.test_query_timeout_ms,
  }
  try {
    return await runTestQuery({
      pool: deps.restPools.get(database, testQueryUrl(url, tenant, a.kind)),
      tenant,
      request,
      publicUrl: deps.config.public_url,
      timeoutMs: a.timeoutMs,
      maxRows: deps.config.panel.test_query_max_rows,
      maxBytes: deps.config.panel.test_query_max_bytes,
    })
  } catch (err) {
    return answerFailure(a, err, reply)
  }
}

/** A failed test query: the panel's error (thrown), or the gateway's refusal (answered). */
async function answerFailure(a: Attempt, err: unknown, reply: FastifyReply): Promise<FastifyReply> {
  if (err instanceof ResultTooLarge) throw new ResultTooLargeError(err.maxBytes, { cause: err })
  if (isServerError(err) && (err.code === '28P01' || err.code === '28000')) throw loginError(a, err)
  if (!isServerError(err) || connectionFailure(err)) {
    if (connectionFailure(err)) throw new DatabaseUnavailableError({ cause: err, internal: err })
    throw err
  }
  if (err.code === '57014') throw new QueryTimeoutError(a.timeoutMs, { cause: err })
  const { needs, action } = statementNeeds(leadingKeyword(a.request.sql))
  const refusal = await a.deps.explainer.explain({
    tenant: a.tenant,
    kind: a.kind,
    error: { code: err.code, message: err.message, details: err.detail ?? null, hint: err.hint ?? null },
    needs,
    action,
  })
  if (refusal === null) throw queryError(err)
  // The same body as the gateway's refusal; no WWW-Authenticate here (the panel
  // session is fine: it is the tested role that was refused).
  const { 'www-authenticate': _omit, ...headers } = refusal.headers
  return reply
    .code(refusal.status)
    .headers(headers)
    .send({ ...refusal.body, rolled_back: true })
}

function loginError(a: Attempt, err: Error): Error {
  const login = testQueryLogin(a.tenant, a.kind)
  return new TestQueryLoginError(a.database, login, {
    cause: err,
    hint:
      `Run \`gatehouse tenants migrate ${a.database}\`: it creates ${login} (a NOINHERIT member of ${a.tenant.roles[a.kind]} only) ` +
      "with the REST engine login's password; after a change of that password, run it again.",
  })
}

function queryError(err: ServerError): Error {
  return new QueryError(err.message, {
    cause: err,
    details: err.detail ?? null,
    hint: err.hint ?? null,
    extra: {
      sqlstate: err.code,
      ...(err.position !== undefined ? { position: Number(err.position) } : {}),
      rolled_back: true,
    },
  })
}

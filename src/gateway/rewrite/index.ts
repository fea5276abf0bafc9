// The refusal rewriter the gateway's `rewriteError` hook takes: REST upstream error bodies
// (already buffered, bounded, by the proxy) that are database refusals become the
// platform's refusals (refusals.ts), with catalog facts from the tenant database
// (catalog.ts). Anything else, and any failure of the rewriter itself, leaves the upstream
// response as it was.
//
// RLS and `Prefer: return=representation` (docs/architecture.md, "Contracts with the
// engines"): our REST engine keeps the written row and marks its 42501 answer with the body
// field `row_written: true`; on a table write (POST, PUT, PATCH) that marker alone makes an
// `rls_refusal`. Nothing else does: not the message's wording, not a header (a function can
// RAISE 'PGRST' with any message and headers, never with another body field). A real
// PostgREST rolls such a write back and answers the same 42501 "new row violates row-level
// security policy" as for a failed WITH CHECK: nothing was written in either case, so it
// becomes `permission_denied` with a hint naming both causes. We never probe the table for
// the row: the owner connection would bypass the tenant's policies, and a probe cannot tell
// a new row from an old identical one.
import { firstHeader, isPlainObject, type TenantPoolsSnapshot } from '../../shared/index.js'
import { roleKindOf, type RewriteError, type RewrittenError, type UpstreamErrorContext } from '../types.js'
import { createCatalog } from './catalog.js'
import { createRefusalExplainer, isRefusalCandidate, privilegesForMethod, type SourceError } from './refusals.js'

export {
  createRefusalExplainer,
  privilegesForMethod,
  grantStatement,
  isRefusalCandidate,
  REFUSAL_CODES,
  type RefusalCode,
  type RefusalExplainer,
  type RefusalInput,
  type Refusal,
  type SourceError,
  type ExplainerOptions,
} from './refusals.js'
export {
  createCatalog,
  PRIVILEGES,
  type Catalog,
  type Privilege,
  type TableFacts,
  type RolePrivileges,
} from './catalog.js'

/** The logger shape the rewriter uses (pino and fastify's fit). */
export interface RewriterLogger {
  warn(obj: unknown, msg?: string): void
  debug(obj: unknown, msg?: string): void
}

export interface RefusalRewriterDeps {
  logger?: RewriterLogger
}

/** The hook for buildGateway({ rewriteError }); close() ends its catalog pools (call it on gateway close). */
export type RefusalRewriter = RewriteError & {
  /** The catalog look-up pools' numbers (metrics). */
  poolSnapshot(): TenantPoolsSnapshot
  close(): Promise<void>
}

function optionalText(v: unknown): string | null {
  return typeof v === 'string' ? v : null
}

/** The table writes whose representation the SELECT policy can hide (the engine's marker counts on them only). */
const WRITES: ReadonlySet<string> = new Set(['POST', 'PUT', 'PATCH'])

function decodeSegment(s: string): string | null {
  try {
    return decodeURIComponent(s)
  } catch {
    return null
  }
}

/**
 * Creates the refusal rewriter. Only REST responses are looked at; codes PGRST205, 42P01
 * and 42501 may be rewritten, every other error passes through unchanged.
 */
export function createRefusalRewriter(deps: RefusalRewriterDeps = {}): RefusalRewriter {
  const catalog = createCatalog()
  const explainer = createRefusalExplainer({
    catalog,
    onLookupError: (err, tenant) => {
      deps.logger?.warn(
        { err, tenant: tenant.database },
        'refusal rewriter: catalog look-up failed; refusal sent with less detail',
      )
    },
  })

  async function rewrite(ctx: UpstreamErrorContext): Promise<RewrittenError | null> {
    if (ctx.service !== 'rest' || !isPlainObject(ctx.body)) return null
    const b = ctx.body
    if (typeof b.code !== 'string' || typeof b.message !== 'string') return null
    const error: SourceError = {
      code: b.code,
      message: b.message,
      details: optionalText(b.details),
      hint: optionalText(b.hint),
    }
    if (!isRefusalCandidate(error)) return null

    const segments = ctx.path.split('/').filter((s) => s !== '')
    const isRpc = segments[0] === 'rpc'
    const table = !isRpc && segments.length === 1 ? decodeSegment(segments[0]!) : null
    // The schema the upstream answered for (PostgREST sets Content-Profile when one was chosen).
    const profile = firstHeader(ctx.headers['content-profile'])
    const schemas =
      profile !== undefined && profile !== ''
        ? [profile, ...ctx.tenant.rest.schemas.filter((s) => s !== profile)]
        : ctx.tenant.rest.schemas
    const rowWritten = table !== null && WRITES.has(ctx.method.toUpperCase()) && b.row_written === true

    const r = await explainer.explain({
      tenant: ctx.tenant,
      kind: roleKindOf(ctx.caller),
      error,
      needs: isRpc ? [] : privilegesForMethod(ctx.method),
      action: isRpc ? `calling ${decodeSegment(segments[1] ?? '') ?? 'the function'}` : ctx.method.toUpperCase(),
      table,
      schemas,
      rowWritten,
    })
    if (r === null) return null
    ctx.log.debug({ from: error.code, to: r.body.code, status: r.status }, 'upstream refusal rewritten')
    return { status: r.status, body: r.body, headers: r.headers }
  }

  return Object.assign(rewrite, {
    poolSnapshot: () => catalog.poolSnapshot(),
    close: () => catalog.close(),
  })
}

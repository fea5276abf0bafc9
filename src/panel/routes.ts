// Every route of the panel below /organizations/:org/databases/:db/api, declared in one
// table: method, path, the checks before the handler, the limit, the handler. Every route
// first passes the guard of context.ts (onRequest: the panel session, the membership of the
// organization, the database being the organization's); a route's own checks and limit run
// as its preHandler. docs/routes.md is rendered from this table (scripts/routes-doc.ts).
import type { FastifyInstance, FastifyRequest, HTTPMethods } from 'fastify'
import { postAppSession, requireAuthEngine, takeExchange } from './exchange.js'
import type { PanelHandler, PanelRouteDeps } from './route-deps.js'
import {
  deleteLegacy,
  deleteSigningKey,
  getAuthSettings,
  getHistory,
  getPolicyCheck,
  getRestSettings,
  getSigningKeys,
  getTypescriptTypes,
  patchAuthSettings,
  patchRestSettings,
  postRotate,
} from './settings-routes.js'
import { postTestQuery } from './test-query-route.js'

/** A check or a limit before a handler: its name in the route list, and what it does. */
interface PanelStep {
  readonly name: string
  readonly run: (deps: PanelRouteDeps, req: FastifyRequest) => Promise<void>
}

interface PanelRoute {
  readonly method: HTTPMethods
  readonly path: string
  readonly checks: readonly PanelStep[]
  readonly limit: PanelStep | null
  readonly handler: PanelHandler
}

const AUTH_ENGINE: PanelStep = { name: 'auth engine configured', run: requireAuthEngine }
const EXCHANGE_LIMIT: PanelStep = { name: 'sign_in_sign_up per database and panel user', run: takeExchange }

const PANEL_ROUTES: readonly PanelRoute[] = [
  { method: 'POST', path: '/app-session', checks: [AUTH_ENGINE], limit: EXCHANGE_LIMIT, handler: postAppSession },
  { method: 'POST', path: '/test-query', checks: [], limit: null, handler: postTestQuery },
  { method: 'GET', path: '/auth-settings', checks: [], limit: null, handler: getAuthSettings },
  { method: 'PATCH', path: '/auth-settings', checks: [], limit: null, handler: patchAuthSettings },
  { method: 'GET', path: '/rest-settings', checks: [], limit: null, handler: getRestSettings },
  { method: 'PATCH', path: '/rest-settings', checks: [], limit: null, handler: patchRestSettings },
  { method: 'GET', path: '/signing-keys', checks: [], limit: null, handler: getSigningKeys },
  { method: 'POST', path: '/signing-keys/rotate', checks: [], limit: null, handler: postRotate },
  { method: 'DELETE', path: '/signing-keys/legacy', checks: [], limit: null, handler: deleteLegacy },
  { method: 'DELETE', path: '/signing-keys/:kid', checks: [], limit: null, handler: deleteSigningKey },
  { method: 'GET', path: '/history', checks: [], limit: null, handler: getHistory },
  { method: 'GET', path: '/policy-check', checks: [], limit: null, handler: getPolicyCheck },
  { method: 'GET', path: '/types/typescript', checks: [], limit: null, handler: getTypescriptTypes },
]

/** Registers the table's routes on the guarded scope. */
export function registerPanelRoutes(scope: FastifyInstance, deps: PanelRouteDeps): void {
  for (const route of PANEL_ROUTES) {
    const steps = route.limit === null ? route.checks : [...route.checks, route.limit]
    scope.route({
      method: route.method,
      url: route.path,
      preHandler: async (req) => {
        for (const step of steps) await step.run(deps, req)
      },
      handler: async (req, reply) => route.handler(deps, req, reply),
    })
  }
}

/** The table as the route list shows it (docs/routes.md): method, path, checks, limit. */
export function panelRouteList(): Array<{ method: string; path: string; checks: string[]; limit: string | null }> {
  return PANEL_ROUTES.map((r) => ({
    method: r.method,
    path: r.path,
    checks: r.checks.map((c) => c.name),
    limit: r.limit?.name ?? null,
  }))
}

// The checks a route of the table (table.ts) runs before its handler, GoTrue's route
// middleware (api.go: requireAuthentication, requireAdmin, requireNotAnonymous, loadFactor,
// limitHandler), and the per-IP limits. A check proves something and keeps what it found on
// the request (request-state.ts); each has a name for the route list (docs/routes.md).
import type { FastifyReply, FastifyRequest, HTTPMethods } from 'fastify'
import { ownValue } from '../../shared/index.js'
import { requireAdmin, requireDatabaseAudience, requireUser, UUID } from '../bearer.js'
import {
  AnonymousDisabledError,
  FeatureDisabledError,
  NoAuthorizationError,
  FactorNotFoundError,
  InvalidCredentialsError,
  ManualLinkingDisabledError,
  UnexpectedFailureError,
  UserNotFoundError,
  ValidationFailedError,
} from '../errors.js'
import { GRANTS } from '../grants/index.js'
import { bodyOf, optObject, optString, queryParam } from '../http.js'
import { findFactorOfUser } from '../models/factors.js'
import { findUserById } from '../models/users.js'
import type { TenantContext, UserRow } from '../types.js'
import { oauthServerOf } from '../../tenants/index.js'
import { limitRequest, type RateLimitBucketName } from '../rate-limits.js'
import { callerOf, contextOf, setCaller, setFactor } from '../request-state.js'
import { limitFeatureRequest, type FeatureLimit } from '../request-limits.js'

/** A check before a handler: its name in the route list, and the check. */
export interface Check {
  readonly name: string
  readonly run: (req: FastifyRequest) => Promise<void> | void
}

/** A signed-in user (a valid bearer of this tenant naming an existing user and session). */
export const USER: Check = {
  name: 'user',
  run: async (req) => {
    setCaller(req, await requireUser(contextOf(req), req))
  },
}

/** The user's token was made for this database's audience (GoTrue's UserGet check). */
export const DATABASE_AUDIENCE: Check = {
  name: 'database audience',
  run: (req) => {
    requireDatabaseAudience(contextOf(req), callerOf(req).claims)
  },
}

/** The database allows manual identity linking. */
export const MANUAL_LINKING: Check = {
  name: 'manual linking on',
  run: (req) => {
    if (!contextOf(req).tenant.auth.manual_linking) throw new ManualLinkingDisabledError()
  },
}

/** The database runs the OAuth 2.1 server (GoTrue's requireOAuthServerEnabled). */
export const OAUTH_SERVER: Check = {
  name: 'oauth server on',
  run: (req) => {
    if (!oauthServerOf(contextOf(req).tenant.auth).enabled) throw new FeatureDisabledError('OAuth server is disabled')
  },
}

/** The user is not anonymous (GoTrue's requireNotAnonymous). */
export const NOT_ANONYMOUS: Check = {
  name: 'not anonymous',
  run: (req) => {
    if (callerOf(req).claims.is_anonymous === true) throw new NoAuthorizationError('anonymous')
  },
}

/** The user's token names a session (MFA works on sessions). */
export const SESSION: Check = {
  name: 'session',
  run: (req) => {
    if (!callerOf(req).sessionId) throw new UnexpectedFailureError('enrollSession')
  },
}

/** The path parameter `name` as a lower-case UUID; else 404 validation_failed naming it `label`. */
export function uuidParam(req: FastifyRequest, name: string, label = name): string {
  const id = (req.params as Partial<Record<string, string>>)[name] ?? ''
  if (!UUID.test(id)) throw new ValidationFailedError('notFound', `${label} must be an UUID`)
  return id.toLowerCase()
}

/** The factor `:id` of the path, one of the caller's (GoTrue's loadFactor). */
export const FACTOR: Check = {
  name: 'factor',
  run: async (req) => {
    const ctx = contextOf(req)
    const f = await findFactorOfUser(ctx.db, callerOf(req).user.user.id, uuidParam(req, 'id', 'factor_id'))
    if (!f) throw new FactorNotFoundError('factor')
    setFactor(req, f)
  },
}

/** The admin routes' user `:id` of the path (GoTrue's loadUser): 404 for a malformed or unknown id. */
export async function loadPathUser(ctx: TenantContext, req: FastifyRequest): Promise<UserRow> {
  const user = await findUserById(ctx.db, uuidParam(req, 'id', 'user_id'))
  if (!user) throw new UserNotFoundError('byId')
  return user
}

/** An admin token: a role of GoTrue's JWT_ADMIN_ROLES, for this database's audience. */
export const ADMIN: Check = {
  name: 'admin',
  run: async (req) => {
    await requireAdmin(contextOf(req), req)
  },
}

/**
 * A per-IP limit: a bucket of auth.rate_limits (with its own counter per `endpoint`,
 * rate-limits.ts) or a feature's limit (request-limits.ts).
 */
export type Limit =
  { readonly bucket: RateLimitBucketName; readonly endpoint?: string } | { readonly feature: FeatureLimit }

/** A limit that depends on the request: its description in the route list, and the choice. */
export interface LimitRule {
  readonly name: string
  readonly pick: (req: FastifyRequest) => Limit | null
}

function isLimitRule(limit: Limit | LimitRule): limit is LimitRule {
  return 'pick' in limit
}

export function limitName(limit: Limit | LimitRule): string {
  if (isLimitRule(limit)) return limit.name
  if ('feature' in limit) return limit.feature
  return limit.endpoint === undefined ? limit.bucket : `${limit.bucket} (${limit.endpoint})`
}

export async function takeLimit(req: FastifyRequest, limit: Limit | LimitRule): Promise<void> {
  const chosen = isLimitRule(limit) ? limit.pick(req) : limit
  if (chosen === null) return
  const ctx = contextOf(req)
  if ('feature' in chosen) await limitFeatureRequest(ctx, req, chosen.feature)
  else await limitRequest(req, ctx, chosen.bucket, chosen.endpoint)
}

/**
 * POST /token: refreshing a session has its own, larger bucket; every other grant is a
 * sign-in. An unknown grant is refused before any limit.
 */
export const TOKEN_LIMIT: LimitRule = {
  name: 'token_refresh for grant_type=refresh_token, else sign_in_sign_up',
  pick: (req) => {
    const grantType = queryParam(req, 'grant_type') ?? ''
    if (!ownValue(GRANTS, grantType)) throw new InvalidCredentialsError('unsupported_grant_type')
    return { bucket: grantType === 'refresh_token' ? 'token_refresh' : 'sign_in_sign_up' }
  },
}

/**
 * POST /signup: with an email or phone a sign-up (sign_in_sign_up, its own counter), else an
 * anonymous sign-in (anonymous_sign_ins, refused first when switched off). The body's fields
 * are read in the handler's order, so a malformed one is refused before any limit.
 */
export const SIGNUP_LIMIT: LimitRule = {
  name: 'sign_in_sign_up (signup) with email or phone, else anonymous_sign_ins',
  pick: (req) => {
    const b = bodyOf(req)
    const email = optString(b, 'email')
    const phone = optString(b, 'phone')
    optString(b, 'password')
    optObject(b, 'data')
    if (email || phone) return { bucket: 'sign_in_sign_up', endpoint: 'signup' }
    if (!contextOf(req).tenant.auth.anonymous_sign_in) throw new AnonymousDisabledError()
    return { feature: 'anonymous_sign_ins' }
  },
}

type RouteHandler = (req: FastifyRequest, reply: FastifyReply) => Promise<unknown>

/** One route of the engine (below /:database): the checks, then the limit, then the handler. */
export interface AuthRoute {
  readonly method: HTTPMethods
  readonly path: string
  /** None when absent. */
  readonly checks?: readonly Check[]
  /** No limit when absent. */
  readonly limit?: Limit | LimitRule
  readonly handler: RouteHandler
  /** What the route answers when that is all it does (the switched-off features). */
  readonly note?: string
}

// POST /token?grant_type=... (docs/auth-protocol.md §3.4): dispatches to the grant functions. An unknown
// grant is GoTrue's 400 invalid_credentials "unsupported_grant_type".
import type { FastifyInstance } from 'fastify'
import { UnsupportedGrantTypeError } from '../errors.js'
import { GRANTS } from '../grants/index.js'
import { contextOf } from '../hooks/resolve-tenant.js'
import { limitRequest } from '../rate-limits.js'
import { bodyOf, queryParam } from '../http.js'
import { ownValue } from '../../shared/index.js'

export async function tokenRoutes (scope: FastifyInstance): Promise<void> {
  scope.post('/token', async (req) => {
    const ctx = contextOf(req)
    const grantType = queryParam(req, 'grant_type') ?? ''
    const grant = ownValue(GRANTS, grantType)
    if (!grant) throw new UnsupportedGrantTypeError()
    // Refreshing a session has its own, larger bucket; every other grant is a sign-in.
    await limitRequest(req, ctx, grantType === 'refresh_token' ? 'token_refresh' : 'sign_in_sign_up')
    return grant(ctx, req, bodyOf(req))
  })
}

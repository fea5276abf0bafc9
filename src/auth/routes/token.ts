// POST /token?grant_type=... (spec §3.4): dispatches to the grant functions. An unknown
// grant is GoTrue's 400 invalid_credentials "unsupported_grant_type".
import type { FastifyInstance } from 'fastify'
import { invalidCredentials } from '../errors.js'
import { GRANTS } from '../grants/index.js'
import { contextOf } from '../hooks/resolve-tenant.js'
import { bodyOf, queryParam } from '../http.js'
import { ownValue } from '../../shared/own.js'

export async function tokenRoutes (scope: FastifyInstance): Promise<void> {
  scope.post('/token', async (req) => {
    const ctx = contextOf(req)
    const grant = ownValue(GRANTS, queryParam(req, 'grant_type') ?? '')
    if (!grant) throw invalidCredentials('unsupported_grant_type')
    return grant(ctx, req, bodyOf(req))
  })
}

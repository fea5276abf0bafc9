// POST /token?grant_type=... (docs/auth-protocol.md §3.4): dispatches to the grant functions. An unknown
// grant is GoTrue's 400 invalid_credentials "unsupported_grant_type".
import type { FastifyRequest } from 'fastify'
import { InvalidCredentialsError } from '../errors.js'
import { GRANTS } from '../grants/index.js'
import { contextOf } from '../request-state.js'
import { bodyOf, queryParam } from '../http.js'
import { ownValue } from '../../shared/index.js'

export async function postToken(req: FastifyRequest): Promise<unknown> {
  const ctx = contextOf(req)
  const grantType = queryParam(req, 'grant_type') ?? ''
  const grant = ownValue(GRANTS, grantType)
  if (!grant) throw new InvalidCredentialsError('unsupported_grant_type')
  return grant(ctx, req, bodyOf(req))
}

// POST /logout?scope=global|local|others (docs/auth-protocol.md §3.17): deletes sessions (refresh tokens
// cascade) and answers 204. A token without a session_id falls back to global.
import type { FastifyReply, FastifyRequest } from 'fastify'
import { ValidationFailedError } from '../errors.js'
import { callerOf, contextOf } from '../request-state.js'
import { queryParam } from '../http.js'
import { audit } from '../models/audit-log.js'
import { deleteSession, deleteSessionsOfUser } from '../models/sessions.js'

export async function postLogout(req: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
  const ctx = contextOf(req)
  const { user, sessionId } = callerOf(req)
  const scopeParam = queryParam(req, 'scope') ?? ''
  if (!['', 'global', 'local', 'others'].includes(scopeParam))
    throw new ValidationFailedError('request', `Unsupported logout scope "${scopeParam}"`)
  const id = user.user.id
  if (!sessionId || scopeParam === '' || scopeParam === 'global') await deleteSessionsOfUser(ctx.db, id)
  else if (scopeParam === 'local') await deleteSession(ctx.db, sessionId)
  else await deleteSessionsOfUser(ctx.db, id, sessionId)
  await audit(ctx.db, {
    action: 'logout',
    actorId: id,
    actorUsername: user.user.email,
    traits: { scope: scopeParam || 'global' },
    now: ctx.now(),
  })
  return reply.code(204).send()
}

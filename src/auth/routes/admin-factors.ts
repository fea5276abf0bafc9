// Admin API of MFA factors (docs/auth-protocol.md §3.20): GET /admin/users/:id/factors lists a user's factors,
// PUT /admin/users/:id/factors/:factor_id renames one, DELETE removes it (the sessions it
// raised drop back to aal1). Admin bearer required, as every /admin route.
import type { FastifyRequest } from 'fastify'
import { withTransaction } from '../../shared/index.js'
import { FactorNotFoundError } from '../errors.js'
import { contextOf } from '../request-state.js'
import { bodyOf, optString } from '../http.js'
import { audit } from '../models/audit-log.js'
import { loadPathUser, uuidParam } from './checks.js'
import {
  deleteFactor,
  downgradeSessionsOfFactor,
  factorsOfUser,
  findFactorOfUser,
  toFactorJson,
} from '../models/factors.js'
import type { FactorRow, TenantContext, UserRow } from '../types.js'

async function loadFactor(ctx: TenantContext, req: FastifyRequest, user: UserRow): Promise<FactorRow> {
  const f = await findFactorOfUser(ctx.db, user.id, uuidParam(req, 'factor_id'))
  if (!f) throw new FactorNotFoundError('factor')
  return f
}

export async function getAdminFactors(req: FastifyRequest): Promise<unknown> {
  const ctx = contextOf(req)
  const user = await loadPathUser(ctx, req)
  return (await factorsOfUser(ctx.db, user.id)).map(toFactorJson)
}

export async function putAdminFactor(req: FastifyRequest): Promise<unknown> {
  const ctx = contextOf(req)
  const user = await loadPathUser(ctx, req)
  const factor = await loadFactor(ctx, req, user)
  const b = bodyOf(req)
  const friendlyName = optString(b, 'friendly_name') ?? ''
  optString(b, 'phone')
  return withTransaction(ctx.db, async (q) => {
    const now = ctx.now()
    let updated = factor
    if (friendlyName !== '') {
      const r = await q.query<{ updated_at: Date }>(
        'UPDATE auth.mfa_factors SET friendly_name = $2, updated_at = $3 WHERE id = $1 RETURNING updated_at',
        [factor.id, friendlyName, now],
      )
      updated = { ...factor, friendly_name: friendlyName, updated_at: r.rows[0]!.updated_at }
    }
    await audit(q, {
      action: 'factor_updated',
      actorId: user.id,
      actorUsername: user.email,
      traits: { user_id: user.id, factor_id: factor.id, factor_type: factor.factor_type },
      now,
    })
    return toFactorJson(updated)
  })
}

export async function deleteAdminFactor(req: FastifyRequest): Promise<unknown> {
  const ctx = contextOf(req)
  const user = await loadPathUser(ctx, req)
  const factor = await loadFactor(ctx, req, user)
  await withTransaction(ctx.db, async (q) => {
    const now = ctx.now()
    await audit(q, {
      action: 'factor_deleted',
      actorId: user.id,
      actorUsername: user.email,
      traits: { user_id: user.id, factor_id: factor.id },
      now,
    })
    await deleteFactor(q, factor.id)
    await downgradeSessionsOfFactor(q, factor, now)
  })
  return toFactorJson(factor)
}

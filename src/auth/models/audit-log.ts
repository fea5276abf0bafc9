// auth.audit_log_entries: GoTrue's audit trail ({actor_id, actor_username, action,
// log_type, traits}). Written for account events; not for every token refresh (that is
// the hot path, and the session row already records refreshed_at).
import { randomUUID } from 'node:crypto'
import type { Queryable } from '../../shared/index.js'
import { NIL_UUID } from './users.js'

/** GoTrue's audit actions, each with the log_type it is recorded with. */
const LOG_TYPE = {
  user_signedup: 'team',
  login: 'account',
  logout: 'account',
  user_modified: 'user',
  user_updated_password: 'user',
  user_confirmation_requested: 'user',
  user_invited: 'team',
  user_deleted: 'team',
  user_recovery_requested: 'user',
  user_reauthenticate_requested: 'user',
  token_revoked: 'token',
  identity_linked: 'account',
  identity_unlinked: 'account',
  factor_in_progress: 'factor',
  factor_unenrolled: 'factor',
  challenge_created: 'factor',
  verification_attempted: 'factor',
  factor_deleted: 'factor',
  factor_updated: 'factor',
  passkey_created: 'user',
  passkey_updated: 'user',
  passkey_deleted: 'user',
} as const

export type AuditAction = keyof typeof LOG_TYPE

export async function audit(
  q: Queryable,
  e: {
    action: AuditAction
    actorId: string
    actorUsername?: string | null
    traits?: Record<string, unknown>
    ip?: string | null
    now: Date
  },
): Promise<void> {
  const payload = {
    actor_id: e.actorId,
    actor_username: e.actorUsername ?? '',
    actor_via_sso: false,
    action: e.action,
    log_type: LOG_TYPE[e.action],
    ...(e.traits ? { traits: e.traits } : {}),
  }
  await q.query(
    'INSERT INTO auth.audit_log_entries (instance_id, id, payload, created_at, ip_address) VALUES ($1, $2, $3, $4, $5)',
    [NIL_UUID, randomUUID(), JSON.stringify(payload), e.now, (e.ip ?? '').slice(0, 64)],
  )
}

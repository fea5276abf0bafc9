// Manual identity linking (docs/auth-protocol.md §3.16, GoTrue's linkIdentityToUser): an external identity
// added to the signed-in user (through /user/identities/authorize + /callback, or the
// id_token grant with link_identity), and unlinking one (DELETE /user/identities/:id).
// Runs on the caller's transaction, serialised per identity by the same advisory lock as
// sign-in through an identity.
import type { Queryable } from '../shared/index.js'
import { externalIdentityData, refreshProviders, type ExternalIdentity } from './accounts.js'
import {
  EmailConflictIdentityNotDeletableError,
  IdentityAlreadyLinkedError,
  IdentityNotFoundError,
  EmailExistsError,
  SingleIdentityNotDeletableError,
  EmailNotConfirmedError,
  UserNotFoundError,
} from './errors.js'
import { audit } from './models/audit-log.js'
import { findIdentity, identitiesForUser, insertIdentity } from './models/identities.js'
import { findUserById, isEmailTaken, updateUser } from './models/users.js'
import type { TenantContext, UserWithIdentities } from './types.js'

const LINK_LOCK_NS = 0x6c6b // 'lk'

/** Links `ext` to the user `targetUserId`; 422 identity_already_exists when the identity has an owner. */
export async function linkIdentityToUser(
  ctx: TenantContext,
  q: Queryable,
  targetUserId: string,
  ext: ExternalIdentity,
): Promise<UserWithIdentities> {
  await q.query('SELECT pg_advisory_xact_lock($1, hashtext($2))', [
    LINK_LOCK_NS,
    JSON.stringify([ext.provider, ext.providerId]),
  ])
  const existing = await findIdentity(q, ext.provider, ext.providerId)
  if (existing) throw new IdentityAlreadyLinkedError(existing.user_id !== targetUserId)
  let user = await findUserById(q, targetUserId)
  if (!user) throw new UserNotFoundError('byId')
  const now = ctx.now()
  const email = ext.email ? ext.email.trim().toLowerCase() : ''
  const identityData = externalIdentityData(ext, email)
  const identity = await insertIdentity(q, {
    userId: user.id,
    provider: ext.provider,
    providerId: ext.providerId,
    identityData,
    now,
    lastSignInAt: now,
  })
  await audit(q, {
    action: 'identity_linked',
    actorId: user.id,
    actorUsername: user.email,
    traits: { identity_id: identity.id, provider: ext.provider, provider_id: ext.providerId },
    now,
  })
  if (!user.email && email) {
    // The user (an anonymous one, say) takes the identity's address; only a verified one
    // (GoTrue mails a confirmation for an unverified one; this engine refuses the link).
    if (await isEmailTaken(q, email, user.id)) throw new EmailExistsError('linking')
    if (!ext.emailVerified) {
      throw new EmailNotConfirmedError('provider', ext.provider)
    }
    user = await updateUser(
      q,
      user.id,
      { email, email_confirmed_at: user.email_confirmed_at ?? now, is_anonymous: false },
      now,
    )
  }
  return refreshProviders(ctx, q, user)
}

/** Removes one identity of a user (never the last); the user's email follows the remaining identities. */
export async function unlinkIdentity(
  ctx: TenantContext,
  q: Queryable,
  userId: string,
  identityId: string,
): Promise<void> {
  const identities = await identitiesForUser(q, userId)
  if (identities.length <= 1) throw new SingleIdentityNotDeletableError()
  const target = identities.find((i) => i.id === identityId)
  if (!target) throw new IdentityNotFoundError()
  const user = await findUserById(q, userId)
  if (!user) throw new UserNotFoundError('byId')
  const now = ctx.now()
  await audit(q, {
    action: 'identity_unlinked',
    actorId: user.id,
    actorUsername: user.email,
    traits: { identity_id: target.id, provider: target.provider, provider_id: target.provider_id },
    now,
  })
  await q.query('DELETE FROM auth.identities WHERE id = $1', [target.id])
  let current = user
  if (target.provider === 'phone') {
    current = await updateUser(q, user.id, { phone: null, phone_confirmed_at: null }, now)
  } else {
    // GoTrue's UpdateUserEmailFromIdentities: an address no remaining identity carries is
    // replaced by the first remaining identity's address.
    const rest = identities.filter((i) => i.id !== target.id)
    const primary = (user.email ?? '').toLowerCase()
    if (primary && !rest.some((i) => (i.email ?? '') === primary)) {
      const next = rest.find((i) => i.email)?.email
      if (next) {
        if (await isEmailTaken(q, next, user.id)) throw new EmailConflictIdentityNotDeletableError()
        current = await updateUser(q, user.id, { email: next }, now)
      }
    }
  }
  const app = { ...(current.raw_app_meta_data ?? {}) }
  const remaining = await identitiesForUser(q, user.id)
  const providers = [...new Set(remaining.map((i) => i.provider))]
  app.providers = providers
  if (typeof app.provider !== 'string' || !providers.includes(app.provider)) app.provider = providers[0]
  await updateUser(q, user.id, { raw_app_meta_data: app }, now)
}

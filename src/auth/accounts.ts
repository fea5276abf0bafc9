// Account operations shared by several endpoints: creating a user with its email identity,
// confirming an email, refreshing app_metadata.providers, and the external-identity sign-in
// of docs/auth-protocol.md §5.9 (find by provider + provider id, else link to the user owning the verified
// email, else create). The provider callback and the panel exchange both go
// through signInWithIdentity, so a repeated sign-in always finds the same user.
import { randomUUID } from 'node:crypto'
import { withTransaction, type Queryable } from '../shared/index.js'
import {
  UnexpectedFailureError,
  ProviderEmailNeedsVerificationError,
  SignupDisabledError,
  UserBannedError,
} from './errors.js'
import {
  findIdentitiesByEmails,
  findIdentity,
  identitiesForUser,
  insertIdentity,
  insertIdentityIfAbsent,
  deleteIdentitiesOfUser,
  mergeIdentityData,
  updateIdentity,
} from './models/identities.js'
import { deleteOneTimeTokensOfUser } from './models/one-time-tokens.js'
import { audit } from './models/audit-log.js'
import { hasEmailProof } from './models/email-proofs.js'
import {
  findUserByEmail,
  findUserById,
  insertUser,
  isEmailTaken,
  isUserBanned,
  lockUserById,
  providersOf,
  toUserJson,
  updateUser,
} from './models/users.js'
import { beforeUserCreatedHook } from './auth-hooks.js'
import { startSession } from './tokens.js'
import type { AccessTokenResponse, IdentityRow, TenantContext, UserRow, UserWithIdentities } from './types.js'

// Namespace of our transaction advisory locks (two-int form): "an identity or email is being linked".
const LINK_LOCK_NS = 0x6c696e6b // 'link'

/** The identity data of an email identity (docs/auth-protocol.md §2.1): GoTrue's keys win over signup data. */
function emailIdentityData(
  userId: string,
  email: string,
  data: Record<string, unknown> | undefined,
  verified: boolean,
): Record<string, unknown> {
  return { ...(data ?? {}), sub: userId, email, email_verified: verified, phone_verified: false }
}

/** Inserts the user's `email` identity for the address (its provider_id is the user id). */
export function insertEmailIdentity(q: Queryable, userId: string, email: string, verified: boolean, now: Date) {
  const identityData = emailIdentityData(userId, email, undefined, verified)
  return insertIdentity(q, { userId, provider: 'email', providerId: userId, identityData, now })
}

interface NewEmailUser {
  email: string
  encryptedPassword: string | null
  data?: Record<string, unknown>
  confirmed: boolean
  invited?: boolean
  /**
   * 'identity' (default): user_metadata is the email identity's data, as GoTrue's /signup leaves it
   * (RemoveUnconfirmedIdentities). 'data': user_metadata is `data` alone and the identity holds
   * GoTrue's claims only, as its admin /invite and /generate_link create users (internal/api/mail.go).
   */
  metadata?: 'identity' | 'data'
}

/** Inserts a user with an `email` identity whose provider_id is the user id. */
export async function createEmailUser(ctx: TenantContext, q: Queryable, n: NewEmailUser): Promise<UserWithIdentities> {
  const now = ctx.now()
  const id = randomUUID()
  const fromData = n.metadata === 'data'
  const identityData = emailIdentityData(id, n.email, fromData ? undefined : n.data, n.confirmed)
  const user = await insertUser(q, {
    id,
    aud: ctx.tenant.jwt.aud,
    role: 'authenticated',
    email: n.email,
    encryptedPassword: n.encryptedPassword,
    appMetadata: { provider: 'email', providers: ['email'] },
    userMetadata: fromData ? { ...(n.data ?? {}) } : identityData,
    emailConfirmedAt: n.confirmed ? now : null,
    invitedAt: n.invited ? now : null,
    now,
  })
  const identity = await insertIdentity(q, { userId: id, provider: 'email', providerId: id, identityData, now })
  await beforeUserCreatedHook({ ctx, q }, toUserJson({ user, identities: [identity] }))
  return { user, identities: [identity] }
}

/** Marks the email confirmed: timestamp, email_verified in metadata and identity, tokens cleared. */
export async function confirmEmail(ctx: TenantContext, q: Queryable, user: UserRow): Promise<UserWithIdentities> {
  const now = ctx.now()
  const meta = { ...(user.raw_user_meta_data ?? {}), email_verified: true }
  const updated = await updateUser(
    q,
    user.id,
    {
      email_confirmed_at: user.email_confirmed_at ?? now,
      raw_user_meta_data: meta,
      confirmation_token: '',
      recovery_token: '',
    },
    now,
  )
  await mergeIdentityData(q, user.id, 'email', { email_verified: true }, now)
  await deleteOneTimeTokensOfUser(q, user.id)
  return { user: updated, identities: await identitiesForUser(q, user.id) }
}

/** Recomputes app_metadata.provider/providers from the user's identities (docs/auth-protocol.md §2.1). */
export async function refreshProviders(ctx: TenantContext, q: Queryable, user: UserRow): Promise<UserWithIdentities> {
  const identities = await identitiesForUser(q, user.id)
  if (user.is_anonymous && identities.length === 0) return { user, identities }
  const providers = providersOf(identities)
  const app = { ...(user.raw_app_meta_data ?? {}) }
  if (providers.length) {
    app.provider = typeof app.provider === 'string' && providers.includes(app.provider) ? app.provider : providers[0]
    app.providers = providers
  }
  const same = JSON.stringify(app) === JSON.stringify(user.raw_app_meta_data ?? {})
  const updated = same ? user : await updateUser(q, user.id, { raw_app_meta_data: app }, ctx.now())
  return { user: updated, identities }
}

/**
 * Runs `fn` in one transaction on the locked user of `address` (this database's audience);
 * nothing when there is none (also when it was deleted meanwhile).
 */
export async function withUserOfEmail(
  ctx: TenantContext,
  address: string,
  fn: (q: Queryable, user: UserRow) => Promise<void>,
): Promise<void> {
  const found = await findUserByEmail(ctx.db, address, ctx.tenant.jwt.aud)
  if (!found) return
  await withTransaction(ctx.db, async (q) => {
    const user = await lockUserById(q, found.id)
    if (user) await fn(q, user)
  })
}

// ----- external identities (docs/auth-protocol.md §5.9) ------------------------------------------------------

export interface ExternalIdentity {
  /** `github`, `google`, `oidc`, `panel`, `custom:<id>` ... */
  provider: string
  /** The provider's subject for this person. */
  providerId: string
  email?: string | null
  /** Whether the provider vouches for the email. */
  emailVerified: boolean
  /** Provider claims (name, avatar_url, ...), stored as identity_data. */
  identityData?: Record<string, unknown>
  /**
   * Link to an existing user of the email only when that user proved the address by a mail
   * round trip (a verified token mailed to it); otherwise the identity gets a user of its
   * own, linked by the identity alone, without the address someone else holds (docs/edge.md).
   * The panel exchange sets it: auto-confirmed sign-ups prove nothing, and a stranger's
   * sign-up with a member's address neither blocks the member nor is handed to them.
   */
  requireEmailProof?: boolean
}

/** What happened: found by identity, linked to an existing user, or a new user. */
type IdentityDecision = 'account_exists' | 'link_account' | 'create_account'

/**
 * Signs a person in through an external identity (AMR `oauth`), in one transaction:
 * serialised per (provider, provider id) and per email by advisory locks, so concurrent calls
 * for one person end with one user. Returns the new session.
 */
export async function signInWithIdentity(
  ctx: TenantContext,
  ext: ExternalIdentity,
  client: { userAgent?: string | null; ip?: string | null } = {},
): Promise<AccessTokenResponse> {
  return withTransaction(ctx.db, async (q) => {
    const { user, decision } = await resolveIdentityUser(ctx, q, ext)
    const auditAction = decision === 'create_account' ? null : 'login'
    return startSession(ctx, q, user, { method: 'oauth', ...client, auditAction })
  })
}

/**
 * The user of an external identity (found, linked by verified email, or created), on the
 * caller's transaction and without a session: signInWithIdentity and the PKCE provider
 * callback (whose session starts at the code exchange) share it.
 */
export async function resolveIdentityUser(
  ctx: TenantContext,
  q: Queryable,
  ext: ExternalIdentity,
): Promise<{ user: UserWithIdentities; decision: IdentityDecision }> {
  let email = ext.email ? ext.email.trim().toLowerCase() : ''
  await q.query('SELECT pg_advisory_xact_lock($1, hashtext($2))', [
    LINK_LOCK_NS,
    JSON.stringify(['identity', ext.provider, ext.providerId]),
  ])
  if (email)
    await q.query('SELECT pg_advisory_xact_lock($1, hashtext($2))', [LINK_LOCK_NS, JSON.stringify(['email', email])])
  const now = ctx.now()
  const existing = await findIdentity(q, ext.provider, ext.providerId)
  let owner: UserRow | null = null
  if (existing === null && ext.emailVerified && email) {
    owner = await linkingCandidate(ctx, q, email)
    // Someone else holds the address and never proved it: the identity gets a user of its
    // own, without the address (neither handed the stranger's account nor refused).
    if (owner !== null && ext.requireEmailProof === true && !(await hasEmailProof(q, owner.id, email))) {
      owner = null
      email = ''
    }
  }
  const identityData = externalIdentityData(ext, email)

  let decision: IdentityDecision
  let user: UserRow
  if (existing) {
    // AccountExists: refresh the identity, merge its data into user_metadata.
    decision = 'account_exists'
    user = await refreshIdentityUser(q, existing, identityData, now)
  } else if (owner) {
    decision = 'link_account'
    user = await linkIdentityToOwner(q, owner, ext, identityData, now)
  } else {
    if (!ctx.tenant.auth.signup_enabled) throw new SignupDisabledError()
    decision = 'create_account'
    user = await createIdentityUser(ctx, q, ext, email, identityData, now)
  }
  if (isUserBanned(user, now)) throw new UserBannedError('bearer')
  return { user: await refreshProviders(ctx, q, user), decision }
}

async function refreshIdentityUser(
  q: Queryable,
  existing: IdentityRow,
  identityData: Record<string, unknown>,
  now: Date,
): Promise<UserRow> {
  await updateIdentity(q, existing.id, { identityData, lastSignInAt: now }, now)
  const u = await findUserById(q, existing.user_id)
  if (!u) throw new Error('identity without user')
  return updateUser(q, u.id, { raw_user_meta_data: { ...(u.raw_user_meta_data ?? {}), ...identityData } }, now)
}

/** LinkAccount: the identity added to the user owning the verified email. */
async function linkIdentityToOwner(
  q: Queryable,
  owner: UserRow,
  ext: ExternalIdentity,
  identityData: Record<string, unknown>,
  now: Date,
): Promise<UserRow> {
  const mine = await insertIdentityIfAbsent(q, {
    userId: owner.id,
    provider: ext.provider,
    providerId: ext.providerId,
    identityData,
    now,
    lastSignInAt: now,
  })
  let u = owner
  if (!u.email_confirmed_at) {
    // Pre-account-takeover defence (§5.9 step 4): whoever registered this address
    // without confirming it loses the password and other identities.
    await deleteIdentitiesOfUser(q, u.id, mine.id)
    u = await updateUser(
      q,
      u.id,
      { encrypted_password: '', raw_user_meta_data: identityData, email_confirmed_at: now },
      now,
    )
  } else {
    u = await updateUser(q, u.id, { raw_user_meta_data: { ...(u.raw_user_meta_data ?? {}), ...identityData } }, now)
  }
  await audit(q, {
    action: 'identity_linked',
    actorId: u.id,
    actorUsername: u.email,
    traits: { provider: ext.provider },
    now,
  })
  return u
}

/** CreateAccount: a new user of the identity, with the address when nobody holds it. */
async function createIdentityUser(
  ctx: TenantContext,
  q: Queryable,
  ext: ExternalIdentity,
  email: string,
  identityData: Record<string, unknown>,
  now: Date,
): Promise<UserRow> {
  const id = randomUUID()
  const emailFree = email ? !(await isEmailTaken(q, email)) : false
  const confirmed = emailFree && (ext.emailVerified || !ctx.tenant.auth.mail_confirmation)
  if (emailFree && !confirmed) throw new ProviderEmailNeedsVerificationError()
  const user = await insertUser(q, {
    id,
    aud: ctx.tenant.jwt.aud,
    role: 'authenticated',
    email: emailFree ? email : null,
    encryptedPassword: '',
    appMetadata: { provider: ext.provider, providers: [ext.provider] },
    userMetadata: identityData,
    emailConfirmedAt: confirmed ? now : null,
    now,
  })
  const identity = await insertIdentity(q, {
    userId: id,
    provider: ext.provider,
    providerId: ext.providerId,
    identityData,
    now,
    lastSignInAt: now,
  })
  await beforeUserCreatedHook({ ctx, q }, toUserJson({ user, identities: [identity] }))
  await audit(q, {
    action: 'user_signedup',
    actorId: id,
    actorUsername: user.email,
    traits: { provider: ext.provider },
    now,
  })
  return user
}

/** The one user a verified email links to: owner of an identity or of the email itself. */
async function linkingCandidate(ctx: TenantContext, q: Queryable, email: string): Promise<UserRow | null> {
  const identities: IdentityRow[] = await findIdentitiesByEmails(q, [email])
  const ids = new Set(identities.map((i) => i.user_id))
  const byEmail = await findUserByEmail(q, email, ctx.tenant.jwt.aud)
  if (byEmail) ids.add(byEmail.id)
  if (ids.size === 0) return null
  if (ids.size > 1) throw new UnexpectedFailureError('multipleAccounts')
  const [only] = [...ids]
  return byEmail && byEmail.id === only ? byEmail : findUserById(q, only!)
}

/** An external identity's identity_data as GoTrue stores it (the provider's claims, then `sub`, the address and flags). */
export function externalIdentityData(ext: ExternalIdentity, email: string): Record<string, unknown> {
  return {
    ...(ext.identityData ?? {}),
    sub: ext.providerId,
    ...(email ? { email } : {}),
    email_verified: ext.emailVerified,
    phone_verified: false,
    provider_id: ext.providerId,
  }
}

// POST /signup (docs/auth-protocol.md §3.3): email + password sign-up (confirmation mail, or a session with
// autoconfirm), and anonymous sign-in when neither email nor phone is given. Repeated
// sign-ups of a confirmed address answer an obfuscated user (no enumeration) unless
// autoconfirm is on, then 422 user_already_exists.
import { randomUUID } from 'node:crypto'
import type { FastifyRequest } from 'fastify'
import { withTransaction } from '../../shared/index.js'
import { confirmEmail, createEmailUser } from '../accounts.js'
import { sendEmailToken } from '../confirmations.js'
import { assertPasswordAcceptable, hashPassword, verifyPassword } from '../crypto.js'
import {
  PhoneProviderDisabledError,
  SignupDisabledError,
  UserAlreadyExistsError,
  ValidationFailedError,
  statementRefused,
  UnexpectedFailureError,
} from '../errors.js'
import { contextOf } from '../request-state.js'
import { bodyOf, clientMeta, normaliseEmail, optObject, optString, redirectUrlOf } from '../http.js'
import { audit } from '../models/audit-log.js'
import { identitiesForUser } from '../models/identities.js'
import { findUserByEmail, insertUser, toUserJson } from '../models/users.js'
import { beforeUserCreatedHook } from '../auth-hooks.js'
import { pkceParamsOf, type PkceParams } from '../pkce.js'
import { startSession } from '../tokens.js'
import type { TenantContext, UserRow } from '../types.js'

async function anonymousSignIn(ctx: TenantContext, req: FastifyRequest, data: Record<string, unknown> | undefined) {
  if (!ctx.tenant.auth.signup_enabled) throw new SignupDisabledError()
  return withTransaction(ctx.db, async (q) => {
    const now = ctx.now()
    const user = await insertUser(q, {
      id: randomUUID(),
      aud: ctx.tenant.jwt.aud,
      role: 'authenticated',
      appMetadata: {},
      userMetadata: data ?? {},
      isAnonymous: true,
      encryptedPassword: null,
      now,
    })
    await beforeUserCreatedHook({ ctx, q, ip: clientMeta(req).ip }, toUserJson({ user, identities: [] }))
    return startSession(
      ctx,
      q,
      { user, identities: [] },
      { method: 'anonymous', ...clientMeta(req), auditAction: 'user_signedup' },
    )
  })
}

/**
 * The fake user of a repeated sign-up (docs/auth-protocol.md §3.3), as GoTrue's sanitizeUser shapes it: a
 * random id, an empty role, confirmation_sent_at now, no confirmation times, no identities.
 * Nothing of the real record (its other timestamps, metadata, factors) is carried over.
 */
function obfuscatedUser(
  ctx: TenantContext,
  email: string,
  data: Record<string, unknown> | undefined,
): Record<string, unknown> {
  const now = ctx.now().toISOString()
  return {
    id: randomUUID(),
    aud: ctx.tenant.jwt.aud,
    role: '',
    email,
    phone: '',
    confirmation_sent_at: now,
    app_metadata: { provider: 'email', providers: ['email'] },
    user_metadata: data ?? {},
    identities: [],
    created_at: now,
    updated_at: now,
    is_anonymous: false,
  }
}

/**
 * A sign-up of an address already registered but unconfirmed: nothing stored changes. With
 * autoconfirm (the tenant switched it on since), the right password confirms and signs in;
 * otherwise a new confirmation mail.
 */
async function signUpUnconfirmed(
  ctx: TenantContext,
  req: FastifyRequest,
  existing: UserRow,
  r: { password: string; address: string; redirectTo: string; pkce: PkceParams | null },
): Promise<unknown> {
  const { address, redirectTo, pkce } = r
  if (!ctx.tenant.auth.mail_confirmation) {
    if (!(await verifyPassword(r.password, existing.encrypted_password, ctx.config.auth.bcrypt_cost)))
      throw new UserAlreadyExistsError()
    return withTransaction(ctx.db, async (q) => {
      const confirmed = await confirmEmail(ctx, q, existing)
      return startSession(ctx, q, confirmed, { method: 'password', ...clientMeta(req) })
    })
  }
  return withTransaction(ctx.db, async (q) => {
    const sent = await sendEmailToken(ctx, q, existing, 'confirmation', { address, redirectTo, pkce })
    return toUserJson({ user: sent.user, identities: await identitiesForUser(q, existing.id) })
  })
}

export async function postSignup(req: FastifyRequest): Promise<unknown> {
  const ctx = contextOf(req)
  const settings = ctx.tenant.auth
  const b = bodyOf(req)
  const email = optString(b, 'email')
  const phone = optString(b, 'phone')
  const password = optString(b, 'password')
  const data = optObject(b, 'data')
  if (!email && !phone) return anonymousSignIn(ctx, req, data)

  if (!settings.signup_enabled) throw new SignupDisabledError()
  if (!password) throw new ValidationFailedError('request', 'Signup requires a valid password')
  assertPasswordAcceptable(password, settings)
  if (email && phone)
    throw new ValidationFailedError('request', 'Only an email address or phone number should be provided on signup.')
  if (phone) throw new PhoneProviderDisabledError('request', 'Phone signups are disabled')
  const pkce = pkceParamsOf(ctx, b.code_challenge, b.code_challenge_method)
  const address = normaliseEmail(email!)
  const redirectTo = redirectUrlOf(req, settings)
  const autoconfirm = !settings.mail_confirmation
  const cost = ctx.config.auth.bcrypt_cost

  const existing = await findUserByEmail(ctx.db, address, ctx.tenant.jwt.aud)
  if (existing?.email_confirmed_at) {
    if (autoconfirm) throw new UserAlreadyExistsError()
    return obfuscatedUser(ctx, address, data)
  }
  if (existing) return signUpUnconfirmed(ctx, req, existing, { password, address, redirectTo, pkce })

  const hash = await hashPassword(password, cost)
  try {
    return await withTransaction(ctx.db, async (q) => {
      const created = await createEmailUser(ctx, q, {
        email: address,
        encryptedPassword: hash,
        data,
        confirmed: autoconfirm,
      })
      await audit(q, {
        action: 'user_signedup',
        actorId: created.user.id,
        actorUsername: address,
        traits: { provider: 'email' },
        now: ctx.now(),
      })
      if (autoconfirm)
        return startSession(ctx, q, created, { method: 'password', ...clientMeta(req), auditAction: null })
      const sent = await sendEmailToken(ctx, q, created.user, 'confirmation', { address, redirectTo, pkce })
      return toUserJson({ user: sent.user, identities: created.identities })
    })
  } catch (err) {
    return signUpFailed(ctx, err, { address, data, autoconfirm })
  }
}

/** A sign-up whose transaction failed: a concurrent sign-up of the address, or a statement refused. */
function signUpFailed(
  ctx: TenantContext,
  err: unknown,
  o: { address: string; data: Record<string, unknown> | undefined; autoconfirm: boolean },
) {
  // A concurrent sign-up of the same address won the unique index.
  if ((err as { code?: string }).code === '23505') {
    if (o.autoconfirm) throw new UserAlreadyExistsError()
    return obfuscatedUser(ctx, o.address, o.data)
  }
  // A trigger on auth.users that raised (docs/supabase.md): GoTrue's answer, the request rolled back.
  if (statementRefused(err)) throw new UnexpectedFailureError('saveUser', { internal: err })
  throw err
}

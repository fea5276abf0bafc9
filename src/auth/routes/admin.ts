// The admin API of docs/auth-protocol.md §3.20 (bearer JWT with role service_role; the gateway mints it for
// the secret key): /admin/users list (page/per_page, X-Total-Count and Link), create, get,
// update, delete; /admin/generate_link (tokens made, no mail sent); /invite (with mail).
import { randomUUID } from 'node:crypto'
import type { FastifyReply, FastifyRequest } from 'fastify'
import { withTransaction, type Queryable } from '../../shared/index.js'
import { confirmEmail, createEmailUser, insertEmailIdentity, refreshProviders } from '../accounts.js'
import { issueEmailToken, sendEmailToken, type EmailTokenKind } from '../confirmations.js'
import { assertPasswordAcceptable, checkPasswordLength, hashOtp, hashPassword, randomPasswordHash } from '../crypto.js'
import { EmailExistsError, PhoneExistsError, UserNotFoundError, ValidationFailedError } from '../errors.js'
import { contextOf } from '../request-state.js'
import { UUID } from '../bearer.js'
import {
  bodyOf,
  normaliseEmail,
  normalisePhone,
  optBool,
  optObject,
  optString,
  queryParam,
  redirectUrlOf,
  type Body,
} from '../http.js'
import { verifyLink, type VerifyLinkType } from '../mail/index.js'
import { audit } from '../models/audit-log.js'
import { deleteIdentitiesOfUser, identitiesForUser, insertIdentity, updateIdentity } from '../models/identities.js'
import { deleteOneTimeTokensOfUser } from '../models/one-time-tokens.js'
import { deleteSessionsOfUser } from '../models/sessions.js'
import {
  deleteUser,
  findUserByEmail,
  findUserByPhone,
  isEmailTaken,
  listUsers,
  loadUserWithIdentities,
  lockUserById,
  insertUser,
  toUserJson,
  updateUser,
  type UserColumn,
} from '../models/users.js'
import { uuidParam } from './checks.js'
import { mergeMetadata } from './user.js'
import type { TenantContext, UserJson, UserRow } from '../types.js'

const GO_UNITS: Record<string, number> = {
  ns: 1e-6,
  us: 1e-3,
  µs: 1e-3,
  μs: 1e-3,
  ms: 1,
  s: 1000,
  m: 60_000,
  h: 3_600_000,
}

/**
 * Go's time.ParseDuration ("24h", "1h30m", "-1.5h", "0") in milliseconds, or its error text
 * (`time: unknown unit "d" in duration "1d"`), which GoTrue puts into its ban_duration answer.
 */
function parseGoDuration(s: string): { ms: number } | { error: string } {
  const quoted = JSON.stringify(s)
  const invalid = { error: `time: invalid duration ${quoted}` }
  let rest = s
  let sign = 1
  if (rest.startsWith('-') || rest.startsWith('+')) {
    sign = rest[0] === '-' ? -1 : 1
    rest = rest.slice(1)
  }
  if (rest === '0') return { ms: 0 }
  if (rest === '') return invalid
  let total = 0
  while (rest !== '') {
    const num = /^(\d*)(?:\.(\d*))?/.exec(rest)!
    if (num[0] === '' || (num[1] === '' && (num[2] ?? '') === '')) return invalid
    rest = rest.slice(num[0].length)
    const unit = /^[^\d.]*/.exec(rest)![0]
    if (unit === '') return { error: `time: missing unit in duration ${quoted}` }
    const factor = Object.hasOwn(GO_UNITS, unit) ? GO_UNITS[unit]! : undefined
    if (factor === undefined) return { error: `time: unknown unit ${JSON.stringify(unit)} in duration ${quoted}` }
    rest = rest.slice(unit.length)
    total += Number(`${num[1] || '0'}.${num[2] || '0'}`) * factor
  }
  return { ms: sign * total }
}

function banUntil(ctx: TenantContext, banDuration: string | undefined): Date | null | undefined {
  if (banDuration === undefined || banDuration === '') return undefined
  if (banDuration === 'none') return null
  const parsed = parseGoDuration(banDuration)
  if ('error' in parsed) throw new ValidationFailedError('request', `invalid format for ban duration: ${parsed.error}`)
  return new Date(ctx.now().getTime() + parsed.ms)
}

async function passwordHashFrom(ctx: TenantContext, b: Body, checkStrength: boolean): Promise<string | undefined> {
  const password = optString(b, 'password')
  const passwordHash = optString(b, 'password_hash')
  if (password !== undefined && passwordHash !== undefined)
    throw new ValidationFailedError('request', 'Only a password or a password hash should be provided')
  if (passwordHash !== undefined) {
    if (!/^\$2[abxy]\$\d\d\$[./A-Za-z0-9]{53}$/.test(passwordHash))
      throw new ValidationFailedError('request', 'Invalid password hash format: only bcrypt hashes are supported')
    return passwordHash
  }
  if (password === undefined) return undefined
  if (checkStrength) assertPasswordAcceptable(password, ctx.tenant.auth)
  else checkPasswordLength(password)
  return hashPassword(password, ctx.config.auth.bcrypt_cost)
}

async function adminCreateUser(ctx: TenantContext, b: Body) {
  const rawEmail = optString(b, 'email')
  const rawPhone = optString(b, 'phone')
  if (!rawEmail && !rawPhone)
    throw new ValidationFailedError('request', 'Cannot create a user without either an email or phone')
  const email = rawEmail ? normaliseEmail(rawEmail) : undefined
  const phone = rawPhone ? normalisePhone(rawPhone) : undefined
  const id = optString(b, 'id')
  const hash = (await passwordHashFrom(ctx, b, false)) ?? (await randomPasswordHash(ctx.config.auth.bcrypt_cost))
  // GoTrue checks a chosen id after the addresses and the password, with these texts.
  if (id !== undefined && id !== '') {
    if (!UUID.test(id)) throw new ValidationFailedError('request', 'ID must conform to the uuid v4 format')
    if (/^0{8}-0{4}-0{4}-0{4}-0{12}$/.test(id)) throw new ValidationFailedError('request', 'ID cannot be a nil uuid')
  }
  const emailConfirm = optBool(b, 'email_confirm') ?? false
  const phoneConfirm = optBool(b, 'phone_confirm') ?? false
  const userMeta = optObject(b, 'user_metadata') ?? {}
  const appMeta = optObject(b, 'app_metadata') ?? {}
  const banned = banUntil(ctx, optString(b, 'ban_duration'))
  const aud = optString(b, 'aud') || ctx.tenant.jwt.aud
  const role = optString(b, 'role') || 'authenticated'
  try {
    return await withTransaction(ctx.db, async (q) => {
      if (email && (await isEmailTaken(q, email))) throw new EmailExistsError('signUp')
      if (phone && (await findUserByPhone(q, phone, aud))) throw new PhoneExistsError()
      const now = ctx.now()
      const userId = id ? id.toLowerCase() : randomUUID()
      const providers = [...(email ? ['email'] : []), ...(phone ? ['phone'] : [])]
      const user = await insertUser(q, {
        id: userId,
        aud,
        role,
        email: email ?? null,
        phone: phone ?? null,
        encryptedPassword: hash,
        appMetadata: { provider: providers[0], providers, ...appMeta },
        userMetadata: userMeta,
        emailConfirmedAt: email && emailConfirm ? now : null,
        phoneConfirmedAt: phone && phoneConfirm ? now : null,
        bannedUntil: banned ?? null,
        now,
      })
      if (email) await insertEmailIdentity(q, userId, email, emailConfirm, now)
      if (phone) await insertPhoneIdentity(q, userId, phone, phoneConfirm, now)
      await audit(q, {
        action: 'user_signedup',
        actorId: userId,
        actorUsername: email ?? phone,
        traits: { provider: providers[0], via: 'admin' },
        now,
      })
      return toUserJson({ user, identities: await identitiesForUser(q, userId) })
    })
  } catch (err) {
    throw uniqueViolation(err) ?? err
  }
}

/** A unique violation while creating a user: the address or the id someone else holds. */
function uniqueViolation(err: unknown): Error | undefined {
  if ((err as { code?: string }).code !== '23505') return undefined
  const c = (err as { constraint?: string }).constraint ?? ''
  if (c.includes('phone')) return new PhoneExistsError()
  if (c.includes('pkey')) return new ValidationFailedError('unprocessable', 'A user with this id already exists')
  return new EmailExistsError('signUp')
}

function insertPhoneIdentity(q: Queryable, userId: string, phone: string, confirmed: boolean, now: Date) {
  const identityData = { sub: userId, phone, email_verified: false, phone_verified: confirmed }
  return insertIdentity(q, { userId, provider: 'phone', providerId: userId, identityData, now })
}

async function adminUpdateUser(ctx: TenantContext, id: string, b: Body) {
  const rawEmail = optString(b, 'email')
  const rawPhone = optString(b, 'phone')
  const email = rawEmail ? normaliseEmail(rawEmail) : undefined
  const phone = rawPhone ? normalisePhone(rawPhone) : undefined
  const hash = await passwordHashFrom(ctx, b, true)
  const emailConfirm = optBool(b, 'email_confirm')
  const phoneConfirm = optBool(b, 'phone_confirm')
  const userMeta = optObject(b, 'user_metadata')
  const appMeta = optObject(b, 'app_metadata')
  const banned = banUntil(ctx, optString(b, 'ban_duration'))
  const role = optString(b, 'role')
  return withTransaction(ctx.db, async (q) => {
    let user = await lockUserById(q, id)
    if (!user) throw new UserNotFoundError('byId')
    const now = ctx.now()
    const fields: Partial<Record<UserColumn, unknown>> = {}
    if (role) fields.role = role
    if (userMeta) fields.raw_user_meta_data = mergeMetadata(user.raw_user_meta_data, userMeta)
    if (appMeta) fields.raw_app_meta_data = mergeMetadata(user.raw_app_meta_data, appMeta)
    if (banned !== undefined) fields.banned_until = banned
    if (hash) fields.encrypted_password = hash
    if (phone && phone !== user.phone) {
      if (await findUserByPhone(q, phone, user.aud ?? ctx.tenant.jwt.aud)) throw new PhoneExistsError()
      fields.phone = phone
    }
    if (phoneConfirm) fields.phone_confirmed_at = user.phone_confirmed_at ?? now
    if (email && email !== (user.email ?? '')) {
      if (await isEmailTaken(q, email, user.id)) throw new EmailExistsError('signUp')
      fields.email = email
    }
    if (Object.keys(fields).length) user = await updateUser(q, user.id, fields, now)
    const identities = await identitiesForUser(q, user.id)
    if (fields.email) {
      const ei = identities.find((i) => i.provider === 'email')
      if (ei) await updateIdentity(q, ei.id, { identityData: { ...ei.identity_data, email } }, now)
      else await insertEmailIdentity(q, user.id, email!, !!user.email_confirmed_at, now)
    }
    if (fields.phone && !identities.some((i) => i.provider === 'phone'))
      await insertPhoneIdentity(q, user.id, phone!, !!phoneConfirm, now)
    if (emailConfirm && user.email) user = (await confirmEmail(ctx, q, user)).user
    if (hash || banned) await deleteSessionsOfUser(q, user.id)
    const refreshed = await refreshProviders(ctx, q, user)
    await audit(q, {
      action: 'user_modified',
      actorId: user.id,
      actorUsername: user.email,
      traits: { via: 'admin' },
      now,
    })
    return toUserJson(refreshed)
  })
}

async function adminDeleteUser(ctx: TenantContext, id: string, soft: boolean) {
  await withTransaction(ctx.db, async (q) => {
    const user = await lockUserById(q, id)
    if (!user) throw new UserNotFoundError('byId')
    const now = ctx.now()
    if (soft) {
      // GoTrue's soft delete: identifying data obfuscated, sessions gone, row kept.
      await updateUser(
        q,
        id,
        {
          email: null,
          phone: null,
          encrypted_password: '',
          raw_user_meta_data: {},
          raw_app_meta_data: {},
          email_change: '',
          phone_change: '',
          confirmation_token: '',
          recovery_token: '',
          deleted_at: now,
        },
        now,
      )
      await deleteIdentitiesOfUser(q, id)
      await deleteOneTimeTokensOfUser(q, id)
      await deleteSessionsOfUser(q, id)
    } else {
      await deleteUser(q, id)
    }
    await audit(q, { action: 'user_deleted', actorId: id, actorUsername: user.email, traits: { soft }, now })
  })
  return {}
}

// ----- generate_link --------------------------------------------------------------------------

const LINK_TYPES = ['signup', 'invite', 'magiclink', 'recovery', 'email_change_current', 'email_change_new'] as const
type LinkType = (typeof LINK_TYPES)[number]

interface LinkRequest {
  type: LinkType
  email: string
  data: Record<string, unknown> | undefined
  newEmailRaw: string
  redirectTo: string
  /** The new user's password hash of a signup link (bcrypt before the transaction). */
  passwordHash: string | undefined
}

/** The body read in GoTrue's order: the address, the user, then the type. */
async function linkRequestOf(ctx: TenantContext, req: FastifyRequest, b: Body): Promise<LinkRequest> {
  const requested = optString(b, 'type') ?? ''
  const email = normaliseEmail(optString(b, 'email') ?? '')
  const data = optObject(b, 'data')
  const newEmailRaw = optString(b, 'new_email') ?? ''
  const password = optString(b, 'password') ?? ''
  const redirectTo = redirectUrlOf(req, ctx.tenant.auth, optString(b, 'redirect_to'))
  const known = await findUserByEmail(ctx.db, email, ctx.tenant.jwt.aud)
  if (!known && ['recovery', 'email_change_current', 'email_change_new'].includes(requested))
    throw new UserNotFoundError('byEmail')
  if (!(LINK_TYPES as readonly string[]).includes(requested))
    throw new ValidationFailedError('request', `Invalid email action link type requested: ${requested}`)
  const type = requested as LinkType
  let passwordHash: string | undefined
  if (type === 'signup' && !known) {
    if (password === '') throw new ValidationFailedError('request', 'Signup requires a valid password')
    assertPasswordAcceptable(password, ctx.tenant.auth)
    passwordHash = await hashPassword(password, ctx.config.auth.bcrypt_cost)
  }
  return { type, email, data, newEmailRaw, redirectTo, passwordHash }
}

/** The user a link is for, the token it carries, the verify type and the address it goes to. */
interface LinkTarget {
  user: UserRow
  tokenKind: EmailTokenKind
  verificationType: VerifyLinkType | LinkType
  address: string
  extra: Partial<Record<UserColumn, unknown>>
}

/** A user an admin's link or invite creates: unconfirmed, its user_metadata the request's `data` alone. */
async function createAdminUser(
  ctx: TenantContext,
  q: Queryable,
  u: { email: string; data: Record<string, unknown> | undefined; encryptedPassword: string | null; invited: boolean },
): Promise<UserRow> {
  return (await createEmailUser(ctx, q, { ...u, confirmed: false, metadata: 'data' })).user
}

async function signupOrInviteTarget(
  ctx: TenantContext,
  q: Queryable,
  r: LinkRequest,
  found: UserRow | null,
): Promise<LinkTarget> {
  const { type, email, data } = r
  let user = found
  const extra: Partial<Record<UserColumn, unknown>> = {}
  if (user?.email_confirmed_at) throw new EmailExistsError('signUp')
  if (user && type === 'signup' && data) {
    user = await updateUser(q, user.id, { raw_user_meta_data: mergeMetadata(user.raw_user_meta_data, data) }, ctx.now())
  }
  if (!user) {
    const hash = type === 'signup' ? (r.passwordHash ?? (await randomPasswordHash(ctx.config.auth.bcrypt_cost))) : null
    user = await createAdminUser(ctx, q, { email, data, encryptedPassword: hash, invited: type === 'invite' })
  } else if (type === 'invite') {
    extra.invited_at = ctx.now()
  }
  return {
    user,
    tokenKind: type === 'signup' ? 'confirmation' : 'invite',
    verificationType: type,
    address: email,
    extra,
  }
}

async function linkTarget(ctx: TenantContext, q: Queryable, r: LinkRequest): Promise<LinkTarget> {
  const { type, email } = r
  const user = await findUserByEmail(q, email, ctx.tenant.jwt.aud)
  switch (type) {
    case 'signup':
    case 'invite':
      return signupOrInviteTarget(ctx, q, r, user)
    case 'magiclink': {
      if (user) return { user, tokenKind: 'magiclink', verificationType: type, address: email, extra: {} }
      const hash = await randomPasswordHash(ctx.config.auth.bcrypt_cost)
      const created = await createAdminUser(ctx, q, { email, data: r.data, encryptedPassword: hash, invited: false })
      return { user: created, tokenKind: 'confirmation', verificationType: 'signup', address: email, extra: {} }
    }
    case 'recovery':
      if (!user) throw new UserNotFoundError('byId')
      return { user, tokenKind: 'recovery', verificationType: type, address: email, extra: {} }
    default: {
      if (!user) throw new UserNotFoundError('byId')
      const newEmail = normaliseEmail(r.newEmailRaw)
      if (await isEmailTaken(q, newEmail, user.id)) throw new EmailExistsError('signUp')
      const extra = { email_change: newEmail, email_change_confirm_status: 0 }
      return {
        user,
        tokenKind: type,
        verificationType: type,
        address: type === 'email_change_new' ? newEmail : email,
        extra,
      }
    }
  }
}

async function generateLink(ctx: TenantContext, req: FastifyRequest, b: Body) {
  const r = await linkRequestOf(ctx, req, b)
  return withTransaction(ctx.db, async (q: Queryable) => {
    const { user, tokenKind, verificationType, address, extra } = await linkTarget(ctx, q, r)
    const issued = await issueEmailToken(ctx, q, user, tokenKind, { address, extra })
    const linkType: VerifyLinkType =
      tokenKind === 'email_change_new' || tokenKind === 'email_change_current'
        ? 'email_change'
        : (verificationType as VerifyLinkType)
    const full = await loadUserWithIdentities(q, user.id)
    return {
      ...toUserJson(full!),
      action_link: verifyLink(ctx.externalUrl, issued.hash, linkType, r.redirectTo),
      email_otp: issued.otp,
      // The hash of the address the token was issued for (GoTrue hashes the request's
      // address even for email_change_new, a hash no verify accepts; this one verifies).
      hashed_token: hashOtp(address, issued.otp),
      verification_type: verificationType,
      redirect_to: r.redirectTo,
    }
  })
}

/** Go's strconv.ParseUint(s, 10, 64) as GoTrue's paginate uses it: the value or its error text. */
function parseUint(s: string): number {
  const problem = !/^\d+$/.test(s) ? 'invalid syntax' : BigInt(s) > 18446744073709551615n ? 'value out of range' : null
  if (problem !== null) {
    const text = `Bad Pagination Parameters: strconv.ParseUint: parsing ${JSON.stringify(s)}: ${problem}`
    throw new ValidationFailedError('request', text)
  }
  return Number(s)
}

/** page / per_page (pageParams; 50 when not given) / sort of GET /admin/users: sort only on created_at, asc or desc. */
function listParams(req: FastifyRequest): { page: number; perPage: number; sortDesc: boolean } {
  const q = req.query as Record<string, unknown>
  let sortDesc = true
  const sorts = q.sort === undefined ? [] : Array.isArray(q.sort) ? q.sort : [q.sort]
  for (const v of sorts) {
    const value = String(v)
    const sp = value.indexOf(' ')
    const field = sp < 0 ? value : value.slice(0, sp)
    if (field !== 'created_at')
      throw new ValidationFailedError('request', `Bad Sort Parameters: bad field for sort '${field}'`)
    if (sp >= 0) {
      const dir = value.slice(sp + 1).toUpperCase()
      if (dir !== 'ASC' && dir !== 'DESC')
        throw new ValidationFailedError(
          'request',
          `Bad Sort Parameters: bad direction for sort '${value.slice(sp + 1)}', only 'asc' and 'desc' allowed`,
        )
      sortDesc = dir === 'DESC'
    } else sortDesc = true
  }
  const { page, perPage } = pageParams(req)
  return { page, perPage: perPage ?? 50, sortDesc }
}

/**
 * page and per_page as GoTrue's paginate reads them: page 0 reads as 1, per_page 0 as pop's
 * 20, at most 1000 per page here; per_page null when not given.
 */
export function pageParams(req: FastifyRequest): { page: number; perPage: number | null } {
  const rawPage = queryParam(req, 'page') ?? ''
  const rawPerPage = queryParam(req, 'per_page') ?? ''
  const page = Math.max(1, rawPage === '' ? 1 : parseUint(rawPage))
  if (rawPerPage === '') return { page, perPage: null }
  const perPage = parseUint(rawPerPage)
  return { page, perPage: Math.min(1000, perPage < 1 ? 20 : perPage) }
}

export async function getAdminUsers(req: FastifyRequest, reply: FastifyReply): Promise<unknown> {
  const ctx = contextOf(req)
  const { page, perPage, sortDesc } = listParams(req)
  const filter = queryParam(req, 'filter') || undefined
  const { users, total } = await listUsers(ctx.db, { aud: ctx.tenant.jwt.aud, page, perPage, filter, sortDesc })
  // Link: query keys in sorted order so `page` comes first (auth-js parses it so).
  const query = { ...(req.query as Record<string, string>) }
  const link = (p: number) => {
    const qs = new URLSearchParams()
    for (const k of Object.keys({ ...query, page: '', per_page: '' }).sort()) {
      qs.set(k, k === 'page' ? String(p) : k === 'per_page' ? String(perPage) : String(query[k]))
    }
    return `<${ctx.externalUrl}/admin/users?${qs.toString()}>`
  }
  const lastPage = Math.ceil(total / perPage)
  const parts: string[] = []
  if (total > page * perPage) parts.push(`${link(page + 1)}; rel="next"`)
  parts.push(`${link(lastPage)}; rel="last"`)
  reply.header('x-total-count', String(total))
  reply.header('link', parts.join(', '))
  return { users: users.map(toUserJson), aud: ctx.tenant.jwt.aud }
}

export async function postAdminUsers(req: FastifyRequest): Promise<UserJson> {
  return adminCreateUser(contextOf(req), bodyOf(req))
}

export async function putAdminUser(req: FastifyRequest): Promise<UserJson> {
  return adminUpdateUser(contextOf(req), uuidParam(req, 'id', 'user_id'), bodyOf(req))
}

export async function postGenerateLink(req: FastifyRequest): Promise<unknown> {
  return generateLink(contextOf(req), req, bodyOf(req))
}

export async function getAdminUser(req: FastifyRequest): Promise<UserJson> {
  const ctx = contextOf(req)
  const u = await loadUserWithIdentities(ctx.db, uuidParam(req, 'id', 'user_id'))
  if (!u) throw new UserNotFoundError('byId')
  return toUserJson(u)
}

export async function deleteAdminUser(req: FastifyRequest): Promise<unknown> {
  const ctx = contextOf(req)
  return adminDeleteUser(ctx, uuidParam(req, 'id', 'user_id'), optBool(bodyOf(req), 'should_soft_delete') ?? false)
}

export async function postInvite(req: FastifyRequest): Promise<UserJson> {
  const ctx = contextOf(req)
  const b = bodyOf(req)
  const email = normaliseEmail(optString(b, 'email') ?? '')
  const data = optObject(b, 'data')
  const redirectTo = redirectUrlOf(req, ctx.tenant.auth)
  return withTransaction(ctx.db, async (q) => {
    let user = await findUserByEmail(q, email, ctx.tenant.jwt.aud)
    if (user?.email_confirmed_at) throw new EmailExistsError('signUp')
    user ??= await createAdminUser(ctx, q, { email, data, encryptedPassword: null, invited: true })
    const sent = await sendEmailToken(ctx, q, user, 'invite', {
      address: email,
      redirectTo,
      extra: { invited_at: ctx.now() },
    })
    return toUserJson({ user: sent.user, identities: await identitiesForUser(q, user.id) })
  })
}

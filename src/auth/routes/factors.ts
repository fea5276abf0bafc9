// MFA (docs/auth-protocol.md §3.19): POST /factors (enroll a TOTP factor: secret, otpauth URI,
// QR code as SVG), POST /factors/:id/challenge, POST /factors/:id/verify (the same session
// raised to aal2: AMR `totp`, refresh token rotated, the user's other aal1 sessions ended) and
// DELETE /factors/:id. WebAuthn factors when the database turns them on (factors-webauthn.ts);
// phone factors are never enabled here and answer GoTrue's "disabled" errors. Anonymous users
// are refused; challenge and verify are rate limited.
import type { FastifyRequest } from 'fastify'
import * as OTPAuth from 'otpauth'
import QRCode from 'qrcode'
import { withTransaction, type Queryable } from '../../shared/index.js'
import {
  InsufficientAalError,
  BadJsonError,
  MfaPhoneEnrollDisabledError,
  MfaPhoneVerifyDisabledError,
  MfaTotpEnrollDisabledError,
  MfaTotpVerifyDisabledError,
  MfaVerificationFailedError,
  MfaWebAuthnEnrollDisabledError,
  MfaWebAuthnVerifyDisabledError,
  UnexpectedFailureError,
  unexpectedFailure,
  ValidationFailedError,
} from '../errors.js'
import { mfaAttemptHook } from '../auth-hooks.js'
import { callerOf, contextOf, factorOf } from '../request-state.js'
import { UUID } from '../bearer.js'
import { bodyOf, clientMeta, optString } from '../http.js'
import {
  checkNewFactor,
  completeVerification,
  createChallenge,
  liveChallenge,
  sessionIsAal2,
  type MfaCaller,
} from '../mfa.js'
import { audit } from '../models/audit-log.js'
import { challengeWebAuthn, enrollWebAuthn, verifyWebAuthn } from './factors-webauthn.js'
import { deleteFactor, downgradeSessionsOfFactor, insertFactor } from '../models/factors.js'
import { deleteSessionsOfUser } from '../models/sessions.js'
import type { FactorRow, TenantContext } from '../types.js'

const TOTP = { algorithm: 'SHA1', digits: 6, period: 30 } as const

/** The caller the table's checks proved: signed in, not anonymous, with a session. */
function mfaCallerOf(req: FastifyRequest): MfaCaller {
  return callerOf(req) as MfaCaller
}

/** pquerna/otp's key URL: otpauth://totp/<issuer>:<account>?algorithm&digits&issuer&period&secret. */
function otpauthUri(issuer: string, account: string, secret: string): string {
  const path = (s: string) => encodeURIComponent(s).replace(/%40/g, '@')
  const q = new URLSearchParams({
    algorithm: TOTP.algorithm,
    digits: String(TOTP.digits),
    issuer,
    period: String(TOTP.period),
    secret,
  })
  return `otpauth://totp/${path(issuer)}:${path(account)}?${q.toString().replace(/\+/g, '%20')}`
}

function totpOf(secret: string): OTPAuth.TOTP {
  return new OTPAuth.TOTP({ ...TOTP, secret: OTPAuth.Secret.fromBase32(secret) })
}

/** The time step `code` belongs to (one period of skew either way), or null when it is not a code of `secret` near `now`. */
function totpStep(secret: string, code: string, now: Date): number | null {
  if (!/^\d{6}$/.test(code)) return null
  const delta = totpOf(secret).validate({ token: code, timestamp: now.getTime(), window: 1 })
  return delta === null ? null : Math.floor(now.getTime() / 1000 / TOTP.period) + delta
}

/**
 * Records that `factorId` verified with time step `step`; false when that step (or a later
 * one) was used already: a code works once, and no older code after it (RFC 6238 section 5.2).
 */
async function useTotpStep(q: Queryable, factorId: string, step: number): Promise<boolean> {
  const r = await q.query(
    `INSERT INTO auth.gatehouse_totp_used_steps (factor_id, last_step) VALUES ($1, $2)
     ON CONFLICT (factor_id) DO UPDATE SET last_step = EXCLUDED.last_step
       WHERE auth.gatehouse_totp_used_steps.last_step < EXCLUDED.last_step
     RETURNING factor_id`,
    [factorId, step],
  )
  return r.rowCount === 1
}

async function enrollTotp(
  ctx: TenantContext,
  req: FastifyRequest,
  u: MfaCaller,
  friendlyName: string,
  issuerParam: string | undefined,
) {
  let issuer = issuerParam ?? ''
  if (issuer === '') {
    try {
      issuer = new URL(ctx.tenant.auth.site_url).host
    } catch {
      throw new UnexpectedFailureError('siteUrl')
    }
  }
  const user = u.user.user
  return withTransaction(ctx.db, async (q) => {
    const now = ctx.now()
    await checkNewFactor(ctx, q, u, friendlyName)
    const account = user.email ?? ''
    if (account === '') throw new UnexpectedFailureError('qrCode')
    const secret = new OTPAuth.Secret({ size: 20 }).base32
    const uri = otpauthUri(issuer, account, secret)
    let svg: string
    try {
      svg = await QRCode.toString(uri, { type: 'svg', errorCorrectionLevel: 'H', margin: 1 })
    } catch (err) {
      throw new UnexpectedFailureError('qrCode', { internal: err })
    }
    const factor = await insertFactor(q, { userId: user.id, friendlyName, type: 'totp', secret, now })
    await audit(q, {
      action: 'factor_in_progress',
      actorId: user.id,
      actorUsername: user.email,
      traits: { factor_id: factor.id },
      ip: clientMeta(req).ip,
      now,
    })
    return { id: factor.id, type: 'totp', friendly_name: friendlyName, totp: { qr_code: svg.trim(), secret, uri } }
  })
}

async function verifyTotp(
  ctx: TenantContext,
  req: FastifyRequest,
  u: MfaCaller,
  factor: FactorRow,
  challengeId: string,
  code: string,
) {
  const ip = clientMeta(req).ip ?? ''
  const challenge = await liveChallenge(ctx, factor, challengeId, ip)
  const now = ctx.now()
  const userId = u.user.user.id
  const step = factor.secret ? totpStep(factor.secret, code, now) : null
  await mfaAttemptHook(
    { ctx, ip },
    { userId, factorId: factor.id, factorType: factor.factor_type, valid: step !== null },
    (id) => deleteSessionsOfUser(ctx.db, id),
  )
  if (step === null) throw new MfaVerificationFailedError('Invalid TOTP code entered')
  return withTransaction(ctx.db, async (q) => {
    // A code that verified once is spent for the rest of its window (GoTrue accepts it again).
    if (!(await useTotpStep(q, factor.id, step)))
      throw new MfaVerificationFailedError(
        'This TOTP code was already used; wait for the next code of your authenticator',
      )
    return completeVerification(ctx, q, u, factor, challenge.id, ip)
  })
}

function challengeIdOf(b: Record<string, unknown>): string {
  const v = b.challenge_id
  if (v === undefined || v === null || v === '') return '00000000-0000-0000-0000-000000000000'
  if (typeof v !== 'string' || !UUID.test(v))
    throw new BadJsonError('Could not parse request body as JSON: challenge_id must be a UUID')
  return v.toLowerCase()
}

export async function postFactor(req: FastifyRequest): Promise<unknown> {
  const ctx = contextOf(req)
  const u = mfaCallerOf(req)
  const b = bodyOf(req)
  const friendlyName = optString(b, 'friendly_name') ?? ''
  const factorType = optString(b, 'factor_type') ?? ''
  const issuer = optString(b, 'issuer')
  optString(b, 'phone')
  switch (factorType) {
    case 'phone':
      throw new MfaPhoneEnrollDisabledError()
    case 'webauthn':
      if (!ctx.tenant.auth.mfa_webauthn_enroll)
        throw new MfaWebAuthnEnrollDisabledError('MFA enroll is disabled for WebAuthn')
      return enrollWebAuthn(ctx, req, u, friendlyName)
    case 'totp':
      if (!ctx.tenant.auth.mfa_totp_enroll) throw new MfaTotpEnrollDisabledError()
      return enrollTotp(ctx, req, u, friendlyName, issuer)
    default:
      throw new ValidationFailedError('request', 'factor_type needs to be totp, phone, or webauthn')
  }
}

/**
 * Challenge and verify work on TOTP factors with TOTP verification on and on WebAuthn factors
 * with WebAuthn verification on: otherwise GoTrue's "disabled" error (`webauthn`: the one of
 * the calling route). A phone factor is never enabled here.
 */
function requireVerify(ctx: TenantContext, factor: FactorRow, webauthn: () => Error): 'totp' | 'webauthn' {
  switch (factor.factor_type) {
    case 'phone':
      throw new MfaPhoneVerifyDisabledError()
    case 'webauthn':
      if (!ctx.tenant.auth.mfa_webauthn_verify) throw webauthn()
      return 'webauthn'
    case 'totp':
      if (!ctx.tenant.auth.mfa_totp_verify) throw new MfaTotpVerifyDisabledError()
      return 'totp'
    default:
      throw new ValidationFailedError('request', 'factor_type needs to be totp, phone, or webauthn')
  }
}

export async function postChallenge(req: FastifyRequest): Promise<unknown> {
  const ctx = contextOf(req)
  const u = mfaCallerOf(req)
  const factor = factorOf(req)
  const b = bodyOf(req)
  optString(b, 'channel')
  const kind = requireVerify(ctx, factor, () => new MfaWebAuthnVerifyDisabledError())
  const ip = clientMeta(req).ip
  if (!ip) throw unexpectedFailure(new Error('no client IP for an MFA challenge'))
  if (kind === 'webauthn') return challengeWebAuthn(ctx, u, factor, ip)
  return createChallenge(ctx, u, factor, ip)
}

export async function postFactorVerify(req: FastifyRequest): Promise<unknown> {
  const ctx = contextOf(req)
  const u = mfaCallerOf(req)
  const factor = factorOf(req)
  const b = bodyOf(req)
  const challengeId = challengeIdOf(b)
  const code = optString(b, 'code') ?? ''
  if (code === '' && factor.factor_type !== 'webauthn')
    throw new ValidationFailedError('request', 'Code needs to be non-empty')
  const kind = requireVerify(
    ctx,
    factor,
    () => new MfaWebAuthnEnrollDisabledError('MFA verification is disabled for WebAuthn'),
  )
  if (kind === 'webauthn') return verifyWebAuthn(ctx, req, u, factor, challengeId, b)
  return verifyTotp(ctx, req, u, factor, challengeId, code)
}

export async function deleteFactorRoute(req: FastifyRequest): Promise<unknown> {
  const ctx = contextOf(req)
  const u = mfaCallerOf(req)
  const factor = factorOf(req)
  if (factor.status === 'verified' && !(await sessionIsAal2(ctx.db, u.sessionId)))
    throw new InsufficientAalError('unenroll')
  await withTransaction(ctx.db, async (q) => {
    const now = ctx.now()
    await deleteFactor(q, factor.id)
    await audit(q, {
      action: 'factor_unenrolled',
      actorId: u.user.user.id,
      actorUsername: u.user.user.email,
      traits: { factor_id: factor.id, factor_status: factor.status, session_id: u.sessionId },
      ip: clientMeta(req).ip,
      now,
    })
    await downgradeSessionsOfFactor(q, factor, now)
  })
  return { id: factor.id }
}

// auth.mfa_factors and auth.mfa_challenges (GoTrue's tables): factors of a user, their
// challenges, and what verifying or removing a factor does to the user's sessions (the
// session's aal, factor_id and MFA AMR claims). Values are parameters; times from ctx.now().
import { randomUUID } from 'node:crypto'
import type { Queryable } from '../../shared/index.js'
import type { FactorRow } from '../types.js'
import { definedOnly, isoString } from '../json.js'

const FACTOR_SELECT = `id, user_id, friendly_name, factor_type::text AS factor_type, status::text AS status, created_at,
  updated_at, secret, phone, last_challenged_at, web_authn_aaguid, last_webauthn_challenge_data`

/** The AMR method a verified factor of a type adds to a session. */
export const AMR_OF_FACTOR: Record<string, string> = { totp: 'totp', phone: 'mfa/phone', webauthn: 'mfa/webauthn' }

export async function factorsOfUser(q: Queryable, userId: string): Promise<FactorRow[]> {
  const r = await q.query<FactorRow>(
    `SELECT ${FACTOR_SELECT} FROM auth.mfa_factors WHERE user_id = $1 ORDER BY created_at`,
    [userId],
  )
  return r.rows
}

export async function findFactorOfUser(
  q: Queryable,
  userId: string,
  id: string,
  lock = false,
): Promise<FactorRow | null> {
  const r = await q.query<FactorRow>(
    `SELECT ${FACTOR_SELECT} FROM auth.mfa_factors WHERE id = $1 AND user_id = $2${lock ? ' FOR UPDATE' : ''}`,
    [id, userId],
  )
  return r.rows[0] ?? null
}

/** GoTrue's DeleteExpiredFactors: unverified, never challenged factors older than `seconds`. */
export async function deleteExpiredFactors(q: Queryable, userId: string, now: Date, seconds: number): Promise<void> {
  await q.query(
    `DELETE FROM auth.mfa_factors f WHERE f.user_id = $1 AND f.status <> 'verified'
        AND NOT EXISTS (SELECT 1 FROM auth.mfa_challenges c WHERE c.factor_id = f.id)
        AND f.created_at + make_interval(secs => $3) < $2::timestamptz`,
    [userId, now, seconds],
  )
}

/** A new unverified factor (a TOTP factor with its secret). */
export async function insertFactor(
  q: Queryable,
  f: { userId: string; friendlyName: string; type: 'totp' | 'webauthn'; secret: string | null; now: Date },
): Promise<FactorRow> {
  const r = await q.query<FactorRow>(
    `INSERT INTO auth.mfa_factors (id, user_id, friendly_name, factor_type, status, created_at, updated_at, secret)
     VALUES ($1, $2, $3, $4::auth.factor_type, 'unverified', $5, $5, $6) RETURNING ${FACTOR_SELECT}`,
    [randomUUID(), f.userId, f.friendlyName, f.type, f.now, f.secret],
  )
  return r.rows[0]!
}

/** The credential a WebAuthn factor holds once verified (go-webauthn's Credential, as GoTrue stores it). */
export async function webAuthnCredentialOf(q: Queryable, factorId: string): Promise<Record<string, unknown> | null> {
  const r = await q.query<{ c: Record<string, unknown> | null }>(
    'SELECT web_authn_credential AS c FROM auth.mfa_factors WHERE id = $1',
    [factorId],
  )
  return r.rows[0]?.c ?? null
}

/** The credentials of the user's verified WebAuthn factors. */
export async function webAuthnCredentialsOfUser(q: Queryable, userId: string): Promise<Array<Record<string, unknown>>> {
  const r = await q.query<{ c: Record<string, unknown> }>(
    `SELECT web_authn_credential AS c FROM auth.mfa_factors
      WHERE user_id = $1 AND factor_type = 'webauthn' AND web_authn_credential IS NOT NULL ORDER BY created_at`,
    [userId],
  )
  return r.rows.map((x) => x.c)
}

export async function saveWebAuthnCredential(
  q: Queryable,
  factorId: string,
  credential: Record<string, unknown>,
  aaguid: string | null,
  now: Date,
): Promise<void> {
  await q.query(
    'UPDATE auth.mfa_factors SET web_authn_credential = $2, web_authn_aaguid = $3, updated_at = $4 WHERE id = $1',
    [factorId, JSON.stringify(credential), aaguid, now],
  )
}

export async function deleteFactor(q: Queryable, id: string): Promise<void> {
  await q.query('DELETE FROM auth.mfa_factors WHERE id = $1', [id])
}

export async function markFactorVerified(q: Queryable, id: string, now: Date): Promise<void> {
  await q.query(`UPDATE auth.mfa_factors SET status = 'verified', updated_at = $2 WHERE id = $1`, [id, now])
}

export async function deleteUnverifiedFactors(q: Queryable, userId: string, factorType: string): Promise<void> {
  await q.query(
    `DELETE FROM auth.mfa_factors WHERE user_id = $1 AND status = 'unverified' AND factor_type = $2::auth.factor_type`,
    [userId, factorType],
  )
}

export interface ChallengeRow {
  id: string
  factor_id: string
  created_at: Date
  verified_at: Date | null
  ip_address: string
  /** A WebAuthn factor's ceremony: its challenge, relying party and kind (create/request). */
  web_authn_session_data: unknown
}

const CHALLENGE_SELECT =
  'id, factor_id, created_at, verified_at, host(ip_address) AS ip_address, web_authn_session_data'

/** A challenge of a factor; the factor's last_challenged_at is stamped with it. */
export async function insertChallenge(
  q: Queryable,
  c: { factorId: string; ip: string; now: Date; webauthn?: object },
): Promise<ChallengeRow> {
  const r = await q.query<ChallengeRow>(
    `INSERT INTO auth.mfa_challenges (id, factor_id, created_at, ip_address, web_authn_session_data)
     VALUES ($1, $2, $3, $4::inet, $5) RETURNING ${CHALLENGE_SELECT}`,
    [randomUUID(), c.factorId, c.now, c.ip, c.webauthn === undefined ? null : JSON.stringify(c.webauthn)],
  )
  // last_challenged_at is UNIQUE in GoTrue's schema: two challenges in the same microsecond
  // of different factors must not collide, so a clash keeps the earlier stamp.
  await q.query(
    `UPDATE auth.mfa_factors SET last_challenged_at = $2 WHERE id = $1
        AND NOT EXISTS (SELECT 1 FROM auth.mfa_factors WHERE last_challenged_at = $2 AND id <> $1)`,
    [c.factorId, c.now],
  )
  return r.rows[0]!
}

export async function findChallenge(q: Queryable, factorId: string, id: string): Promise<ChallengeRow | null> {
  const r = await q.query<ChallengeRow>(
    `SELECT ${CHALLENGE_SELECT} FROM auth.mfa_challenges WHERE id = $1 AND factor_id = $2`,
    [id, factorId],
  )
  return r.rows[0] ?? null
}

export async function deleteChallenge(q: Queryable, id: string): Promise<void> {
  await q.query('DELETE FROM auth.mfa_challenges WHERE id = $1', [id])
}

/** Marks a challenge verified; false when another request verified it first. */
export async function markChallengeVerified(q: Queryable, id: string, now: Date): Promise<boolean> {
  const r = await q.query('UPDATE auth.mfa_challenges SET verified_at = $2 WHERE id = $1 AND verified_at IS NULL', [
    id,
    now,
  ])
  return (r.rowCount ?? 0) > 0
}

/** The session reached aal2 through this factor (GoTrue's UpdateAALAndAssociatedFactor). */
export async function setSessionAal(
  q: Queryable,
  sessionId: string,
  aal: 'aal1' | 'aal2',
  factorId: string | null,
  now: Date,
): Promise<void> {
  await q.query('UPDATE auth.sessions SET aal = $2::auth.aal_level, factor_id = $3, updated_at = $4 WHERE id = $1', [
    sessionId,
    aal,
    factorId,
    now,
  ])
}

/** GoTrue's InvalidateSessionsWithAALLessThan: the user's other aal1 sessions end. */
export async function deleteSessionsBelowAal2(q: Queryable, userId: string): Promise<void> {
  await q.query(`DELETE FROM auth.sessions WHERE user_id = $1 AND (aal IS NULL OR aal < 'aal2'::auth.aal_level)`, [
    userId,
  ])
}

/** GoTrue's DowngradeSessionsToAAL1: sessions raised by this factor lose its AMR claim and aal2. */
export async function downgradeSessionsOfFactor(
  q: Queryable,
  factor: { id: string; user_id: string; factor_type: string },
  now: Date,
): Promise<void> {
  const method = AMR_OF_FACTOR[factor.factor_type] ?? 'totp'
  await q.query(
    `DELETE FROM auth.mfa_amr_claims a USING auth.sessions s
      WHERE a.session_id = s.id AND s.factor_id = $1 AND a.authentication_method = $2`,
    [factor.id, method],
  )
  await q.query(
    `UPDATE auth.sessions SET aal = 'aal1', factor_id = NULL, updated_at = $3 WHERE user_id = $1 AND factor_id = $2`,
    [factor.user_id, factor.id, now],
  )
}

/** The Factor object (docs/auth-protocol.md §2.3): secret never sent, friendly_name omitted when empty. */
export function toFactorJson(f: FactorRow): Record<string, unknown> {
  const out: Record<string, unknown> = {
    id: f.id,
    created_at: isoString(f.created_at),
    updated_at: isoString(f.updated_at),
    status: f.status,
    friendly_name: f.friendly_name || undefined,
    factor_type: f.factor_type,
    phone: f.phone ?? '',
    last_challenged_at: f.last_challenged_at ? isoString(f.last_challenged_at) : null,
    web_authn_aaguid: f.web_authn_aaguid ?? undefined,
    last_webauthn_challenge_data: f.last_webauthn_challenge_data ?? undefined,
  }
  return definedOnly(out)
}

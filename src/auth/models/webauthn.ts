// auth.webauthn_credentials and auth.webauthn_challenges (GoTrue's passkey tables, migration
// 0200): a user's passkeys, and the challenges of ceremonies waiting for their answer. A
// challenge is consumed by one DELETE ... RETURNING, so an answer is checked against it once
// (docs/auth-protocol.md §3.21). Values are parameters; times from ctx.now().
import type { Queryable } from '../../shared/index.js'

export type ChallengeType = 'registration' | 'authentication'

/** What a ceremony's challenge remembers until its answer comes. */
export interface ChallengeSession {
  /** The challenge as sent in the options (base64url). */
  challenge: string
  /** The relying party and origins of the ceremony, as configured when it began. */
  rp_id: string
  rp_origins: string[]
}

export interface ChallengeRow {
  id: string
  user_id: string | null
  session_data: ChallengeSession
  expires_at: Date
}

export interface PasskeyRow {
  id: string
  user_id: string
  credential_id: Buffer
  public_key: Buffer
  sign_count: string
  transports: string[]
  friendly_name: string
  created_at: Date
  last_used_at: Date | null
}

const PASSKEY_SELECT = `id, user_id, credential_id, public_key, sign_count, transports, friendly_name, created_at,
  last_used_at`

export async function insertChallenge(
  q: Queryable,
  c: { userId: string | null; type: ChallengeType; session: ChallengeSession; now: Date; expiresAt: Date },
): Promise<string> {
  const r = await q.query<{ id: string }>(
    `INSERT INTO auth.webauthn_challenges (user_id, challenge_type, session_data, created_at, expires_at)
     VALUES ($1, $2, $3, $4, $5) RETURNING id`,
    [c.userId, c.type, JSON.stringify(c.session), c.now, c.expiresAt],
  )
  return r.rows[0]!.id
}

/**
 * Takes the challenge `id` of this type (and user, for registration) out of the table: a
 * second answer to it finds nothing (GoTrue's ConsumeWebAuthnChallengeByID). Expired ones
 * are returned too, so the caller can say so.
 */
export async function consumeChallenge(
  q: Queryable,
  id: string,
  type: ChallengeType,
  userId: string | null,
): Promise<ChallengeRow | null> {
  const r = await q.query<ChallengeRow>(
    `DELETE FROM auth.webauthn_challenges WHERE id = $1 AND challenge_type = $2
        AND user_id IS NOT DISTINCT FROM $3::uuid
     RETURNING id, user_id, session_data, expires_at`,
    [id, type, userId],
  )
  return r.rows[0] ?? null
}

/** Challenges whose ceremony was never answered, kept no longer than they could be used. */
export async function deleteExpiredChallenges(q: Queryable, now: Date): Promise<void> {
  await q.query('DELETE FROM auth.webauthn_challenges WHERE expires_at < $1', [now])
}

export async function passkeysOfUser(q: Queryable, userId: string): Promise<PasskeyRow[]> {
  const r = await q.query<PasskeyRow>(
    `SELECT ${PASSKEY_SELECT} FROM auth.webauthn_credentials WHERE user_id = $1 ORDER BY created_at, id`,
    [userId],
  )
  return r.rows
}

export async function countPasskeys(q: Queryable, userId: string): Promise<number> {
  const r = await q.query<{ n: number }>(
    'SELECT count(*)::int AS n FROM auth.webauthn_credentials WHERE user_id = $1',
    [userId],
  )
  return r.rows[0]!.n
}

export async function findPasskeyOfUser(q: Queryable, userId: string, id: string): Promise<PasskeyRow | null> {
  const r = await q.query<PasskeyRow>(
    `SELECT ${PASSKEY_SELECT} FROM auth.webauthn_credentials WHERE id = $1 AND user_id = $2`,
    [id, userId],
  )
  return r.rows[0] ?? null
}

export async function findPasskeyByCredentialId(q: Queryable, credentialId: Buffer): Promise<PasskeyRow | null> {
  const r = await q.query<PasskeyRow>(
    `SELECT ${PASSKEY_SELECT} FROM auth.webauthn_credentials WHERE credential_id = $1`,
    [credentialId],
  )
  return r.rows[0] ?? null
}

export interface NewPasskey {
  userId: string
  credentialId: Buffer
  publicKey: Buffer
  attestationType: string
  aaguid: string | null
  signCount: number
  transports: string[]
  backupEligible: boolean
  backedUp: boolean
  now: Date
}

export async function insertPasskey(q: Queryable, p: NewPasskey): Promise<PasskeyRow> {
  const r = await q.query<PasskeyRow>(
    `INSERT INTO auth.webauthn_credentials (user_id, credential_id, public_key, attestation_type, aaguid, sign_count,
       transports, backup_eligible, backed_up, created_at, updated_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $10) RETURNING ${PASSKEY_SELECT}`,
    [
      p.userId,
      p.credentialId,
      p.publicKey,
      p.attestationType,
      p.aaguid,
      p.signCount,
      JSON.stringify(p.transports),
      p.backupEligible,
      p.backedUp,
      p.now,
    ],
  )
  return r.rows[0]!
}

export async function renamePasskey(q: Queryable, id: string, name: string, now: Date): Promise<PasskeyRow> {
  const r = await q.query<PasskeyRow>(
    `UPDATE auth.webauthn_credentials SET friendly_name = $2, updated_at = $3 WHERE id = $1 RETURNING ${PASSKEY_SELECT}`,
    [id, name, now],
  )
  return r.rows[0]!
}

/** A sign-in with the passkey: its counter and when it was last used. */
export async function touchPasskey(q: Queryable, id: string, signCount: number, now: Date): Promise<void> {
  await q.query(
    'UPDATE auth.webauthn_credentials SET sign_count = $2, last_used_at = $3, updated_at = $3 WHERE id = $1',
    [id, signCount, now],
  )
}

export async function deletePasskey(q: Queryable, id: string): Promise<void> {
  await q.query('DELETE FROM auth.webauthn_credentials WHERE id = $1', [id])
}

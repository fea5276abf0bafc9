// auth.identities: one row per (provider, provider_id), keyed as GoTrue keys them, and
// the identity JSON of docs/auth-protocol.md §2.2 (`identity_id` = row uuid, `id` = provider subject).
import { randomUUID } from 'node:crypto'
import type { Queryable } from '../../shared/index.js'
import type { IdentityRow } from '../types.js'
import { definedOnly, isoString } from '../json.js'

const SELECT = 'id, provider_id, user_id, identity_data, provider, last_sign_in_at, created_at, updated_at, email'

export async function identitiesForUser(q: Queryable, userId: string): Promise<IdentityRow[]> {
  const r = await q.query<IdentityRow>(
    `SELECT ${SELECT} FROM auth.identities WHERE user_id = $1 ORDER BY created_at, id`,
    [userId],
  )
  return r.rows
}

/** The identities of several users (none asked: none read), in the same order. */
export async function identitiesOfUsers(q: Queryable, userIds: string[]): Promise<IdentityRow[]> {
  if (userIds.length === 0) return []
  const r = await q.query<IdentityRow>(
    `SELECT ${SELECT} FROM auth.identities WHERE user_id = ANY($1::uuid[]) ORDER BY created_at, id`,
    [userIds],
  )
  return r.rows
}

export async function findIdentity(q: Queryable, provider: string, providerId: string): Promise<IdentityRow | null> {
  const r = await q.query<IdentityRow>(
    `SELECT ${SELECT} FROM auth.identities WHERE provider = $1 AND provider_id = $2`,
    [provider, providerId],
  )
  return r.rows[0] ?? null
}

/** Identities carrying one of these emails (lower-cased), outside the sso:* linking domain. */
export async function findIdentitiesByEmails(q: Queryable, emails: string[]): Promise<IdentityRow[]> {
  if (emails.length === 0) return []
  const r = await q.query<IdentityRow>(
    `SELECT ${SELECT} FROM auth.identities WHERE email = ANY($1::text[]) AND provider NOT LIKE 'sso:%'`,
    [emails.map((e) => e.toLowerCase())],
  )
  return r.rows
}

interface NewIdentity {
  userId: string
  provider: string
  providerId: string
  identityData: Record<string, unknown>
  now: Date
  lastSignInAt?: Date | null
}

const INSERT = `INSERT INTO auth.identities (id, provider_id, user_id, identity_data, provider, last_sign_in_at, created_at, updated_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $7)`

const insertValues = (i: NewIdentity) => [
  randomUUID(),
  i.providerId,
  i.userId,
  JSON.stringify(i.identityData),
  i.provider,
  i.lastSignInAt ?? null,
  i.now,
]

export async function insertIdentity(q: Queryable, i: NewIdentity): Promise<IdentityRow> {
  const r = await q.query<IdentityRow>(`${INSERT} RETURNING ${SELECT}`, insertValues(i))
  return r.rows[0]!
}

/**
 * Inserts the identity unless (provider, provider_id) already exists; returns the row that
 * holds the key afterwards (safe under concurrency: the unique key decides, the loser reads
 * the winner's row).
 */
export async function insertIdentityIfAbsent(q: Queryable, i: NewIdentity): Promise<IdentityRow> {
  const r = await q.query<IdentityRow>(
    `${INSERT} ON CONFLICT (provider_id, provider) DO NOTHING RETURNING ${SELECT}`,
    insertValues(i),
  )
  const holder = r.rows[0] ?? (await findIdentity(q, i.provider, i.providerId))
  if (!holder) throw new Error('identity conflict without a row')
  return holder
}

export async function updateIdentity(
  q: Queryable,
  id: string,
  fields: { identityData?: Record<string, unknown>; lastSignInAt?: Date },
  now: Date,
): Promise<void> {
  await q.query(
    `UPDATE auth.identities SET identity_data = COALESCE($2::jsonb, identity_data),
        last_sign_in_at = COALESCE($3, last_sign_in_at), updated_at = $4 WHERE id = $1`,
    [id, fields.identityData ? JSON.stringify(fields.identityData) : null, fields.lastSignInAt ?? null, now],
  )
}

/** Merges keys into identity_data of the user's identity of one provider (e.g. email_verified). */
export async function mergeIdentityData(
  q: Queryable,
  userId: string,
  provider: string,
  patch: Record<string, unknown>,
  now: Date,
): Promise<void> {
  await q.query(
    'UPDATE auth.identities SET identity_data = identity_data || $3::jsonb, updated_at = $4 WHERE user_id = $1 AND provider = $2',
    [userId, provider, JSON.stringify(patch), now],
  )
}

export async function deleteIdentitiesOfUser(q: Queryable, userId: string, exceptId?: string): Promise<void> {
  await q.query('DELETE FROM auth.identities WHERE user_id = $1 AND ($2::uuid IS NULL OR id <> $2::uuid)', [
    userId,
    exceptId ?? null,
  ])
}

export function toIdentityJson(i: IdentityRow): Record<string, unknown> {
  const out: Record<string, unknown> = {
    identity_id: i.id,
    id: i.provider_id,
    user_id: i.user_id,
    identity_data: i.identity_data ?? {},
    provider: i.provider,
    last_sign_in_at: i.last_sign_in_at ? isoString(i.last_sign_in_at) : undefined,
    created_at: i.created_at ? isoString(i.created_at) : undefined,
    updated_at: i.updated_at ? isoString(i.updated_at) : undefined,
    email: i.email || undefined,
  }
  return definedOnly(out)
}

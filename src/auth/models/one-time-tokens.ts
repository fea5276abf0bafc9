// auth.one_time_tokens: the hashed tokens of mails (docs/auth-protocol.md §5.4), mirrored in the user's
// token column as GoTrue does. (user_id, token_type) is unique: a new token of a type
// replaces the previous one. created_at is `timestamp without time zone` holding UTC.
import { randomUUID } from 'node:crypto'
import type { Queryable } from '../../shared/index.js'

export type OneTimeTokenType =
  | 'confirmation_token'
  | 'reauthentication_token'
  | 'recovery_token'
  | 'email_change_token_new'
  | 'email_change_token_current'
  | 'phone_change_token'

interface OneTimeTokenRow {
  id: string
  user_id: string
  token_type: OneTimeTokenType
  token_hash: string
  relates_to: string
  created_at: Date
}

/** Stores (replacing) the token of one type for a user. */
export async function putOneTimeToken(
  q: Queryable,
  t: { userId: string; type: OneTimeTokenType; hash: string; relatesTo: string; now: Date },
): Promise<void> {
  await q.query('DELETE FROM auth.one_time_tokens WHERE user_id = $1 AND token_type = $2', [t.userId, t.type])
  await q.query(
    `INSERT INTO auth.one_time_tokens (id, user_id, token_type, token_hash, relates_to, created_at, updated_at)
     VALUES ($1, $2, $3, $4, $5, ($6::timestamptz AT TIME ZONE 'UTC'), ($6::timestamptz AT TIME ZONE 'UTC'))`,
    [randomUUID(), t.userId, t.type, t.hash, t.relatesTo.toLowerCase(), t.now],
  )
}

/** Finds a token by its exact hash among the given types. */
export async function findOneTimeToken(
  q: Queryable,
  hash: string,
  types: OneTimeTokenType[],
): Promise<OneTimeTokenRow | null> {
  const r = await q.query<OneTimeTokenRow>(
    `SELECT id, user_id, token_type, token_hash, relates_to, (created_at AT TIME ZONE 'UTC') AS created_at
       FROM auth.one_time_tokens WHERE token_hash = $1 AND token_type::text = ANY($2::text[])
      ORDER BY created_at DESC LIMIT 1`,
    [hash, types],
  )
  return r.rows[0] ?? null
}

export async function deleteOneTimeTokensOfUser(q: Queryable, userId: string): Promise<void> {
  await q.query('DELETE FROM auth.one_time_tokens WHERE user_id = $1', [userId])
}

export async function deleteOneTimeToken(q: Queryable, userId: string, type: OneTimeTokenType): Promise<void> {
  await q.query('DELETE FROM auth.one_time_tokens WHERE user_id = $1 AND token_type = $2', [userId, type])
}

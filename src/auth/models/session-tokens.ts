// Refresh tokens v2 in auth.sessions (docs/auth-protocol.md §5.3; supabase/auth
// internal/models/sessions.go, refresh_token.go): a session holds its HMAC key
// (refresh_token_hmac_key, base64url as GoTrue stores it without database encryption) and the
// counter of the newest token it issued (refresh_token_counter). A refresh touches only the
// session row, in columns no index covers, so Postgres can update it in place (a HOT update):
// no row per token, no index entry per refresh.
import { preparedRow, type Queryable } from '../../shared/index.js'
import { newRefreshTokenKey } from '../refresh-token-format.js'
import { AMR_JSON, FACTORS_JSON, IDENTITIES_JSON, rowExists, toHotContext, type HotContext } from './refresh-tokens.js'
import { USER_JSON } from './users.js'

/** What a refresh writes into the session besides its counter (GoTrue's UpdateOnlyRefreshInfo). */
export interface RefreshInfo {
  readonly now: Date
  readonly userAgent: string | null
  readonly ip: string | null
}

/** A v2 session as the slow path reads it (no lock): what the hot path answers, with the session's v2 state. */
export interface SessionTokenContext extends HotContext {
  readonly key: string | null
  readonly counter: bigint | null
  readonly notAfter: Date | null
}

/** The session a v2 token names with its user, or null when there is none. */
export async function loadSessionTokenContext(q: Queryable, sessionId: string): Promise<SessionTokenContext | null> {
  const row = await preparedRow(
    q,
    'gatehouse_auth_load_session_token',
    `SELECT s.id, ${USER_JSON} AS user_json, ${IDENTITIES_JSON} AS identities_json, ${AMR_JSON('s.id')} AS amr_json,
            ${FACTORS_JSON} AS factors_json, s.refresh_token_hmac_key, s.refresh_token_counter::text,
            (extract(epoch FROM s.not_after) * 1000)::text
       FROM auth.sessions s JOIN auth.users u ON u.id = s.user_id
      WHERE s.id = $1`,
    [sessionId],
  )
  if (!row) return null
  return {
    ...toHotContext(row),
    key: row[5] ?? null,
    counter: row[6] == null ? null : BigInt(row[6]),
    notAfter: row[7] == null ? null : new Date(Math.floor(Number(row[7]))),
  }
}

/** The session's v2 state under its row lock: null when another refresh holds it, 'gone' when deleted. */
export async function lockSessionToken(
  q: Queryable,
  sessionId: string,
): Promise<{ key: string | null; counter: bigint | null; lastRefreshedAt: Date } | 'gone' | null> {
  const r = await q.query<{ key: string | null; counter: string | null; last: Date }>(
    `SELECT refresh_token_hmac_key AS key, refresh_token_counter::text AS counter,
            COALESCE(refreshed_at AT TIME ZONE 'UTC', created_at) AS last
       FROM auth.sessions WHERE id = $1 FOR UPDATE SKIP LOCKED`,
    [sessionId],
  )
  const row = r.rows[0]
  if (!row) return (await rowExists(q, 'sessions', sessionId)) ? null : 'gone'
  return { key: row.key, counter: row.counter === null ? null : BigInt(row.counter), lastRefreshedAt: row.last }
}

/** Stores the session's counter and refresh info (GoTrue's UpdateOnlyRefreshToken and UpdateOnlyRefreshInfo). */
export async function saveSessionCounter(
  q: Queryable,
  sessionId: string,
  counter: bigint,
  info: RefreshInfo,
): Promise<void> {
  await q.query(
    `UPDATE auth.sessions SET refresh_token_counter = $2, refreshed_at = ($3::timestamptz AT TIME ZONE 'UTC'),
            updated_at = $3, user_agent = $4, ip = $5::inet
      WHERE id = $1`,
    [sessionId, counter.toString(), info.now, info.userAgent, info.ip],
  )
}

/**
 * Sets a session up for v2 tokens when it is not yet (GoTrue's SetupRefreshTokenData: a new
 * key, counter 0), else moves its counter on by `step`; returns the key and the new counter.
 * The caller holds the session's row lock or has just created it.
 */
export async function advanceSessionCounter(
  q: Queryable,
  sessionId: string,
  step: number,
  now: Date,
): Promise<{ key: string; counter: bigint } | null> {
  const r = await q.query<{ key: string; counter: string }>(
    `UPDATE auth.sessions SET
            refresh_token_hmac_key = COALESCE(refresh_token_hmac_key, $2),
            refresh_token_counter = CASE WHEN refresh_token_hmac_key IS NULL OR refresh_token_counter IS NULL THEN 0
                                         ELSE refresh_token_counter + $3 END,
            updated_at = $4
      WHERE id = $1
      RETURNING refresh_token_hmac_key AS key, refresh_token_counter::text AS counter`,
    [sessionId, newRefreshTokenKey(), step, now],
  )
  const row = r.rows[0]
  return row ? { key: row.key, counter: BigInt(row.counter) } : null
}

/** Whether the session holds v2 token data (GoTrue issues v2 tokens for it then). */
export async function sessionTokenState(
  q: Queryable,
  sessionId: string,
): Promise<{ key: string; counter: bigint } | null> {
  const r = await q.query<{ key: string | null; counter: string | null }>(
    `SELECT refresh_token_hmac_key AS key, refresh_token_counter::text AS counter FROM auth.sessions
      WHERE id = $1 FOR UPDATE`,
    [sessionId],
  )
  const row = r.rows[0]
  if (!row || row.key === null || row.counter === null) return null
  return { key: row.key, counter: BigInt(row.counter) }
}

// auth.sessions and auth.mfa_amr_claims: a session per sign-in, its authentication
// methods (AMR, docs/auth-protocol.md §4.1), and deletion for logout (rows cascade to refresh tokens).
// refreshed_at is `timestamp without time zone` holding UTC, so it is written AT TIME ZONE 'UTC'.
import { randomUUID } from 'node:crypto'
import type { Queryable } from '../../shared/index.js'
import type { AmrEntry, SessionRow } from '../types.js'

/**
 * A new aal1 session; with a refresh token key it is set up for v2 tokens (counter 0,
 * docs/auth-protocol.md §5.3), and the row it returns carries the key.
 */
export async function insertSession(
  q: Queryable,
  s: { userId: string; now: Date; userAgent?: string | null; ip?: string | null; refreshTokenKey?: string | null },
): Promise<SessionRow & { refresh_token_hmac_key: string | null }> {
  const r = await q.query<SessionRow & { refresh_token_hmac_key: string | null }>(
    `INSERT INTO auth.sessions (id, user_id, created_at, updated_at, aal, user_agent, ip, refresh_token_hmac_key, refresh_token_counter)
     VALUES ($1, $2, $3, $3, 'aal1', $4, $5, $6, CASE WHEN $6::text IS NULL THEN NULL ELSE 0 END)
     RETURNING id, user_id, created_at, updated_at, aal, not_after, NULL::timestamptz AS refreshed_at, user_agent, host(ip) AS ip,
               refresh_token_hmac_key`,
    [randomUUID(), s.userId, s.now, s.userAgent ?? null, s.ip ?? null, s.refreshTokenKey ?? null],
  )
  return r.rows[0]!
}

export async function findSession(q: Queryable, id: string): Promise<SessionRow | null> {
  const r = await q.query<SessionRow>(
    `SELECT id, user_id, created_at, updated_at, aal, not_after, (refreshed_at AT TIME ZONE 'UTC') AS refreshed_at,
            user_agent, host(ip) AS ip FROM auth.sessions WHERE id = $1`,
    [id],
  )
  return r.rows[0] ?? null
}

export async function sessionExists(q: Queryable, id: string, userId: string): Promise<boolean> {
  const r = await q.query('SELECT 1 FROM auth.sessions WHERE id = $1 AND user_id = $2', [id, userId])
  return (r.rowCount ?? 0) > 0
}

export async function deleteSession(q: Queryable, id: string): Promise<void> {
  await q.query('DELETE FROM auth.sessions WHERE id = $1', [id])
}

/** Deletes all sessions of a user, or all but one. */
export async function deleteSessionsOfUser(q: Queryable, userId: string, exceptId?: string | null): Promise<number> {
  const r = await q.query('DELETE FROM auth.sessions WHERE user_id = $1 AND ($2::uuid IS NULL OR id <> $2::uuid)', [
    userId,
    exceptId ?? null,
  ])
  return r.rowCount ?? 0
}

/** What binds a session to an OAuth client: the client and the scopes it was granted. */
export interface OAuthBinding {
  clientId: string
  scopes: string | null
}

/** Binds a new session to the OAuth client it is issued to (GoTrue's oauth_client_id and scopes). */
export async function bindSessionToOAuthClient(q: Queryable, sessionId: string, b: OAuthBinding): Promise<void> {
  await q.query('UPDATE auth.sessions SET oauth_client_id = $2, scopes = $3 WHERE id = $1', [
    sessionId,
    b.clientId,
    b.scopes,
  ])
}

/** The OAuth client a session is bound to, or null for an ordinary session (or none). */
export async function oauthBindingOf(q: Queryable, sessionId: string): Promise<OAuthBinding | null> {
  const r = await q.query<{ oauth_client_id: string | null; scopes: string | null }>(
    'SELECT oauth_client_id, scopes FROM auth.sessions WHERE id = $1',
    [sessionId],
  )
  const row = r.rows[0]
  return row?.oauth_client_id ? { clientId: row.oauth_client_id, scopes: row.scopes } : null
}

/** Deletes the sessions an OAuth client holds (of one user, or of all). */
export async function deleteSessionsOfOAuthClient(q: Queryable, clientId: string, userId?: string): Promise<number> {
  const r = await q.query(
    'DELETE FROM auth.sessions WHERE oauth_client_id = $1 AND ($2::uuid IS NULL OR user_id = $2::uuid)',
    [clientId, userId ?? null],
  )
  return r.rowCount ?? 0
}

/** Records a sign-in method on a session: upsert of (session_id, method) with updated_at = now. */
export async function addAmrClaim(q: Queryable, sessionId: string, method: string, now: Date): Promise<void> {
  await q.query(
    `INSERT INTO auth.mfa_amr_claims (id, session_id, created_at, updated_at, authentication_method)
     VALUES ($1, $2, $3, $3, $4)
     ON CONFLICT (session_id, authentication_method) DO UPDATE SET updated_at = EXCLUDED.updated_at`,
    [randomUUID(), sessionId, now, method],
  )
}

export async function amrClaims(q: Queryable, sessionId: string): Promise<AmrEntry[]> {
  const r = await q.query<{ method: string; ts: string }>(
    `SELECT authentication_method AS method, pg_catalog.floor(extract(epoch FROM updated_at))::bigint::text AS ts
       FROM auth.mfa_amr_claims WHERE session_id = $1 ORDER BY updated_at DESC`,
    [sessionId],
  )
  return r.rows.map((x) => ({ method: x.method, timestamp: Number(x.ts) }))
}

// auth.oauth_authorizations and auth.oauth_consents (GoTrue's OAuth server, migration 0220): an
// authorization request from GET /oauth/authorize waiting for the user's consent, its one-use
// code once approved, and the consents a user gave a client (docs/auth-protocol.md §3.22).
// Requests are locked FOR UPDATE SKIP LOCKED while a consent decides them (GoTrue's
// FindOAuthServerAuthorizationByIDForUpdate); a code is taken by one DELETE ... RETURNING, so it
// is used once. Values are parameters; times from ctx.now().
import { randomUUID } from 'node:crypto'
import type { Queryable } from '../../shared/index.js'

type AuthorizationStatus = 'pending' | 'approved' | 'denied' | 'expired'

export interface AuthorizationRow {
  id: string
  authorization_id: string
  client_id: string
  user_id: string | null
  redirect_uri: string
  scope: string
  state: string | null
  resource: string | null
  code_challenge: string | null
  code_challenge_method: 's256' | 'plain' | null
  status: AuthorizationStatus
  authorization_code: string | null
  expires_at: Date
  nonce: string | null
}

const AUTHORIZATION_SELECT = `id, authorization_id, client_id, user_id, redirect_uri, scope, state, resource,
  code_challenge, code_challenge_method, status, authorization_code, expires_at, nonce`

export interface NewAuthorization {
  authorizationId: string
  clientId: string
  redirectUri: string
  scope: string
  state: string | null
  resource: string | null
  codeChallenge: string
  codeChallengeMethod: 's256'
  nonce: string | null
  now: Date
  expiresAt: Date
}

/** How long a request is kept after it expired (its refusals keep GoTrue's texts meanwhile). */
const KEEP_EXPIRED_SECONDS = 24 * 3600

export async function insertAuthorization(q: Queryable, a: NewAuthorization): Promise<void> {
  // Requests that expired a day ago go first (migration 0221 indexes expires_at).
  await q.query(
    'DELETE FROM auth.oauth_authorizations WHERE expires_at < $1::timestamptz - pg_catalog.make_interval(secs => $2)',
    [a.now, KEEP_EXPIRED_SECONDS],
  )
  await q.query(
    `INSERT INTO auth.oauth_authorizations (id, authorization_id, client_id, redirect_uri, scope, state, resource,
       code_challenge, code_challenge_method, nonce, created_at, expires_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`,
    [
      randomUUID(),
      a.authorizationId,
      a.clientId,
      a.redirectUri,
      a.scope,
      a.state,
      a.resource,
      a.codeChallenge,
      a.codeChallengeMethod,
      a.nonce,
      a.now,
      a.expiresAt,
    ],
  )
}

/** The request, locked for this transaction; null when there is none or another request holds it. */
export async function lockAuthorization(q: Queryable, authorizationId: string): Promise<AuthorizationRow | null> {
  const r = await q.query<AuthorizationRow>(
    `SELECT ${AUTHORIZATION_SELECT} FROM auth.oauth_authorizations WHERE authorization_id = $1
     LIMIT 1 FOR UPDATE SKIP LOCKED`,
    [authorizationId],
  )
  return r.rows[0] ?? null
}

export async function setAuthorizationUser(q: Queryable, id: string, userId: string): Promise<void> {
  await q.query('UPDATE auth.oauth_authorizations SET user_id = $2 WHERE id = $1', [id, userId])
}

export async function setAuthorizationStatus(q: Queryable, id: string, status: 'denied' | 'expired'): Promise<void> {
  await q.query('UPDATE auth.oauth_authorizations SET status = $2 WHERE id = $1', [id, status])
}

/** Approves a pending request with its new code. */
export async function approveAuthorization(q: Queryable, id: string, code: string, now: Date): Promise<void> {
  await q.query(
    `UPDATE auth.oauth_authorizations SET status = 'approved', approved_at = $3, authorization_code = $2 WHERE id = $1`,
    [id, code, now],
  )
}

/** Takes an approved request by its code: the row is deleted, so the code works once. */
export async function takeApprovedCode(q: Queryable, code: string): Promise<AuthorizationRow | null> {
  const r = await q.query<AuthorizationRow>(
    `DELETE FROM auth.oauth_authorizations WHERE authorization_code = $1 AND status = 'approved'
     RETURNING ${AUTHORIZATION_SELECT}`,
    [code],
  )
  return r.rows[0] ?? null
}

export interface ConsentRow {
  client_id: string
  scopes: string
  granted_at: Date
}

/** The user's consent to the client that is not revoked, or null. */
export async function findActiveConsent(q: Queryable, userId: string, clientId: string): Promise<ConsentRow | null> {
  const r = await q.query<ConsentRow>(
    `SELECT client_id, scopes, granted_at FROM auth.oauth_consents
     WHERE user_id = $1 AND client_id = $2 AND revoked_at IS NULL`,
    [userId, clientId],
  )
  return r.rows[0] ?? null
}

/** Records a consent: its scopes replace an earlier one's, and a revoked one is given again (GoTrue's upsert). */
export async function upsertConsent(
  q: Queryable,
  c: { userId: string; clientId: string; scopes: string; now: Date },
): Promise<void> {
  await q.query(
    `INSERT INTO auth.oauth_consents (id, user_id, client_id, scopes, granted_at) VALUES ($1, $2, $3, $4, $5)
     ON CONFLICT (user_id, client_id) DO UPDATE SET scopes = EXCLUDED.scopes, granted_at = EXCLUDED.granted_at,
       revoked_at = NULL`,
    [randomUUID(), c.userId, c.clientId, c.scopes, c.now],
  )
}

export interface GrantRow extends ConsentRow {
  client_name: string | null
  client_uri: string | null
  logo_uri: string | null
}

/** The user's consents that are not revoked, to clients that are not deleted, newest first. */
export async function listActiveConsents(q: Queryable, userId: string): Promise<GrantRow[]> {
  const r = await q.query<GrantRow>(
    `SELECT c.client_id, c.scopes, c.granted_at, k.client_name, k.client_uri, k.logo_uri
       FROM auth.oauth_consents c JOIN auth.oauth_clients k ON k.id = c.client_id AND k.deleted_at IS NULL
      WHERE c.user_id = $1 AND c.revoked_at IS NULL ORDER BY c.granted_at DESC`,
    [userId],
  )
  return r.rows
}

/** Revokes the user's consent to a client; false when there was none. */
export async function revokeConsent(q: Queryable, userId: string, clientId: string, now: Date): Promise<boolean> {
  const r = await q.query(
    `UPDATE auth.oauth_consents SET revoked_at = greatest($3, granted_at)
      WHERE user_id = $1 AND client_id = $2 AND revoked_at IS NULL`,
    [userId, clientId, now],
  )
  return (r.rowCount ?? 0) > 0
}

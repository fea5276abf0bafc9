// auth.flow_state (docs/auth-protocol.md §5.7) and auth.oauth_client_states: the state of a PKCE or OAuth
// flow between its start (/signup, /otp, /recover, /authorize) and its end (/verify,
// /callback, the pkce grant). Timestamps come from the engine's clock; values are parameters.
import { randomUUID } from 'node:crypto'
import type { Queryable } from '../../shared/index.js'

export type CodeChallengeMethod = 's256' | 'plain'

export interface FlowStateRow {
  id: string
  user_id: string | null
  auth_code: string | null
  code_challenge_method: CodeChallengeMethod | null
  code_challenge: string | null
  provider_type: string
  provider_access_token: string | null
  provider_refresh_token: string | null
  created_at: Date
  updated_at: Date | null
  authentication_method: string
  auth_code_issued_at: Date | null
  referrer: string | null
  oauth_client_state_id: string | null
  /** Manual linking: the user the identity is added to. */
  linking_target_id: string | null
}

const SELECT = `id, user_id, auth_code, code_challenge_method::text AS code_challenge_method, code_challenge, provider_type,
  provider_access_token, provider_refresh_token, created_at, updated_at, authentication_method, auth_code_issued_at,
  referrer, oauth_client_state_id, linking_target_id`

interface NewFlowState {
  providerType: string
  authenticationMethod: string
  /** PKCE: the client's challenge; an auth_code is generated. Null for implicit OAuth flows. */
  pkce?: { challenge: string; method: CodeChallengeMethod } | null
  userId?: string | null
  referrer?: string | null
  oauthClientStateId?: string | null
  linkingTargetId?: string | null
  now: Date
}

/** How long rows are kept at most (GoTrue's cleanup: 24 h). */
const KEEP_SECONDS = 24 * 3600

export async function insertFlowState(q: Queryable, f: NewFlowState): Promise<FlowStateRow> {
  // Stale rows of abandoned flows go first (indexed on created_at).
  await q.query(
    'DELETE FROM auth.flow_state WHERE created_at < $1::timestamptz - pg_catalog.make_interval(secs => $2)',
    [f.now, KEEP_SECONDS],
  )
  const r = await q.query<FlowStateRow>(
    `INSERT INTO auth.flow_state (id, user_id, auth_code, code_challenge_method, code_challenge, provider_type,
        authentication_method, referrer, oauth_client_state_id, created_at, updated_at, linking_target_id)
     VALUES ($1, $2, $3, $4::auth.code_challenge_method, $5, $6, $7, $8, $9, $10, $10, $11)
     RETURNING ${SELECT}`,
    [
      randomUUID(),
      f.userId ?? null,
      f.pkce ? randomUUID() : null,
      f.pkce?.method ?? null,
      f.pkce?.challenge ?? null,
      f.providerType,
      f.authenticationMethod,
      f.referrer ?? null,
      f.oauthClientStateId ?? null,
      f.now,
      f.linkingTargetId ?? null,
    ],
  )
  return r.rows[0]!
}

export async function findFlowStateById(q: Queryable, id: string, lock = false): Promise<FlowStateRow | null> {
  const r = await q.query<FlowStateRow>(
    `SELECT ${SELECT} FROM auth.flow_state WHERE id = $1${lock ? ' FOR UPDATE' : ''}`,
    [id],
  )
  return r.rows[0] ?? null
}

/** The flow of an auth code, locked for the rest of the transaction (a code is used once). */
export async function lockFlowStateByAuthCode(q: Queryable, authCode: string): Promise<FlowStateRow | null> {
  const r = await q.query<FlowStateRow>(
    `SELECT ${SELECT} FROM auth.flow_state WHERE auth_code = $1 ORDER BY created_at DESC LIMIT 1 FOR UPDATE`,
    [authCode],
  )
  return r.rows[0] ?? null
}

/** The most recent flow of a user for a method (email flows: the one the mailed link ends). */
export async function findLatestFlowState(q: Queryable, userId: string, method: string): Promise<FlowStateRow | null> {
  const r = await q.query<FlowStateRow>(
    `SELECT ${SELECT} FROM auth.flow_state WHERE user_id = $1 AND authentication_method = $2
      ORDER BY created_at DESC LIMIT 1 FOR UPDATE`,
    [userId, method],
  )
  return r.rows[0] ?? null
}

interface FlowStateUpdate {
  userId?: string
  providerAccessToken?: string | null
  providerRefreshToken?: string | null
  authCodeIssuedAt?: Date
}

export async function updateFlowState(q: Queryable, id: string, u: FlowStateUpdate, now: Date): Promise<void> {
  await q.query(
    `UPDATE auth.flow_state SET user_id = COALESCE($2, user_id),
        provider_access_token = CASE WHEN $3::boolean THEN $4 ELSE provider_access_token END,
        provider_refresh_token = CASE WHEN $5::boolean THEN $6 ELSE provider_refresh_token END,
        auth_code_issued_at = COALESCE($7, auth_code_issued_at), updated_at = $8
      WHERE id = $1`,
    [
      id,
      u.userId ?? null,
      u.providerAccessToken !== undefined,
      u.providerAccessToken ?? null,
      u.providerRefreshToken !== undefined,
      u.providerRefreshToken ?? null,
      u.authCodeIssuedAt ?? null,
      now,
    ],
  )
}

export async function deleteFlowState(q: Queryable, id: string): Promise<void> {
  await q.query('DELETE FROM auth.flow_state WHERE id = $1', [id])
}

// ----- auth.oauth_client_states: our own PKCE verifier towards a provider --------------------

export async function insertOAuthClientState(
  q: Queryable,
  s: { providerType: string; codeVerifier: string; now: Date },
): Promise<string> {
  const id = randomUUID()
  await q.query(
    'DELETE FROM auth.oauth_client_states WHERE created_at < $1::timestamptz - pg_catalog.make_interval(secs => $2)',
    [s.now, KEEP_SECONDS],
  )
  await q.query(
    'INSERT INTO auth.oauth_client_states (id, provider_type, code_verifier, created_at) VALUES ($1, $2, $3, $4)',
    [id, s.providerType, s.codeVerifier, s.now],
  )
  return id
}

/** Reads and deletes the verifier (it serves one code exchange). */
export async function takeOAuthClientState(q: Queryable, id: string): Promise<string | null> {
  const r = await q.query<{ code_verifier: string | null }>(
    'DELETE FROM auth.oauth_client_states WHERE id = $1 RETURNING code_verifier',
    [id],
  )
  return r.rows[0]?.code_verifier ?? null
}

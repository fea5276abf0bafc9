// auth.refresh_tokens: legacy v1 tokens (docs/auth-protocol.md §5.2). A token row names its session and
// its parent (the token it replaced). The hot path of the refresh grant is one read and
// one atomic rotation statement; the rarer revoked-token path runs in a transaction.
import { preparedRow, type Queryable, type RowFields } from '../../shared/index.js'
import { generateRefreshToken } from '../crypto.js'
import type { AmrEntry, FactorRow, IdentityRow, UserRow } from '../types.js'
import { inCreationOrder, NIL_UUID, USER_JSON, USER_SELECT, userFromJson, userOf } from './users.js'

interface RefreshTokenRow {
  id: string
  token: string
  user_id: string
  revoked: boolean
  parent: string | null
  session_id: string | null
  updated_at: Date
}

/** Inserts the first token of a session (parent ''). */
export async function insertRefreshToken(
  q: Queryable,
  t: { userId: string; sessionId: string; parent?: string; now: Date },
): Promise<string> {
  const token = generateRefreshToken()
  await q.query(
    `INSERT INTO auth.refresh_tokens (instance_id, token, user_id, revoked, created_at, updated_at, parent, session_id)
     VALUES ($1, $2, $3, false, $4, $4, $5, $6)`,
    [NIL_UUID, token, t.userId, t.now, t.parent ?? '', t.sessionId],
  )
  return token
}

/** Everything the refresh grant needs, read in one statement (no lock). */
interface RefreshContext {
  token: RefreshTokenRow
  sessionExists: boolean
  sessionNotAfter: Date | null
  user: UserRow | null
  identities: IdentityRow[]
  factors: FactorRow[]
  amr: AmrEntry[]
}

interface ContextRow extends UserRow {
  rt_id: string
  rt_token: string
  rt_user_id: string
  rt_revoked: boolean
  rt_parent: string | null
  rt_session_id: string | null
  rt_updated_at: Date
  s_id: string | null
  s_not_after: Date | null
  identities_json: Array<
    Omit<IdentityRow, 'created_at' | 'updated_at' | 'last_sign_in_at'> & {
      created_at: string | null
      updated_at: string | null
      last_sign_in_at: string | null
    }
  > | null
  amr_json: Array<{ method: string; timestamp: number }> | null
  factors_json: Array<
    Omit<FactorRow, 'created_at' | 'updated_at' | 'last_challenged_at'> & {
      created_at: string
      updated_at: string
      last_challenged_at: string | null
    }
  > | null
}

export async function loadRefreshContext(q: Queryable, token: string): Promise<RefreshContext | null> {
  const r = await q.query<ContextRow>({
    name: 'gatehouse_auth_load_refresh_context',
    text: `SELECT rt.id AS rt_id, rt.token AS rt_token, rt.user_id AS rt_user_id, rt.revoked AS rt_revoked, rt.parent AS rt_parent,
            rt.session_id AS rt_session_id, rt.updated_at AS rt_updated_at, s.id AS s_id, s.not_after AS s_not_after,
            ${USER_SELECT}, ${IDENTITIES_JSON} AS identities_json, ${AMR_JSON('s.id')} AS amr_json, ${FACTORS_JSON} AS factors_json
       FROM auth.refresh_tokens rt
       LEFT JOIN auth.sessions s ON s.id = rt.session_id
       LEFT JOIN auth.users u ON u.id = rt.user_id::uuid
      WHERE rt.token = $1`,
    values: [token],
  })
  const row = r.rows[0]
  return row ? toContext(row) : null
}

// A user's identities, factors and a session's AMR claims, each as one json array (empty: `[]`).
// ARRAY(SELECT ...) rather than json_agg(...): the same array, with no Agg node for Postgres to
// set up and run per execution (a sixth of the refresh statement's CPU). Identities and factors
// come unordered and are put in order here (identitiesOf, factorsOf): their Sort nodes (set
// up, filled and torn down on every execution, whatever the row count) were about 3% of the
// statement's Postgres CPU. The AMR claims keep theirs: their json has no exact sort key.
export const IDENTITIES_JSON = `pg_catalog.array_to_json(ARRAY(SELECT pg_catalog.json_build_object('id', i.id, 'provider_id', i.provider_id,
    'user_id', i.user_id, 'identity_data', i.identity_data, 'provider', i.provider, 'last_sign_in_at', i.last_sign_in_at,
    'created_at', i.created_at, 'updated_at', i.updated_at, 'email', i.email)
  FROM auth.identities i WHERE i.user_id = u.id))`

export const FACTORS_JSON = `pg_catalog.array_to_json(ARRAY(SELECT pg_catalog.json_build_object('id', f.id, 'user_id', f.user_id,
    'friendly_name', f.friendly_name, 'factor_type', f.factor_type, 'status', f.status, 'created_at', f.created_at,
    'updated_at', f.updated_at, 'secret', NULL, 'phone', f.phone, 'last_challenged_at', f.last_challenged_at,
    'web_authn_aaguid', f.web_authn_aaguid, 'last_webauthn_challenge_data', f.last_webauthn_challenge_data)
  FROM auth.mfa_factors f WHERE f.user_id = u.id))`

export const AMR_JSON = (
  sessionId: string,
) => `pg_catalog.array_to_json(ARRAY(SELECT pg_catalog.json_build_object('method', a.authentication_method,
    'timestamp', pg_catalog.floor(extract(epoch FROM a.updated_at))::bigint)
  FROM auth.mfa_amr_claims a WHERE a.session_id = ${sessionId} ORDER BY a.updated_at DESC))`

function toContext(row: ContextRow): RefreshContext {
  return {
    token: {
      id: row.rt_id,
      token: row.rt_token,
      user_id: row.rt_user_id,
      revoked: row.rt_revoked,
      parent: row.rt_parent,
      session_id: row.rt_session_id,
      updated_at: row.rt_updated_at,
    },
    sessionExists: row.s_id !== null,
    sessionNotAfter: row.s_not_after,
    user: row.id ? userOf(row) : null,
    identities: identitiesOf(row.identities_json),
    factors: factorsOf(row.factors_json),
    amr: row.amr_json ?? [],
  }
}

const dateOrNull = (v: string | null): Date | null => (v ? new Date(v) : null)

/** The identities in `ORDER BY created_at, id` order, timestamps as Dates. */
function identitiesOf(json: ContextRow['identities_json']): IdentityRow[] {
  return inCreationOrder(json ?? [], true).map((i) => ({
    ...i,
    created_at: dateOrNull(i.created_at),
    updated_at: dateOrNull(i.updated_at),
    last_sign_in_at: dateOrNull(i.last_sign_in_at),
  }))
}

/** The factors in `ORDER BY created_at` order, timestamps as Dates. */
function factorsOf(json: ContextRow['factors_json']): FactorRow[] {
  return inCreationOrder(json ?? [], false).map((f) => ({
    ...f,
    created_at: new Date(f.created_at),
    updated_at: new Date(f.updated_at),
    last_challenged_at: dateOrNull(f.last_challenged_at),
  }))
}

/**
 * The hot path of the refresh grant in one prepared statement: when the presented token is
 * live, its user exists and is not banned, and its session exists and has not passed
 * not_after, the token is revoked, its child inserted, the session touched, and the user,
 * identities, factors and AMR returned. Empty in every other case (unknown, revoked, banned,
 * no session): the caller then takes the slow path, which tells these cases apart.
 *
 * The revoking UPDATE joins the session and the user and returns the user's columns, so no
 * second read of them; the child insert and the session touch are CTEs on its one row, which
 * Postgres runs to completion without the outer SELECT reading them. A concurrent refresh of
 * the same token waits for this statement's row lock and then finds the token revoked (the
 * UPDATE's re-check), so it too takes the slow path, which answers it as a reuse. A session of
 * an OAuth 2.1 client never takes this statement: the slow path checks its client first.
 */
export async function rotateLiveToken(
  q: Queryable,
  token: string,
  now: Date,
): Promise<{ newToken: string; context: HotContext } | null> {
  const next = generateRefreshToken()
  const row = await preparedRow(
    q,
    'gatehouse_auth_rotate_live_token',
    `WITH cur AS (
        UPDATE auth.refresh_tokens rt SET revoked = true, updated_at = $2
          FROM auth.sessions s, auth.users u
         WHERE rt.token = $1 AND rt.revoked = false
           AND s.id = rt.session_id AND u.id = rt.user_id::uuid
           AND (u.banned_until IS NULL OR u.banned_until <= $2)
           AND (s.not_after IS NULL OR s.not_after >= $2) AND s.oauth_client_id IS NULL
        RETURNING rt.token AS rt_token, rt.user_id AS rt_user_id, rt.session_id, ${USER_JSON} AS user_json,
          ${IDENTITIES_JSON} AS identities_json, ${AMR_JSON('rt.session_id')} AS amr_json, ${FACTORS_JSON} AS factors_json
     ), ins AS (
        INSERT INTO auth.refresh_tokens (instance_id, token, user_id, revoked, created_at, updated_at, parent, session_id)
        SELECT $4, $3, cur.rt_user_id, false, $2, $2, cur.rt_token, cur.session_id FROM cur
     ), sess AS (
        UPDATE auth.sessions SET refreshed_at = ($2::timestamptz AT TIME ZONE 'UTC'), updated_at = $2
         WHERE id = (SELECT cur.session_id FROM cur)
     )
     SELECT session_id, user_json, identities_json, amr_json, factors_json FROM cur`,
    // The clock as ISO text: what the driver would send for the Date, without its own formatting.
    [token, now.toISOString(), next, NIL_UUID],
  ).catch(nullIfDeleted)
  if (!row) return null
  return { newToken: next, context: toHotContext(row) }
}

/** What the hot path hands to the token response. */
export interface HotContext {
  sessionId: string
  user: UserRow
  identities: IdentityRow[]
  factors: FactorRow[]
  amr: AmrEntry[]
}

/** The hot statement's row, read by position: session_id, then the user, identities, AMR and factors as json text. */
export function toHotContext(row: RowFields): HotContext {
  const json = (i: number): unknown => (row[i] == null ? null : JSON.parse(row[i]))
  return {
    sessionId: row[0]!,
    user: userFromJson(json(1) as Record<string, unknown>),
    identities: identitiesOf(json(2) as ContextRow['identities_json']),
    amr: (json(3) as ContextRow['amr_json']) ?? [],
    factors: factorsOf(json(4) as ContextRow['factors_json']),
  }
}

/**
 * A catch handler for a write that lost a race with a concurrent delete of its session: null
 * (the slow path tells) for a foreign key violation (23503) or a deadlock between our row lock
 * and the cascade (40P01); any other error is thrown again.
 */
export function nullIfDeleted(err: unknown): null {
  const code = (err as { code?: string } | null)?.code
  if (code === '23503' || code === '40P01') return null
  throw err
}

export type RotateOutcome =
  { kind: 'rotated'; token: string } | { kind: 'locked' } | { kind: 'revoked' } | { kind: 'gone' }

/**
 * Step 3 of §5.2 in one statement: lock the presented token (SKIP LOCKED), and if it is
 * not revoked, revoke it, insert its child and touch the session. `locked` means a
 * concurrent refresh holds the row (the caller retries); `revoked` sends the caller to
 * the reuse path.
 */
export async function rotateRefreshToken(
  q: Queryable,
  t: { id: string; userId: string; sessionId: string; now: Date },
): Promise<RotateOutcome> {
  const next = generateRefreshToken()
  const r = await q
    .query<{ locked: number; was_revoked: boolean | null; new_token: string | null }>(
      `WITH cur AS (
        SELECT id, token, revoked FROM auth.refresh_tokens WHERE id = $1 FOR UPDATE SKIP LOCKED
     ), rev AS (
        UPDATE auth.refresh_tokens t SET revoked = true, updated_at = $3 FROM cur
         WHERE t.id = cur.id AND NOT cur.revoked RETURNING t.id
     ), ins AS (
        INSERT INTO auth.refresh_tokens (instance_id, token, user_id, revoked, created_at, updated_at, parent, session_id)
        SELECT $4, $2, $5, false, $3, $3, cur.token, $6 FROM cur JOIN rev ON rev.id = cur.id
        RETURNING token
     ), sess AS (
        UPDATE auth.sessions SET refreshed_at = ($3::timestamptz AT TIME ZONE 'UTC'), updated_at = $3
         WHERE id = $6 AND EXISTS (SELECT 1 FROM ins) RETURNING id
     )
     SELECT (SELECT pg_catalog.count(*) FROM cur)::int AS locked, (SELECT revoked FROM cur) AS was_revoked,
            (SELECT token FROM ins) AS new_token, (SELECT pg_catalog.count(*) FROM sess)::int AS touched`,
      [t.id, next, t.now, NIL_UUID, t.userId, t.sessionId],
    )
    .catch(nullIfDeleted)
  if (!r) return { kind: 'gone' }
  const row = r.rows[0]!
  if (row.locked === 0) return (await rowExists(q, 'refresh_tokens', t.id)) ? { kind: 'locked' } : { kind: 'gone' }
  if (row.was_revoked) return { kind: 'revoked' }
  return row.new_token ? { kind: 'rotated', token: row.new_token } : { kind: 'gone' }
}

/** Whether the row `id` of the table exists: a row a SKIP LOCKED read passed over is held by another transaction. */
export async function rowExists(q: Queryable, table: 'refresh_tokens' | 'sessions', id: string): Promise<boolean> {
  const r = await q.query(`SELECT 1 FROM auth.${table} WHERE id = $1`, [id])
  return (r.rowCount ?? 0) > 0
}

/** Locks the token and its session for the reuse path; null when another refresh holds them. */
export async function lockTokenAndSession(
  q: Queryable,
  tokenId: string,
  sessionId: string,
): Promise<{ token: RefreshTokenRow | null } | null> {
  const t = await q.query<RefreshTokenRow>(
    'SELECT id, token, user_id, revoked, parent, session_id, updated_at FROM auth.refresh_tokens WHERE id = $1 FOR UPDATE SKIP LOCKED',
    [tokenId],
  )
  if (!t.rows[0]) return (await rowExists(q, 'refresh_tokens', tokenId)) ? null : { token: null }
  const s = await q.query('SELECT id FROM auth.sessions WHERE id = $1 FOR UPDATE SKIP LOCKED', [sessionId])
  if (!s.rows[0]) return (await rowExists(q, 'sessions', sessionId)) ? null : { token: null }
  return { token: t.rows[0] }
}

/** The newest non-revoked token of a session (the "active" token of §5.2 step 4a). */
export async function activeTokenOfSession(q: Queryable, sessionId: string): Promise<RefreshTokenRow | null> {
  const r = await q.query<RefreshTokenRow>(
    `SELECT id, token, user_id, revoked, parent, session_id, updated_at FROM auth.refresh_tokens
      WHERE session_id = $1 AND revoked = false ORDER BY id DESC LIMIT 1`,
    [sessionId],
  )
  return r.rows[0] ?? null
}

/** Revokes one token. */
export async function revokeRefreshToken(q: Queryable, id: string, now: Date): Promise<void> {
  await q.query('UPDATE auth.refresh_tokens SET revoked = true, updated_at = $2 WHERE id = $1', [id, now])
}

/** Revokes every token of a session (reuse detected). */
export async function revokeSessionTokens(q: Queryable, sessionId: string, now: Date): Promise<void> {
  await q.query(
    'UPDATE auth.refresh_tokens SET revoked = true, updated_at = $2 WHERE session_id = $1 AND revoked = false',
    [sessionId, now],
  )
}

export async function touchSession(q: Queryable, sessionId: string, now: Date): Promise<void> {
  await q.query(
    `UPDATE auth.sessions SET refreshed_at = ($2::timestamptz AT TIME ZONE 'UTC'), updated_at = $2 WHERE id = $1`,
    [sessionId, now],
  )
}

export async function deleteRefreshToken(q: Queryable, id: string): Promise<void> {
  await q.query('DELETE FROM auth.refresh_tokens WHERE id = $1', [id])
}

// Refresh tokens v2 in auth.sessions (docs/auth-protocol.md §5.3; supabase/auth
// internal/models/sessions.go, refresh_token.go): a session holds its HMAC key
// (refresh_token_hmac_key, base64url as GoTrue stores it without database encryption) and the
// counter of the newest token it issued (refresh_token_counter). A refresh touches only the
// session row, in columns no index covers, so Postgres can update it in place (a HOT update):
// no row per token, no index entry per refresh.
import { preparedRow, quoteIdent, type Queryable } from '../../shared/index.js'
import { LRUCache } from 'lru-cache'
import { hasValidSignature, newRefreshTokenKey, type RefreshTokenV2 } from '../refresh-token-v2.js'
import type { AmrEntry, FactorRow, IdentityRow, UserRow } from '../types.js'
import {
  AMR_JSON,
  FACTORS_JSON,
  IDENTITIES_JSON,
  isConcurrentDeletion,
  toHotContext,
  type HotContext,
} from './refresh-tokens.js'
import { USER_JSON } from './users.js'

// The hot statement checks a token's signature against the key in the row it updates, in the
// same statement: with pgcrypto's hmac() where the database has it (migration 0230 installs it
// in `extensions`, as Supabase projects have it), else HMAC-SHA-256 (RFC 2104) built on
// Postgres' own sha256() (11 and later): the 32-byte key XORed with ipad/opad eight bytes at a
// time as bigints. Postgres sets up every node of these expressions on each execution, which
// made the sha256() form cost about 50 µs of its CPU per refresh; hmac() is one call.
const IPAD = '3906369333256140342' // 0x3636363636363636
const OPAD = '6655295901103053916' // 0x5c5c5c5c5c5c5c5c
const xorKey = (key: string, pad: string): string =>
  [1, 9, 17, 25]
    .map(
      (at) =>
        `pg_catalog.int8send(('x' || pg_catalog.encode(pg_catalog.substr(${key}, ${at}, 8), 'hex'))::bit(64)::bigint # ${pad})`,
    )
    .join(' || ')

const sha256Hmac = (signed: string): string =>
  `pg_catalog.sha256(${xorKey('k.b', OPAD)} || '\\x${'5c'.repeat(32)}'::bytea
      || pg_catalog.sha256(${xorKey('k.b', IPAD)} || '\\x${'36'.repeat(32)}'::bytea || ${signed}::bytea))`

/**
 * True when the first 16 bytes of HMAC-SHA-256(key, signed) equal the presented signature,
 * compared by their SHA-256 hashes, so the comparison's time tells nothing about the expected
 * signature. A key that is not 43 base64url characters (32 bytes) never matches here; the slow
 * path reads it. `pgcrypto`: the schema of pgcrypto's hmac(), or null.
 */
const signatureHolds = (keyText: string, signed: string, signature: string, pgcrypto: string | null): string =>
  `(SELECT pg_catalog.sha256(pg_catalog.substr(${
    pgcrypto === null ? sha256Hmac(signed) : `${quoteIdent(pgcrypto)}.hmac(${signed}::bytea, k.b, 'sha256'::text)`
  }, 1, 16)) = pg_catalog.sha256(${signature}::bytea)
     FROM (SELECT pg_catalog.decode(pg_catalog.translate(${keyText}, '-_', '+/') || '=', 'base64') AS b
            WHERE ${keyText} ~ '^[A-Za-z0-9_-]{43}$') k)`

/** The schema of pgcrypto's hmac() where the engine's login may call it, per pool; null without. */
const pgcryptoSchemas = new WeakMap<Queryable, Promise<string | null> | { readonly schema: string | null }>()

/** The look-up's answer once it came (no promise to await on the hot path), else its promise. */
function pgcryptoSchemaOf(q: Queryable): Promise<string | null> | { readonly schema: string | null } {
  let found = pgcryptoSchemas.get(q)
  if (found === undefined) {
    const lookup = q
      .query<{ schema: string }>(
        `SELECT n.nspname AS schema FROM pg_catalog.pg_extension e
           JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace
          WHERE e.extname = 'pgcrypto' AND pg_catalog.has_schema_privilege(n.oid, 'USAGE')
            AND pg_catalog.has_function_privilege(
                  pg_catalog.to_regprocedure(pg_catalog.format('%I.hmac(bytea, bytea, text)', n.nspname)), 'EXECUTE')`,
      )
      .then((r) => r.rows[0]?.schema ?? null)
    lookup.then(
      (schema) => {
        if (pgcryptoSchemas.get(q) === lookup) pgcryptoSchemas.set(q, { schema })
      },
      () => pgcryptoSchemas.delete(q),
    )
    pgcryptoSchemas.set(q, lookup)
    found = lookup
  }
  return found
}

/** The extension's schema or function went away since it was looked up (3F000, 42883). */
function lostPgcrypto(q: Queryable, err: unknown): boolean {
  const code = (err as { code?: string } | null)?.code
  if (code !== '3F000' && code !== '42883') return false
  pgcryptoSchemas.delete(q)
  return true
}

/**
 * What the hot path remembers of a session it refreshed, per pool: the session's HMAC key
 * (set once when the session is set up for v2, never changed by the engine) and its user's
 * json with the users row version it was read at. With the key, the engine checks a token's
 * signature itself and the statement only compares the key's text (pgcrypto's hmac() was
 * about 35 µs of Postgres' CPU per refresh); with the version, the statement builds the
 * user's json only when the row changed since (about 50 µs). The statement checks both against
 * the row it updates, so a stale entry costs nothing but the long form.
 *
 * The version is the row's xmin and ctid: every update writes a new tuple (HOT or not) at
 * another line pointer while the old one still stands, with the writing transaction's xid,
 * and only committed tuples are seen; the same pair again would take a line pointer reused
 * after pruning and that xid again after wraparound. Entries expire after a minute.
 */
interface RememberedSession {
  readonly key: string
  readonly userVersion: string
  readonly userJson: string
}

const SESSIONS_REMEMBERED = 1_000
const REMEMBERED_FOR_MS = 60_000
const rememberedSessions = new WeakMap<Queryable, LRUCache<string, RememberedSession>>()

function rememberedOf(q: Queryable): LRUCache<string, RememberedSession> {
  let cache = rememberedSessions.get(q)
  if (cache === undefined) {
    cache = new LRUCache({ max: SESSIONS_REMEMBERED, ttl: REMEMBERED_FOR_MS })
    rememberedSessions.set(q, cache)
  }
  return cache
}

const USER_VERSION = `u.xmin::text || u.ctid::text`

const RETURNING = `RETURNING s.id, CASE WHEN ${USER_VERSION} = $9 THEN NULL ELSE ${USER_JSON} END AS user_json,
       ${IDENTITIES_JSON} AS identities_json, ${AMR_JSON('s.id')} AS amr_json, ${FACTORS_JSON} AS factors_json,
       s.refresh_token_hmac_key, ${USER_VERSION}`

const rotateStatements = new Map<string, { name: string; text: string }>()

/**
 * The hot statement with the signature checked in SQL (with pgcrypto's hmac() in `pgcrypto`'s
 * schema, or the sha256() form for null), or, for KEYED, by comparing the session's key with
 * the one the engine checked the signature with. One text, and one prepared statement name, per form.
 */
const KEYED = '\0keyed'
function rotateStatement(form: string | null): { name: string; text: string } {
  const id = form ?? ''
  let st = rotateStatements.get(id)
  if (st === undefined) {
    const check =
      form === KEYED
        ? 's.refresh_token_hmac_key = $8 AND $4::bytea IS NOT NULL AND $5::bytea IS NOT NULL'
        : `$8::text IS NULL AND ${signatureHolds('s.refresh_token_hmac_key', '$4', '$5', form)}`
    st = {
      name:
        form === KEYED
          ? 'gatehouse_auth_rotate_session_token_keyed'
          : form === null
            ? 'gatehouse_auth_rotate_session_token'
            : `gatehouse_auth_rotate_session_token_${form}`,
      text: `UPDATE auth.sessions s SET refresh_token_counter = s.refresh_token_counter + 1,
            refreshed_at = ($2::timestamptz AT TIME ZONE 'UTC'), updated_at = $2, user_agent = $6, ip = $7::inet
       FROM auth.users u
      WHERE s.id = $1 AND s.refresh_token_counter = $3 AND u.id = s.user_id
        AND (u.banned_until IS NULL OR u.banned_until <= $2)
        AND (s.not_after IS NULL OR s.not_after >= $2) AND s.oauth_client_id IS NULL
        AND ${check}
     ${RETURNING}`,
    }
    rotateStatements.set(id, st)
  }
  return st
}

/** What a refresh writes into the session besides its counter (GoTrue's UpdateOnlyRefreshInfo). */
export interface RefreshInfo {
  readonly now: Date
  readonly userAgent: string | null
  readonly ip: string | null
}

const hex = (b: Buffer): string => '\\x' + b.toString('hex')

/**
 * The hot path of a v2 refresh in one prepared statement: when the session holds exactly the
 * presented counter, the token's signature holds for its key, its user is not banned and it has
 * not passed not_after, the counter moves on by one and the refresh info is written; the user,
 * identities, AMR and factors come back with the session's key. Empty in every other case
 * (reuse, bad signature, no session, banned, expired): the slow path tells them apart. A
 * concurrent refresh with the same token waits for this row lock and then finds the counter
 * moved (the UPDATE's re-check), so it takes the slow path, which answers it as a reuse.
 */
export async function rotateSessionToken(
  q: Queryable,
  t: RefreshTokenV2,
  info: RefreshInfo,
): Promise<{ key: string; context: HotContext } | null> {
  const remembered = rememberedOf(q)
  let known = remembered.get(t.sessionId)
  // A key the signature does not hold for may have been replaced: the statement checks in SQL.
  if (known !== undefined && !hasValidSignature(t, known.key)) known = undefined
  let form: string | null = KEYED
  if (known === undefined) {
    const pgcrypto = pgcryptoSchemaOf(q)
    form = pgcrypto instanceof Promise ? await pgcrypto : pgcrypto.schema
  }
  const st = rotateStatement(form)
  const row = await preparedRow(q, st.name, st.text, [
    t.sessionId,
    info.now.toISOString(),
    t.counter.toString(),
    hex(t.signed),
    hex(t.signature),
    info.userAgent,
    info.ip,
    known?.key ?? null,
    known?.userVersion ?? null,
  ]).catch((err: unknown) => {
    // The session went away under us, or pgcrypto did: the slow path tells.
    if (isConcurrentDeletion(err) || lostPgcrypto(q, err)) return null
    throw err
  })
  if (!row) {
    remembered.delete(t.sessionId)
    return null
  }
  const key = row[5]!
  const userJson = row[1] ?? known!.userJson
  remembered.set(t.sessionId, { key, userVersion: row[6]!, userJson })
  return { key, context: toHotContext([row[0]!, userJson, row[2]!, row[3]!, row[4]!]) }
}

/** A v2 session as the slow path reads it (no lock). */
export interface SessionTokenContext {
  readonly key: string | null
  readonly counter: bigint | null
  readonly notAfter: Date | null
  readonly user: UserRow
  readonly identities: IdentityRow[]
  readonly factors: FactorRow[]
  readonly amr: AmrEntry[]
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
  const c = toHotContext(row)
  return {
    key: row[5] ?? null,
    counter: row[6] == null ? null : BigInt(row[6]),
    notAfter: row[7] == null ? null : new Date(Math.floor(Number(row[7]))),
    user: c.user,
    identities: c.identities,
    factors: c.factors,
    amr: c.amr,
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
  if (!row) {
    const exists = await q.query('SELECT 1 FROM auth.sessions WHERE id = $1', [sessionId])
    return (exists.rowCount ?? 0) === 0 ? 'gone' : null
  }
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

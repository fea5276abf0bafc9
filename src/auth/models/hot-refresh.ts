// The one-statement refresh of a v2 token (docs/auth-protocol.md §5.3): the common case of
// grant_type=refresh_token, one prepared statement in one round trip that moves the session's
// counter on when the presented token is its current one and answers the user, identities,
// AMR claims and factors the response needs. grants/refresh-token-v2.ts takes the slow path
// (models/session-tokens.ts) whenever this answers null.
import { LRUCache } from 'lru-cache'
import { preparedRow, quoteIdent, type Queryable, type RowFields } from '../../shared/index.js'
import { hasValidSignature, type RefreshTokenV2 } from '../refresh-token-format.js'
import {
  AMR_JSON,
  FACTORS_JSON,
  IDENTITIES_JSON,
  nullIfDeleted,
  toHotContext,
  type HotContext,
} from './refresh-tokens.js'
import type { RefreshInfo } from './session-tokens.js'
import { USER_JSON } from './users.js'

// The hot statement checks a token's signature against the key in the row it updates, in the
// same statement: with pgcrypto's hmac() where the database has it (migration 0230 installs it
// in `extensions`, as Supabase projects have it), else HMAC-SHA-256 (RFC 2104) built on
// Postgres' own sha256() (11 and later): the 32-byte key XORed with ipad/opad eight bytes at a
// time as bigints. Postgres sets up every node of these expressions on each execution, which
// makes the sha256() form much dearer than hmac(), one call (docs/benchmarks.md).
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
 * What the engine remembers of a session it refreshed, per process (`auth.remembered_sessions`
 * sessions at most, the least recently refreshed forgotten first, each for two hours at most):
 * the session's HMAC key (set once when the session is set up for v2), the versions of the
 * session row it wrote and of the users row it read, and the answer's json (user, identities,
 * AMR, factors), about 2 KB. A version is the row's xmin and ctid: every UPDATE writes a new
 * tuple (HOT or not) at another line pointer while the old one still stands, with the writing
 * transaction's xid, and only committed tuples are seen, so the same pair again would take a
 * reused line pointer and that xid again after wraparound (2^32 transactions: more than two
 * hours even at 500,000 a second).
 *
 * When both rows are still the versions remembered, nothing the answer holds has changed: the
 * user's columns are in the users row, and migration 0240 writes a new version of a session
 * whenever its user's identities or factors or its own AMR claims change. The refresh is then
 * the short statement, which reads no other table and builds no json (the long one's
 * subqueries and json were about half of Postgres' CPU per refresh). Otherwise the long
 * statement answers, checking the signature by the key's text when the engine checked it
 * with the remembered key (hmac() in Postgres costs more than the engine's check) and building the
 * user's json only when the users row changed. A stale entry costs one more statement, never
 * a stale answer. Entries are keyed by the tenant's pool and the session.
 */
interface RememberedSession {
  readonly key: string
  readonly userVersion: string
  readonly sessionVersion: readonly [xmin: string, ctid: string]
  /** The long statement's first five fields: session id, user, identities, AMR, factors. */
  readonly answer: RowFields
}

const REMEMBERED_FOR_MS = 2 * 60 * 60 * 1000
let remembered: LRUCache<string, RememberedSession> | null = new LRUCache({
  max: 10_000,
  ttl: REMEMBERED_FOR_MS,
})

/** How many sessions a process remembers (auth.remembered_sessions); 0: none, every refresh reads everything. */
export function setRememberedSessions(max: number): void {
  remembered = max === 0 ? null : new LRUCache({ max, ttl: REMEMBERED_FOR_MS })
}

const poolIds = new WeakMap<Queryable, number>()
let nextPoolId = 0

/** The cache key of a session of the tenant whose pool `q` is. */
function rememberedKey(q: Queryable, sessionId: string): string {
  let id = poolIds.get(q)
  if (id === undefined) {
    id = nextPoolId++
    poolIds.set(q, id)
  }
  return `${id}:${sessionId}`
}

const USER_VERSION = `u.xmin::text || u.ctid::text`

const SET_REFRESHED = `refresh_token_counter = s.refresh_token_counter + 1,
            refreshed_at = ($2::timestamptz AT TIME ZONE 'UTC'), updated_at = $2`

/**
 * The short statement: the session row found by its remembered ctid (a TID scan) and version,
 * its counter, the users row's version, and the checks that depend on the time (a ban that
 * ended or began, not_after passed). The key and the OAuth binding are those of the version.
 */
const SHORT = {
  name: 'gatehouse_auth_refresh_remembered_session',
  text: `UPDATE auth.sessions s SET ${SET_REFRESHED}, user_agent = $5, ip = $6::inet
       FROM auth.users u
      WHERE s.ctid = $7::tid AND s.xmin::text = $8 AND s.id = $1 AND s.refresh_token_counter = $3
        AND u.id = s.user_id AND ${USER_VERSION} = $4
        AND (u.banned_until IS NULL OR u.banned_until <= $2)
        AND (s.not_after IS NULL OR s.not_after >= $2)
     RETURNING s.xmin::text, s.ctid::text`,
}

/** The long statement's answer; the user's json left out (null) when the users row is the version `$9`, where given. */
const longReturning = (userJson: string): string => `RETURNING s.id, ${userJson} AS user_json,
       ${IDENTITIES_JSON} AS identities_json, ${AMR_JSON('s.id')} AS amr_json, ${FACTORS_JSON} AS factors_json,
       s.refresh_token_hmac_key, ${USER_VERSION}, s.xmin::text, s.ctid::text`

const longStatements = new Map<string, { name: string; text: string }>()

/**
 * The long statement with the signature checked in SQL (with pgcrypto's hmac() in `pgcrypto`'s
 * schema, or the sha256() form for null), or, for KEYED, by comparing the session's key with
 * the one the engine checked the signature with. One text, and one prepared statement name, per form.
 */
const KEYED = '\0keyed'
function longStatement(form: string | null): { name: string; text: string } {
  const id = form ?? ''
  let st = longStatements.get(id)
  if (st === undefined) {
    // Nothing remembered: the signature checked in SQL and every field built (seven parameters).
    // The key remembered: its text compared, and the user's version (nine parameters).
    const [check, userJson] =
      form === KEYED
        ? [
            's.refresh_token_hmac_key = $8 AND $4::bytea IS NOT NULL AND $5::bytea IS NOT NULL',
            `CASE WHEN ${USER_VERSION} = $9 THEN NULL ELSE ${USER_JSON} END`,
          ]
        : [signatureHolds('s.refresh_token_hmac_key', '$4', '$5', form), USER_JSON]
    st = {
      name:
        form === KEYED
          ? 'gatehouse_auth_rotate_session_token_keyed'
          : form === null
            ? 'gatehouse_auth_rotate_session_token'
            : `gatehouse_auth_rotate_session_token_${form}`,
      text: `UPDATE auth.sessions s SET ${SET_REFRESHED}, user_agent = $6, ip = $7::inet
       FROM auth.users u
      WHERE s.id = $1 AND s.refresh_token_counter = $3 AND u.id = s.user_id
        AND (u.banned_until IS NULL OR u.banned_until <= $2)
        AND (s.not_after IS NULL OR s.not_after >= $2) AND s.oauth_client_id IS NULL
        AND ${check}
     ${longReturning(userJson)}`,
    }
    longStatements.set(id, st)
  }
  return st
}

const hex = (b: Buffer): string => '\\x' + b.toString('hex')

/**
 * The hot path of a v2 refresh: when the session holds exactly the presented counter, the
 * token's signature holds for its key, its user is not banned and it has not passed not_after,
 * the counter moves on by one and the refresh info is written; the user, identities, AMR and
 * factors come back with the session's key. Null in every other case (reuse, bad signature,
 * no session, banned, expired): the slow path tells them apart. A concurrent refresh with the
 * same token waits for this row lock and then finds the counter (and the row's version) moved
 * (the UPDATE's re-check), so it takes the slow path, which answers it as a reuse.
 */
export async function rotateSessionToken(
  q: Queryable,
  t: RefreshTokenV2,
  info: RefreshInfo,
): Promise<{ key: string; context: HotContext } | null> {
  const slot = rememberedKey(q, t.sessionId)
  let known = remembered?.get(slot)
  // A key the signature does not hold for may have been replaced: the long statement checks in SQL.
  if (known !== undefined && !hasValidSignature(t, known.key)) known = undefined
  if (known !== undefined) {
    const [xmin, ctid] = known.sessionVersion
    const row = await preparedRow(q, SHORT.name, SHORT.text, [
      t.sessionId,
      info.now.toISOString(),
      t.counter.toString(),
      known.userVersion,
      info.userAgent,
      info.ip,
      ctid,
      xmin,
    ]).catch(nullIfDeleted)
    if (row) {
      remembered?.set(slot, { ...known, sessionVersion: [row[0]!, row[1]!] })
      return { key: known.key, context: toHotContext(known.answer) }
    }
  }
  return rotateByLongStatement(q, slot, t, info, known)
}

async function rotateByLongStatement(
  q: Queryable,
  slot: string,
  t: RefreshTokenV2,
  info: RefreshInfo,
  known: RememberedSession | undefined,
): Promise<{ key: string; context: HotContext } | null> {
  let form: string | null = KEYED
  if (known === undefined) {
    const pgcrypto = pgcryptoSchemaOf(q)
    form = pgcrypto instanceof Promise ? await pgcrypto : pgcrypto.schema
  }
  const st = longStatement(form)
  const values = [
    t.sessionId,
    info.now.toISOString(),
    t.counter.toString(),
    hex(t.signed),
    hex(t.signature),
    info.userAgent,
    info.ip,
  ]
  if (known !== undefined) values.push(known.key, known.userVersion)
  const row = await preparedRow(q, st.name, st.text, values).catch((err: unknown) =>
    lostPgcrypto(q, err) ? null : nullIfDeleted(err),
  )
  if (!row) {
    remembered?.delete(slot)
    return null
  }
  const answer = [row[0]!, row[1] ?? known!.answer[1]!, row[2]!, row[3]!, row[4]!]
  const key = row[5]!
  remembered?.set(slot, { key, userVersion: row[6]!, sessionVersion: [row[7]!, row[8]!], answer })
  return { key, context: toHotContext(answer) }
}

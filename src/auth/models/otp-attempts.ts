// auth.gatehouse_otp_attempts (migration 0101): how many codes were entered against each
// one-time token; auth.gatehouse_otp_address_attempts (migration 0170): how many for each
// address within a window (a new code, or guesses from many client IPs, give no fresh
// tries). A verification by code counts its attempt before the code is checked, so
// concurrent guesses cannot slip past the limit; a code whose count reached the limit no
// longer verifies (a right code consumes its token, and the count goes with it). A mailed
// link (the token hash) is never counted nor refused by these counts (docs/edge.md).
import type { Queryable } from '../../shared/index.js'
import type { OneTimeTokenType } from './one-time-tokens.js'

/**
 * Counts one attempt against every outstanding token of `types` sent to `address`;
 * returns the highest count among them (0 when the address has no such token).
 */
export async function countOtpAttempt(
  q: Queryable,
  address: string,
  types: readonly OneTimeTokenType[],
): Promise<number> {
  const r = await q.query<{ attempts: number }>(
    `INSERT INTO auth.gatehouse_otp_attempts (token_id, attempts)
     SELECT id, 1 FROM auth.one_time_tokens WHERE relates_to = $1 AND token_type::text = ANY($2::text[])
     ON CONFLICT (token_id) DO UPDATE SET attempts = auth.gatehouse_otp_attempts.attempts + 1
     RETURNING attempts`,
    [address.toLowerCase(), types],
  )
  return r.rows.reduce((m, row) => Math.max(m, row.attempts), 0)
}

/** Attempts counted against one token (0 when none). */
export async function otpAttemptsOf(q: Queryable, tokenId: string): Promise<number> {
  const r = await q.query<{ attempts: number }>(
    'SELECT attempts FROM auth.gatehouse_otp_attempts WHERE token_id = $1',
    [tokenId],
  )
  return r.rows[0]?.attempts ?? 0
}

/**
 * Counts one code entered for `address` in the window that started at most `windowSeconds`
 * before `now` (a new window when the last one is over); returns the count in the window.
 */
export async function countAddressAttempt(
  q: Queryable,
  address: string,
  windowSeconds: number,
  now: Date,
): Promise<number> {
  const r = await q.query<{ attempts: number }>(
    `INSERT INTO auth.gatehouse_otp_address_attempts AS a (address, window_started, attempts) VALUES ($1, $2, 1)
     ON CONFLICT (address) DO UPDATE SET
       window_started = CASE WHEN a.window_started + make_interval(secs => $3) <= $2 THEN $2 ELSE a.window_started END,
       attempts = CASE WHEN a.window_started + make_interval(secs => $3) <= $2 THEN 1 ELSE a.attempts + 1 END
     RETURNING attempts`,
    [address.toLowerCase(), now, windowSeconds],
  )
  return r.rows[0]?.attempts ?? 1
}

/** A right code for `address`: its count starts over. */
export async function clearAddressAttempts(q: Queryable, address: string): Promise<void> {
  await q.query('DELETE FROM auth.gatehouse_otp_address_attempts WHERE address = $1', [address.toLowerCase()])
}

// auth.gatehouse_otp_attempts (migration 0101): how many codes were entered against each
// one-time token. A verification naming the address counts its attempt before the code is
// checked, so concurrent guesses cannot slip past the limit; a token whose count reached the
// limit through wrong codes no longer verifies (a right code consumes its token, and the
// count goes with it).
import type { Queryable } from '../../shared/index.js'
import type { OneTimeTokenType } from './one-time-tokens.js'

/**
 * Counts one attempt against every outstanding token of `types` sent to `address`;
 * returns the highest count among them (0 when the address has no such token).
 */
export async function countOtpAttempt (q: Queryable, address: string, types: readonly OneTimeTokenType[]): Promise<number> {
  const r = await q.query<{ attempts: number }>(
    `INSERT INTO auth.gatehouse_otp_attempts (token_id, attempts)
     SELECT id, 1 FROM auth.one_time_tokens WHERE relates_to = $1 AND token_type::text = ANY($2::text[])
     ON CONFLICT (token_id) DO UPDATE SET attempts = auth.gatehouse_otp_attempts.attempts + 1
     RETURNING attempts`, [address.toLowerCase(), types])
  return r.rows.reduce((m, row) => Math.max(m, row.attempts), 0)
}

/** Attempts counted against one token (0 when none). */
export async function otpAttemptsOf (q: Queryable, tokenId: string): Promise<number> {
  const r = await q.query<{ attempts: number }>('SELECT attempts FROM auth.gatehouse_otp_attempts WHERE token_id = $1', [tokenId])
  return r.rows[0]?.attempts ?? 0
}

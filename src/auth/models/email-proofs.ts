// auth.gatehouse_email_proofs: the addresses a user has proven to own by a mail round trip
// (a token sent to the address and verified). Auto-confirmation writes nothing here.
import type { Queryable } from '../../shared/index.js'

/** Records that `userId` verified a token mailed to `address`. */
export async function recordEmailProof(q: Queryable, userId: string, address: string, now: Date): Promise<void> {
  await q.query(
    `INSERT INTO auth.gatehouse_email_proofs (user_id, address, proven_at) VALUES ($1, pg_catalog.lower($2::text), $3)
     ON CONFLICT (user_id, address) DO UPDATE SET proven_at = EXCLUDED.proven_at`,
    [userId, address, now],
  )
}

/** Whether `userId` has proven `address` by a mail round trip. */
export async function hasEmailProof(q: Queryable, userId: string, address: string): Promise<boolean> {
  const r = await q.query(
    'SELECT 1 FROM auth.gatehouse_email_proofs WHERE user_id = $1 AND address = pg_catalog.lower($2::text)',
    [userId, address],
  )
  return (r.rowCount ?? 0) > 0
}

// Mail send limits of a tenant, kept in the tenant database (auth.gatehouse_mail_sends,
// migration 0100) so every engine process sees the same counts: at most
// `mail_rate_per_hour` mails per tenant in any hour (GoTrue RATE_LIMIT_EMAIL_SENT) and one
// mail per address and kind every `mail_min_interval` seconds (GoTrue SMTP_MAX_FREQUENCY).
import type { Queryable } from '../../shared/index.js'
import type { AuthSettings } from '../../tenants/index.js'
import { OverEmailSendRateLimitError } from '../errors.js'

// One transaction-level advisory lock key per database: "counting mail sends".
const LOCK_KEY = 0x6d61_696c // 'mail'

/**
 * Checks both limits and records the send, inside the caller's transaction (the advisory
 * lock is held until it ends, so concurrent sends of one tenant are counted one by one).
 * Throws 429 over_email_send_rate_limit.
 */
export async function reserveMailSend(
  q: Queryable,
  settings: Pick<AuthSettings, 'mail_min_interval' | 'mail_rate_per_hour'>,
  send: { address: string; bucket: string; now: Date },
): Promise<void> {
  await q.query('SELECT pg_advisory_xact_lock($1)', [LOCK_KEY])
  const address = send.address.toLowerCase()
  // The hour's count, and the send whose leaving the window frees the next slot.
  const r = await q.query<{ hour_count: number; frees_at: Date | null; last_sent: Date | null }>(
    `WITH hour AS (SELECT sent_at FROM auth.gatehouse_mail_sends WHERE sent_at > $1::timestamptz - interval '1 hour')
     SELECT (SELECT pg_catalog.count(*)::int FROM hour) AS hour_count,
            (SELECT sent_at + interval '1 hour' FROM hour ORDER BY sent_at DESC OFFSET greatest($4::int - 1, 0) LIMIT 1) AS frees_at,
            (SELECT pg_catalog.max(sent_at) FROM auth.gatehouse_mail_sends WHERE address = $2 AND kind = $3) AS last_sent`,
    [send.now, address, send.bucket, settings.mail_rate_per_hour],
  )
  const { hour_count: hourCount, frees_at: freesAt, last_sent: lastSent } = r.rows[0]!
  if (settings.mail_min_interval > 0 && lastSent) {
    const leftMs = lastSent.getTime() + settings.mail_min_interval * 1000 - send.now.getTime()
    // The message counts whole seconds left as GoTrue does (truncated: 59 right after a
    // send with a 60 s interval); Retry-After rounds up so a client waiting it is served.
    if (leftMs > 0)
      throw new OverEmailSendRateLimitError('wait', Math.floor(leftMs / 1000), {
        headers: { 'retry-after': String(Math.ceil(leftMs / 1000)) },
      })
  }
  if (hourCount >= settings.mail_rate_per_hour) {
    const wait = freesAt ? Math.ceil((freesAt.getTime() - send.now.getTime()) / 1000) : 3600
    throw new OverEmailSendRateLimitError('limit', { headers: { 'retry-after': String(Math.max(1, wait)) } })
  }
  await q.query('INSERT INTO auth.gatehouse_mail_sends (address, kind, sent_at) VALUES ($1, $2, $3)', [
    address,
    send.bucket,
    send.now,
  ])
  // Rows older than both windows are of no further use.
  const keepSeconds = Math.max(3600, settings.mail_min_interval)
  await q.query(
    `DELETE FROM auth.gatehouse_mail_sends WHERE sent_at < $1::timestamptz - pg_catalog.make_interval(secs => $2)`,
    [send.now, keepSeconds],
  )
}

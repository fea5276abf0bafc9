// SMTP transports (nodemailer), one pooled transport per distinct SMTP target, shared by
// the tenants that use it: the tenant's own `auth.smtp`, else the process's mail section.
import nodemailer, { type Transporter } from 'nodemailer'
import type { Config } from '../../config/index.js'
import type { Tenant } from '../../tenants/index.js'

interface SmtpTarget {
  host: string
  port: number
  secure: boolean
  user?: string
  pass?: string
}

interface Sender {
  address: string
  name?: string
}

export function smtpTargetOf(tenant: Tenant, config: Config): SmtpTarget {
  const s = tenant.auth.smtp
  if (s) return { host: s.host, port: s.port, secure: s.secure ?? s.port === 465, user: s.user, pass: s.pass }
  return { host: config.mail.smtp_host, port: config.mail.smtp_port, secure: false }
}

export function senderOf(tenant: Tenant): Sender {
  const s = tenant.auth.smtp
  return { address: s?.sender ?? 'no-reply@gatehouse.local', name: s?.sender_name ?? tenant.database }
}

export class TransportPool {
  #transports = new Map<string, Transporter>()

  get(target: SmtpTarget): Transporter {
    const key = JSON.stringify([target.host, target.port, target.secure, target.user ?? '', target.pass ?? ''])
    let t = this.#transports.get(key)
    if (!t) {
      t = nodemailer.createTransport({
        host: target.host,
        port: target.port,
        secure: target.secure,
        auth: target.user ? { user: target.user, pass: target.pass ?? '' } : undefined,
        pool: true,
        maxConnections: 2,
        connectionTimeout: 10_000,
        greetingTimeout: 10_000,
        socketTimeout: 20_000,
        // Local catchers and development servers offer no certificate worth checking.
        tls: { rejectUnauthorized: target.host !== '127.0.0.1' && target.host !== 'localhost' },
      })
      this.#transports.set(key, t)
    }
    return t
  }

  close(): void {
    for (const t of this.#transports.values()) t.close()
    this.#transports.clear()
  }
}

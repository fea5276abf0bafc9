// The development stack's ports, moved together: `gatehouse dev --port-offset N` (or
// GATEHOUSE_DEV_PORT_OFFSET) adds N to every port it listens on (gateway, engines, panel, their
// admin listeners, the mail catcher's SMTP and web ports, the embedded Postgres), so a second
// checkout's stack runs beside the first with one setting. A port of 0 (the kernel's choice)
// stays 0.
import type { Config } from '../config/index.js'
import { ConfigError } from '../shared/index.js'

/** The embedded Postgres's port when GATEHOUSE_DEV_PG_PORT does not say. */
export const DEV_PG_PORT = 54322

/**
 * What the development stack's config defaults to where the process config's own defaults do
 * not suit a developer's machine (a config file or GATEHOUSE_* variables still win): the REST
 * engine on 3100, not PostgREST's 3000, which is where a Supabase app runs by default (Next.js,
 * and the tenants' site_url http://localhost:3000 that sign-in links and the OAuth consent page
 * redirect to).
 */
export const DEV_CONFIG_DEFAULTS = { rest: { port: 3100 } }

const PARTS = ['gateway', 'rest', 'auth', 'panel'] as const

/** The offset from --port-offset or GATEHOUSE_DEV_PORT_OFFSET; 0 when neither is given. */
export function parsePortOffset(raw: string | number | undefined, source = 'GATEHOUSE_DEV_PORT_OFFSET'): number {
  if (raw === undefined || raw === '') return 0
  const n = typeof raw === 'number' ? raw : Number(raw)
  if (!Number.isInteger(n) || n < 0 || n > 60000) {
    throw new ConfigError(
      `${source} must be a whole number from 0 to 60000 (added to every port of the development stack), not ${JSON.stringify(String(raw))}`,
    )
  }
  return n
}

function shift(port: number, offset: number, name: string): number {
  if (port === 0) return 0
  const moved = port + offset
  if (moved > 65535)
    throw new ConfigError(`the port offset ${offset} moves ${name} (${port}) past 65535: choose a smaller offset`)
  return moved
}

/** Config overrides that move every listening port of `config` by `offset` (none for 0). */
export function offsetPortOverrides(config: Config, offset: number): Record<string, unknown> {
  if (offset === 0) return {}
  const out: Record<string, unknown> = {}
  for (const p of PARTS) {
    out[p] = {
      port: shift(config[p].port, offset, `${p}.port`),
      admin_port: shift(config[p].admin_port, offset, `${p}.admin_port`),
    }
  }
  out.mail = {
    smtp_port: shift(config.mail.smtp_port, offset, 'mail.smtp_port'),
    web_port: shift(config.mail.web_port, offset, 'mail.web_port'),
  }
  return out
}

/**
 * The embedded Postgres's port: GATEHOUSE_DEV_PG_PORT (or 54322), moved by the offset; 0 for
 * a port the kernel picks (startEmbeddedPostgres).
 */
export function devPgPort(env: NodeJS.ProcessEnv, offset: number): number {
  const raw = env.GATEHOUSE_DEV_PG_PORT
  const port = raw === undefined || raw === '' ? DEV_PG_PORT : Number(raw)
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    throw new ConfigError(
      `GATEHOUSE_DEV_PG_PORT must be a port number (0: one the kernel picks), not ${JSON.stringify(raw)}`,
    )
  }
  return shift(port, offset, 'GATEHOUSE_DEV_PG_PORT')
}

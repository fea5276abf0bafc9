// The development stack's records: .gatehouse/dev.json (what a person or a script needs of the
// running stack), the secrets kept between starts, and the banner that prints dev.json.
import { mkdirSync, readFileSync, existsSync } from 'node:fs'
import path from 'node:path'
import { randomBytes } from 'node:crypto'
import { writeFileAtomic } from '../shared/index.js'

export interface DevDatabaseInfo {
  database: string
  organization: string
  url: string
  public_key: string
  secret_key: string
  owner_url: string
}

export interface DevInfo {
  gateway_url: string
  panel_url: string
  panel_session: string
  mail_url: string
  rest_engine_url: string
  auth_engine_url: string
  /** Each part's admin listener (/healthz, /readyz, /metrics). */
  admin_urls?: Record<string, string>
  databases: DevDatabaseInfo[]
  /** The process running the stack (the CLI uses the stack's defaults while it lives). */
  pid: number
  /** Superuser URL of the stack's cluster (its own generated password, or DATABASE_URL). */
  postgres_admin_url: string
  /** Where tenants live: the files the stack serves (generated) and the files it watches. */
  tenants_source: 'files' | 'redis'
  tenants_dir: string
  tenants_source_dir: string
  /** The Redis the stack's tenant store is in (REDIS_URL), and its key prefix: only with `redis`. */
  redis_url?: string
  redis_key_prefix?: string
  /** What went wrong since the start (the stack's Postgres exited, say); absent when nothing. */
  problems?: string[]
}

/** Development secrets kept between starts (.gatehouse/secrets.json). */
export function devSecrets(stateDir: string): { panel_session_secret: string } {
  const file = path.join(stateDir, 'secrets.json')
  if (existsSync(file)) return JSON.parse(readFileSync(file, 'utf8')) as { panel_session_secret: string }
  const s = { panel_session_secret: randomBytes(32).toString('base64url') }
  mkdirSync(stateDir, { recursive: true })
  writeFileAtomic(file, JSON.stringify(s, null, 2) + '\n', { mode: 0o600 })
  return s
}

export function writeDevInfo(stateDir: string, info: DevInfo): string {
  const file = path.join(stateDir, 'dev.json')
  writeFileAtomic(file, JSON.stringify(info, null, 2) + '\n', { mode: 0o600 })
  return file
}

export function readDevInfo(stateDir: string): DevInfo | null {
  const file = path.join(stateDir, 'dev.json')
  return existsSync(file) ? (JSON.parse(readFileSync(file, 'utf8')) as DevInfo) : null
}

/** What a second start says of the stack running in `stateDir` (its URLs once it is up). */
export function describeRunningStack(stateDir: string, pid: number): string {
  let info: DevInfo | null = null
  try {
    info = readDevInfo(stateDir)
  } catch {}
  if (info === null || info.pid !== pid) return ', still starting'
  return `: gateway ${info.gateway_url}, panel API ${info.panel_url}, mail UI ${info.mail_url}`
}

/**
 * The banner of `npm start` and `gatehouse status`; each value under its dev.json name. `running: false` (status, when the stack
 * that wrote dev.json has stopped) says so instead of "is running".
 */
export function renderDevInfo(info: DevInfo, opts: { running?: boolean } = {}): string {
  const running = opts.running ?? true
  const lines = [
    '',
    running
      ? info.problems?.length
        ? 'Gatehouse is running, BUT:'
        : 'Gatehouse is running.'
      : 'Gatehouse is NOT running: these are the URLs and keys of its last start here. `npm start` starts it again (same keys, data kept).',
    ...(running && info.problems?.length ? info.problems.map((p) => `  - ${p}`) : []),
    '',
    `  gateway_url    ${info.gateway_url}`,
    `  panel_url      ${info.panel_url}      (the control-panel API)`,
    `  mail_url       ${info.mail_url}      (the mail catcher's web UI)`,
    '',
    ...(info.admin_urls !== undefined && Object.keys(info.admin_urls).length > 0
      ? [
          '  admin_urls (/healthz /readyz /metrics):',
          ...Object.entries(info.admin_urls).map(([part, url]) => `    ${part.padEnd(10)} ${url}`),
          '',
        ]
      : []),
    '  panel_session (Authorization: Bearer ...):',
    `    ${info.panel_session}`,
    '',
  ]
  for (const d of info.databases) {
    lines.push(
      `  database ${d.database} (organization ${d.organization})`,
      `    url          ${d.url}`,
      `    public_key   ${d.public_key}`,
      `    secret_key   ${d.secret_key}`,
      `    owner_url    ${d.owner_url}`,
      '',
    )
  }
  lines.push(
    running
      ? '  The same is in .gatehouse/dev.json (`gatehouse status --json`). Ctrl-C stops everything.'
      : '  The same is in .gatehouse/dev.json (`gatehouse status --json`).',
    '',
  )
  return lines.join('\n')
}

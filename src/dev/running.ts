// The development stack running in a directory, as the CLI sees it: .gatehouse/dev.json of
// a `gatehouse dev` whose process is alive. Its cluster and tenant files become the CLI's
// defaults there, so `gatehouse tenants create` lands on the stack's cluster and
// `gatehouse tenants check` reads the databases the stack serves.
import { existsSync, readFileSync } from 'node:fs'
import path from 'node:path'
import { devLockOwner, LOCK_FILE } from './lock.js'
import { processAlive } from './process-probes.js'
import type { DevInfo } from './info.js'

/** What dev.json says about the running stack (read as written by any version: every field may be missing). */
type RunningInfo = Partial<DevInfo>

function listen(url: string | undefined): { host: string; port: number } | undefined {
  if (!url) return undefined
  try {
    const u = new URL(url)
    return { host: u.hostname, port: Number(u.port) }
  } catch {
    return undefined
  }
}

/** dev.json of the stack running in `root`, or null (none ran there, or it stopped). */
export function runningDevInfo(root: string): RunningInfo | null {
  const file = path.join(root, '.gatehouse', 'dev.json')
  if (!existsSync(file)) return null
  let info: RunningInfo
  try {
    info = JSON.parse(readFileSync(file, 'utf8')) as RunningInfo
  } catch {
    return null
  }
  if (typeof info.pid !== 'number') return null
  // The lock (dev.lock) knows its owner by pid and the kernel's start time of that pid: a pid
  // reused by another process after a crash is not taken for the stack.
  const owner = devLockOwner(path.join(root, '.gatehouse'))
  if (owner !== null) return owner.pid === info.pid ? info : null
  if (existsSync(path.join(root, '.gatehouse', LOCK_FILE))) return null
  return processAlive(info.pid) ? info : null
}

/**
 * Config defaults from the stack running in `root`: its cluster's admin URL; for commands
 * that write tenants (`write`), the tenant files it watches and its engines; for commands
 * that read them (`read`), the tenant files it serves (pointed at its cluster). A stack that
 * runs with Redis (REDIS_URL) gives its store to both: that is what it serves.
 */
export function runningDevDefaults(root: string, kind: 'write' | 'read'): Record<string, unknown> | null {
  const info = runningDevInfo(root)
  if (info === null) return null
  const out: Record<string, unknown> = {}
  if (info.postgres_admin_url) out.postgres = { url: info.postgres_admin_url }
  // The stack's gateway is the public URL of what the CLI makes there (printed database URLs).
  if (info.gateway_url) out.public_url = info.gateway_url
  if (info.tenants_source !== 'redis') {
    const dir = kind === 'write' ? info.tenants_source_dir : info.tenants_dir
    if (dir) out.tenants = { dir }
  } else if (info.redis_url) {
    // The stack serves its Redis store: the CLI reads and changes that store (what the panel
    // changed, revoked keys, the audit trail), not the tenant files it merged into it.
    const dir = kind === 'write' ? info.tenants_source_dir : undefined
    out.tenants = { source: 'redis', ...(dir ? { dir } : {}) }
    out.redis = { url: info.redis_url, ...(info.redis_key_prefix ? { key_prefix: info.redis_key_prefix } : {}) }
  }
  if (kind === 'write') {
    const rest = listen(info.rest_engine_url)
    const auth = listen(info.auth_engine_url)
    if (rest) out.rest = rest
    if (auth) out.auth = auth
  }
  return out
}

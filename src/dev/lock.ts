// The development stack's lock: `.gatehouse/dev.lock` names the process that owns the state
// directory (its pid and the kernel's start time of that pid, so a reused pid is not taken for
// the owner). A second `gatehouse dev` in the same checkout finds a live owner and stops there,
// before it touches anything: the cluster, the mail catcher and the ports stay the first
// stack's. A lock whose owner is gone (kill -9, a crash) is stale and taken over.
import { existsSync, mkdirSync, readFileSync, unlinkSync } from 'node:fs'
import path from 'node:path'
import { ConfigError, writeFileAtomic } from '../shared/index.js'
import { processAlive } from './process-probes.js'

export const LOCK_FILE = 'dev.lock'

export interface DevLockOwner {
  pid: number
  /** When the owner took the lock (ISO 8601). */
  started_at: string
  /** The kernel's start time of the pid (Linux: /proc/<pid>/stat field 22), when known. */
  proc_start?: string
}

/** The kernel's start time of `pid` (clock ticks since boot), or undefined where unknown. */
function processStart(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    // Fields after the command name (which may hold spaces and parentheses): state is field 3.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    return fields[22 - 3]
  } catch {
    return undefined
  }
}

/** Whether the lock's owner is the process that took it and still runs. */
function ownerAlive(owner: DevLockOwner): boolean {
  if (!Number.isInteger(owner.pid) || owner.pid <= 0 || !processAlive(owner.pid)) return false
  if (owner.proc_start === undefined) return true
  const now = processStart(owner.pid)
  return now === undefined || now === owner.proc_start
}

function readOwner(file: string): DevLockOwner | null {
  try {
    const o = JSON.parse(readFileSync(file, 'utf8')) as DevLockOwner
    return typeof o.pid === 'number' ? o : null
  } catch {
    return null
  }
}

/** The live owner of the stack in `stateDir`, or null (none runs there). */
export function devLockOwner(stateDir: string): DevLockOwner | null {
  const owner = readOwner(path.join(stateDir, LOCK_FILE))
  return owner !== null && ownerAlive(owner) ? owner : null
}

/** Thrown by a second start: names the running stack (what `describe` says of it). */
class DevStackRunningError extends ConfigError {
  constructor(
    readonly owner: DevLockOwner,
    description: string,
  ) {
    super(
      `a development stack is already running in this checkout (pid ${owner.pid}, started ${owner.started_at})${description}. ` +
        'Nothing was started or stopped. Use that one (`gatehouse status` prints its URLs and keys), stop it with Ctrl-C in its terminal ' +
        `(or \`kill -INT ${owner.pid}\`), or run another checkout's stack beside it with \`gatehouse dev --port-offset <n>\``,
    )
    this.name = 'DevStackRunningError'
  }
}

export interface DevLock {
  owner: DevLockOwner
  /** Removes the lock if it is still this process's. */
  release(): void
}

/** Creates the lock file for `me`, whole at once; false when it exists (EEXIST). */
function createLock(file: string, me: DevLockOwner): boolean {
  try {
    writeFileAtomic(file, JSON.stringify(me) + '\n', { mode: 0o600, exclusive: true })
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err
    return false
  }
  return true
}

/**
 * Takes the lock of `stateDir` for this process, or throws DevStackRunningError when a live
 * stack holds it. `describe(owner)` adds what is known of the running stack (its URLs).
 */
export function acquireDevLock(stateDir: string, describe: (owner: DevLockOwner) => string = () => ''): DevLock {
  mkdirSync(stateDir, { recursive: true })
  const file = path.join(stateDir, LOCK_FILE)
  const me: DevLockOwner = {
    pid: process.pid,
    started_at: new Date().toISOString(),
    proc_start: processStart(process.pid),
  }
  for (let attempt = 0; attempt < 3; attempt++) {
    if (createLock(file, me)) {
      return {
        owner: me,
        release() {
          const now = existsSync(file) ? readOwner(file) : null
          if (now?.pid === me.pid && now.started_at === me.started_at) {
            try {
              unlinkSync(file)
            } catch {}
          }
        },
      }
    }
    const owner = readOwner(file)
    if (owner !== null && ownerAlive(owner)) throw new DevStackRunningError(owner, describe(owner))
    // A stale lock (its owner is gone), or one being written this instant (retried).
    if (owner !== null || attempt > 0) {
      try {
        unlinkSync(file)
      } catch {}
    }
  }
  throw new ConfigError(`cannot take the lock ${file}: another start takes it at the same time`)
}

// Graceful shutdown of a listening part (the gateway, or an engine or the panel under `gatehouse
// serve`; its log lines carry the part): on SIGTERM (or shutdown()) /readyz turns 503 and
// responses close their connection, after an optional drain delay (for load balancers and
// kept-alive clients to notice) the server stops accepting,
// in-flight requests finish (their connections close after the response), then exit.
// A grace timer cuts connections that are still open after graceMs. Shutdown never waits
// on a log write or a hook that hangs: a line that cannot be written is skipped, the process
// exits at the latest HOOKS_MS after the grace period, and a second signal exits at once.
import type { FastifyInstance } from 'fastify'

interface GatewayState {
  shuttingDown: boolean
}

const states = new WeakMap<FastifyInstance, GatewayState>()

/** The shutdown flag of a gateway instance (created on first use). */
export function gatewayState(app: FastifyInstance): GatewayState {
  let s = states.get(app)
  if (s === undefined) {
    s = { shuttingDown: false }
    states.set(app, s)
  }
  return s
}

export interface GracefulShutdownOptions {
  /** config.gateway.shutdown_grace_ms: longest wait for in-flight requests. */
  graceMs: number
  /** Time between /readyz turning 503 and closing the listener (default 0). */
  drainDelayMs?: number
  /** Signals handled (default SIGTERM and SIGINT). */
  signals?: NodeJS.Signals[]
  /** Called with the exit code once closed; default process.exit. */
  exit?: (code: number) => void
}

export interface GracefulShutdown {
  /**
   * Starts (or joins) the shutdown; resolves after the exit callback ran. `drainDelayMs`
   * overrides the option's for this shutdown (a worker retired by a reload).
   */
  shutdown(reason?: string, drainDelayMs?: number): Promise<void>
  /** Removes the signal handlers. */
  dispose(): void
}

type ShutdownLog = (level: 'info' | 'warn' | 'error', obj: object, msg: string) => void

/**
 * readyz turns 503, in-flight requests drain for the grace period, then the remaining
 * connections are closed and the process exits; a deadline exits anyway when the close hooks hang.
 */
async function drainAndClose(
  app: FastifyInstance,
  opts: GracefulShutdownOptions,
  reason: string,
  log: ShutdownLog,
  exit: (code: number) => void,
): Promise<void> {
  gatewayState(app).shuttingDown = true
  log('info', { reason, graceMs: opts.graceMs }, 'shutting down: readyz is 503, draining in-flight requests')
  const deadline = setTimeout(
    () => {
      log('error', { hooksMs: HOOKS_MS }, 'shutdown took longer than the grace period and its hooks may: exiting')
      exit(1)
    },
    (opts.drainDelayMs ?? 0) + opts.graceMs + HOOKS_MS,
  )
  deadline.unref()
  if (opts.drainDelayMs) await new Promise((resolve) => setTimeout(resolve, opts.drainDelayMs).unref())
  const force = setTimeout(() => {
    log('warn', {}, 'shutdown grace period over: closing the remaining connections')
    app.server.closeAllConnections()
  }, opts.graceMs)
  force.unref()
  let code = 0
  try {
    await app.close()
  } catch (err) {
    log('error', { err }, 'error while closing')
    code = 1
  } finally {
    clearTimeout(force)
    clearTimeout(deadline)
  }
  log('info', {}, 'closed: the listener and every connection')
  exit(code)
}

/** After the grace period, how long the close hooks may still take before the process exits anyway. */
const HOOKS_MS = 2_000

export function installGracefulShutdown(app: FastifyInstance, opts: GracefulShutdownOptions): GracefulShutdown {
  const signals = opts.signals ?? ['SIGTERM', 'SIGINT']
  const exitNow = opts.exit ?? ((code: number) => process.exit(code))
  let exited = false
  const exit = (code: number): void => {
    if (!exited) {
      exited = true
      exitNow(code)
    }
  }
  let running: Promise<void> | null = null
  // A log line is never worth a stuck shutdown: a logger that throws is passed over.
  const log: ShutdownLog = (level, obj, msg) => {
    try {
      app.log[level](obj, msg)
    } catch {}
  }

  function shutdown(reason = 'shutdown', drainDelayMs = opts.drainDelayMs): Promise<void> {
    running ??= drainAndClose(app, { ...opts, drainDelayMs }, reason, log, exit)
    return running
  }

  // While draining, every response says `Connection: close`: a kept-alive client sends its next
  // request on a new connection, which another process (or worker) takes.
  app.server.prependListener('request', (_req, res: { shouldKeepAlive: boolean }) => {
    if (gatewayState(app).shuttingDown) res.shouldKeepAlive = false
  })

  // A second signal while shutting down: exit now (the first one is taking too long for
  // whoever sent it).
  const handler = (signal: NodeJS.Signals): void => {
    if (running === null) {
      void shutdown(signal)
      return
    }
    log('warn', { signal }, 'second signal while shutting down: exiting now')
    exit(1)
  }
  for (const s of signals) process.on(s, handler)
  return {
    shutdown,
    dispose() {
      for (const s of signals) process.removeListener(s, handler)
    },
  }
}

// Graceful shutdown of a listening gateway: on SIGTERM (or shutdown()) /readyz turns 503,
// after an optional drain delay (for load balancers to notice) the server stops accepting,
// in-flight requests finish (their connections close after the response), then exit.
// A grace timer cuts connections that are still open after graceMs.
import type { FastifyInstance } from 'fastify'

interface GatewayState { shuttingDown: boolean }

const states = new WeakMap<FastifyInstance, GatewayState>()

/** The shutdown flag of a gateway instance (created on first use). */
export function gatewayState (app: FastifyInstance): GatewayState {
  let s = states.get(app)
  if (s === undefined) { s = { shuttingDown: false }; states.set(app, s) }
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
  /** Starts (or joins) the shutdown; resolves after the exit callback ran. */
  shutdown (reason?: string): Promise<void>
  /** Removes the signal handlers. */
  dispose (): void
}

export function installGracefulShutdown (app: FastifyInstance, opts: GracefulShutdownOptions): GracefulShutdown {
  const signals = opts.signals ?? ['SIGTERM', 'SIGINT']
  const exit = opts.exit ?? ((code: number) => process.exit(code))
  let running: Promise<void> | null = null

  function shutdown (reason = 'shutdown'): Promise<void> {
    if (running !== null) return running
    running = (async () => {
      gatewayState(app).shuttingDown = true
      app.log.info({ reason, graceMs: opts.graceMs }, 'shutting down: readyz is 503, draining in-flight requests')
      if (opts.drainDelayMs) await new Promise((resolve) => setTimeout(resolve, opts.drainDelayMs).unref())
      const force = setTimeout(() => {
        app.log.warn('shutdown grace period over: closing the remaining connections')
        app.server.closeAllConnections()
      }, opts.graceMs)
      force.unref()
      let code = 0
      try {
        await app.close()
      } catch (err) {
        app.log.error({ err }, 'error while closing the gateway')
        code = 1
      } finally {
        clearTimeout(force)
      }
      app.log.info('gateway closed')
      exit(code)
    })()
    return running
  }

  const handler = (signal: NodeJS.Signals): void => { void shutdown(signal) }
  for (const s of signals) process.on(s, handler)
  return {
    shutdown,
    dispose () { for (const s of signals) process.removeListener(s, handler) }
  }
}

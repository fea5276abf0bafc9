// The development mail catcher: maildev (a real SMTP server with a web UI) as a child
// process, so `npm start` shows every mail the auth engine sends.
import { spawn, type ChildProcess } from 'node:child_process'
import { mkdirSync, rmSync } from 'node:fs'
import { createRequire } from 'node:module'
import net from 'node:net'
import path from 'node:path'
import { ConfigError } from '../shared/index.js'

export interface DevMail {
  smtpPort: number
  webUrl: string
  stop (): Promise<void>
}

function portOpen (port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect(port, '127.0.0.1')
    s.once('connect', () => { s.destroy(); resolve(true) })
    s.once('error', () => resolve(false))
  })
}

/**
 * maildev's own entry (index.js) rather than its extension-less bin script: a module loader
 * hook in the environment (a coverage tool's, say) may not load a file without one. maildev is
 * a development dependency: a production install (`npm ci --omit=dev`) has none.
 */
function maildevEntry (): string {
  const require = createRequire(import.meta.url)
  try {
    return path.join(path.dirname(require.resolve('maildev/package.json')), 'index.js')
  } catch {
    throw new ConfigError('the development mail catcher (maildev, a development dependency) is not installed here: ' +
      '`gatehouse dev` needs the full install of a checkout (`npm ci`, not `npm ci --omit=dev`); ' +
      'production processes run with `gatehouse serve` and a real SMTP server')
  }
}

/**
 * Starts maildev on the two ports unless something already answers on the SMTP port. Mails
 * are kept in `mailDir` (emptied first), never in the system's temporary directory.
 */
export async function startDevMail (smtpPort: number, webPort: number, mailDir: string): Promise<DevMail> {
  const webUrl = `http://127.0.0.1:${webPort}`
  if (await portOpen(smtpPort)) return { smtpPort, webUrl, stop: async () => {} }
  rmSync(mailDir, { recursive: true, force: true })
  mkdirSync(mailDir, { recursive: true, mode: 0o700 })
  const entry = maildevEntry()
  // The catcher must not outlive this process when it dies without cleaning up (a crash,
  // SIGKILL): it holds the ports the next start needs. Through an IPC channel the child sees
  // its parent go ('disconnect') and exits. maildev reads its options from process.argv.
  const boot = `process.on('disconnect', () => process.exit(0)); process.argv.splice(1, 0, ${JSON.stringify(entry)}); const MailDev = require(${JSON.stringify(entry)}); new MailDev().listen()`
  const child: ChildProcess = spawn(process.execPath,
    ['-e', boot, '--', '--smtp', String(smtpPort), '--web', String(webPort), '--ip', '127.0.0.1', '--mail-directory', mailDir, '--silent'],
    { stdio: ['ignore', 'ignore', 'inherit', 'ipc'] })
  child.channel?.unref()
  // Ready when both listen: the web UI can come up after SMTP on a loaded machine.
  for (let i = 0; i < 200 && !((await portOpen(smtpPort)) && (await portOpen(webPort))); i++) await new Promise((r) => setTimeout(r, 50))
  return {
    smtpPort,
    webUrl,
    stop: () => new Promise<void>((resolve) => {
      if (child.exitCode !== null) return resolve()
      child.once('exit', () => resolve())
      child.kill('SIGTERM')
    })
  }
}

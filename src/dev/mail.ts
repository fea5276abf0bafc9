// The development mail catcher: maildev (a real SMTP server with a web UI) as a child
// process, so `npm start` shows every mail the auth engine sends.
import { spawn, type ChildProcess } from 'node:child_process'
import { mkdirSync, rmSync } from 'node:fs'
import { createRequire } from 'node:module'
import path from 'node:path'
import { ConfigError } from '../shared/index.js'
import { portOpen } from './process-probes.js'

export interface DevMail {
  smtpPort: number
  webPort: number
  webUrl: string
  stop(): Promise<void>
}

/**
 * maildev's own entry (index.js) rather than its extension-less bin script: a module loader
 * hook in the environment (a coverage tool's, say) may not load a file without one. maildev is
 * a development dependency: a production install (`npm ci --omit=dev`) has none.
 */
function maildevEntry(): string {
  const require = createRequire(import.meta.url)
  try {
    return path.join(path.dirname(require.resolve('maildev/package.json')), 'index.js')
  } catch {
    throw new ConfigError(
      'the development mail catcher (maildev, a development dependency) is not installed here: ' +
        '`gatehouse dev` needs the full install of a checkout (`npm ci`, not `npm ci --omit=dev`); ' +
        'production processes run with `gatehouse serve` and a real SMTP server',
    )
  }
}

/**
 * The catcher's process: maildev with its options in process.argv (as its own bin reads them);
 * once both servers listen it sends the ports they got to its parent (the kernel's choice for a
 * port of 0). It exits when its parent goes ('disconnect').
 */
function bootScript(entry: string): string {
  const web = JSON.stringify(path.join(path.dirname(entry), 'lib', 'web.js'))
  return `process.on('disconnect', () => process.exit(0));
process.argv.splice(1, 0, ${JSON.stringify(entry)});
const MailDev = require(${JSON.stringify(entry)});
const web = require(${web});
const mail = new MailDev();
mail.listen().then(() => {
  const ready = () => process.send({ smtp: mail.smtp.server.address().port, web: web.server.address().port });
  if (web.server.listening) ready(); else web.server.once('listening', ready);
});`
}

/** The ports the catcher reports, or its exit before it did (a port in use, say). */
function catcherPorts(child: ChildProcess, smtpPort: number, webPort: number): Promise<{ smtp: number; web: number }> {
  return new Promise((resolve, reject) => {
    const onMessage = (msg: { smtp?: unknown; web?: unknown }): void => {
      child.off('exit', onExit)
      if (typeof msg?.smtp === 'number' && typeof msg.web === 'number') resolve({ smtp: msg.smtp, web: msg.web })
      else reject(new ConfigError('the development mail catcher (maildev) did not say which ports it listens on'))
    }
    const onExit = (code: number | null, signal: string | null): void => {
      child.off('message', onMessage)
      reject(
        new ConfigError(
          `the development mail catcher (maildev) exited while starting (${signal ?? `exit code ${code}`}): ` +
            `are its ports ${smtpPort} (GATEHOUSE_MAIL_SMTP_PORT) and ${webPort} (GATEHOUSE_MAIL_WEB_PORT) in use? ` +
            'Give it free ones (0 lets the kernel choose)',
        ),
      )
    }
    child.once('message', onMessage)
    child.once('exit', onExit)
  })
}

function stopper(child: ChildProcess): () => Promise<void> {
  return () =>
    new Promise<void>((resolve) => {
      if (child.exitCode !== null || child.signalCode !== null) return resolve()
      child.once('exit', () => resolve())
      child.kill('SIGTERM')
    })
}

/**
 * Starts maildev on the two ports (0: ports the kernel picks, reported back) unless something
 * already answers on a given SMTP port. Mails are kept in `mailDir` (emptied first), never in
 * the system's temporary directory.
 */
export async function startDevMail(smtpPort: number, webPort: number, mailDir: string): Promise<DevMail> {
  if (smtpPort !== 0 && (await portOpen(smtpPort))) {
    return { smtpPort, webPort, webUrl: `http://127.0.0.1:${webPort}`, stop: async () => {} }
  }
  rmSync(mailDir, { recursive: true, force: true })
  mkdirSync(mailDir, { recursive: true, mode: 0o700 })
  // The catcher must not outlive this process when it dies without cleaning up (a crash,
  // SIGKILL): it holds the ports the next start needs. Through an IPC channel the child sees
  // its parent go ('disconnect') and exits.
  const child: ChildProcess = spawn(
    process.execPath,
    [
      '-e',
      bootScript(maildevEntry()),
      '--',
      '--smtp',
      String(smtpPort),
      '--web',
      String(webPort),
      '--ip',
      '127.0.0.1',
      '--mail-directory',
      mailDir,
      '--silent',
    ],
    { stdio: ['ignore', 'ignore', 'inherit', 'ipc'] },
  )
  const stop = stopper(child)
  let ports: { smtp: number; web: number }
  try {
    ports = await catcherPorts(child, smtpPort, webPort)
  } catch (err) {
    await stop()
    throw err
  }
  child.channel?.unref()
  return { smtpPort: ports.smtp, webPort: ports.web, webUrl: `http://127.0.0.1:${ports.web}`, stop }
}

// The development mail catcher: maildev (a real SMTP server with a web UI) as a child
// process, so `npm start` shows every mail the auth engine sends.
import { spawn, type ChildProcess } from 'node:child_process'
import { createRequire } from 'node:module'
import net from 'node:net'
import path from 'node:path'

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

export async function startDevMail (smtpPort: number, webPort: number): Promise<DevMail> {
  const webUrl = `http://127.0.0.1:${webPort}`
  if (await portOpen(smtpPort)) return { smtpPort, webUrl, stop: async () => {} }
  const require = createRequire(import.meta.url)
  const bin = path.join(path.dirname(require.resolve('maildev/package.json')), 'bin', 'maildev')
  // The catcher must not outlive this process when it dies without cleaning up (a crash,
  // SIGKILL): it holds the ports the next start needs. Through an IPC channel the child sees
  // its parent go ('disconnect') and exits.
  const boot = `process.on('disconnect', () => process.exit(0)); process.argv.splice(1, 0, ${JSON.stringify(bin)}); require(${JSON.stringify(bin)})`
  const child: ChildProcess = spawn(process.execPath,
    ['-e', boot, '--', '--smtp', String(smtpPort), '--web', String(webPort), '--ip', '127.0.0.1', '--silent'],
    { stdio: ['ignore', 'ignore', 'ignore', 'ipc'] })
  child.channel?.unref()
  for (let i = 0; i < 100 && !(await portOpen(smtpPort)); i++) await new Promise((r) => setTimeout(r, 50))
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

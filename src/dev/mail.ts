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
  const child: ChildProcess = spawn(process.execPath, [bin, '--smtp', String(smtpPort), '--web', String(webPort), '--ip', '127.0.0.1', '--silent'], { stdio: 'ignore' })
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

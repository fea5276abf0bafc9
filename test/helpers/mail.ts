// A real SMTP catcher for tests: smtp-server on a free port (listen 0), every message kept
// and parsed by a tiny MIME reader (multipart, quoted-printable, base64, encoded words).
// `waitForMail(to)` resolves with the next unread mail to that address. Not a test file.
import { SMTPServer } from 'smtp-server'
import type { AddressInfo } from 'node:net'

export interface CaughtMail {
  /** Envelope recipients, lower-cased. */
  to: string[]
  from: string
  subject: string
  text: string
  html: string
  /** Links found in the html (href) and the text, in order, de-duplicated. */
  links: string[]
  headers: Record<string, string>
  raw: string
}

export interface MailCatcher {
  host: string
  port: number
  mails: CaughtMail[]
  /** The next mail to `to` not returned before; waits up to timeoutMs (default 10 s). */
  waitForMail(to: string, opts?: { timeoutMs?: number }): Promise<CaughtMail>
  /** Mails received for an address (all of them when omitted). */
  count(to?: string): number
  close(): Promise<void>
}

interface Teardown {
  teardown(fn: () => unknown): void
}

function parseHeaders(block: string): Record<string, string> {
  const out: Record<string, string> = {}
  const unfolded = block.replace(/\r?\n[ \t]+/g, ' ')
  for (const line of unfolded.split(/\r?\n/)) {
    const i = line.indexOf(':')
    if (i > 0) out[line.slice(0, i).trim().toLowerCase()] = line.slice(i + 1).trim()
  }
  return out
}

function decodeQuotedPrintable(s: string): Buffer {
  const soft = s.replace(/=\r?\n/g, '')
  const bytes: number[] = []
  for (let i = 0; i < soft.length; i++) {
    const c = soft[i]!
    if (c === '=' && /^[0-9A-Fa-f]{2}$/.test(soft.slice(i + 1, i + 3))) {
      bytes.push(parseInt(soft.slice(i + 1, i + 3), 16))
      i += 2
    } else {
      for (const b of Buffer.from(c, 'utf8')) bytes.push(b)
    }
  }
  return Buffer.from(bytes)
}

function decodeEncodedWords(s: string): string {
  return s.replace(/=\?([^?]+)\?([BbQq])\?([^?]*)\?=\s*/g, (_m, _cs: string, enc: string, data: string) => {
    if (enc.toUpperCase() === 'B') return Buffer.from(data, 'base64').toString('utf8')
    return decodeQuotedPrintable(data.replace(/_/g, ' ')).toString('utf8')
  })
}

function param(header: string | undefined, name: string): string | undefined {
  if (!header) return undefined
  const m = new RegExp(`${name}="?([^";]+)"?`, 'i').exec(header)
  return m?.[1]
}

interface Part {
  type: string
  body: string
}

function parseEntity(raw: string): Part[] {
  const split = raw.search(/\r?\n\r?\n/)
  const headBlock = split < 0 ? raw : raw.slice(0, split)
  const body = split < 0 ? '' : raw.slice(split).replace(/^\r?\n\r?\n/, '')
  const headers = parseHeaders(headBlock)
  const type = (headers['content-type'] ?? 'text/plain').split(';')[0]!.trim().toLowerCase()
  if (type.startsWith('multipart/')) {
    const boundary = param(headers['content-type'], 'boundary')
    if (!boundary) return []
    const pieces = body.split('--' + boundary)
    return pieces
      .slice(1)
      .filter((p) => !p.startsWith('--'))
      .flatMap((p) => parseEntity(p.replace(/^\r?\n/, '')))
  }
  const cte = (headers['content-transfer-encoding'] ?? '7bit').toLowerCase()
  const decoded =
    cte === 'base64'
      ? Buffer.from(body.replace(/\s+/g, ''), 'base64').toString('utf8')
      : cte === 'quoted-printable'
        ? decodeQuotedPrintable(body).toString('utf8')
        : body
  return [{ type, body: decoded }]
}

function decodeHtmlEntities(s: string): string {
  return s
    .replace(/&amp;/g, '&')
    .replace(/&quot;/g, '"')
    .replace(/&#39;/g, "'")
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
}

function parseMail(raw: string, envelopeTo: string[], envelopeFrom: string): CaughtMail {
  const split = raw.search(/\r?\n\r?\n/)
  const headers = parseHeaders(split < 0 ? raw : raw.slice(0, split))
  const parts = parseEntity(raw)
  const text = parts.find((p) => p.type === 'text/plain')?.body ?? ''
  const html = parts.find((p) => p.type === 'text/html')?.body ?? ''
  const links: string[] = []
  for (const m of html.matchAll(/href="([^"]+)"/g)) links.push(decodeHtmlEntities(m[1]!))
  for (const m of text.matchAll(/https?:\/\/[^\s<>"]+/g)) links.push(m[0])
  return {
    to: envelopeTo.map((a) => a.toLowerCase()),
    from: envelopeFrom,
    subject: decodeEncodedWords(headers.subject ?? ''),
    text,
    html,
    links: [...new Set(links)],
    headers,
    raw,
  }
}

/** Starts a catcher on 127.0.0.1:<free port>; closed on teardown when `t` is given. */
export async function startMailCatcher(t?: Teardown): Promise<MailCatcher> {
  const mails: CaughtMail[] = []
  const consumed = new Set<CaughtMail>()
  const waiters: Array<() => void> = []
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS', 'AUTH'],
    logger: false,
    onData(stream, session, callback) {
      const chunks: Buffer[] = []
      stream.on('data', (c: Buffer) => chunks.push(c))
      stream.on('end', () => {
        const to = session.envelope.rcptTo.map((r) => r.address)
        const from = session.envelope.mailFrom ? session.envelope.mailFrom.address : ''
        mails.push(parseMail(Buffer.concat(chunks).toString('utf8'), to, from))
        for (const w of waiters.splice(0)) w()
        callback()
      })
    },
  })
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => resolve())
  })
  server.on('error', () => {})
  const port = (server as unknown as { server: { address(): AddressInfo } }).server.address().port

  const catcher: MailCatcher = {
    host: '127.0.0.1',
    port,
    mails,
    async waitForMail(to, opts = {}) {
      const address = to.toLowerCase()
      const deadline = Date.now() + (opts.timeoutMs ?? 10_000)
      for (;;) {
        const m = mails.find((x) => !consumed.has(x) && x.to.includes(address))
        if (m) {
          consumed.add(m)
          return m
        }
        const left = deadline - Date.now()
        if (left <= 0)
          throw new Error(`no mail to ${to} within ${opts.timeoutMs ?? 10_000} ms (got ${mails.length} for others)`)
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, left)
          waiters.push(() => {
            clearTimeout(timer)
            resolve()
          })
        })
      }
    },
    count(to) {
      return to ? mails.filter((m) => m.to.includes(to.toLowerCase())).length : mails.length
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  }
  t?.teardown(() => catcher.close())
  return catcher
}

/** The 6-digit one-time code of a mail ("Or enter this code: 123456"). */
export function codeOf(mail: CaughtMail): string {
  const m = /code: (\d{6})/.exec(mail.text)
  if (!m) throw new Error('no code in the mail: ' + mail.text)
  return m[1]!
}

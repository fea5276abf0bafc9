// The access-log line is the same bytes pino writes for `info(fields, 'request completed')`
// (src/gateway/access-log.ts builds it in one template): compared line for line on the
// production logger set-up, and loggers set up so that pino would write something else get
// their lines from pino itself.
import t from 'tap'
import { pino, type Logger, type LoggerOptions } from 'pino'
import type { FastifyBaseLogger } from 'fastify'
import { createLogger } from '../../src/shared/index.js'
import { accessLogWriter, ACCESS_MESSAGE, type AccessLine } from '../../src/gateway/access-log.js'

function capture(): { stream: { write: (s: string) => void }; lines: string[] } {
  const lines: string[] = []
  return {
    stream: {
      write: (s: string) => {
        lines.push(s)
      },
    },
    lines,
  }
}

/** What the gateway's responder logs through: a child with the identity log formatter. */
function accessChild(root: Logger): FastifyBaseLogger {
  return root.child({}, {
    formatters: { log: (o: Record<string, unknown>) => o },
  } as never) as unknown as FastifyBaseLogger
}

const FIXED_TIME: LoggerOptions = { timestamp: () => ',"time":1700000000000' }

const LINES: AccessLine[] = [
  {
    reqId: '0b6f2c1e-2d7b-4d7e-9b0e-3f1d2a4c5e6f',
    tenant: 'acme',
    method: 'GET',
    url: '/acme/rest/v1/books?select=id&limit=20',
    status: 200,
    ms: 1.3,
  },
  { reqId: 'client-id-1', tenant: '_unknown', method: 'POST', url: '/x', status: 404, ms: 0, code: 'not_found' },
  {
    reqId: 'r',
    tenant: 'acme',
    method: 'GET',
    url: '/acme/rest/v1/t?q="quoted"&b=back\\slash',
    status: 200,
    ms: 12.5,
    trace_id: '4bf92f3577b34da6a3ce929d0e0e4736',
    span_id: '00f067aa0ba902b7',
  },
  {
    reqId: 'r',
    tenant: 'acme',
    method: 'GET',
    url: `/acme/rest/v1/t?select=${'a,'.repeat(80)}id&x="q"`,
    status: 200,
    ms: 3,
  },
  {
    reqId: 'r',
    tenant: 'acme',
    method: 'GET',
    url: '/acme/rest/v1/t?c=\u0001\u001f\u00e9\u00ff',
    status: 499,
    ms: Number.NaN,
    code: 'client_closed',
  },
  { reqId: 'r\ud800', tenant: 'acme', method: 'GET', url: '/lone\udfffsurrogate', status: 200, ms: 1 },
]

t.test('the line is the one pino writes, field for field and byte for byte', async (t) => {
  for (const extra of [FIXED_TIME, { ...FIXED_TIME, base: { service: 'gatehouse' } }, { ...FIXED_TIME, crlf: true }]) {
    const ours = capture()
    const theirs = capture()
    const logger = accessChild(createLogger({ level: 'info' }, ours.stream as never, extra).child({ part: 'gateway' }))
    // Count the lines that went through pino's info() instead of the template.
    let viaPino = 0
    const info = logger.info.bind(logger)
    logger.info = ((...a: Parameters<typeof info>) => {
      viaPino++
      info(...a)
    }) as typeof logger.info
    const writer = accessLogWriter(logger)
    const child = accessChild(createLogger({ level: 'info' }, theirs.stream as never, extra).child({ part: 'gateway' }))
    for (const line of LINES) {
      writer(line)
      child.info({ ...line }, ACCESS_MESSAGE)
    }
    t.same(ours.lines, theirs.lines)
    t.equal(ours.lines.length, LINES.length)
    t.equal(viaPino, 1, 'only the line with a lone surrogate is written by pino')
  }
})

t.test('the level is honoured, also when it changes later', async (t) => {
  const out = capture()
  const root = createLogger({ level: 'warn' }, out.stream as never, FIXED_TIME)
  const writer = accessLogWriter(accessChild(root))
  writer(LINES[0]!)
  t.equal(out.lines.length, 0, 'nothing at warn')
  const root2 = createLogger({ level: 'info' }, out.stream as never, FIXED_TIME)
  const child = accessChild(root2)
  const writer2 = accessLogWriter(child)
  child.level = 'error'
  writer2(LINES[0]!)
  t.equal(out.lines.length, 0, 'nothing once the level went up')
  child.level = 'info'
  writer2(LINES[0]!)
  t.equal(out.lines.length, 1)
})

t.test('loggers pino would write differently for get their lines from pino', async (t) => {
  const cases: Array<[string, LoggerOptions]> = [
    ['a mixin', { mixin: () => ({ extra: 1 }) }],
    ['a nested key', { nestedKey: 'payload' }],
    ['another message key', { messageKey: 'message' }],
    ['a message prefix', { msgPrefix: '[gw] ' }],
    ['a serializer of one of the fields', { serializers: { url: () => 'hidden' } }],
    ['redaction of one of the fields', { redact: ['url'] }],
    ['a stream write hook', { hooks: { streamWrite: (s: string) => s.replace('acme', 'ACME') } }],
  ]
  for (const [name, options] of cases) {
    const ours = capture()
    const theirs = capture()
    accessLogWriter(accessChild(pino({ ...FIXED_TIME, ...options }, ours.stream as never)))(LINES[0]!)
    accessChild(pino({ ...FIXED_TIME, ...options }, theirs.stream as never)).info({ ...LINES[0]! }, ACCESS_MESSAGE)
    t.same(ours.lines, theirs.lines, name)
  }
  const notPino = {
    info: (o: unknown, msg: string) => {
      seen.push([o, msg])
    },
  }
  const seen: Array<[unknown, string]> = []
  accessLogWriter(notPino as unknown as FastifyBaseLogger)(LINES[1]!)
  t.same(seen, [[LINES[1], ACCESS_MESSAGE]], 'a logger that is not pino gets info(fields, message)')
})

// A log sink proves that keys, tokens and passwords never reach the log: every line the
// gateway writes at trace level, for requests carrying credentials in headers, queries
// and bodies, refused and failed ones included, is searched for each secret.
import t from 'tap'
import { Writable } from 'node:stream'
import net from 'node:net'
import type { AddressInfo } from 'node:net'
import { mkdtempSync, rmSync, openSync, closeSync, readFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { createBatchedDestination, createLogger, redactUrl } from '../../src/shared/index.js'
import { makeTenant, lookupOf, startUpstream, startGateway, request, signToken } from '../helpers/gateway.js'
import { eventually } from '../helpers/eventually.js'

function sink(): { stream: Writable; lines: string[] } {
  const lines: string[] = []
  const stream = new Writable({
    write(chunk: Buffer, _enc, cb) {
      lines.push(...chunk.toString('utf8').split('\n').filter(Boolean))
      cb()
    },
  })
  return { stream, lines }
}

t.test('redactUrl', async (t) => {
  t.equal(redactUrl('/db/rest/v1/t?select=id&apikey=sk_123&x=1'), '/db/rest/v1/t?select=id&apikey=[REDACTED]&x=1')
  t.equal(
    redactUrl('/db/auth/v1/verify?token=abc&type=signup&redirect_to=https://x'),
    '/db/auth/v1/verify?token=[REDACTED]&type=signup&redirect_to=https://x',
  )
  t.equal(redactUrl('/cb?code=1&state=s'), '/cb?code=[REDACTED]&state=s')
  t.equal(redactUrl('/x?%61pikey=k'), '/x?%61pikey=[REDACTED]', 'encoded names too')
  t.equal(redactUrl('/x?a=1'), '/x?a=1')
  t.equal(redactUrl('/x'), '/x')
})

t.test('no key, token or password reaches the log', async (t) => {
  const up = await startUpstream(t)
  const acme = makeTenant('acme', { auth: up.url, rest: up.url })
  // A tenant whose upstream refuses connections, to log an upstream failure.
  const s = net.createServer()
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve))
  const deadPort = (s.address() as AddressInfo).port
  await new Promise<void>((resolve) => s.close(() => resolve()))
  const dead = makeTenant('dead', { auth: `http://127.0.0.1:${deadPort}`, rest: `http://127.0.0.1:${deadPort}` })

  const one = sink()
  const two = sink()
  const gw = await startGateway(t, {
    tenants: lookupOf(acme, dead),
    logger: createLogger({ level: 'trace' }, one.stream) as never,
  })
  const gw2 = await startGateway(t, {
    tenants: lookupOf(acme, dead),
    loggerOptions: { level: 'trace', stream: two.stream } as never,
  })

  const user = await signToken(acme, { email: 'ada@example.com' })
  const expired = await signToken(acme, {}, { now: Math.floor(Date.now() / 1000) - 7200, expiresIn: 60 })
  const password = 'correct horse battery staple'
  const secrets = [
    acme.file.keys.public,
    acme.file.keys.secret,
    dead.file.keys.secret,
    user,
    expired,
    password,
    'session-cookie-value',
    'magic-link-token-0123',
    'pkce-code-4567',
  ]

  for (const g of [gw, gw2]) {
    await request(`${g.url}/acme/rest/v1/todos?select=*`, {
      headers: { apikey: acme.file.keys.public, authorization: `Bearer ${user}`, cookie: 'sb=session-cookie-value' },
    })
    await request(`${g.url}/acme/rest/v1/todos?apikey=${acme.file.keys.secret}`)
    await request(`${g.url}/acme/auth/v1/token?grant_type=password`, {
      method: 'POST',
      headers: { apikey: acme.file.keys.public, 'content-type': 'application/json' },
      body: JSON.stringify({ email: 'ada@example.com', password }),
    })
    await request(`${g.url}/acme/auth/v1/verify?token=magic-link-token-0123&type=magiclink`)
    await request(`${g.url}/acme/auth/v1/callback?code=pkce-code-4567`)
    await request(`${g.url}/acme/rest/v1/todos`, {
      headers: { apikey: acme.file.keys.public, authorization: `Bearer ${expired}` },
    })
    await request(`${g.url}/acme/rest/v1/todos`, { headers: { apikey: `${acme.file.keys.secret}x` } })
    const r = await request(`${g.url}/dead/rest/v1/todos`, { headers: { apikey: dead.file.keys.secret } })
    t.equal(r.status, 503)
  }
  // The logger itself, given objects shaped like what a careless caller might log.
  gw.app.log.info(
    {
      req: {
        headers: { authorization: `Bearer ${user}`, apikey: acme.file.keys.secret, cookie: 'sb=session-cookie-value' },
      },
    },
    'headers object',
  )
  gw.app.log.info({ password, token: user, body: { password, refresh_token: expired, access_token: user } }, 'fields')
  gw.app.log.info(
    { headers: { apikey: acme.file.keys.public, 'set-cookie': ['sb=session-cookie-value'] } },
    'bare headers',
  )

  for (const [name, lines] of [
    ['logger instance', one.lines],
    ['logger options', two.lines],
  ] as const) {
    t.ok(lines.length > 10, `${name}: the log is not empty (${lines.length} lines)`)
    const completed = lines.filter((l) => l.includes('request completed'))
    t.ok(completed.length >= 8, `${name}: one line per proxied request`)
    t.ok(
      completed.some((l) => l.includes('apikey=[REDACTED]')),
      `${name}: the ?apikey= URL is logged redacted`,
    )
    t.ok(
      lines.some((l) => l.includes('upstream request failed')),
      `${name}: the upstream failure is logged with its cause`,
    )
    t.ok(
      lines.some((l) => /"reqId":"[0-9a-f-]{36}"/.test(l)),
      `${name}: lines carry the request id`,
    )
    for (const secret of secrets) {
      const leaks = lines.filter((l) => l.includes(secret))
      t.same(leaks, [], `${name}: ${secret.slice(0, 12)}... never logged`)
    }
  }
  t.ok(
    one.lines.some((l) => l.includes('"msg":"fields"') && l.includes('"password":"[REDACTED]"')),
    'token and password fields are censored',
  )
  t.ok(
    one.lines.some((l) => l.includes('"msg":"bare headers"') && l.includes('"apikey":"[REDACTED]"')),
    'header objects are censored',
  )
  t.ok(
    one.lines.some((l) => l.includes('"msg":"headers object"') && !l.includes('authorization')),
    'the req serializer never logs headers',
  )
})

t.test('loggerOptions keeps our redaction whatever the caller passes', async (t) => {
  const lines: string[] = []
  const stream = new Writable({
    write(c: Buffer, _e, cb) {
      lines.push(c.toString())
      cb()
    },
  })
  const log = createLogger({ level: 'info' }, stream, {
    level: 'debug',
    formatters: { log: (o: Record<string, unknown>) => ({ ...o, extra: 1 }) },
    serializers: { req: (r: { headers: unknown }) => ({ headers: r.headers }) },
  })
  t.equal(log.level, 'debug', "the caller's level applies")
  log.info(
    {
      Authorization: 'Bearer x',
      nested: { deeper: { Password: 'p', url: '/a?apikey=k&b=1' } },
      list: [{ token: 't' }],
      req: { headers: { apikey: 'k' } },
    },
    'm',
  )
  const line = JSON.parse(lines[0]!)
  t.equal(line.extra, 1, "the caller's formatter runs")
  t.equal(line.Authorization, '[REDACTED]', 'names match case-insensitively')
  t.same(line.nested, { deeper: { Password: '[REDACTED]', url: '/a?apikey=[REDACTED]&b=1' } })
  t.same(line.list, [{ token: '[REDACTED]' }], 'inside arrays too')
  t.same(line.req, {}, 'our request serializer wins: no headers')
  const child = log.child({ token: 'bound-secret' })
  child.info('c')
  t.notMatch(lines[1], /bound-secret/, 'child bindings are censored too')
})

t.test('the batched destination keeps every line, in order', async (t) => {
  const dir = mkdtempSync(path.join(tmpdir(), 'gh-log-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const file = path.join(dir, 'log.ndjson')
  const fd = openSync(file, 'w')
  t.teardown(() => closeSync(fd))
  const dest = createBatchedDestination({ fd, maxBytes: 4096, flushMs: 20 })
  const log = createLogger({ level: 'info' }, dest)

  // 1. A few lines are written by the timer, without any flush call.
  for (let i = 0; i < 3; i++) log.info({ i }, 'early')
  await eventually(() => readFileSync(file, 'utf8').split('\n').filter(Boolean).length >= 3).catch(() => {})
  t.equal(readFileSync(file, 'utf8').split('\n').filter(Boolean).length, 3, 'written after flushMs')

  // 2. Many lines: size-triggered batches, then end() writes the rest synchronously.
  for (let i = 0; i < 2000; i++) log.info({ i, password: 'pw-secret' }, 'bulk')
  dest.end()
  const lines = readFileSync(file, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l))
  const bulk = lines.filter((l) => l.msg === 'bulk')
  t.equal(bulk.length, 2000, 'no line lost')
  t.ok(
    bulk.every((l, i) => l.i === i),
    'in order',
  )
  t.ok(
    bulk.every((l) => l.password === '[REDACTED]'),
    'still censored',
  )
  t.equal(dest.dropped, 0)
})

t.test('settled(): the batch in flight has reached the sink, so an exit writes no line twice', async (t) => {
  const dir = mkdtempSync(path.join(tmpdir(), 'gh-log-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const file = path.join(dir, 'log.ndjson')
  const fd = openSync(file, 'w')
  t.teardown(() => closeSync(fd))
  const dest = createBatchedDestination({ fd, maxBytes: 16, flushMs: 10_000 })
  await dest.settled(10) // nothing in flight: at once
  dest.write('{"msg":"the last line before exit"}\n') // over maxBytes: written asynchronously now
  await dest.settled(60_000)
  t.equal(
    readFileSync(file, 'utf8'),
    '{"msg":"the last line before exit"}\n',
    'written once, before settled() resolved',
  )
  dest.end() // what the exit flush does: nothing in flight, nothing pending, nothing written again
  t.equal(readFileSync(file, 'utf8'), '{"msg":"the last line before exit"}\n', 'not written again')
})

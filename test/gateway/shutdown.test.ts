// Graceful shutdown: a real SIGTERM to a gateway process while a request is in flight to a
// slow upstream: /readyz turns 503, the listener closes (new connections refused), the
// in-flight request still completes, then the process exits 0. And the grace timer.
import t from 'tap'
import http from 'node:http'
import net from 'node:net'
import { spawn } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { buildGateway, installGracefulShutdown } from '../../src/gateway/index.js'
import { makeTenant, lookupOf, startUpstream, startGateway, request, testConfig } from '../helpers/gateway.js'
import { until } from '../helpers/eventually.js'

const child = fileURLToPath(new URL('./fixtures/shutdown-child.ts', import.meta.url))

function refused(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect(port, '127.0.0.1')
    s.once('connect', () => {
      s.destroy()
      resolve(false)
    })
    s.once('error', () => resolve(true))
  })
}

t.test('SIGTERM: readyz 503, stop accepting, in-flight finishes, exit 0', async (t) => {
  // The slow upstream holds every answer until the test releases it (no timing involved).
  const held: Array<(body: string) => void> = []
  const up = await startUpstream(t, (_req, res) => {
    held.push((body) => {
      res.writeHead(200, { 'content-type': 'application/json' })
      res.end(body)
    })
  })
  const acme = makeTenant('acme', { auth: up.url, rest: up.url })

  const proc = spawn(process.execPath, ['--import', 'tsx', child], {
    env: { ...process.env, GATEHOUSE_TEST_TENANT: JSON.stringify(acme.file), GATEHOUSE_TEST_DRAIN_MS: '1500' },
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  t.teardown(() => {
    if (proc.exitCode === null) proc.kill('SIGKILL')
  })
  const exited = new Promise<number | null>((resolve) => proc.once('exit', (code) => resolve(code)))
  const [port, adminPort] = await new Promise<[number, number]>((resolve, reject) => {
    let out = ''
    proc.stdout!.on('data', (c: Buffer) => {
      out += c.toString()
      const m = /port=(\d+) admin=(\d+)/.exec(out)
      if (m) resolve([Number(m[1]), Number(m[2])])
    })
    proc.once('exit', () => reject(new Error('the gateway process exited early')))
  })
  const base = `http://127.0.0.1:${port}`
  const admin = `http://127.0.0.1:${adminPort}`
  t.equal((await request(`${admin}/readyz`)).status, 200, 'ready before (admin listener)')

  // 1. A request in flight: the upstream has it and holds the answer.
  const inflight = request(`${base}/acme/rest/v1/slow`, { headers: { apikey: acme.file.keys.public } })
  await until(async () => held.length === 1, 'the upstream got the request')

  // 2. SIGTERM: readiness fails first (drain delay), while the listener still answers.
  proc.kill('SIGTERM')
  await until(async () => (await request(`${admin}/readyz`)).status === 503, 'readyz turned 503')
  const r503 = await request(`${admin}/readyz`)
  t.equal(r503.json().code, 'not_ready')
  t.match(r503.json().message, /shutting down/)
  const during = await request(`${base}/acme/rest/v1/nothing-here`)
  t.equal(during.headers.connection, 'close', 'public answers during the drain close their connection')

  // 3. Then it stops accepting new connections; the in-flight request is still held.
  await until(() => refused(port), 'new connections are refused')
  t.pass('new connections refused while a request is in flight')
  t.equal(proc.exitCode, null, 'the process waits for the in-flight request')

  // 4. The upstream answers: the client gets the full response; then the process exits 0.
  held[0]!('{"done":true}')
  const r = await inflight
  t.equal(r.status, 200, 'the in-flight request completed')
  t.same(r.json(), { done: true })
  t.equal(await exited, 0, 'exit code 0 after draining')
})

t.test('shutdown(): the grace period cuts what is still open, then exits', async (t) => {
  const held: http.ServerResponse[] = []
  const up = await startUpstream(t, (_req, res) => {
    held.push(res)
  })
  t.teardown(() => {
    for (const r of held) r.destroy()
  })
  const acme = makeTenant('acme', { auth: up.url, rest: up.url })
  const gw = await startGateway(t, { tenants: lookupOf(acme) })
  const codes: number[] = []
  const sd = installGracefulShutdown(gw.app, { graceMs: 200, signals: [], exit: (c) => codes.push(c) })
  t.teardown(() => sd.dispose())

  const stuck = request(`${gw.url}/acme/rest/v1/forever`, { headers: { apikey: acme.file.keys.public } })
  await until(async () => held.length === 1, 'the upstream got the request')
  const done = sd.shutdown('test')
  t.equal(sd.shutdown('again'), done, 'a second call joins the first')
  await done
  await t.rejects(stuck, 'the stuck request was cut after the grace period')
  t.same(codes, [0], 'exit called once with 0')
})

/** A listening gateway with a close hook that ends only when released. */
async function hangingGateway(t: { teardown: (fn: () => unknown) => void }, tt: ReturnType<typeof makeTenant>) {
  const app = buildGateway({ config: testConfig(), tenants: lookupOf(tt) })
  let release: () => void = () => {}
  app.addHook(
    'onClose',
    () =>
      new Promise<void>((resolve) => {
        release = resolve
      }),
  )
  t.teardown(() => release())
  await app.listen({ port: 0, host: '127.0.0.1' })
  return { app }
}

t.test(
  'a close hook that never ends: a second signal exits at once, else the process exits after the grace period and its hooks',
  async (t) => {
    const up = await startUpstream(t)
    const acme = makeTenant('acme', { auth: up.url, rest: up.url })
    const { app } = await hangingGateway(t, acme)
    const codes: number[] = []
    const sd = installGracefulShutdown(app, {
      graceMs: 50,
      signals: ['SIGUSR2'],
      exit: (code) => {
        codes.push(code)
      },
    })
    t.teardown(() => sd.dispose())
    process.kill(process.pid, 'SIGUSR2')
    await until(async () => app.server.listening === false, 'the listener closed')
    t.same(codes, [], 'still waiting for its hook')
    process.kill(process.pid, 'SIGUSR2')
    await until(async () => codes.length === 1, 'the second signal exits')
    t.same(codes, [1], 'a second signal: exit 1 at once')
  },
)

t.test(
  "a close hook that never ends and no second signal: exit 1 once the grace period and the hooks' time are over",
  async (t) => {
    const up = await startUpstream(t)
    const acme = makeTenant('acme', { auth: up.url, rest: up.url })
    const { app } = await hangingGateway(t, acme)
    const codes: number[] = []
    const sd = installGracefulShutdown(app, {
      graceMs: 50,
      signals: [],
      exit: (code) => {
        codes.push(code)
      },
    })
    t.teardown(() => sd.dispose())
    void sd.shutdown('test')
    await until(async () => codes.length === 1, 'the deadline exits', 10_000)
    t.same(codes, [1])
  },
)

t.test('the shutdown of another part (the REST engine under gatehouse serve) does not say "gateway"', async (t) => {
  const { buildRestEngine } = await import('../../src/rest/index.js')
  const { pino } = await import('pino')
  const lines: Array<{ msg: string; part?: string }> = []
  const logger = pino({ base: { part: 'rest' } }, { write: (s: string) => void lines.push(JSON.parse(s)) })
  const app = buildRestEngine({ config: testConfig(), tenants: { get: async () => null }, logger })
  await app.listen({ port: 0, host: '127.0.0.1' })
  const codes: number[] = []
  const sd = installGracefulShutdown(app, { graceMs: 100, signals: [], exit: (c) => codes.push(c) })
  t.teardown(() => sd.dispose())
  await sd.shutdown('SIGTERM')
  t.same(codes, [0])
  const said = lines.map((l) => l.msg)
  t.ok(said.length >= 2, `the shutdown is logged: ${said.join('; ')}`)
  t.notOk(
    said.some((m) => /gateway/.test(m)),
    `no line names the gateway: ${said.join('; ')}`,
  )
  t.ok(
    lines.every((l) => l.part === 'rest'),
    'each line carries the part',
  )
})

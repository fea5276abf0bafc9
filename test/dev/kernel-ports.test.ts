// The development stack on ports the kernel picks (every port 0): it binds its listeners before
// it builds anything, so the URLs it writes (the tenants' engine URLs, the public URL, dev.json)
// are the ports it actually got, and the mail catcher reports its own. It starts while the
// default ports of `npm start` are taken (held here where nothing else holds them, as a running
// `npm start` would), and everything works through the gateway: REST, auth, a mail that reaches
// the catcher.
import t from 'tap'
import net from 'node:net'
import { readFileSync } from 'node:fs'
import path from 'node:path'
import { parse as parseYaml } from 'yaml'
import { startE2eStack, email } from '../helpers/e2e-stack.js'
import { loadConfig } from '../../src/config/index.js'
import { DEV_PG_PORT } from '../../src/dev/index.js'
import { until } from '../helpers/eventually.js'

t.setTimeout(300_000)

/** The ports a default `npm start` listens on. */
function defaultPorts(): number[] {
  const c = loadConfig({ env: {} })
  return [
    ...(['gateway', 'rest', 'auth', 'panel'] as const).flatMap((p) => [c[p].port, c[p].admin_port]),
    c.mail.smtp_port,
    c.mail.web_port,
    DEV_PG_PORT,
  ]
}

/** Holds `port` until teardown when it is free; a port something else holds is taken already. */
async function hold(t: { teardown(fn: () => unknown): void }, port: number): Promise<void> {
  const server = net.createServer((socket) => socket.destroy())
  const held = await new Promise<boolean>((resolve) => {
    server.once('error', () => resolve(false))
    server.listen(port, '127.0.0.1', () => resolve(true))
  })
  if (held) t.teardown(() => new Promise((resolve) => server.close(resolve)))
}

t.test('every port 0: the stack starts beside the default ports and reports what it got', async (t) => {
  const defaults = defaultPorts()
  for (const port of defaults) await hold(t, port)
  const stack = await startE2eStack(t, { source: 'files', prefix: 'kports' })
  const info = stack.info
  const port = (url: string): number => Number(new URL(url).port)
  const ports = [
    info.gateway_url,
    info.panel_url,
    info.mail_url,
    info.rest_engine_url,
    info.auth_engine_url,
    ...Object.values(info.admin_urls ?? {}),
  ].map(port)
  t.equal(ports.length, 9)
  t.ok(
    ports.every((p) => p > 0 && !defaults.includes(p)),
    `none 0, none a default: ${ports.join(', ')}`,
  )
  t.equal(new Set(ports).size, ports.length, 'each listener its own port')

  // The generated tenant file points the gateway at the engines' real ports.
  const demo = stack.tenant('demo')
  const runtime = parseYaml(readFileSync(path.join(info.tenants_dir, `${demo.database}.yaml`), 'utf8')) as {
    upstreams: { rest: string; auth: string }
  }
  t.same(runtime.upstreams, {
    rest: `${info.rest_engine_url}/${demo.database}`,
    auth: `${info.auth_engine_url}/${demo.database}`,
  })
  t.equal(demo.url, `${info.gateway_url}/${demo.database}`)

  // Through the gateway: auth and REST answer.
  const settings = await stack.gateway(demo, '/auth/v1/settings')
  t.equal(settings.status, 200, 'auth through the gateway')
  const rest = await stack.gateway(demo, '/rest/v1/no_such_table')
  t.equal(rest.status, 404, 'REST through the gateway')
  t.equal(rest.body.code, 'unknown_table')

  // A mail the auth engine sends reaches the catcher on its reported port.
  const to = email('kports')
  const otp = await stack.gateway(demo, '/auth/v1/otp', { method: 'POST', body: { email: to } })
  t.equal(otp.status, 200, JSON.stringify(otp.body))
  await until(async () => {
    const mails = (await (await fetch(`${info.mail_url}/email`)).json()) as Array<{ to: Array<{ address: string }> }>
    return mails.some((m) => m.to.some((x) => x.address === to))
  }, 'the mail is in the catcher')
  t.pass('the mail is in the catcher')
  t.equal(
    info.admin_urls?.gateway !== undefined && (await fetch(`${info.admin_urls.gateway}/readyz`)).status,
    200,
    'the admin listener answers',
  )
})

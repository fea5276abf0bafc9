// Trusted proxies that fit the deployment (docs/edge.md): the shipped k8s, compose and
// systemd configs name the proxy in front of the gateway, and a gateway with none that gets
// most of its traffic from what looks like one proxy (a private address, or loopback
// sending X-Forwarded-For: an nginx on the same host) logs one warning naming
// gateway.trusted_proxies. Real sockets; the log lines captured.
import t from 'tap'
import http from 'node:http'
import { readFileSync } from 'node:fs'
import { Writable } from 'node:stream'
import type { AddressInfo } from 'node:net'
import { parse as parseYaml } from 'yaml'
import { loadConfig } from '../../src/config/index.js'
import { buildGateway } from '../../src/gateway/index.js'
import { isPrivateAddress } from '../../src/gateway/proxy-hint.js'
import { createLogger } from '../../src/shared/index.js'
import { lookupOf, makeTenant, request, startUpstream, testConfig } from '../helpers/gateway.js'

async function gateway(t: { teardown: (fn: () => unknown) => void }, trusted: string[]) {
  const up = await startUpstream(t)
  const tt = makeTenant('acme', { auth: up.url, rest: up.url })
  const lines: Array<Record<string, unknown>> = []
  const stream = new Writable({
    write(c: Buffer, _e, cb) {
      for (const l of c.toString('utf8').split('\n')) if (l) lines.push(JSON.parse(l))
      cb()
    },
  })
  const app = buildGateway({
    config: testConfig({ gateway: { trusted_proxies: trusted } }),
    tenants: lookupOf(tt),
    logger: createLogger({ level: 'warn' }, stream) as never,
  })
  await app.listen({ port: 0, host: '127.0.0.1' })
  t.teardown(() => app.close())
  const agent = new http.Agent({ keepAlive: true })
  t.teardown(() => agent.destroy())
  const url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}/acme/rest/v1/items`
  /** Sends n requests one after the other; the statuses other than 200 (none expected). */
  const send = async (n: number, headers: Record<string, string> = {}): Promise<number[]> => {
    const odd: number[] = []
    for (let i = 0; i < n; i++) {
      const status = (await request(url, { headers: { apikey: tt.file.keys.public, ...headers }, agent })).status
      if (status !== 200) odd.push(status)
    }
    return odd
  }
  const warnings = () => lines.filter((l) => l.setting === 'gateway.trusted_proxies')
  return { up, send, warnings }
}

t.test(
  'no trusted proxies, and most requests come through a proxy on loopback: one warning naming the setting',
  async (t) => {
    const gw = await gateway(t, [])
    t.same(await gw.send(199, { 'x-forwarded-for': '203.0.113.7' }), [])
    t.equal(gw.warnings().length, 0, 'not before a whole window')
    t.same(await gw.send(1, { 'x-forwarded-for': '203.0.113.8' }), [])
    const [w] = gw.warnings()
    t.match(w, { level: 40, peer: '127.0.0.1', requests: 200, of: 200 })
    t.match(w!.msg, /gateway\.trusted_proxies is empty/)
    t.equal(gw.up.last().headers['x-forwarded-for'], '127.0.0.1', 'the client is the proxy (which is the problem)')
    t.same(await gw.send(400, { 'x-forwarded-for': '203.0.113.9' }), [])
    t.equal(gw.warnings().length, 1, 'said once')
  },
)

t.test('clients that reach the gateway directly (no proxy): no warning', async (t) => {
  const gw = await gateway(t, [])
  t.same(await gw.send(400), [])
  t.equal(gw.warnings().length, 0)
})

t.test('with the proxy listed: its X-Forwarded-For names the client, no warning', async (t) => {
  const gw = await gateway(t, ['loopback'])
  t.same(await gw.send(200, { 'x-forwarded-for': '203.0.113.7' }), [])
  t.equal(gw.warnings().length, 0)
  t.equal(gw.up.last().headers['x-forwarded-for'], '203.0.113.7')
})

t.test('private and carrier-grade NAT addresses look like a proxy; public ones do not', async (t) => {
  for (const a of [
    '10.1.2.3',
    '172.16.0.1',
    '172.31.255.255',
    '192.168.1.1',
    '100.64.0.1',
    '::ffff:10.0.0.1',
    'fd12:3456::1',
  ])
    t.ok(isPrivateAddress(a), a)
  for (const a of ['203.0.113.7', '172.32.0.1', '8.8.8.8', '127.0.0.1', '::1', '2001:db8::1'])
    t.notOk(isPrivateAddress(a), a)
})

t.test('the shipped deployments name the proxy in front of the gateway', async (t) => {
  const k8s = loadConfig({
    file: 'deploy/k8s/config/gatehouse.yaml',
    env: { GATEHOUSE_REDIS_URL: 'redis://redis:6379/0' },
  })
  t.same(k8s.gateway.trusted_proxies, ['uniquelocal'], 'k8s: the ingress controller on the pod network')
  const compose = parseYaml(readFileSync('deploy/compose.yaml', 'utf8')) as {
    'x-gatehouse-env': Record<string, string>
  }
  const fromCompose = loadConfig({
    env: { GATEHOUSE_GATEWAY_TRUSTED_PROXIES: compose['x-gatehouse-env'].GATEHOUSE_GATEWAY_TRUSTED_PROXIES },
  })
  t.same(
    fromCompose.gateway.trusted_proxies,
    ['uniquelocal'],
    "compose: the host's reverse proxy through Docker's port publishing",
  )
  // systemd's EnvironmentFile: single quotes are removed, the rest kept.
  const line = readFileSync('deploy/systemd/env.example', 'utf8')
    .split('\n')
    .find((l) => l.startsWith('GATEHOUSE_GATEWAY_TRUSTED_PROXIES='))!
  const value = line.slice(line.indexOf('=') + 1).replace(/^'(.*)'$/, '$1')
  t.same(
    loadConfig({ env: { GATEHOUSE_GATEWAY_TRUSTED_PROXIES: value } }).gateway.trusted_proxies,
    ['loopback', 'uniquelocal'],
    'systemd: a proxy on this host or the private network',
  )
})

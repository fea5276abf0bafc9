// Requests to identity providers (issuer discovery, token, userinfo, JWKS) go only to https
// URLs at public addresses, unless the operator allows the host (outbound.allow_hosts): a
// provider set to loopback makes the engine fetch nothing, redirects are checked hop by hop,
// and with the host allowed the real OIDC provider works as before. Real engine, real
// Postgres, the oidc-provider of test/helpers/oidc.ts, a counting server on loopback.
import t from 'tap'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { randomBytes } from 'node:crypto'
import { startAuth, PUBLIC_URL } from '../helpers/auth-harness.js'
import { startOidcProvider } from '../helpers/oidc.js'
import { nonPublicReason, outboundFetch } from '../../src/shared/index.js'

/** A loopback server that counts requests and answers with `answer`. */
async function countingServer(
  t: { teardown(fn: () => unknown): void },
  answer: (req: http.IncomingMessage, res: http.ServerResponse, base: string) => void,
) {
  const seen: string[] = []
  let base = ''
  const server = http.createServer((req, res) => {
    seen.push(`${req.method} ${req.url}`)
    answer(req, res, base)
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  t.teardown(() => new Promise((resolve) => server.close(resolve)))
  return { seen, base }
}

t.test('address classes: loopback, private, link-local, CGNAT, metadata, IPv6 and IPv4-mapped', async (t) => {
  const refused = [
    '127.0.0.1',
    '10.1.2.3',
    '172.16.0.1',
    '192.168.1.1',
    '169.254.169.254',
    '100.64.0.1',
    '0.0.0.0',
    '::1',
    '::',
    'fe80::1',
    'fd00:ec2::254',
    'fc00::1',
    '::ffff:127.0.0.1',
    '::ffff:7f00:1',
    '::ffff:169.254.169.254',
    '64:ff9b::a9fe:a9fe',
    '2002:7f00:1::',
    // Every IPv6 form embedding 169.254.169.254: SIIT, local-use NAT64 (RFC 8215), compatible,
    // 6to4, Teredo (its client address is stored inverted).
    '::ffff:0:a9fe:a9fe',
    '::ffff:0:169.254.169.254',
    '64:ff9b:1::a9fe:a9fe',
    '64:ff9b:1:a9fe:a9:fe00::',
    '::a9fe:a9fe',
    '2002:a9fe:a9fe::1',
    '2001:0:a9fe:a9fe::5601:5601',
    '64:ff9b:0:0:1::a9fe:a9fe',
    '64:ff9b::1:0:a9fe:a9fe',
    'ff02::1',
    '224.0.0.1',
  ]
  for (const ip of refused) t.not(nonPublicReason(ip), null, `${ip} is not public (${nonPublicReason(ip)})`)
  for (const ip of ['93.184.215.14', '8.8.8.8', '2606:4700:4700::1111', '::ffff:8.8.8.8', '::ffff:0:808:808'])
    t.equal(nonPublicReason(ip), null, `${ip} is public`)
  t.match(nonPublicReason('169.254.169.254'), /metadata/)
  t.match(nonPublicReason('::ffff:0:a9fe:a9fe'), /metadata/, 'SIIT is judged by the address it embeds')
  t.match(nonPublicReason('64:ff9b:1::808:808'), /local-use NAT64/, 'local-use NAT64 is refused whole')
  t.match(nonPublicReason('100.64.0.1'), /carrier-grade NAT/)
})

t.test('a provider pointed at loopback: the engine fetches nothing', async (t) => {
  const target = await countingServer(t, (_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json' })
    res.end('{}')
  })
  const h = await startAuth(t, { outboundAllowHosts: [] })
  const x = h.list[0]!
  const authorize = (name: string) => fetch(`${h.base(x)}/authorize?provider=${name}`, { redirect: 'manual' })

  for (const [name, issuer] of [
    ['plain', target.base],
    ['tls', target.base.replace('http:', 'https:')],
    ['named', target.base.replace('127.0.0.1', 'localhost')],
    ['mapped', target.base.replace('127.0.0.1', '[::ffff:127.0.0.1]')],
  ] as const) {
    h.setAuth(x, { providers: { [name]: { client_id: 'c', secret: 's', issuer } } })
    const r = await authorize(name)
    t.equal(r.status, 500, `${name}: the authorization cannot start`)
    t.equal(((await r.json()) as { error_code?: string }).error_code, 'unexpected_failure')
  }
  t.same(target.seen, [], 'not one request reached the loopback server')
})

t.test('redirects are checked hop by hop, and POSTs never follow one', async (t) => {
  const allowed = await countingServer(t, (req, res, base) => {
    if (req.url === '/hop') {
      res.writeHead(302, { location: base.replace('127.0.0.1', 'localhost') + '/secret' })
      res.end()
      return
    }
    if (req.url === '/post') {
      res.writeHead(307, { location: '/hop' })
      res.end()
      return
    }
    res.writeHead(200, { 'content-type': 'text/plain' })
    res.end('ok')
  })
  const policy = { allowHosts: ['127.0.0.1'] }
  const ok = await outboundFetch(`${allowed.base}/fine`, {}, policy)
  t.equal(await ok.text(), 'ok', 'an allowed host answers')
  await t.rejects(
    outboundFetch(`${allowed.base}/hop`, {}, policy),
    { name: 'OutboundRefusedError', message: /only https/ },
    'the redirect to a host not allowed is refused',
  )
  await t.rejects(outboundFetch(`${allowed.base}/post`, { method: 'POST', body: 'x' }, policy), {
    message: /redirect \(HTTP 307\) not followed/,
  })
  t.same(allowed.seen, ['GET /fine', 'GET /hop', 'POST /post'], 'the refused hops were never requested')
  await t.rejects(
    outboundFetch(`${allowed.base}/fine`, {}, { allowHosts: [] }),
    { message: /only https is allowed/ },
    'without the allow-list: refused',
  )
  await t.rejects(outboundFetch('https://169.254.169.254/latest/meta-data/', {}, { allowHosts: [] }), {
    message: /metadata/,
  })
})

t.test('with the host allowed, the real OIDC provider works as before', async (t) => {
  const database = `tenant_${randomBytes(5).toString('hex')}`
  const op = await startOidcProvider(t, { redirectUris: [`${PUBLIC_URL}/${database}/auth/v1/callback`] })
  const h = await startAuth(t, {
    tenants: [
      {
        database,
        auth: {
          providers: { oidc: { client_id: op.client.client_id, secret: op.client.client_secret, issuer: op.issuer } },
        },
      },
    ],
  })
  const r = await fetch(`${h.base(h.list[0]!)}/authorize?provider=oidc`, { redirect: 'manual' })
  t.equal(r.status, 302)
  t.ok((r.headers.get('location') ?? '').startsWith(op.issuer + '/'), 'discovery through the pinned connection worked')
})
